"""The smoke run end to end (tests/lambdas/ops/smoke_harness.py): `python -m ops smoke --env` through the real CLI,
the synthesized smoke workflow executed by moto's Step Functions, the real ops worker and stream sync, moto
DynamoDB streams and the loopback OpenSearch with FGAC: one run per verdict, each ending with the right step and
component and nothing left behind, in the environment with the most tables. The pass in every environment, with
every role as AWS evaluates it, is tests/lambdas/ops/test_ops_smoke_deployed.py's."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace

import boto3
import pytest
from ops.index import TransientFailure
from refdata.indexnames import index_name, read_alias, write_alias
from refdata.registry import Visibility, get_schema
from search.readers import document_filter, read_role_body
from smoke_harness import SmokeStack, smoke_stack, table_name
from stream_sync import handler

from infra.constructs.ops_workflows import STARTUP_CHECK_SECONDS
from infra.environments import environments
from ops import cli, smoke
from tests.support.secured_node import SecuredNode

pytestmark = pytest.mark.integration


def run(stack: SmokeStack, capsys: pytest.CaptureFixture[str], *options: str) -> tuple[int, dict, str]:
    status = cli.main(["smoke", "--env", stack.config.name, "--region", "ca-central-1", *options])
    out, err = capsys.readouterr()
    return status, json.loads(out.strip().splitlines()[-1]), err


# --- one failing run per verdict ----------------------------------------------------------------------------------

# The environment with the most source tables: a verdict names the table whose part failed, the others pass.
LAYOUT = max(environments().values(), key=lambda config: len(config.source_tables))
COMPONENTS = {"stream not flowing", "sync erroring", "document refused", "alias missing", "reader leak"}


@pytest.fixture
def failing(monkeypatch: pytest.MonkeyPatch, secured_as_left: SecuredNode) -> Iterator[SmokeStack]:
    """A step that is to time out waits five (virtual) seconds, ten polls of the mappings: the other tables'
    canaries, which must pass in the same run, arrive at their first."""
    with smoke_stack(LAYOUT, monkeypatch, secured_as_left, wait_seconds=5.0) as stack:
        yield stack


@pytest.fixture
def flowing(monkeypatch: pytest.MonkeyPatch, secured_as_left: SecuredNode) -> Iterator[SmokeStack]:
    """Every wait succeeds (the canary arrives at the first poll), the failure comes from something else."""
    with smoke_stack(LAYOUT, monkeypatch, secured_as_left, wait_seconds=20) as stack:
        yield stack


def failures(summary: dict, step: str, component: str) -> dict[str, str]:
    """Schema -> reason of every canary that failed, each of them at `step` for `component`."""
    found = {t["schema"]: t["failure"] for t in summary["targets"] if t["failure"]}
    assert all((f["step"], f["component"]) == (step, component) for f in found.values()), found
    return {schema: failure["reason"] for schema, failure in found.items()}


def failed(stack: SmokeStack, status: int, summary: dict, step: str, component: str) -> dict[str, str]:
    """`failures`, once the run failed with the verdict for `step` and `component` and left nothing behind."""
    assert_verdict(status, summary, step, component)
    assert_nothing_left(stack, summary)
    return failures(summary, step, component)


def write_canary(part: dict, cursor: dict) -> None:
    """What a part's canary write leaves in its table."""
    table = boto3.resource("dynamodb", region_name="ca-central-1").Table(part["table"])
    table.put_item(Item={"pk": cursor["pk"], "sk": cursor["sk"], **cursor["attributes"]})


def assert_nothing_left(stack: SmokeStack, summary: dict) -> None:
    assert summary["leftBehind"] == []
    assert stack.canary_items() == [] and stack.canary_documents() == []
    assert [
        letter for letter in stack.dead_letters() if "refdata-canary" in str(letter.get("documentId"))
    ] == []


def assert_verdict(status: int, summary: dict, step: str, component: str) -> None:
    assert component in COMPONENTS
    assert status == 2 and summary["status"] == "failed"
    assert summary["verdict"].startswith(f"FAILED at {step} ({component}): ")
    assert f"docs/runbook.md#smoke-{component.replace(' ', '-')}" in summary["verdict"]
    assert_failed_with_verdict(summary)


