"""refdata-client as an application team uses it: the wheel `make client` builds, installed into a fresh virtual
environment with nothing of this repository on its path, runs the example of docs/client.md as written, against an
environment as its stacks deploy it (tests/lambdas/ops/workflows_harness.py: every environment's synthesized
templates stood up in moto, the loopback search domain set up by the real index bootstrap).

The writer and the reader are two roles of the platform's account holding exactly the policies the stateful stack
publishes (`WriterPolicyArn`, `ReaderPolicyArns`), read from the synthesized template, and nothing else. Their writes
go over HTTP to moto, where IAM decides each request as AWS does (tests/support/iam.py `HttpCalls`: the table's and
the bucket's data key included); the stream sync indexes them as its own role; the reads are signed as the read
role's IAM role, decided by the domain's access policy with the published reader's policy, then by FGAC.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from infra.config import EnvironmentConfig
from tests.integration.sync_harness import stream_records
from tests.lambdas.ops.workflows_harness import (
    SYNC_HANDLER,
    World,
    bootstrapped,
    deployed_environment,
    run_as,
)
from tests.support import client
from tests.support.aws import Context
from tests.support.iam import SdkCalls, moto_over_http
from tests.support.opensearch_server import LoopbackOpenSearch
from tests.support.secured_node import SecuredNode

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "client.md"
BLOCK = re.compile(r"<!-- example: (\w+) -->\n```python\n(.*?)```", re.S)
OUTPUT = re.compile(r"<!-- example-output -->\n```text\n(.*?)```", re.S)
# The schemas the guide's example reads back through search.
READ_SCHEMAS = {"geozone", "productDate"}


def example() -> dict[str, str]:
    """The guide's example blocks by name (configure, write, read)."""
    return dict(BLOCK.findall(GUIDE.read_text()))


@pytest.fixture(scope="module")
def team_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the wheel and its `aws` extra at the lock's versions, nothing else.

    Offline and without resolving: the extra's closure comes from the lock with its hashes, so the install needs
    only the wheels the set-up fetched (a machine whose caches were empty before `make test` passes too)."""
    directory = tmp_path_factory.mktemp("team")
    venv, locked = directory / "venv", directory / "requirements.txt"
    locked.write_text(client.locked_closure("aws"))
    uv = ROOT / ".venv" / "bin" / "uv"
    subprocess.run([uv, "venv", "--quiet", "--python", os.path.realpath(sys.executable), venv], check=True)
    python = venv / "bin" / "python"
    install = [uv, "pip", "install", "--quiet", "--offline", "--no-deps", "--python", python]
    subprocess.run([*install, "--require-hashes", "--requirement", locked], check=True)
    subprocess.run([*install, client.wheel()], check=True)
    # Nothing the wheel or its dependencies require is missing or at another version.
    subprocess.run([uv, "pip", "check", "--quiet", "--python", python], check=True)
    return python


@pytest.fixture
def deployed(
    each_config: EnvironmentConfig, monkeypatch: pytest.MonkeyPatch, secured_as_left: SecuredNode
) -> Iterator[tuple[World, SdkCalls, LoopbackOpenSearch]]:
    """The environment as deployed (its domain the secured node: the security plugin decides what the reader sees),
    set up by the index bootstrap; the test fails on any IAM refusal."""
    for world, calls, _clock, _gaps, server in deployed_environment(
        each_config, monkeypatch, secured_as_left
    ):
        bootstrapped(world, calls, monkeypatch, server)
        yield world, calls, server


@pytest.fixture
def moto_endpoint(deployed: tuple[World, SdkCalls, LoopbackOpenSearch]) -> Iterator[str]:
    """moto over HTTP, serving the same in-process state the environment lives in, every request decided by IAM."""
    _, calls, _ = deployed
    with moto_over_http(calls) as endpoint:
        yield endpoint


def output(world: World, name: str) -> str:
    """A stateful stack output's value, as `describe-stacks` shows it."""
    return str(world.stateful(world.stateful.template["Outputs"][name]["Value"]))


