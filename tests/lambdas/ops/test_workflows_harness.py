"""The workflows' interpreter (tests/lambdas/ops/workflows_harness.py: moto's, with `MotoGaps`) is as strict as Step
Functions about a distributed map's results: held in the state they count against the 256 KiB payload quota
(over it, `States.DataLimitExceeded`, which `States.ALL` does not catch), and a `ResultWriter` writes them to S3
instead, as "ResultWriter (Map)" lays them out. Small state machines of their own, not the workflows'."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from workflows_harness import PAYLOAD_QUOTA, Clock, MotoGaps, payload_bytes, running_execution

from tests.support.aws import use_fake_aws

pytestmark = pytest.mark.integration

REGION = "eu-west-1"
BUCKET = "results"
PADDING = 8_000  # bytes of each child's output: a 33rd child puts the results over the quota
ROLE = "arn:aws:iam::123456789012:role/machine"


@pytest.fixture
def sfn(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    use_fake_aws(monkeypatch, REGION)
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        MotoGaps(monkeypatch, Clock())
        boto3.client("s3", region_name=REGION).create_bucket(
            Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION}
        )
        yield boto3.client("stepfunctions", region_name=REGION)


def padded_map(**fields: Any) -> dict[str, Any]:
    """A distributed map over `$.items` whose children each answer PADDING bytes, keeping only their number in the
    state (the state's output stays small: moto checks that already); a catch-all Catch."""
    return {
        "StartAt": "Map",
        "States": {
            "Map": {
                "Type": "Map",
                "ItemsPath": "$.items",
                "ItemProcessor": {
                    "ProcessorConfig": {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"},
                    "StartAt": "Pad",
                    "States": {"Pad": {"Type": "Pass", "Result": "x" * (PADDING - 2), "End": True}},
                },
                "ResultSelector": {"count.$": "States.ArrayLength($)"},
                "ResultPath": "$.results",
                "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Caught"}],
                "End": True,
                **fields,
            },
            "Caught": {"Type": "Succeed"},
        },
    }


def execute(
    sfn: Any, definition: dict[str, Any], items: int, **given: Any
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    arn = sfn.create_state_machine(name="padded", definition=json.dumps(definition), roleArn=ROLE)[
        "stateMachineArn"
    ]
    execution = sfn.start_execution(
        stateMachineArn=arn, input=json.dumps({"items": list(range(items)), **given})
    )
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and running_execution(thread):
            thread.join(60)
    described = sfn.describe_execution(executionArn=execution["executionArn"])
    history = sfn.get_execution_history(executionArn=execution["executionArn"], maxResults=1000)["events"]
    return described, history


def entered(history: list[dict[str, Any]]) -> list[str]:
    return [e["stateEnteredEventDetails"]["name"] for e in history if "stateEnteredEventDetails" in e]


def items_over_the_quota() -> int:
    items = 1
    while payload_bytes(["x" * (PADDING - 2)] * items) <= PAYLOAD_QUOTA:
        items += 1
    return items


def test_results_over_the_payload_quota_fail_the_run_and_no_catch_all_catches_it(sfn: Any) -> None:
    items = items_over_the_quota()

    described, history = execute(sfn, padded_map(), items)

    assert described["status"] == "FAILED", described
    assert described["error"] == "States.DataLimitExceeded"
    assert "Caught" not in entered(history)  # a terminal error: States.ALL does not catch it


def test_results_within_the_payload_quota_stay_in_the_state(sfn: Any) -> None:
    items = items_over_the_quota() - 1

    described, _ = execute(sfn, padded_map(), items)

    assert described["status"] == "SUCCEEDED", described
    assert json.loads(described["output"])["results"] == {"count": items}


def test_a_result_writer_writes_the_results_to_s3_and_the_state_keeps_where(sfn: Any) -> None:
    items = items_over_the_quota()
    writer = {
        "Resource": "arn:aws:states:::s3:putObject",
        "Parameters": {"Bucket": BUCKET, "Prefix": "maps/run"},
    }

    map_state = padded_map(ResultWriter=writer)
    del map_state["States"]["Map"]["ResultSelector"]  # the state keeps the writer's answer

    described, _ = execute(sfn, map_state, items)

    assert described["status"] == "SUCCEEDED", described
    written = json.loads(described["output"])["results"]
    map_run_id = written["MapRunArn"].rsplit(":", 1)[1]
    assert ":mapRun:padded/" in written["MapRunArn"]
    manifest_key = f"maps/run/{map_run_id}/manifest.json"
    assert written["ResultWriterDetails"] == {"Bucket": BUCKET, "Key": manifest_key}
    s3 = boto3.client("s3", region_name=REGION)
    manifest = json.loads(s3.get_object(Bucket=BUCKET, Key=manifest_key)["Body"].read())
    assert manifest["DestinationBucket"] == BUCKET and manifest["MapRunArn"] == written["MapRunArn"]
    assert manifest["ResultFiles"]["FAILED"] == manifest["ResultFiles"]["PENDING"] == []
    (result_file,) = manifest["ResultFiles"]["SUCCEEDED"]
    assert result_file["Key"] == f"maps/run/{map_run_id}/SUCCEEDED_0.json"
    body = s3.get_object(Bucket=BUCKET, Key=result_file["Key"])["Body"].read()
    assert result_file["Size"] == len(body)
    children = json.loads(body)
    assert len(children) == items
    assert all(
        child["Status"] == "SUCCEEDED" and len(json.loads(child["Output"])) == PADDING - 2
        for child in children
    )
