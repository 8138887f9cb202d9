"""The stream sync and the index bootstrap as deployed, IAM-checked: each handler runs in-process with the
environment and role its synthesized template gives it, against the environment's stacks stood up in moto
(tests/lambdas/ops/workflows_harness.py), and every AWS call it makes is checked against its role's synthesized
policies as AWS evaluates them (tests/support/iam.py). (The ops worker's and the state machines' calls are checked
by the executed workflows, tests/lambdas/ops/test_ops_workflows_executed.py.)"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from infra.config import EnvironmentConfig
from infra.environments import environments
from tests.lambdas.ops.workflows_harness import (
    SYNC_HANDLER,
    World,
    bootstrap,
    deployed_environment,
    run_as,
)
from tests.lambdas.stream_sync.stream_sync_fakes import record
from tests.support.aws import Context
from tests.support.iam import SdkCalls
from tests.support.opensearch_server import LoopbackOpenSearch
from tests.support.secured_node import SecuredNode

pytestmark = pytest.mark.integration

ZONE = "geozone::bcparks_1"


@pytest.fixture(params=sorted(environments()))
def deployed(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, secured: SecuredNode
) -> Iterator[tuple[World, SdkCalls, LoopbackOpenSearch]]:
    config: EnvironmentConfig = environments()[request.param]
    for world, calls, _clock, _gaps, server in deployed_environment(config, monkeypatch, secured):
        yield world, calls, server


def test_the_bootstrap_sets_the_domain_up_and_the_sync_indexes_dereferences_and_dead_letters_each_as_its_role(
    deployed: tuple[World, SdkCalls, LoopbackOpenSearch], monkeypatch: pytest.MonkeyPatch
) -> None:
    world, calls, server = deployed
    from stream_sync import handler

    created = bootstrap(world, calls, monkeypatch)
    assert created["PhysicalResourceId"] and [c.action for c in calls.checked] == ["sts:AssumeRole"]
    _, environment = world.function(SYNC_HANDLER)
    bucket = environment["GEOMETRY_BUCKET"]
    geometry = json.dumps({"type": "Point", "coordinates": [-123.1, 49.2]}).encode()
    key = f"geometries/{hashlib.sha256(geometry).hexdigest()}.geojson"
    boto3.client("s3", region_name=world.region).put_object(Bucket=bucket, Key=key, Body=geometry)
    table = world.table_of("geozone")
    stream = boto3.client("dynamodb", region_name=world.region).describe_table(TableName=table)["Table"][
        "LatestStreamArn"
    ]
    located = {"name": {"S": "zone"}, "geometryUrl": {"S": f"s3://{bucket}/{key}"}}
    records = [
        record("INSERT", "0001", 11, located, pk=ZONE),
        record("INSERT", "0002", 12, {"stream_seq": {"S": "reserved"}}, pk=ZONE),  # refused: to the DLQ
    ]
    for entry in records:
        entry["eventSourceARN"] = stream

    answer = run_as(
        world, calls, SYNC_HANDLER, monkeypatch, lambda: handler.handler({"Records": records}, Context(120))
    )

    assert answer == {"batchItemFailures": []}
    assert server.documents("geozone-v1")[f"{ZONE}#0001"]["geometry"]["type"] == "Point"
    actions = {call.action for call in calls.checked}
    assert {"s3:GetObject", "sqs:SendMessage"} <= actions


def schedule_calls(world: World, service: str) -> list[tuple[str, str, dict[str, Any]]]:
    """(role ARN, operation, parameters) of each schedule whose target is an AWS SDK call into `service`, with the
    scheduled time filled in as EventBridge Scheduler fills it."""
    prefix = f"arn:aws:scheduler:::aws-sdk:{service}:"
    found = []
    for resource in world.stateless.resources("AWS::Scheduler::Schedule").values():
        target = world.stateless(resource["Properties"]["Target"])
        if str(target["Arn"]).startswith(prefix):
            text = str(target["Input"]).replace("<aws.scheduler.scheduled-time>", "2026-12-04T05:00:00Z")
            found.append((str(target["RoleArn"]), target["Arn"][len(prefix) :], json.loads(text)))
    return found


def test_each_heartbeat_schedule_writes_its_item_as_its_role_and_the_role_may_write_nothing_else(
    deployed: tuple[World, SdkCalls, LoopbackOpenSearch],
) -> None:
    """The schedules' targets executed as Scheduler would: their role's `dynamodb:LeadingKeys` grant
    (ForAllValues:StringEquals) and the data key's kms:ViaService grant decide, as on AWS."""
    world, calls, _ = deployed
    dynamodb = boto3.client("dynamodb", region_name=world.region)
    scheduled = schedule_calls(world, "dynamodb")
    assert scheduled and {operation for _, operation, _ in scheduled} == {"putItem"}
    for role, _, parameters in scheduled:
        with calls.acting(role):
            dynamodb.put_item(**parameters)
        item = dynamodb.get_item(
            TableName=parameters["TableName"], Key={k: parameters["Item"][k] for k in ("pk", "sk")}
        )
        assert item["Item"]["heartbeatAt"] == {"S": "2026-12-04T05:00:00Z"}
        elsewhere = parameters | {"Item": parameters["Item"] | {"pk": {"S": "geozone::bcparks_1"}}}
        with calls.acting(role), pytest.raises(ClientError, match="AccessDenied"):
            dynamodb.put_item(**elsewhere)
    assert {v.call.action for v in calls.violations} == {"dynamodb:PutItem"}
    assert all("dynamodb:PutItem: no statement allows it" in v.why for v in calls.violations)
    calls.violations.clear()  # those refusals were the point
    # Without the data key's grant the role may not write its own item: DynamoDB uses the key on its behalf.
    role, _, parameters = scheduled[0]
    calls.policies.identity[role] = [
        {"Statement": [s for s in document["Statement"] if "kms:Decrypt" not in s["Action"]]}
        for document in calls.policies.identity[role]
    ]
    with calls.acting(role), pytest.raises(ClientError, match="AccessDenied"):
        dynamodb.put_item(**parameters)
    assert [v.why for v in calls.violations] == ["kms:Decrypt: no statement allows it"]
    calls.violations.clear()


