"""The four ops workflows executed from their synthesized definitions (tests/lambdas/ops/workflows_harness.py):
started by the CLI, every Lambda task running the worker, every AWS call checked against the synthesized IAM."""

from __future__ import annotations

import inspect
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from index_bootstrap import bootstrap
from ops.index import OpsError
from ops_harness import ZONE, OpsEnv, changed_mappings, seq
from workflows_harness import Workflows, asl, deployed_environment

from infra.config import EnvironmentConfig
from infra.constructs.ops_workflows import map_results_prefix
from infra.environments import environments
from ops import worker
from tests.lambdas.stream_sync.stream_sync_fakes import record
from tests.support.opensearch_server import ROUTE_BULK
from tests.support.secured_node import SecuredNode

pytestmark = pytest.mark.integration


def smallest() -> EnvironmentConfig:
    """The environment whose runs have the fewest parts: the failure paths run there (each part is an
    invocation); every environment runs each operation once."""
    return min(environments().values(), key=lambda config: (config.ops.scan_segments, config.name))


@pytest.fixture
def every(
    each_config: EnvironmentConfig, monkeypatch: pytest.MonkeyPatch, secured_as_left: SecuredNode
) -> Iterator[tuple[Workflows, OpsEnv]]:
    yield from _flows(each_config, monkeypatch, secured_as_left)


@pytest.fixture
def flows(
    monkeypatch: pytest.MonkeyPatch, secured_as_left: SecuredNode
) -> Iterator[tuple[Workflows, OpsEnv]]:
    yield from _flows(smallest(), monkeypatch, secured_as_left)


def _flows(
    config: EnvironmentConfig, monkeypatch: pytest.MonkeyPatch, node: SecuredNode
) -> Iterator[tuple[Workflows, OpsEnv]]:
    for world, calls, clock, gaps, server in deployed_environment(config, monkeypatch, node):
        search = OpsEnv(
            server, dynamodb=boto3.client("dynamodb", region_name=config.region), region=config.region
        )
        search.bootstrapped()
        yield Workflows(world, calls, clock, gaps), search
        search.transport.close()


def put_zones(flows: Workflows, search: OpsEnv, count: int, *, synced: bool = True) -> None:
    dynamodb = boto3.client("dynamodb", region_name=flows.world.region)
    for n in range(count):
        item = {"pk": {"S": ZONE}, "sk": {"S": f"{n:04d}"}, "name": {"S": f"zone {n}"}}
        dynamodb.put_item(TableName=flows.world.table_of("geozone"), Item=item)
        if synced:
            search.stream_apply(item, ZONE, f"{n:04d}", seq(100 + n))


def mapping_change(
    workflows: Workflows, search: OpsEnv, monkeypatch: pytest.MonkeyPatch, zones: int
) -> Workflows:
    """`zones` zones in sync, then a deployment that creates geozone-v2 (aliases stay on v1)."""
    put_zones(workflows, search, zones)
    monkeypatch.setattr(bootstrap, "index_mappings", changed_mappings)
    search.bootstrap()
    return workflows


@pytest.mark.parametrize("source", ["scan", "export"])
def test_reindex_moves_the_aliases_and_backfills(
    flows: tuple[Workflows, OpsEnv],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    source: str,
) -> None:
    workflows, search = flows
    mapping_change(*flows, monkeypatch, 12)

    run = workflows.run("reindex", "--schema", "geozone", "--source", source, capsys=capsys)

    assert run.status == 0, run.summary
    assert run.summary["complete"] and run.summary["source"] == source
    assert run.summary["tableItems"] == 12 and run.summary["backfill"] == {"indexed": 12}
    v1 = {doc_id: doc | {"tombstone": False} for doc_id, doc in search.visible("geozone-v1").items()}
    assert search.visible("geozone-v2") == v1 or len(search.visible("geozone-v2")) == 12
    assert set(search.aliases("geozone-v2")) == {"geozone", "geozone-write"}
    if source == "export":
        assert {"ExportTable", "DescribeExport", "ExportReady", "Files"} <= set(run.states_entered())