def assert_failed_with_verdict(summary: dict) -> None:
    """The execution fails with the verdict as its cause (docs/runbook.md: the alarm's first look)."""
    sfn = boto3.client("stepfunctions", region_name="ca-central-1")
    execution = sfn.describe_execution(executionArn=summary["execution"]["arn"])
    assert (execution["status"], execution.get("error"), execution.get("cause")) == (
        "FAILED",
        "RunFailed",
        summary["verdict"],
    )


@pytest.mark.parametrize("table", [plan.construct_id for plan in LAYOUT.source_tables])
def test_a_disabled_mapping_fails_its_tables_canaries_as_stream_not_flowing(
    failing: SmokeStack, table: str, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = table_name(table)
    failing.disable_mapping(broken)

    status, summary, _ = run(failing, capsys)

    found = failed(failing, status, summary, "indexed", "stream not flowing")
    held = {schema for schema, name in failing.tables_of_indexable().items() if name == broken}
    assert set(found) == held, summary["targets"]
    for reason in found.values():
        assert f"the event source mapping of table {broken} is Disabled" in reason
    assert all(t["passed"] for t in summary["targets"] if t["schema"] not in held)


def test_a_sync_that_raises_fails_every_canary_as_sync_erroring(
    failing: SmokeStack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug in the sync")

    monkeypatch.setattr(handler, "process_batch", broken)

    status, summary, _ = run(failing, capsys)

    found = failed(failing, status, summary, "indexed", "sync erroring")
    assert set(found) == set(failing.tables_of_indexable())
    for reason in found.values():
        assert "'PROBLEM: Function call failed'" in reason


def test_a_document_the_index_refuses_fails_as_document_refused_and_its_dead_letter_goes(
    failing: SmokeStack, capsys: pytest.CaptureFixture[str]
) -> None:
    # An earlier writer made `canaryVersion` a boolean field in every index: the canary's number is refused.
    for schema in failing.tables_of_indexable():
        line = {"index": {"_index": write_alias(schema), "_id": f"{schema}::other#1", "require_alias": True}}
        body = json.dumps(line) + "\n" + json.dumps({"pk": f"{schema}::other", "canaryVersion": True}) + "\n"
        answer = failing.admin.request(
            "POST", "_bulk", body.encode(), {"Content-Type": "application/x-ndjson"}
        )
        assert answer.status == 200 and not answer.json()["errors"], answer.body

    # Someone else's dead letter, waiting for a redrive: the smoke run leaves it as it found it.
    boto3.client("sqs", region_name="ca-central-1").send_message(
        QueueUrl=failing.dlq_url, MessageBody=json.dumps({"documentId": "geozone::bcparks_1#0000000001"})
    )

    status, summary, _ = run(failing, capsys)

    assert [letter["documentId"] for letter in failing.dead_letters()] == ["geozone::bcparks_1#0000000001"]
    found = failed(failing, status, summary, "indexed", "document refused")
    assert set(found) == set(failing.tables_of_indexable())
    for reason in found.values():
        assert "mapper_parsing_exception" in reason and "canaryVersion" in reason


@pytest.mark.parametrize("alias", ["read", "write"])
def test_a_missing_alias_fails_before_anything_is_written(
    flowing: SmokeStack, alias: str, capsys: pytest.CaptureFixture[str]
) -> None:
    name = read_alias if alias == "read" else write_alias
    actions = [
        {"remove": {"index": index_name(schema, 1), "alias": name(schema)}}
        for schema in flowing.tables_of_indexable()
    ]
    flowing.admin_request("POST", "_aliases", {"actions": actions})

    status, summary, _ = run(flowing, capsys)

    found = failed(flowing, status, summary, "write", "alias missing")
    assert set(found) == set(flowing.tables_of_indexable())
    for reason in found.values():
        assert reason.endswith("nothing was written")
    assert all(set(t["steps"]) == {"cleanup"} for t in summary["targets"])


@pytest.mark.parametrize("lost", ["document-level security", "field-level security too"])
def test_a_reader_that_sees_the_canary_fails_as_a_reader_leak(
    flowing: SmokeStack, lost: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Each read role as a release without the reserved scopes put it (tombstones and hidden items only), and then
    # also without its field-level security.
    read = set()
    for role in LAYOUT.search.read_roles:
        body = read_role_body(role.schemas)
        for permission in body["index_permissions"]:
            (schema,) = [s for s in role.schemas if permission["index_patterns"] == [read_alias(s)]]
            clauses = document_filter(get_schema(schema))["bool"]["must_not"]
            older = [clause for clause in clauses if "pk" not in json.dumps(clause)]
            permission["dls"] = json.dumps({"bool": {"must_not": older}})
            if lost != "document-level security":
                permission.pop("fls", None)
            read.add(schema)
        flowing.admin_request("PUT", f"_plugins/_security/api/roles/{role.name}", body)
    assert read, "the layout has a read role"

    status, summary, _ = run(flowing, capsys)

    found = failed(flowing, status, summary, "reader-live", "reader leak")
    assert set(found) == read
    for schema, reason in found.items():
        internal = get_schema(schema).attributes_of(visibility=Visibility.INTERNAL)
        assert "sees the canary" in reason
        if lost == "document-level security":
            assert not any(name in reason for name in internal)  # its FLS still hides them
        else:
            assert all(name in reason for name in internal) and internal
    assert all(t["passed"] for t in summary["targets"] if t["schema"] not in read)


def test_a_probe_role_without_its_identity_grant_is_refused_by_iam_and_fails_as_a_reader_leak(
    flowing: SmokeStack, capsys: pytest.CaptureFixture[str]
) -> None:
    # The access policy names the account with an aws:PrincipalArn condition: in one account that only delegates
    # to the probe's identity policy, so without it AWS answers 403 (the breaker of every first release).
    access = flowing.server.access
    assert access is not None
    reader, probe = sorted(flowing.probes.items())[0]
    flowing.server.access = replace(
        access, identity=lambda role: [] if role == probe else access.identity(role)
    )

    status, summary, _ = run(flowing, capsys)

    found = failed(flowing, status, summary, "reader-live", "reader leak")
    schemas = {s for role in LAYOUT.search.read_roles if role.name == reader for s in role.schemas}
    assert found and set(found) <= schemas
    for reason in found.values():
        assert f"read role {reader} cannot read" in reason and "es:ESHttp" in reason
    assert "implicit" in {d for role, _, _, d in flowing.server.access.decided if role == probe}


# --- leaving nothing behind, whatever happens -----------------------------------------------------------------------


def test_a_later_run_sweeps_what_a_stalled_pipeline_delivered_after_its_run(
    failing: SmokeStack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tables = sorted(set(failing.tables_of_indexable().values()))
    for table in tables:
        failing.disable_mapping(table)
    status, _, _ = run(failing, capsys)
    assert status == 2 and failing.canary_items() == [] and failing.canary_documents() == []

    for table in tables:  # the pipeline recovers: the canaries' insert and delete arrive late
        failing.enable_mapping(table)
    failing.poller.poll_all()  # one poll delivers what the stalled mappings held
    assert len(failing.canary_documents()) == len(failing.tables_of_indexable())
    # An hour passes (and a minute: the sync stamps a delete's tombstone with the wall clock, which ran on a little).
    failing.clock.advance(smoke.SWEEP_AGE_SECONDS + 60)
    status, second, _ = run(failing, capsys)

    assert status == 0, second["verdict"]
    assert sum(t["swept"] for t in second["targets"]) == len(failing.tables_of_indexable())
    assert failing.canary_documents() == [] and failing.canary_items() == []


def test_a_part_that_crashed_is_cleaned_up_by_finish(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], secured_as_left: SecuredNode
) -> None:
    """A worker killed mid-canary runs no cleanup of its own: its canary's key, saved before the write, is cleaned
    up by the run's finish. (One part at a time, so no other part is still running when finish does.)"""

    def crash(env: object, settings: object, tools: object, part: dict, cursor: dict, *, run_id: str) -> None:
        write_canary(part, cursor)
        raise RuntimeError("the worker was killed mid-canary")  # no finally runs in a killed Lambda

    monkeypatch.setattr(smoke, "run_canary", crash)
    serial = replace(LAYOUT, ops=replace(LAYOUT.ops, max_concurrency=1))

    with smoke_stack(serial, monkeypatch, secured_as_left, wait_seconds=5.0) as stack:
        status, summary, _ = run(stack, capsys)

        assert status == 2 and summary["verdict"].startswith("FAILED (smoke run): ")
        assert "the worker was killed mid-canary" in summary["verdict"]
        assert_failed_with_verdict(summary)
        assert summary["leftBehind"] == []
        assert stack.canary_items() == [] and stack.canary_documents() == []


def test_a_retried_part_whose_earlier_attempt_wrote_its_canary_passes_and_leaves_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], secured_as_left: SecuredNode
) -> None:
    """An invocation that wrote its canary and then failed in a way the workflow retries (here a TransientFailure):
    the retry must not refuse its own canary as another writer's. It cleans that one up and runs a fresh one."""
    real = smoke.run_canary
    failed: list[str] = []

    def once(
        env: object, settings: object, tools: object, part: dict, cursor: dict, *, run_id: str
    ) -> object:
        if part["name"] not in failed:
            failed.append(part["name"])
            write_canary(part, cursor)
            raise TransientFailure("the domain throttled after the canary was written")
        return real(env, settings, tools, part, cursor, run_id=run_id)  # type: ignore[arg-type]

    monkeypatch.setattr(smoke, "run_canary", once)
    with smoke_stack(LAYOUT, monkeypatch, secured_as_left, wait_seconds=20) as stack:
        status, summary, _ = run(stack, capsys)

        assert summary["verdict"] == "pass", summary
        assert status == 0 and summary["leftBehind"] == []
        assert failed and stack.canary_items() == [] and stack.canary_documents() == []


@pytest.mark.parametrize("startup", [7, 0])
def test_a_first_deploys_mappings_that_start_polling_minutes_late_pass_within_the_startup_budget(
    startup: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    secured_as_left: SecuredNode,
) -> None:
    """A new event source mapping may take several minutes to start polling (Lambda Developer Guide): the first wait
    goes on until the start-up budget after the mapping was modified. Without one, the first deploy fails."""
    with smoke_stack(LAYOUT, monkeypatch, secured_as_left, wait_seconds=20, startup_minutes=startup) as stack:
        stack.poller.starts = dict.fromkeys(stack.poller.streams, 300.0)  # five minutes on the run's clock

        status, summary, _ = run(stack, capsys)

        if startup:
            assert summary["verdict"] == "pass" and status == 0, summary
            # a canary not indexed within its step's wait says why it waited on (one started later needs no note)
            waited = [t for t in summary["targets"] if t["steps"]["indexed"] > 20]
            assert waited and all(any("is new" in note for note in t["notes"]) for t in waited), summary[
                "targets"
            ]
        else:
            assert_verdict(status, summary, "indexed", "stream not flowing")
        assert stack.canary_items() == [] and stack.canary_documents() == []


def test_a_check_interrupted_after_the_canarys_first_version_starts_the_canary_over(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], secured_as_left: SecuredNode
) -> None:
    """A check that found its canary indexed went on (the update) and was then retried by the workflow (here after
    a TransientFailure, which it retries like Lambda's own errors): the retry
    finds the table's canary past version 1, so it starts over with a fresh canary, as any interrupted attempt
    does, instead of waiting for a version 1 that can no longer come."""
    real = smoke.run_canary
    interrupted: list[str] = []

    def once(
        env: object, settings: object, tools: object, part: dict, cursor: dict, *, run_id: str
    ) -> object:
        polling = stack.clock.monotonic() > starts + STARTUP_CHECK_SECONDS  # the canary is indexed by now
        if cursor.get("awaiting") and polling and part["name"] not in interrupted:
            interrupted.append(part["name"])
            table = boto3.resource("dynamodb", region_name="ca-central-1").Table(part["table"])
            table.update_item(
                Key={"pk": cursor["pk"], "sk": cursor["sk"]},
                UpdateExpression="SET canaryVersion = :two",
                ExpressionAttributeValues={":two": 2},
            )
            stack.poller.poll_all()  # the update reaches the index before the retry looks
            raise TransientFailure("the domain throttled after the canary was updated")
        return real(env, settings, tools, part, cursor, run_id=run_id)  # type: ignore[arg-type]

    monkeypatch.setattr(smoke, "run_canary", once)
    starts = 300.0
    with smoke_stack(LAYOUT, monkeypatch, secured_as_left, wait_seconds=20, startup_minutes=7) as stack:
        stack.poller.starts = dict.fromkeys(stack.poller.streams, starts)

        status, summary, _ = run(stack, capsys)

        assert summary["verdict"] == "pass" and status == 0, summary
        assert interrupted and summary["leftBehind"] == []
        assert stack.canary_items() == [] and stack.canary_documents() == []