def published(world: World, arn: str) -> dict[str, Any]:
    """The policy document of the stateful stack's managed policy `arn`."""
    for logical_id, resource in world.stateful.resources("AWS::IAM::ManagedPolicy").items():
        if world.stateful({"Ref": logical_id}) == arn:
            return dict(world.stateful(resource["Properties"]["PolicyDocument"]))
    raise AssertionError(f"the stateful stack defines no managed policy {arn}")


def team_roles(world: World) -> tuple[str, str, str]:
    """(writer role, reader role, read role name): the writer a role of the platform's account holding exactly the
    published writer's policy; the reader an IAM role of a read role that reads what the example reads, holding
    exactly that read role's published policy."""
    config = world.config
    writer = config.role_arn("team-writer")
    read_role = next(role for role in config.search.read_roles if set(role.schemas) >= READ_SCHEMAS)
    (reader, *_) = (arn for arn in read_role.iam_role_arns if arn.split(":")[4] == config.account)
    reader_policies = json.loads(output(world, "ReaderPolicyArns"))
    world.policies.identity[writer] = [published(world, output(world, "WriterPolicyArn"))]
    world.policies.identity[reader] = [published(world, reader_policies[read_role.name])]
    return writer, reader, read_role.name


def credentials(calls: SdkCalls, role: str, region: str) -> dict[str, str]:
    """A session of `role` (moto's STS), whose access key the IAM checks and the domain attribute to it."""
    issued = boto3.client("sts", region_name=region).assume_role(RoleArn=role, RoleSessionName="team")
    keys = issued["Credentials"]
    calls.keys[keys["AccessKeyId"]] = role
    return {
        "AWS_ACCESS_KEY_ID": keys["AccessKeyId"],
        "AWS_SECRET_ACCESS_KEY": keys["SecretAccessKey"],
        "AWS_SESSION_TOKEN": keys["SessionToken"],
    }


def varying(output: str) -> str:
    """The output with what changes from run to run (a fresh UUID, the shard it picks) as the guide writes it."""
    output = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<uuid>", output)
    return re.sub(r"^(wrote booking::[^:]+)::[0-9]+ ", r"\1::<shard> ", output, flags=re.M)


