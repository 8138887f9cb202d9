"""Lambda entry point of the ops workflows: the state machines (reindex, reconcile, redrive, purge and the smoke run)
invoke this one function for every step.

Event (built by the state machine, infra/constructs/ops_workflows.py):

    {"step": "prepare", "operation": "reindex", "input": <execution input>, "executionName": ...}
    {"step": "export-ready", "operation": ..., "runId": ..., "export": <DescribeExport ExportDescription>}
    {"step": "part", "operation": ..., "runId": ..., "part": {...}}
    {"step": "part-failed", "operation": ..., "runId": ..., "part": {...}, "error": {"Error", "Cause"}}
    {"step": "finish", "operation": ..., "runId"?, "input"?, "executionName"?, "error"?: {"Error", "Cause"}}

The function signs every OpenSearch request as the FGAC admin role (ADMIN_ROLE_ARN, assumed through the STS VPC
endpoint) and keeps each run's records in the ops bucket (OPS_BUCKET). A `part` step works until
DEADLINE_MARGIN_SECONDS remain and answers `{"done": false, "wait": false}` for the state machine to invoke it
again (`"wait": true`: a paused part, which the smoke workflow invokes again after its wait); a
`TransientFailure` (OpenSearch or DynamoDB still throttling after the client's retries) fails the step for the
state machine to retry with backoff, from the part's last saved page.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from refdata.transport import OpenSearchTransport, assume_role
from stream_sync.aws import build_ports
from stream_sync.config import parsed_env, required_env, schema_tables_env
from stream_sync.tables import SchemaTables

from ops import clients
from ops.index import IndexClient
from ops.purge import Purge
from ops.reconcile import Reconcile
from ops.redrive import Redrive
from ops.reindex import Reindex
from ops.runs import Run, S3RunStore, check_run_id
from ops.smoke import PASS, Smoke
from ops.sources import export_ready
from ops.workflow import Env, Operation, finish_run, prepared, run_part, sync_settings

OPERATIONS: dict[str, Operation] = {
    op.name: op for op in (Reindex(), Reconcile(), Redrive(), Purge(), Smoke())
}


@dataclass(frozen=True)
class WorkerSettings:
    """The worker's environment variables (set by the stack)."""

    tables: SchemaTables
    endpoint: str
    region: str
    admin_role_arn: str
    bucket: str
    geometry_bucket: str | None
    dlq_url: str | None
    bulk_max_bytes: int
    request_timeout_seconds: float
    segments: int
    export_above_bytes: int
    read_units_per_segment: float | None
    tombstone_min_age_seconds: int
    deadline_margin_seconds: float

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> WorkerSettings:
        read_units = parsed_env(environ, "READ_UNITS_PER_SEGMENT", float, 0.0)
        return cls(
            tables=schema_tables_env(environ, required=True),
            endpoint=required_env(environ, "OPENSEARCH_ENDPOINT"),
            region=required_env(environ, "AWS_REGION"),
            admin_role_arn=required_env(environ, "ADMIN_ROLE_ARN"),
            bucket=required_env(environ, "OPS_BUCKET"),
            geometry_bucket=environ.get("GEOMETRY_BUCKET", "").strip() or None,
            dlq_url=environ.get("DLQ_URL", "").strip() or None,
            bulk_max_bytes=parsed_env(environ, "BULK_MAX_BYTES", int),
            request_timeout_seconds=parsed_env(environ, "REQUEST_TIMEOUT_SECONDS", float, 30.0),
            segments=parsed_env(environ, "SCAN_SEGMENTS", int),
            export_above_bytes=parsed_env(environ, "EXPORT_ABOVE_BYTES", int),
            read_units_per_segment=read_units or None,
            tombstone_min_age_seconds=parsed_env(environ, "TOMBSTONE_MIN_AGE_SECONDS", int),
            deadline_margin_seconds=parsed_env(environ, "DEADLINE_MARGIN_SECONDS", float, 240.0),
        )


def build_env(settings: WorkerSettings, credentials: Any) -> Env:
    """AWS clients and the admin role's signed transport (the operations' I/O)."""

    sync = sync_settings(
        settings.endpoint,
        settings.region,
        settings.geometry_bucket,
        settings.request_timeout_seconds,
        settings.tables,
        settings.bulk_max_bytes,
    )
    transport = OpenSearchTransport(
        settings.endpoint,
        settings.region,
        timeout_seconds=settings.request_timeout_seconds,
        credentials=credentials,
    )
    return Env(
        client=IndexClient(transport),
        settings=sync,
        ports=lambda: build_ports(sync, credentials),
        dynamodb=clients.client("dynamodb", settings.region),
        tables=settings.tables,
        segments=settings.segments,
        export_above_bytes=settings.export_above_bytes,
        read_units_per_second=settings.read_units_per_segment,
        s3=clients.client("s3", settings.region),
        bucket=settings.bucket,
        sqs=clients.client("sqs", settings.region),
        streams=clients.client("dynamodbstreams", settings.region),
        dlq_url=settings.dlq_url,
        tombstone_min_age_seconds=settings.tombstone_min_age_seconds,
    )