def test_the_maps_results_go_to_the_ops_bucket_and_the_state_keeps_only_where(
    flows: tuple[Workflows, OpsEnv], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """However many files an export has (one child execution each), neither map holds its children's results in
    the state, where over 256 KiB they fail the run with States.DataLimitExceeded: its ResultWriter writes them
    under the operation's literal prefix and the map run's id (as the state machine's role: the IAM check), and
    the state keeps where."""
    workflows = mapping_change(*flows, monkeypatch, 12)
    workflows.gaps.export_files = 5

    run = workflows.run("reindex", "--schema", "geozone", "--source", "export", capsys=capsys)

    assert run.status == 0, run.summary
    assert run.summary["tableItems"] == 12 and run.summary["backfill"] == {"indexed": 12}
    s3 = boto3.client("s3", region_name=workflows.world.region)
    bucket = workflows.world.ops_bucket
    exited = {
        e["stateExitedEventDetails"]["name"]: json.loads(e["stateExitedEventDetails"]["output"])
        for e in run.history
        if "stateExitedEventDetails" in e
    }
    export_files = s3.get_object(Bucket=bucket, Key=exited["Files"]["exportReady"]["manifestFilesKey"])
    files = len(export_files["Body"].read().decode().splitlines())
    parts = len(exited["Files"]["plan"]["parts"])
    assert files == 5
    for state, field, children in (("Files", "filesRun", files), ("Parts", "partsRun", parts)):
        written = exited[state][field]
        assert set(written) == {"MapRunArn", "ResultWriterDetails"}, written
        map_run_id = written["MapRunArn"].rsplit(":", 1)[1]
        prefix = f"{map_results_prefix('reindex', state.lower())}/{map_run_id}/"
        assert written["ResultWriterDetails"] == {"Bucket": bucket, "Key": f"{prefix}manifest.json"}
        manifest = json.loads(s3.get_object(Bucket=bucket, Key=f"{prefix}manifest.json")["Body"].read())
        results = [
            child
            for result_file in manifest["ResultFiles"]["SUCCEEDED"]
            for child in json.loads(s3.get_object(Bucket=bucket, Key=result_file["Key"])["Body"].read())
        ]
        assert len(results) == children and manifest["ResultFiles"]["FAILED"] == [], state


def test_a_part_stopped_by_its_deadline_after_each_page_counts_each_item_once(
    flows: tuple[Workflows, OpsEnv], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    workflows = mapping_change(*flows, monkeypatch, 9)
    workflows.remaining_seconds = 1.0  # under the deadline margin: every invocation stops after one page

    run = workflows.run("reindex", "--schema", "geozone", "--source", "scan", capsys=capsys)

    parts = [event for event in workflows.invocations if event["step"] == "part"]
    assert run.status == 0, run.summary
    assert run.summary["tableItems"] == 9 and run.summary["backfill"] == {"indexed": 9}
    segments = workflows.world.config.ops.scan_segments
    assert len(parts) == segments  # each segment's one page is also its last: done, never read again


def drift(workflows: Workflows, search: OpsEnv) -> None:
    """Ten zones in sync; then one missing, one stale, one deleted."""
    put_zones(workflows, search, 10)
    dynamodb = boto3.client("dynamodb", region_name=workflows.world.region)
    table = workflows.world.table_of("geozone")
    dynamodb.put_item(TableName=table, Item={"pk": {"S": ZONE}, "sk": {"S": "missing"}, "name": {"S": "new"}})
    dynamodb.put_item(
        TableName=table, Item={"pk": {"S": ZONE}, "sk": {"S": "0001"}, "name": {"S": "renamed"}}
    )
    dynamodb.delete_item(TableName=table, Key={"pk": {"S": ZONE}, "sk": {"S": "0002"}})


DIFFERENCES = {"missing": 1, "stale": 1, "deleted": 1}


def test_reconcile_reports_then_fixes_every_difference(
    flows: tuple[Workflows, OpsEnv], capsys: pytest.CaptureFixture[str]
) -> None:
    workflows, search = flows
    drift(workflows, search)
    # No refresh but the runs' own (the engine's own comes a second after a write, or later on a loaded domain): a
    # check run right after the fix must still see every repair the fix made.
    search.client.refresh("geozone")
    no_refresh = json.dumps({"index": {"refresh_interval": "-1"}}).encode()
    settings = search.transport.request(
        "PUT", "geozone/_settings", no_refresh, {"Content-Type": "application/json"}
    )
    assert settings.ok, settings.error_reason()

    found = workflows.run("reconcile", "--schema", "geozone", capsys=capsys)
    fixed = workflows.run("reconcile", "--schema", "geozone", "--fix", capsys=capsys)
    clean = workflows.run("reconcile", "--schema", "geozone", capsys=capsys)

    assert (found.status, found.summary["status"], found.summary["differences"]) == (
        1,
        "work-left",
        DIFFERENCES,
    )
    assert found.execution["status"] == "SUCCEEDED"
    assert (fixed.status, fixed.summary["fix"]) == (0, {"repaired": 3})
    assert clean.status == 0 and clean.summary["clean"]
    # each slice closed its own
    assert search.server.engine.request("GET", "/_search/point_in_time/_all").body["pits"] == []


def test_reconcile_over_an_export_outlives_its_point_in_times_keep_alive(
    every: tuple[Workflows, OpsEnv], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The export's polling takes hours at the sizes that choose it: each wait outlasts the point in time's
    keep-alive, so the engine frees every point in time while the workflow waits, as it does on AWS. (In every
    environment: the run goes through every state of the table workflows, the export, both distributed maps, the
    slices.)"""
    workflows, search = every
    drift(workflows, search)
    waits = workflows.clock.sleep

    def hours_pass(seconds: float) -> None:
        waits(seconds)
        search.server.lose_points_in_time()

    monkeypatch.setattr(workflows.clock, "sleep", hours_pass)

    run = workflows.run("reconcile", "--schema", "geozone", "--source", "export", capsys=capsys)

    assert workflows.clock.waited  # the export was polled: every point in time expired at each wait
    assert run.status == 1 and run.summary["differences"] == DIFFERENCES, run.summary
    assert run.summary["source"] == "export" and not run.summary["errors"]


def test_redrive_drains_the_dead_letter_queue(
    every: tuple[Workflows, OpsEnv], capsys: pytest.CaptureFixture[str]
) -> None:
    workflows, search = every
    put_zones(workflows, search, 1, synced=False)
    sqs = boto3.client("sqs", region_name=workflows.world.region)
    queue = workflows.world.worker_environment["DLQ_URL"]
    message = {"record": record("INSERT", "0000", 7, pk=ZONE)}
    message["record"]["eventSourceARN"] = stream_of(workflows, "geozone")
    sqs.send_message(QueueUrl=queue, MessageBody=json.dumps(message))
    sqs.send_message(QueueUrl=queue, MessageBody="not json")

    run = workflows.run("redrive", capsys=capsys)

    assert run.status == 1, workflows.errors
    assert run.summary["redriven"] == 1 and run.summary["leftInQueue"] == 1, run.summary
    assert search.documents("geozone-v1")[f"{ZONE}#0000"]["stream_seq"] == seq(7)


def stream_of(workflows: Workflows, schema: str) -> str:
    dynamodb = boto3.client("dynamodb", region_name=workflows.world.region)
    return str(
        dynamodb.describe_table(TableName=workflows.world.table_of(schema))["Table"]["LatestStreamArn"]
    )


def test_purge_deletes_only_tombstones_past_the_bound(
    every: tuple[Workflows, OpsEnv], capsys: pytest.CaptureFixture[str]
) -> None:
    workflows, search = every
    bound = time.time() - int(workflows.world.worker_environment["TOMBSTONE_MIN_AGE_SECONDS"])
    search.stream_apply(None, ZONE, "old", seq(5), deleted_at=int(bound) - 60)
    search.stream_apply(None, ZONE, "recent", seq(6), deleted_at=int(bound) + 3600)

    dry = workflows.run("purge", "--dry-run", capsys=capsys)
    run = workflows.run("purge", capsys=capsys)

    assert dry.status == 0 and (dry.summary["found"], dry.summary["deleted"]) == (1, 0)
    assert run.status == 0 and (run.summary["found"], run.summary["deleted"]) == (1, 1), run.summary
    assert set(search.documents("geozone-v1")) == {f"{ZONE}#recent"}


def test_an_export_that_fails_says_why(
    flows: tuple[Workflows, OpsEnv], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    workflows = mapping_change(*flows, monkeypatch, 2)
    workflows.gaps.export_failure = ("S3AccessDenied", "Access denied to the bucket exports/ prefix")

    run = workflows.run("reindex", "--schema", "geozone", "--source", "export", capsys=capsys)

    assert run.status == 2 and run.summary["status"] == "failed"
    reason = "ExportFailed: S3AccessDenied: Access denied to the bucket exports/ prefix"
    assert reason in run.summary["error"] and reason in run.execution["failure"]
    assert "FinishAfterFailure" in run.states_entered()


def test_a_step_that_keeps_failing_is_retried_then_the_run_fails_with_its_summary(
    flows: tuple[Workflows, OpsEnv], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    workflows, search = flows
    mapping_change(*flows, monkeypatch, 2)
    search.server.fail_next(ROUTE_BULK, 429, times=10_000)  # OpenSearch throttles throughout

    run = workflows.run("reindex", "--schema", "geozone", "--source", "scan", capsys=capsys)

    assert run.status == 2 and run.summary["status"] == "failed"
    assert "States.ExceedToleratedFailureThreshold" in run.summary["error"]  # a part's child execution failed
    assert workflows.errors and all(error.startswith("TransientFailure") for error in workflows.errors)
    # 8 retries of a part (its first attempt and 8 more failed), backing off up to 5 minutes: not dropped. Full
    # jitter draws each wait from [0, the backoff], so a wait can be under a second.
    assert len(workflows.errors) >= 9
    backoff = workflows.clock.waited
    assert len(backoff) >= 8 and max(backoff) <= 300
    assert set(search.aliases("geozone-v1")) == {"geozone"}  # the read alias never moved


def test_a_part_that_fails_for_good_fails_its_child_execution_with_its_own_error(
    flows: tuple[Workflows, OpsEnv], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    workflows = mapping_change(*flows, monkeypatch, 2)

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise OpsError("the segment cannot be read")

    monkeypatch.setattr(worker, "run_part", broken)
    run = workflows.run("reindex", "--schema", "geozone", "--source", "scan", capsys=capsys)

    assert run.status == 2 and run.summary["status"] == "failed"
    assert "OpsError: the segment cannot be read" in run.summary["error"]  # saved by part-failed
    # Each failed part's child execution fails with the part's own error, as Lambda reported it.
    failed = workflows.gaps.failed_children
    assert failed and {error for error, _ in failed} == {"OpsError"}, failed
    own = {"errorType": "OpsError", "errorMessage": "the segment cannot be read"}
    assert all(json.loads(cause) == own for _, cause in failed), failed


def test_a_child_still_running_when_its_map_run_fails_is_aborted_not_failed_with_an_error_of_its_own(
    flows: tuple[Workflows, OpsEnv], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both parts fail; the second child to reach PlanPartFailed is held until its map run (failed by the first)
    has stopped it, as a sibling's failure does from another thread. On AWS that child is aborted; moto's
    interpreter failed it with "'dict' object has no attribute 'region'" (about one run in 20 of the test above)."""
    workflows = mapping_change(*flows, monkeypatch, 2)
    monkeypatch.setattr(
        worker, "run_part", lambda *args, **kwargs: (_ for _ in ()).throw(OpsError("unreadable"))
    )
    environment = asl("eval.environment").Environment
    task = asl("component.state.exec.state_task.state_task_lambda").StateTaskLambda
    stopped = threading.Condition()
    original_set_error, original_execution = environment.set_error, task._eval_execution
    entered, held = [], []

    def set_error(self: Any, error: Any) -> None:
        original_set_error(self, error)
        with stopped:
            stopped.notify_all()

    def held_until_stopped(self: Any, env: Any) -> None:
        if self.name == "PlanPartFailed":
            entered.append(env)
            if len(entered) == 2:  # the second child there: waits for its map run to stop it
                with stopped:
                    held.append(stopped.wait_for(lambda: not env.is_running(), timeout=60))
        original_execution(self, env)

    monkeypatch.setattr(environment, "set_error", set_error)
    monkeypatch.setattr(task, "_eval_execution", held_until_stopped)
    run = workflows.run("reindex", "--schema", "geozone", "--source", "scan", capsys=capsys)

    assert held == [True], "the second child was not stopped by its map run while it ran"
    assert run.status == 2 and "OpsError: unreadable" in run.summary["error"]
    assert workflows.gaps.failed_children == [
        ("OpsError", '{"errorType":"OpsError","errorMessage":"unreadable"}')
    ]


def test_a_failing_finish_still_ends_with_a_failed_summary(
    flows: tuple[Workflows, OpsEnv], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    workflows, _ = flows
    real = worker.finish_run
    calls = []

    def finish(operation: Any, env: Any, run: Any, error: str | None = None) -> Any:
        calls.append(error)
        if error is None:
            raise OpsError("the alias swap was refused")
        return real(operation, env, run, error)

    monkeypatch.setattr(worker, "finish_run", finish)
    run = workflows.run("purge", capsys=capsys)

    assert run.status == 2 and run.summary["status"] == "failed"
    assert "the alias swap was refused" in run.summary["error"]
    assert {"Finish", "FinishAfterFailure", "RunFailed"} <= set(run.states_entered())


def test_when_even_the_summary_cannot_be_written_the_run_fails_with_the_cause(
    flows: tuple[Workflows, OpsEnv], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    workflows, _ = flows

    def finish(*args: Any, **kwargs: Any) -> Any:
        raise OpsError("the ops bucket is unreachable")

    monkeypatch.setattr(worker, "finish_run", finish)
    run = workflows.run("purge", capsys=capsys)

    assert run.status == 2 and run.execution["status"] == "FAILED"
    assert (
        "SummaryFailed" in run.execution["failure"]
        and "the ops bucket is unreachable" in run.execution["failure"]
    )


# --- what moto's interpreter lacks, patched in workflows_harness.MotoGaps: each fails once moto has it ---------


def test_moto_still_refuses_the_jsonl_item_reader() -> None:
    input_type = asl("component.state.exec.state_map.item_reader.reader_config.input_type")
    values = {member.value for member in input_type.InputTypeValue}
    assert "JSONL" not in values, "moto reads JSONL now: drop MotoGaps' JSONL patch"


def test_moto_still_leaves_sdk_timestamps_as_datetimes() -> None:
    aws_sdk = asl("component.state.exec.state_task.service.state_task_service_aws_sdk")
    source = inspect.getsource(aws_sdk.StateTaskServiceAwsSdk._eval_service_task)
    message = "moto converts SDK timestamps now: drop MotoGaps' datetime patch"
    assert "datetime" not in source and "isoformat" not in source, message


def test_moto_exports_still_lack_a_manifest() -> None:
    from moto.dynamodb.models import table_export

    assert "manifest" not in inspect.getsource(table_export), (
        "moto writes export manifests: drop MotoGaps' export"
    )