def run(python: Path, code: str, env: dict[str, str], cwd: Path) -> str:
    done = subprocess.run([python, "-c", code], env=env, cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def team_environment(
    world: World, server: LoopbackOpenSearch, moto_endpoint: str, keys: dict[str, str]
) -> dict[str, str]:
    """What the application's process would have: its role's credentials, its region, and the stack outputs the
    guide names."""
    return {
        "PATH": os.environ["PATH"],
        **keys,
        "AWS_REGION": world.region,
        "AWS_DEFAULT_REGION": world.region,
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_ENDPOINT_URL": moto_endpoint,  # DynamoDB and S3 are moto's
        "REFDATA_SCHEMA_TABLES": output(world, "SchemaTables"),
        "REFDATA_GEOMETRY_BUCKET": output(world, "GeometryBucketName"),
        "REFDATA_SEARCH_ENDPOINT": server.endpoint,
    }


def sync(world: World, calls: SdkCalls, monkeypatch: pytest.MonkeyPatch) -> None:
    """What each table's event source mapping does: its stream's records, in Lambda's event format, to the stream
    sync function, run as its role; every record must be indexed (nothing dead-lettered)."""
    from stream_sync import handler

    dynamodb = boto3.client("dynamodb", region_name=world.region)
    streams = boto3.client("dynamodbstreams", region_name=world.region)
    handler.reset()
    for table in sorted(set(json.loads(output(world, "SchemaTables")).values())):
        arn = dynamodb.describe_table(TableName=table)["Table"]["LatestStreamArn"]
        if records := stream_records(streams, arn):
            answer = run_as(
                world,
                calls,
                SYNC_HANDLER,
                monkeypatch,
                lambda batch=records: handler.handler({"Records": batch}, Context(120)),
            )
            assert answer == {"batchItemFailures": []}
    handler.reset()
    _, environment = world.function(SYNC_HANDLER)
    sqs = boto3.client("sqs", region_name=world.region)
    depth = sqs.get_queue_attributes(
        QueueUrl=environment["DLQ_URL"], AttributeNames=["ApproximateNumberOfMessages"]
    )
    assert depth["Attributes"]["ApproximateNumberOfMessages"] == "0", "the sync dead-lettered a record"


def test_the_package_is_the_wheel_alone(team_python: Path, tmp_path: Path) -> None:
    where = run(team_python, "import refdata, sys; print(refdata.__file__); print(sys.path)", {}, tmp_path)
    assert where.splitlines()[0].startswith(str(team_python.parent.parent))
    assert str(ROOT) not in where


def test_the_guides_example_writes_syncs_and_reads_back_with_exactly_the_published_policies(
    team_python: Path,
    deployed: tuple[World, SdkCalls, LoopbackOpenSearch],
    moto_endpoint: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    world, calls, server = deployed
    blocks = example()
    writer, reader, _ = team_roles(world)
    as_writer = team_environment(world, server, moto_endpoint, credentials(calls, writer, world.region))
    wrote = run(team_python, blocks["configure"] + blocks["write"], as_writer, tmp_path)
    assert wrote.count("wrote ") == 3, wrote
    assert {call.action for call in calls.checked if call.role == writer} == {
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
    }, "the writer's calls were decided by IAM"

    sync(world, calls, monkeypatch)
    # The domain makes what was indexed searchable within its refresh interval (one second); the guide's reader runs
    # after that, so the test refreshes rather than sleeping on the real clock.
    assert server.engine is not None
    server.engine.request("POST", "/_refresh")

    as_reader = team_environment(world, server, moto_endpoint, credentials(calls, reader, world.region))
    printed = run(team_python, blocks["configure"] + blocks["read"], as_reader, tmp_path)
    lines = printed.splitlines()
    assert lines[0].startswith("found geozone {'collectionId': 'bcparks_1', 'seq': 1} Alpine Meadow ")
    assert " 1234.567890123456789 Polygon" in lines[0]  # digit for digit, and the geometry
    assert lines[1] == "near ['Alpine Meadow']"
    assert lines[2] == "product 2026-07-01 Lake day pass 12.5"
    assert server.access is not None
    decided = {decision for role, _, _, decision in server.access.decided if role == reader}
    assert decided == {"allow"}, "the reader's requests were decided by IAM"
    (shown,) = OUTPUT.findall(GUIDE.read_text())
    assert shown == varying(wrote + printed), "docs/client.md shows other output than the example prints"


def test_a_writer_without_the_data_key_grant_cannot_write(
    team_python: Path,
    deployed: tuple[World, SdkCalls, LoopbackOpenSearch],
    moto_endpoint: str,
    tmp_path: Path,
) -> None:
    """The published writer's policy less its KMS statements (what docs/client.md listed before it named the key):
    DynamoDB uses the table's data key with the writer's permissions, so its first create is refused."""
    world, calls, server = deployed
    writer, _, _ = team_roles(world)
    (document,) = world.policies.identity[writer]
    world.policies.identity[writer] = [
        document | {"Statement": [s for s in document["Statement"] if not str(s["Action"]).count("kms:")]}
    ]
    env = team_environment(world, server, moto_endpoint, credentials(calls, writer, world.region))
    done = subprocess.run(
        [team_python, "-c", example()["configure"] + example()["write"]],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0 and "AccessDenied" in done.stderr, done.stderr
    assert {v.why for v in calls.violations} == {"kms:Decrypt: no statement allows it"}
    calls.violations.clear()  # the refusal was the point