def run_id_of(event: Mapping[str, Any]) -> str:
    """The run's id: the one the state passes on, else the execution input's `runId` (a resumed run), else the
    execution's name (the CLI names executions by run id; the scheduler's names are ids too)."""
    found = event.get("runId") or (event.get("input") or {}).get("runId") or event.get("executionName")
    return check_run_id(str(found))


def handle(
    event: Mapping[str, Any], env: Env, *, remaining_seconds: Callable[[], float], margin: float
) -> Any:
    """One workflow step (pure of Lambda: tests call it with moto and the loopback server)."""
    operation = OPERATIONS[str(event["operation"])]
    run = Run(S3RunStore(env.s3, str(env.bucket)), operation.name, run_id_of(event))
    step = event["step"]
    if step == "prepare":
        record = prepared(operation, env, run, event.get("input") or {})
        return {
            "runId": run.run_id,
            "source": record.get("source", "none"),
            "parts": record.get("parts", []),
            "exportArn": record.get("exportArn"),
            "tableArn": record.get("tableArn"),
        }
    if step == "export-ready":
        return _export_ready(env, run, event["export"])
    if step == "part":
        state = run_part(
            operation,
            env,
            run,
            event["part"],
            ports=env.ports(),
            deadline=lambda: remaining_seconds() < margin,
        )
        return {"done": state.done, "wait": state.paused}
    if step == "part-failed":  # a part's retries ran out: its own error, for the summary (see finish_run)
        state = run.part(event["part"])
        state.error = _error_text(event.get("error"))
        run.save_part(state)
        return {}
    if step == "finish":
        summary = finish_run(operation, env, run, _error_text(event.get("error")))
        return {
            "status": summary["status"],
            "summary": f"s3://{env.bucket}/{run.prefix}summary.json",
            "reason": _reason(summary),
        }
    raise ValueError(f"unknown step {step!r}")


def _reason(summary: Mapping[str, Any]) -> str:
    """A failed run's execution cause (`RunFailed`): a smoke run's verdict (what failed first, where, what to do:
    docs/runbook.md), else the run's error or errors."""
    verdict = summary.get("verdict")
    if verdict and verdict != PASS:
        return str(verdict)
    return summary.get("error") or "; ".join(summary.get("errors", [])) or str(summary["status"])


def _export_ready(env: Env, run: Run, description: Mapping[str, Any]) -> dict[str, Any]:
    record = run.record()
    if record is None:
        raise ValueError(f"run {run.run_id} has no run record")
    summary_key = str(description["ExportManifest"])
    manifest = json.loads(env.s3.get_object(Bucket=env.bucket, Key=summary_key)["Body"].read())
    files_key = str(manifest["manifestFilesS3Key"])
    lines = env.s3.get_object(Bucket=env.bucket, Key=files_key)["Body"].read().splitlines()
    key = export_ready(record, description, manifest, files=sum(1 for line in lines if line.strip()))
    run.save_record(record)
    return {"manifestFilesKey": key}


def _error_text(error: Any) -> str | None:
    """What a Catch put in `$.error`: {"Error": name, "Cause": text}. The cause is often JSON: a Lambda error
    (`errorType`, `errorMessage`) or, from the ExportFailed state, the export's description (`FailureCode`,
    `FailureMessage`); any other cause is kept as it is."""
    if not error:
        return None
    cause = error.get("Cause", "")
    try:
        parsed = json.loads(cause)
    except (TypeError, ValueError):
        parsed = None
    if isinstance(parsed, dict):
        for kind, message in (("errorType", "errorMessage"), ("FailureCode", "FailureMessage")):
            if kind in parsed or message in parsed:
                cause = f"{parsed.get(kind, '')}: {parsed.get(message, '')}"
                break
    return f"{error.get('Error', 'Error')}: {cause}"[:2000]


def handler(event: Mapping[str, Any], context: Any) -> Any:
    settings = WorkerSettings.from_env(os.environ)
    credentials = assume_role(
        settings.admin_role_arn,
        settings.region,
        session_name="ops-worker",
        duration_seconds=1800,
        sts=clients.client("sts", settings.region),
    )
    env = build_env(settings, credentials)
    try:
        return handle(
            event,
            env,
            remaining_seconds=lambda: context.get_remaining_time_in_millis() / 1000.0,
            margin=settings.deadline_margin_seconds,
        )
    finally:
        env.client.close()
