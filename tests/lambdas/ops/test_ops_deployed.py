"""`python -m ops <command> --env ENV`: finds the workflows in the deployed stacks' outputs (moto CloudFormation),
starts an execution (moto Step Functions), shows progress from the run's records, prints the summary, and exits
non-zero when the execution failed (a fake execution history)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.stepfunctions.models import Execution, stepfunctions_backends

from infra.environments import environments
from ops import cli, deployed
from tests.support.aws import use_fake_aws

pytestmark = pytest.mark.integration

REGION = "ca-central-1"
ACCOUNT = "123456789012"
BUCKET = "refdata-dev-ops"
OPERATIONS = tuple(deployed.STATE_MACHINE_OUTPUTS)  # every workflow the CLI resolves


def stacks() -> None:
    """What `cdk deploy 'dev/*'` leaves behind, as far as the CLI looks: the two stacks' outputs."""
    definition = json.dumps({"StartAt": "Prepare", "States": {"Prepare": {"Type": "Pass", "End": True}}})
    stateless = {
        "Resources": {
            op.title(): {
                "Type": "AWS::StepFunctions::StateMachine",
                "Properties": {
                    "StateMachineName": f"refdata-dev-{op}",
                    "RoleArn": f"arn:aws:iam::{ACCOUNT}:role/ops-workflows",
                    "DefinitionString": definition,
                },
            }
            for op in OPERATIONS
        },
        "Outputs": {deployed.STATE_MACHINE_OUTPUTS[op]: {"Value": {"Ref": op.title()}} for op in OPERATIONS},
    }
    stateful = {
        "Resources": {"OpsBucket": {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": BUCKET}}},
        "Outputs": {deployed.BUCKET_OUTPUT: {"Value": {"Ref": "OpsBucket"}}},
    }
    cloudformation = boto3.client("cloudformation", region_name=REGION)
    for name, template in (("dev-Stateful", stateful), ("dev-Stateless", stateless)):
        cloudformation.create_stack(StackName=name, TemplateBody=json.dumps(template))


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    use_fake_aws(monkeypatch, REGION)
    with mock_aws():
        stacks()
        yield


def execution(arn: str) -> Execution:
    return stepfunctions_backends[ACCOUNT][REGION].describe_execution(arn)


def only_execution() -> Execution:
    backend = stepfunctions_backends[ACCOUNT][REGION]
    (found,) = [e for machine in backend.state_machines for e in machine.executions]
    return found


def put(key: str, value: dict[str, Any]) -> None:
    boto3.client("s3", region_name=REGION).put_object(Bucket=BUCKET, Key=key, Body=json.dumps(value).encode())


def part(number: int, items: int, *, done: bool) -> dict[str, Any]:
    return {"part": {"kind": "segment", "number": number, "of": 2}, "items": items, "done": done}


def test_a_run_is_started_followed_and_summarised(
    aws: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    steps = iter(range(10))

    def pause(seconds: float) -> None:  # the deployed workflow makes progress while the CLI waits
        step = next(steps)
        started = only_execution()
        prefix = f"runs/reindex/{json.loads(started.execution_input)['runId']}/"
        if step == 0:
            put(f"{prefix}run.json", {"expectedItems": 20, "parts": [{}, {}]})
            put(f"{prefix}parts/segment-0000.json", part(0, 8, done=False))
        else:
            put(f"{prefix}parts/segment-0000.json", part(0, 12, done=True))
            put(f"{prefix}parts/segment-0001.json", part(1, 8, done=True))
            put(f"{prefix}summary.json", {"command": "reindex", "status": "done", "complete": True})
            started.status = "SUCCEEDED"

    monkeypatch.setattr(deployed, "pause", pause)
    status = cli.main(["reindex", "--env", "dev", "--schema", "geozone", "--region", REGION])

    out, err = capsys.readouterr()
    started = only_execution()
    request = json.loads(started.execution_input)
    assert status == 0
    assert started.state_machine_arn.endswith(":stateMachine:refdata-dev-reindex")
    assert request == {"dryRun": False, "schema": "geozone", "source": "auto", "maxRejected": 0} | {
        "runId": started.name
    }
    assert started.name.startswith("reindex-geozone-")
    progress = err.splitlines()[1:]
    assert progress == [
        "0 items · 0/0 parts done",
        "[############                  ] 8 / 20 items  40% · 0/2 parts done",
        "[##############################] 20 / 20 items 100% · 2/2 parts done",
    ]
    summary = json.loads(out)
    assert summary["status"] == "done" and summary["complete"] is True
    assert summary["execution"] == {"arn": started.execution_arn, "status": "SUCCEEDED"}


def event(minute: int, kind: str, number: int, **details: str) -> dict[str, Any]:
    """An event of an execution's history, as GetExecutionHistory answers it."""
    at = datetime(2026, 11, 30, 0, minute, tzinfo=UTC)
    key = f"{kind[0].lower()}{kind[1:]}EventDetails"
    return {"timestamp": at, "type": kind, "id": number, "previousEventId": number - 1, key: details}


THROTTLED = '{"errorMessage": "POST _bulk failed: HTTP 429 rejected_execution_exception"}'
FAILED_HISTORY = [
    event(0, "ExecutionStarted", 1, input="{}", roleArn="x"),
    event(
        5,
        "TaskFailed",
        9,
        resourceType="lambda",
        resource="invoke",
        error="TransientFailure",
        cause=THROTTLED,
    ),
    event(6, "ExecutionFailed", 14, error="RunFailed", cause="segment-0001: retries exhausted"),
]


def test_a_failed_execution_is_explained_from_its_history_and_exits_2(
    aws: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(Execution, "get_execution_history", lambda self, role: FAILED_HISTORY)

    def pause(seconds: float) -> None:
        started = only_execution()
        run_id = json.loads(started.execution_input)["runId"]
        put(f"runs/purge/{run_id}/summary.json", {"command": "purge", "status": "failed", "error": "x"})
        started.status = "FAILED"

    monkeypatch.setattr(deployed, "pause", pause)
    status = cli.main(["purge", "--env", "dev", "--region", REGION])

    summary = json.loads(capsys.readouterr().out)
    assert status == 2 and summary["status"] == "failed"
    assert summary["execution"]["status"] == "FAILED"
    assert summary["execution"]["failure"] == (
        "ExecutionFailed: RunFailed: segment-0001: retries exhausted; TaskFailed: TransientFailure: "
        '{"errorMessage": "POST _bulk failed: HTTP 429 rejected_execution_exception"}'
    )


def test_a_resumed_run_is_a_new_execution_of_the_same_run(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["reconcile", "--env", "dev", "--schema", "productDate", "--fix", "--resume", "reconcile-run-1"]

    status = cli.main([*argv, "--no-wait", "--region", REGION])

    started = only_execution()
    assert status == 0 and json.loads(capsys.readouterr().out)["status"] == "started"
    assert started.name.startswith("reconcile-run-1-resume-")
    assert json.loads(started.execution_input) == {
        "dryRun": False,
        "schema": "productDate",
        "source": "auto",
        "fix": True,
        "runId": "reconcile-run-1",
    }


def test_an_environment_without_the_workflows_is_named(aws: None, capsys: pytest.CaptureFixture[str]) -> None:
    (old, *_) = [name for name in environments() if name != "dev"]  # deployed before the workflows existed
    for kind in ("Stateless", "Stateful"):
        boto3.client("cloudformation", region_name=REGION).create_stack(
            StackName=f"{old}-{kind}",
            TemplateBody=json.dumps({"Resources": {"Q": {"Type": "AWS::SQS::Queue"}}}),
        )

    assert cli.main(["redrive", "--env", old, "--region", REGION]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert f"{old}: outputs ReindexStateMachineArn" in error and "deploy this release first" in error


def test_only_configured_environments_are_accepted_and_the_help_lists_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["redrive", "--env", "nope"])
    assert exit_info.value.code == 2 and "invalid choice: 'nope'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["purge", "--help"])
    assert f"one of {', '.join(sorted(environments()))}" in " ".join(capsys.readouterr().out.split())