def test_each_due_count_publishes_its_tables_heartbeat_as_its_role_into_the_syncs_namespace_only(
    deployed: tuple[World, SdkCalls, LoopbackOpenSearch],
) -> None:
    """The heartbeat's other schedules (infra/constructs/heartbeat.py) executed as Scheduler would: PutMetricData of
    one heartbeat due, allowed by the role's cloudwatch:namespace condition, and refused in any other namespace."""
    world, calls, _ = deployed
    cloudwatch = boto3.client("cloudwatch", region_name=world.region)
    counted = schedule_calls(world, "cloudwatch")
    assert len(counted) == len(world.config.source_tables)
    assert {operation for _, operation, _ in counted} == {"putMetricData"}
    _, environment = world.function(SYNC_HANDLER)
    for role, _, parameters in counted:
        assert parameters["Namespace"] == environment["METRICS_NAMESPACE"]
        with calls.acting(role):
            cloudwatch.put_metric_data(**parameters)
        with calls.acting(role), pytest.raises(ClientError, match="AccessDenied"):
            cloudwatch.put_metric_data(**(parameters | {"Namespace": "Elsewhere"}))
    assert [v.why for v in calls.violations] == ["cloudwatch:PutMetricData: no statement allows it"] * len(
        counted
    )
    calls.violations.clear()  # those refusals were the point
    published = cloudwatch.list_metrics(
        Namespace=environment["METRICS_NAMESPACE"], MetricName="HeartbeatsDue"
    )
    assert len(published["Metrics"]) == len(counted)


def test_a_role_is_assumed_only_where_its_trust_policy_admits_the_caller(
    deployed: tuple[World, SdkCalls, LoopbackOpenSearch], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bootstrap assumes the admin role: its identity policy allows it, and the admin role's trust names it.
    Drop the trust statement and the same identity policy no longer suffices (a trust policy must allow)."""
    world, calls, _ = deployed
    bootstrap_role, _ = world.function("index_bootstrap.handler.on_event")
    (admin,) = [
        arn for arn in calls.policies.trust if arn.endswith(world.config.platform_role_name("search-admin"))
    ]
    calls.policies.trust[admin] = {
        "Statement": [
            statement
            for statement in calls.policies.trust[admin]["Statement"]
            if bootstrap_role not in json.dumps(statement.get("Principal"))
        ]
    }
    with pytest.raises(Exception, match=r"AccessDenied|not authorized"):
        bootstrap(world, calls, monkeypatch)
    assert [(v.call.action, v.resource) for v in calls.violations] == [("sts:AssumeRole", admin)]
    calls.violations.clear()