WORKER_TIMEOUT_SECONDS = 15 * 60


@pytest.mark.parametrize(("budget", "passes"), [(30, True), (15, False)])
def test_the_start_up_wait_is_the_workflows_as_long_as_the_budget_and_no_invocation_holds_it(
    budget: int,
    passes: bool,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    secured_as_left: SecuredNode,
) -> None:
    """Mappings that start polling 20 minutes after they were made, longer than any worker invocation lasts: the
    canary waits in the workflow (a Wait and a check, again and again) until it is indexed, within a 30-minute
    budget; with a 15-minute one the run fails at `indexed` once the budget is spent, not before. No invocation
    holds the wait."""
    starts = 20 * 60.0
    with smoke_stack(LAYOUT, monkeypatch, secured_as_left, wait_seconds=20, startup_minutes=budget) as stack:
        stack.poller.starts = dict.fromkeys(stack.poller.streams, starts)

        status, summary, _ = run(stack, capsys)

        if passes:
            assert summary["verdict"] == "pass" and status == 0, summary
            assert stack.clock.monotonic() >= starts
            indexed = [target["steps"]["indexed"] for target in summary["targets"]]
            # a part that wrote before the mappings started waited for them; one started later found them polling
            assert max(indexed) >= starts - 60 and all(seconds < budget * 60 for seconds in indexed), indexed
        else:
            assert_verdict(status, summary, "indexed", "stream not flowing")
            assert budget * 60 - 60 <= stack.clock.monotonic() < starts
        assert set(stack.workflow_waits) == {STARTUP_CHECK_SECONDS}
        assert max(seconds for _, seconds in stack.invocations) < WORKER_TIMEOUT_SECONDS
        checks = [seconds for step, seconds in stack.invocations if step == "part"]
        assert len(checks) > len(summary["targets"])  # each part was invoked again after a wait
        assert stack.canary_items() == [] and stack.canary_documents() == []


