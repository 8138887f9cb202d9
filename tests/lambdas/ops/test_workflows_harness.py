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

from tests.support.aws import create_bucket, use_fake_aws

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
        create_bucket(REGION, BUCKET)
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
    machine = sfn.create_state_machine(name="padded", definition=json.dumps(definition), roleArn=ROLE)
    started = sfn.start_execution(
        stateMachineArn=machine["stateMachineArn"], input=json.dumps({"items": list(range(items)), **given})
    )
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and running_execution(thread):
            thread.join(60)
    described = sfn.describe_execution(executionArn=started["executionArn"])
    history = sfn.get_execution_history(executionArn=started["executionArn"], maxResults=1000)["events"]
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


def test_a_fail_state_stopped_between_its_error_and_its_cause_never_fails_with_its_input(
    sfn: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A child's Fail state takes its error and cause from its input, while its map run may stop it from another
    thread (a sibling failed). The stop arrives right after the error is read: it either waits for the state or
    the state does not run; the cause is never the state's whole input (moto's interpreter gave that)."""
    from moto.stepfunctions.parser.asl.component.state.fail.error_decl import ErrorPath

    stopped: list[str] = []
    original = ErrorPath._eval_body

    def stop_from_another_thread(self: Any, env: Any) -> None:
        original(self, env)

        def stop() -> None:
            if env._state_mutex.acquire(blocking=False):  # the state is not holding the execution
                env.set_error({"error": "Stopped", "cause": "a sibling failed"})
                env._state_mutex.release()
                stopped.append("between")
            else:
                stopped.append("after")

        thread = threading.Thread(target=stop)
        thread.start()
        thread.join()

    monkeypatch.setattr(ErrorPath, "_eval_body", stop_from_another_thread)
    definition = {
        "StartAt": "Failed",
        "States": {"Failed": {"Type": "Fail", "ErrorPath": "$.error.Error", "CausePath": "$.error.Cause"}},
    }

    described, _ = execute(sfn, definition, 0, error={"Error": "OpsError", "Cause": "the part's own cause"})

    assert stopped, "the stop never ran"
    assert described["status"] == "FAILED", described
    assert (described.get("error"), described.get("cause")) in {
        ("OpsError", "the part's own cause"),
        ("Stopped", "a sibling failed"),
    }, described
