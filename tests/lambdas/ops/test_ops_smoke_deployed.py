"""The smoke run as the deploy workflow runs it, with every role evaluated as AWS would (tests/support/iam.py): the
environment's stacks as synthesized (tests/lambdas/ops/workflows_harness.py `World`), the deploy role assuming the
smoke runner role through its trust policy, the runner starting the synthesized smoke workflow, the ops worker
writing canaries under its `dynamodb:LeadingKeys` grant and assuming each probe role, the stream sync (Lambda's
poller played by tests/lambdas/ops/smoke_harness.py `Poller`, on virtual time) indexing as its own role, and each
signed request decided by the domain's access policy with the caller's identity policy before FGAC. Any call a
role may not make fails the test (`deployed_environment` asserts there is none)."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.credentials import Credentials
from ops.smoke import STEPS
from refdata.registry import indexable_schemas
from refdata.reserved import CANARY
from smoke_harness import Poller, canary_documents, canary_items, virtual_time
from stream_sync import aws as sync_aws
from stream_sync import handler
from workflows_harness import (
    SYNC_HANDLER,
    Clock,
    MotoGaps,
    Workflows,
    World,
    bootstrapped,
    deployed_environment,
)

from infra.config import EnvironmentConfig
from infra.environments import environments
from ops import cli
from tests.support.iam import SdkCalls
from tests.support.opensearch_server import LoopbackOpenSearch
from tests.support.secured_node import SecuredNode

pytestmark = pytest.mark.integration


class SmokeWorld:
    def __init__(
        self,
        world: World,
        calls: SdkCalls,
        clock: Clock,
        gaps: MotoGaps,
        server: LoopbackOpenSearch,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        self.world, self.calls, self.server = world, calls, server
        # The domain as the stack's custom resource sets it up; the worker in-process as its role on every task.
        bootstrapped(world, calls, monkeypatch, server)
        self.workflows = Workflows(world, calls, clock, gaps)
        sync_role, sync_environment = world.function(SYNC_HANDLER)
        for name, value in sync_environment.items():
            monkeypatch.setenv(name, str(value))
        session = boto3.client("sts", region_name=world.region).assume_role(
            RoleArn=sync_role, RoleSessionName="stream-sync"
        )["Credentials"]
        signing = Credentials(session["AccessKeyId"], session["SecretAccessKey"], session["SessionToken"])
        self.sync_key = signing.access_key
        signed_ports = functools.partial(sync_aws.build_ports, credentials=signing)
        monkeypatch.setattr(sync_aws, "build_ports", signed_ports)
        handler.reset()
        monkeypatch.setattr(handler, "reset", handler.reset)
        self.schema_tables = schema_tables = json.loads(world.worker_environment["SCHEMA_TABLES"])
        self.indexed = {schema.name: schema_tables[schema.name] for schema in indexable_schemas()}
        dynamodb = boto3.client("dynamodb", region_name=world.region)
        streams = {
            table: dynamodb.describe_table(TableName=table)["Table"]["LatestStreamArn"]
            for table in world.mappings
        }
        prefixes = {
            table: tuple(f"{s.name}::" for s in indexable_schemas() if schema_tables.get(s.name) == table)
            for table in streams
        }
        self.poller = Poller(
            streams,
            prefixes,
            dict(world.mappings),
            account=world.account,
            region=world.region,
            acting=lambda: calls.acting(sync_role),
            # Lambda's poller reads the streams as the service, not as a role
            service=lambda: calls.acting(None),
        )
        self.poller.capture(monkeypatch)
        virtual_time(self.poller, monkeypatch, server.engine)
        self.runner = next(arn for arn in calls.policies.trust if arn.endswith("-smoke-runner"))
        self.deploy_role = world.config.deploy_role_arn
        # What docs/deploy.md's account set-up gives the deploy role for this step: assuming the runner, nothing else.
        calls.policies.identity[self.deploy_role] = [
            {"Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": self.runner}]}
        ]

    def run(self, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any], str]:
        """The smoke run as the deploy workflow starts it: its exit status, its summary and what it wrote to
        stderr."""
        with self.calls.acting(None):
            self.world.machine("smoke")
        self.calls.keys["ak"] = self.world.machine_roles["smoke"]  # moto's interpreter calls AWS as "ak"
        capsys.readouterr()
        with self.calls.acting(self.deploy_role):
            status = cli.main(["smoke", "--env", self.world.config.name, "--assume-role", self.runner])
        out, err = capsys.readouterr()
        return status, json.loads(out.strip().splitlines()[-1]), err


@pytest.fixture
def smoke(
    each_config: EnvironmentConfig, monkeypatch: pytest.MonkeyPatch, secured_as_left: SecuredNode
) -> Iterator[SmokeWorld]:
    for world, calls, clock, gaps, server in deployed_environment(each_config, monkeypatch, secured_as_left):
        yield SmokeWorld(world, calls, clock, gaps, server, monkeypatch)
        handler.reset()


def test_the_smoke_run_passes_in_every_environment_with_every_role_as_aws_evaluates_it(
    smoke: SmokeWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    status, summary, err = smoke.run(capsys)

    assert summary.get("verdict") == "pass", (summary, smoke.workflows.errors)
    assert status == 0
    # Every indexable schema in its table, each through every step, nothing left behind.
    assert {(t["schema"], t["table"]) for t in summary["targets"]} == set(smoke.indexed.items())
    for target in summary["targets"]:
        assert list(target["steps"]) == list(STEPS) and target["passed"] and target["left"] == []
        assert f"ok     {target['schema']} ({target['table']}): write " in err  # each step's time, on stderr
    assert err.rstrip().endswith("verdict: pass")
    # Each canary went the whole way through the stream sync (signed as its role), not written by the smoke run.
    synced = [
        r.body.decode()
        for r in smoke.server.requests_to("_bulk")
        if f"Credential={smoke.sync_key}/" in r.headers.get("authorization", "")
    ]
    for target in summary["targets"]:
        assert sum(CANARY in body and f'"schema":"{target["schema"]}"' in body for body in synced) >= 3
    tables = boto3.client("dynamodb", region_name=smoke.world.region)
    assert canary_items(tables, smoke.schema_tables.values()) == [] and canary_documents(smoke.server) == []
    roles = {call.role for call in smoke.calls.checked}
    worker = smoke.world.worker_role
    assert {smoke.deploy_role, smoke.runner, worker, smoke.world.machine_roles["smoke"]} <= roles
    worker_actions = {call.action for call in smoke.calls.checked if call.role == worker}
    assert {"dynamodb:PutItem", "dynamodb:DeleteItem", "sts:AssumeRole"} <= worker_actions
    assert smoke.server.access is not None
    signed = {(role, decision) for role, _, _, decision in smoke.server.access.decided}
    probes = {arn for arn in smoke.calls.policies.trust if "-probe-" in arn}
    assert probes and all((probe, "allow") in signed for probe in probes)
    assert {decision for _, decision in signed} == {"allow"}


# --- each grant the smoke run depends on, removed: the run fails as AWS would make it fail ---------------------------

LAYOUT = max(environments().values(), key=lambda config: len(config.source_tables))


@pytest.fixture
def layout(monkeypatch: pytest.MonkeyPatch, secured_as_left: SecuredNode) -> Iterator[SmokeWorld]:
    for world, calls, clock, gaps, server in deployed_environment(LAYOUT, monkeypatch, secured_as_left):
        yield SmokeWorld(world, calls, clock, gaps, server, monkeypatch)
        handler.reset()


def without(documents: list[Any], drop: Any) -> list[dict[str, Any]]:
    return [{"Statement": [s for s in document["Statement"] if not drop(s)]} for document in documents]


def test_without_the_probe_roles_identity_grant_the_domain_refuses_the_probe_and_the_run_fails_as_a_reader_leak(
    layout: SmokeWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    probes = [arn for arn in layout.calls.policies.identity if "-probe-" in arn]
    assert probes
    for probe in probes:  # the access policy alone (naming the account) then admits nobody
        layout.calls.policies.identity[probe] = []

    status, summary, _ = layout.run(capsys)

    assert status == 2 and summary["verdict"].startswith("FAILED at reader-live (reader leak): ")
    assert "es:ESHttp" in summary["verdict"] and "cannot read" in summary["verdict"]
    assert layout.server.access is not None
    assert {d for role, *_, d in layout.server.access.decided if role in probes} == {"implicit"}


def test_without_the_runner_roles_trust_in_the_deploy_role_the_smoke_run_cannot_start(
    layout: SmokeWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    trust = layout.calls.policies.trust[layout.runner]
    layout.calls.policies.trust[layout.runner] = without([trust], lambda s: "aws:PrincipalArn" in str(s))[0]

    status, summary, _ = layout.run(capsys)

    assert status != 0 and "AccessDenied" in summary["error"]
    assert [(v.call.action, v.resource) for v in layout.calls.violations] == [
        ("sts:AssumeRole", layout.runner)
    ]
    layout.calls.violations.clear()  # the refusal was the point


def test_without_the_workers_canary_grant_the_canary_write_is_refused_and_the_run_fails_at_write(
    layout: SmokeWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    worker = layout.world.worker_role
    layout.calls.policies.identity[worker] = without(
        layout.calls.policies.identity[worker], lambda s: "dynamodb:LeadingKeys" in str(s.get("Condition"))
    )

    status, summary, _ = layout.run(capsys)

    assert status == 2 and summary.get("verdict", "").startswith("FAILED at write (table): "), summary
    # Nothing was written; what the worker could not even try to delete is reported, not lost in a crash.
    assert summary["leftBehind"] and all("cleanup failed" in left for left in summary["leftBehind"])
    assert {v.call.action for v in layout.calls.violations} == {"dynamodb:PutItem", "dynamodb:DeleteItem"}
    layout.calls.violations.clear()
