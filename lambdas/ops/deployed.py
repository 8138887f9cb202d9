"""The laptop side of a deployed run: find the environment's workflows, start one, follow it, print its summary.

Everything is found from the deployed stacks' outputs (`<env>-Stateless`: one state machine ARN per operation;
`<env>-Stateful`: the ops bucket), with the caller's own AWS credentials; nothing here needs the VPC. Progress
comes from the run's records in the ops bucket (`ops.runs`): the items its parts have read, out of the table's
item count (a scan) or the export's manifest (an export); finished parts are read once, running ones again as
they change.
"""

from __future__ import annotations

import json
import secrets
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TextIO

from ops.index import OpsError
from ops.runs import PartState, run_prefix

STATE_MACHINE_OUTPUTS = {
    "reindex": "ReindexStateMachineArn",
    "reconcile": "ReconcileStateMachineArn",
    "redrive": "RedriveStateMachineArn",
    "purge": "PurgeStateMachineArn",
    "smoke": "SmokeStateMachineArn",
}
BUCKET_OUTPUT = "OpsBucketName"
RUNNING = "RUNNING"
FAILURE_EVENTS = ("ExecutionFailed", "ExecutionTimedOut", "ExecutionAborted")
STEP_FAILURE_EVENTS = ("TaskFailed", "LambdaFunctionFailed", "MapRunFailed", "TaskTimedOut")


class DeploymentError(OpsError):
    """The environment's stacks, outputs or workflow cannot be found or used."""


@dataclass(frozen=True)
class Deployment:
    environment: str
    state_machines: Mapping[str, str]
    bucket: str


def stack_outputs(cloudformation: Any, stack: str) -> dict[str, str]:
    from botocore.exceptions import ClientError

    try:
        (found,) = cloudformation.describe_stacks(StackName=stack)["Stacks"]
    except ClientError as error:
        raise DeploymentError(f"stack {stack} not found: {error}") from error
    return {output["OutputKey"]: output["OutputValue"] for output in found.get("Outputs", [])}


def resolve(cloudformation: Any, environment: str) -> Deployment:
    """The workflows and bucket of `environment`, from its stacks' outputs."""
    stateless = stack_outputs(cloudformation, f"{environment}-Stateless")
    stateful = stack_outputs(cloudformation, f"{environment}-Stateful")
    missing = [name for name in STATE_MACHINE_OUTPUTS.values() if name not in stateless]
    if missing or BUCKET_OUTPUT not in stateful:
        absent = [*missing, *([] if BUCKET_OUTPUT in stateful else [BUCKET_OUTPUT])]
        raise DeploymentError(
            f"{environment}: outputs {', '.join(absent)} missing: deploy this release first"
        )
    machines = {operation: stateless[output] for operation, output in STATE_MACHINE_OUTPUTS.items()}
    return Deployment(environment, machines, stateful[BUCKET_OUTPUT])


def new_run_id(operation: str, subject: str | None, now: Callable[[], float] = time.time) -> str:
    stamp = datetime.fromtimestamp(now(), UTC).strftime("%Y%m%dT%H%M%S")
    return "-".join(part for part in (operation, subject, stamp, secrets.token_hex(2)) if part)


def start(
    sfn: Any, deployment: Deployment, operation: str, request: Mapping[str, Any], *, run_id: str, resume: bool
) -> str:
    """Start the operation's workflow for `run_id` (a resumed run gets a new execution of the same run)."""
    name = run_id if not resume else f"{run_id[:56]}-resume-{datetime.now(UTC):%Y%m%dT%H%M%S}"
    answer = sfn.start_execution(
        stateMachineArn=deployment.state_machines[operation],
        name=name,
        input=json.dumps({**request, "runId": run_id}),
    )
    return str(answer["executionArn"])


def progress_line(total: int | None, states: Iterable[PartState], parts: int | None) -> str:
    """`[####    ] 8 / 20 items 40% · 1/2 parts done`: the items the parts have read, out of the run's total."""
    states = list(states)
    items = sum(state.items for state in states)
    done = sum(state.done for state in states)
    parts = parts if parts else len(states)
    if total:
        share = min(items / total, 1.0)
        bar = "#" * int(share * 30)
        measure = f"[{bar:<30}] {items:,} / {total:,} items {share:4.0%}"
    else:
        measure = f"{items:,} items"
    return f"{measure} · {done}/{parts} parts done"


