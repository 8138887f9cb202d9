"""The workflows' Lambda worker, step by step as the state machines invoke it, against moto and the loopback
server: the admin role assumed through STS, run records in the ops bucket, an export in DynamoDB's format, a
redrive batch, and a finish after a failed step."""

from __future__ import annotations

import gzip
import json
from typing import Any

import boto3
import pytest
from ops.worker import WorkerSettings
from ops_harness import ADMIN_KEY, ADMIN_ROLE_ARN, PRODUCT, REGION, TABLE, ZONE, ZONES, OpsEnv, seq
from stream_sync.config import ConfigError
from stream_sync.tables import SchemaTables

from ops import worker
from tests.lambdas.stream_sync.stream_sync_fakes import record
from tests.support.aws import Context, create_bucket, single_table

pytestmark = pytest.mark.integration

BUCKET = "refdata-ops"
BOOKINGS = "refdata-bookings"


@pytest.fixture
def deployed(assumed_env: OpsEnv, monkeypatch: pytest.MonkeyPatch) -> OpsEnv:
    """The worker's environment as the stack sets it, and its ops bucket."""
    create_bucket(REGION, BUCKET)
    for name, value in {
        "SCHEMA_TABLES": json.dumps({**dict(SchemaTables.single(TABLE).pairs), "booking": BOOKINGS}),
        "OPENSEARCH_ENDPOINT": assumed_env.server.endpoint,
        "AWS_REGION": REGION,
        "ADMIN_ROLE_ARN": ADMIN_ROLE_ARN,
        "OPS_BUCKET": BUCKET,
        "GEOMETRY_BUCKET": "geometry-bucket",
        "BULK_MAX_BYTES": str(2 * 1024 * 1024),
        "REQUEST_TIMEOUT_SECONDS": "10",  # never reached on loopback, however loaded the machine
        "SCAN_SEGMENTS": "2",
        "EXPORT_ABOVE_BYTES": str(10 * 2**30),
        "TOMBSTONE_MIN_AGE_SECONDS": str(16 * 86400),
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDWORKERROLE")  # the function's own role: FGAC knows it not
    return assumed_env


def invoke(event: dict[str, Any], seconds: float = 900.0) -> Any:
    """The Lambda handler, as the state machine calls it (a fresh role session per invocation)."""
    return worker.handler(json.loads(json.dumps(event)), Context(seconds))


def run_parts(operation: str, run_id: str, parts: list[dict[str, Any]]) -> int:
    """Each part invoked until it answers done, as the map's loop does; returns the invocations made."""
    invocations = 0
    for part in parts:
        done = False
        while not done:
            invocations += 1
            done = invoke({"step": "part", "operation": operation, "runId": run_id, "part": part})["done"]
    return invocations


def summary(operation: str, run_id: str) -> dict[str, Any]:
    key = f"runs/{operation}/{run_id}/summary.json"
    return dict(
        json.loads(boto3.client("s3", region_name=REGION).get_object(Bucket=BUCKET, Key=key)["Body"].read())
    )


def test_a_reconcile_runs_step_by_step_as_the_assumed_admin_role(deployed: OpsEnv) -> None:
    for n in range(6):
        deployed.put_and_sync(ZONE, f"{n:02d}", 100 + n, name={"S": f"zone {n}"})
    deployed.put(ZONE, "unsynced", name={"S": "never indexed"})
    deployed.server.forget_requests()

    prepare = {"step": "prepare", "operation": "reconcile", "input": {"schema": "geozone"}}
    plan = invoke(prepare | {"executionName": "rc-1"})
    run_parts("reconcile", plan["runId"], plan["parts"])
    finished = invoke({"step": "finish", "operation": "reconcile", "runId": plan["runId"]})

    assert plan["runId"] == "rc-1" and plan["source"] == "scan"
    assert [part["kind"] for part in plan["parts"]] == ["segment", "segment", "slice", "slice"]
    assert finished == {
        "status": "work-left",
        "summary": f"s3://{BUCKET}/runs/reconcile/rc-1/summary.json",
        "reason": "work-left",
    }
    assert summary("reconcile", "rc-1")["documentIds"]["missing"] == [f"{ZONE}#unsynced"]
    signers = {
        r.headers["authorization"].split("Credential=")[1].split("/")[0] for r in deployed.server.requests
    }
    assert signers and "AKIDWORKERROLE" not in signers and ADMIN_KEY not in signers  # STS session keys only


def export_files(deployed: OpsEnv, run_id: str, items: list[dict[str, Any]]) -> dict[str, Any]:
    """A completed export of `items` in DynamoDB's format (two gzip data files, the two manifests); its
    DescribeExport description as Step Functions passes it."""
    s3 = boto3.client("s3", region_name=REGION)
    base = f"exports/reindex/{run_id}/AWSDynamoDB/01764531000000-a1b2c3d4"
    halves = [items[: len(items) // 2], items[len(items) // 2 :]]
    lines = []
    for number, half in enumerate(halves):
        key = f"{base}/data/file{number}abc.json.gz"
        body = "".join(json.dumps({"Item": item}) + "\n" for item in half).encode()
        s3.put_object(Bucket=BUCKET, Key=key, Body=gzip.compress(body))
        lines.append({"itemCount": len(half), "md5Checksum": "x", "etag": "y", "dataFileS3Key": key})
    files_key = f"{base}/manifest-files.json"
    s3.put_object(
        Bucket=BUCKET, Key=files_key, Body="".join(json.dumps(line) + "\n" for line in lines).encode()
    )
    manifest = {
        "version": "2020-06-30",
        "exportArn": f"arn:aws:dynamodb:{REGION}:123456789012:table/{TABLE}/export/01764531000000-a1b2c3d4",
        "exportTime": "2026-11-30T10:00:00.000Z",
        "itemCount": len(items),
        "manifestFilesS3Key": files_key,
        "outputFormat": "DYNAMODB_JSON",
    }
    s3.put_object(Bucket=BUCKET, Key=f"{base}/manifest-summary.json", Body=json.dumps(manifest).encode())
    return {
        "ExportArn": manifest["exportArn"],
        "ExportStatus": "COMPLETED",
        "ExportManifest": f"{base}/manifest-summary.json",
        "ExportTime": deployed.now,
        "ItemCount": len(items),
    }


def test_an_export_is_read_file_by_file_and_a_part_goes_on_after_its_deadline(
    deployed: OpsEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    deployed.make_geozone_v2(monkeypatch)
    items = deployed.snapshot()  # the zones and two productDate items: only the zones are this run's
    prepare = {"step": "prepare", "operation": "reindex", "input": {"schema": "geozone", "source": "export"}}
    plan = invoke(prepare | {"executionName": "rx-1"})
    description = export_files(deployed, "rx-1", items)

    ready = invoke({"step": "export-ready", "operation": "reindex", "runId": "rx-1", "export": description})
    manifest = boto3.client("s3", region_name=REGION).get_object(Bucket=BUCKET, Key=ready["manifestFilesKey"])
    files = [json.loads(line) for line in manifest["Body"].read().splitlines()]
    first = files[0]["dataFileS3Key"]
    part = {"step": "part", "operation": "reindex", "runId": "rx-1", "part": {"kind": "file", "key": first}}
    stopped = invoke(part, seconds=1.0)  # under the deadline margin: one page, then it answers not done
    run_parts("reindex", "rx-1", [{"kind": "file", "key": entry["dataFileS3Key"]} for entry in files])
    finished = invoke({"step": "finish", "operation": "reindex", "runId": "rx-1"})

    assert plan["source"] == "export" and plan["parts"] == [] and stopped == {"done": False, "wait": False}
    assert plan["tableArn"] == f"arn:aws:dynamodb:{REGION}:123456789012:table/{TABLE}"  # ExportTable reads it
    assert finished["status"] == "done"
    result = summary("reindex", "rx-1")
    assert result["complete"] and result["tableItems"] == ZONES and result["source"] == "export"
    assert result["backfill"] == {"indexed": ZONES} and result["parts"] == {"total": 2, "done": 2}
    assert deployed.visible("geozone-v2") == deployed.expected("geozone")
    assert PRODUCT not in {doc["pk"] for doc in deployed.documents("geozone-v2").values()}


def test_a_redrive_batch_deletes_what_it_resolved_and_keeps_what_it_cannot(
    deployed: OpsEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    queue = sqs.create_queue(QueueName="stream-sync-dlq")["QueueUrl"]
    deployed.put(ZONE, "a", name={"S": "current"})
    sqs.send_message(QueueUrl=queue, MessageBody=json.dumps({"record": record("INSERT", "a", 3, pk=ZONE)}))
    sqs.send_message(QueueUrl=queue, MessageBody="not json")
    monkeypatch.setenv("DLQ_URL", queue)

    plan = invoke({"step": "prepare", "operation": "redrive", "input": {}, "executionName": "rd-1"})
    run_parts("redrive", "rd-1", plan["parts"])
    finished = invoke({"step": "finish", "operation": "redrive", "runId": "rd-1"})

    result = summary("redrive", "rd-1")
    assert finished["status"] == "work-left" and plan["parts"] == [{"kind": "consumer", "number": 0}]
    assert result["redriven"] == 1 and result["leftInQueue"] == 1 and result["fates"] == {"indexed": 1}
    assert deployed.documents("geozone-v1")[f"{ZONE}#a"]["stream_seq"] == seq(3)
    depth = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["All"])["Attributes"]
    assert depth["ApproximateNumberOfMessagesNotVisible"] == "1"  # kept, and hidden for the rest of the run
    assert result["left"][0]["reason"].startswith("Expecting value")  # the unreadable message, and why


def test_finish_after_a_failed_step_records_what_failed(deployed: OpsEnv) -> None:
    cause = json.dumps({"errorType": "OpsError", "errorMessage": "no index matches geozone-v*"})
    error = {"Error": "OpsError", "Cause": cause}

    finished = invoke({"step": "finish", "operation": "reindex", "executionName": "rf-1", "error": error})

    assert finished["status"] == "failed" and "OpsError: no index matches geozone-v*" in finished["reason"]
    assert summary("reindex", "rf-1")["status"] == "failed"


def test_the_worker_names_a_missing_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    environment = {"SCHEMA_TABLES": '{"geozone": "t"}', "OPENSEARCH_ENDPOINT": "e", "AWS_REGION": REGION}

    with pytest.raises(ConfigError, match="OPS_BUCKET is required"):
        WorkerSettings.from_env(environment | {"ADMIN_ROLE_ARN": ADMIN_ROLE_ARN})


def test_a_run_plans_to_export_the_table_that_holds_its_schema(deployed: OpsEnv) -> None:
    deployed.dynamodb.create_table(**single_table(BOOKINGS))
    prepare = {
        "step": "prepare",
        "operation": "reconcile",
        "input": {"schema": "booking", "source": "export"},
    }

    plan = invoke(prepare | {"executionName": "rc-bookings"})

    assert plan["source"] == "export"
    assert plan["tableArn"] == f"arn:aws:dynamodb:{REGION}:123456789012:table/{BOOKINGS}"