def test_two_runs_at_once_share_nothing_and_both_pass(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], secured_as_left: SecuredNode
) -> None:
    results: list[int] = []

    def one() -> None:
        results.append(cli.main(["smoke", "--env", stack.config.name, "--region", "ca-central-1"]))

    with smoke_stack(LAYOUT, monkeypatch, secured_as_left, wait_seconds=20) as stack:
        threads = [threading.Thread(target=one) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(600)  # a bound against a hang only: two runs took over 60 s under a load of 20
        assert not any(thread.is_alive() for thread in threads), "a smoke run never ended"
        out = capsys.readouterr().out
        summaries = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        assert results == [0, 0] and [s["verdict"] for s in summaries] == ["pass", "pass"]
        assert len({s["runId"] for s in summaries}) == 2
        assert stack.canary_items() == [] and stack.canary_documents() == []


def test_the_poller_keeps_the_syncs_output_and_never_swaps_the_process_stdout(
    flowing: SmokeStack, capsys: pytest.CaptureFixture[str]
) -> None:
    """sys.stdout is one for the whole process: the poller's thread once redirected it around each sync, and the
    CLI's summary, printed meanwhile, went into the sync's buffer or a finished test's closed capture."""
    seen: dict[int, object] = {}
    stop = threading.Event()

    def sample() -> None:  # waits on the event between samples: no real sleep however long the run takes
        while not stop.wait(0.0005):
            seen.setdefault(id(sys.stdout), sys.stdout)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        status, summary, _ = run(flowing, capsys)
    finally:
        stop.set()
        sampler.join(10)

    assert status == 0 and summary["verdict"] == "pass", summary
    assert len(seen) == 1, f"sys.stdout was swapped during the run: {list(seen.values())}"
    assert any("batch synced" in line for line in flowing.poller.lines)