@dataclass
class Progress:
    """The run's progress from its records: the total (once prepare recorded it) and each part's items.

    Every look starts with a listing of the run's prefix, and only listed keys are read: an operator whose
    `s3:ListBucket` is limited to `runs/` (an `s3:prefix` condition, which a GetObject does not carry) would get
    403, not 404, for a record not written yet."""

    s3: Any
    bucket: str
    prefix: str
    total: int | None = None
    parts_expected: int | None = None
    states: dict[str, PartState] = field(default_factory=dict)
    _etags: dict[str, str] = field(default_factory=dict)

    def refresh(self) -> None:
        listed = self._listing()
        if self.total is None or self.parts_expected is None:
            record = self._read(f"{self.prefix}run.json", listed)
            if record is not None:
                self.total = record.get("expectedItems")
                self.parts_expected = record.get("partCount", len(record.get("parts", [])))
        for key, etag in listed.items():
            if not key.startswith(f"{self.prefix}parts/") or self._etags.get(key) == etag:
                continue  # not a part, or unchanged since the last look (finished parts never change again)
            value = self._read(key, listed)
            if value is not None:
                self.states[key] = PartState.from_json(value)
                self._etags[key] = etag

    def line(self) -> str:
        return progress_line(self.total, self.states.values(), self.parts_expected)

    def summary(self) -> dict[str, Any] | None:
        return self._read(f"{self.prefix}summary.json", self._listing())

    def _listing(self) -> dict[str, str]:
        paginator = self.s3.get_paginator("list_objects_v2")
        return {
            entry["Key"]: entry["ETag"]
            for page in paginator.paginate(Bucket=self.bucket, Prefix=self.prefix)
            for entry in page.get("Contents", [])
        }

    def _read(self, key: str, listed: Mapping[str, str]) -> dict[str, Any] | None:
        if key not in listed:
            return None
        return dict(json.loads(self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()))


def pause(seconds: float) -> None:
    """Between two looks at a running execution."""
    time.sleep(seconds)


def failure_of(sfn: Any, execution_arn: str) -> str:
    """What failed, from the execution's history: the execution's own error and the last step that failed."""
    events = sfn.get_execution_history(executionArn=execution_arn, reverseOrder=True, maxResults=200)[
        "events"
    ]
    execution: str | None = None
    step: str | None = None
    for event in events:
        kind = event["type"]
        details = next((value for key, value in event.items() if key.endswith("EventDetails")), None) or {}
        text = f"{kind}: {details.get('error', '')}: {details.get('cause', '')}"[:1000]
        if kind in FAILURE_EVENTS and execution is None:
            execution = text
        elif kind in STEP_FAILURE_EVENTS and step is None:
            step = text
        if execution and step:
            break
    return "; ".join(found for found in (execution, step) if found) or "no failure in the execution history"


def follow(
    sfn: Any,
    s3: Any,
    deployment: Deployment,
    operation: str,
    run_id: str,
    execution_arn: str,
    *,
    interval: float = 10.0,
    err: TextIO | None = None,
) -> tuple[str, dict[str, Any] | None, str | None]:
    """Wait for the execution, showing progress: (execution status, the run's summary, what failed)."""
    err = err or sys.stderr
    progress = Progress(s3, deployment.bucket, run_prefix(operation, run_id))
    shown = ""
    tty = err.isatty()
    while True:
        status = sfn.describe_execution(executionArn=execution_arn)["status"]
        progress.refresh()
        line = progress.line()
        if line != shown:
            err.write(f"\r{line}" if tty else f"{line}\n")
            err.flush()
            shown = line
        if status != RUNNING:
            break
        pause(interval)
    if tty:
        err.write("\n")
    summary = progress.summary()
    failure = None if status == "SUCCEEDED" else failure_of(sfn, execution_arn)
    return status, summary, failure
