"""Handler wiring, configuration from the environment, logs and EMF metrics, DLQ message shaping."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from stream_sync import aws, handler, telemetry
from stream_sync.config import ConfigError, Settings
from stream_sync.sync import DeadLetter, Fate, Outcome, dead_letter_body
from stream_sync_fakes import ENV, Harness, deployed, record, settings


def test_settings_defaults_from_the_minimal_environment() -> None:
    config = Settings.from_env(ENV)
    assert config.opensearch_endpoint == ENV["OPENSEARCH_ENDPOINT"]
    assert config.geometry_bucket is None
    assert config.bulk_max_bytes == 10 * 1024 * 1024
    assert config.request_timeout_seconds == 30.0
    assert config.max_record_age_seconds == -1 and config.dead_letter_age_seconds is None
    assert config.metrics_namespace == "RefData/StreamSync"


def test_settings_read_every_variable() -> None:
    config = Settings.from_env(
        {
            **ENV,
            "GEOMETRY_BUCKET": "geo",
            "BULK_MAX_BYTES": "5000000",
            "REQUEST_TIMEOUT_SECONDS": "20",
            "MAX_RECORD_AGE_SECONDS": "3600",
            "RECORD_AGE_MARGIN_SECONDS": "600",
            "BULK_MAX_ATTEMPTS": "3",
            "RETRY_BASE_SECONDS": "0.5",
            "RETRY_MAX_SECONDS": "4",
            "DEADLINE_MARGIN_SECONDS": "2",
            "DLQ_MAX_MESSAGE_BYTES": "1048576",
            "METRICS_NAMESPACE": "X/Y",
            "LOG_LEVEL": "debug",
            "SCHEMA_TABLES": '{"geozone": "refdata", "booking": "refdata-bookings"}',
        }
    )
    assert (config.geometry_bucket, config.bulk_max_bytes, config.max_attempts) == ("geo", 5_000_000, 3)
    assert config.schema_tables.table_of("booking") == "refdata-bookings"
    assert config.dead_letter_age_seconds == 3000.0
    assert config.log_level == "DEBUG" and config.dlq_max_message_bytes == 1048576


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({k: v for k, v in ENV.items() if k != "DLQ_URL"}, "DLQ_URL is required"),
        ({k: v for k, v in ENV.items() if k != "OPENSEARCH_ENDPOINT"}, "OPENSEARCH_ENDPOINT is required"),
        ({**ENV, "BULK_MAX_BYTES": "lots"}, "BULK_MAX_BYTES='lots'"),
        ({**ENV, "BULK_MAX_BYTES": "10"}, "BULK_MAX_BYTES must be at least"),
        ({**ENV, "MAX_RECORD_AGE_SECONDS": "5"}, "MAX_RECORD_AGE_SECONDS"),
        ({**ENV, "LOG_LEVEL": "LOUD"}, "LOG_LEVEL"),
        ({**ENV, "SCHEMA_TABLES": "refdata"}, "SCHEMA_TABLES not JSON"),
        ({**ENV, "SCHEMA_TABLES": '["refdata"]'}, "SCHEMA_TABLES must be a JSON object"),
        (
            {**ENV, "SCHEMA_TABLES": '{"bookings": "t"}'},
            r"SCHEMA_TABLES names schemas the registry does not know: \['bookings'\]",
        ),
    ],
)
def test_invalid_settings_name_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Settings.from_env(env)


def test_handler_returns_the_partial_batch_response(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    harness = Harness()
    harness.opensearch.item_errors["geozone::bcparks_1#b"] = [(503, "unavailable")] * 10
    deployed(monkeypatch, harness)
    context = SimpleNamespace(get_remaining_time_in_millis=lambda: 100)  # no time for retries
    event = {"Records": [record("INSERT", "a", 10), record("INSERT", "b", 11), record("INSERT", "c", 12)]}
    assert handler.handler(event, context) == {"batchItemFailures": [{"itemIdentifier": "11"}]}
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert any(line.get("message") == "record outcome" and line["outcome"] == "retry" for line in lines)
    handler.reset()


def test_handler_module_imports_no_aws_sdk() -> None:
    import subprocess
    import sys

    code = "import sys, stream_sync.handler; print(sorted(m for m in ('boto3', 'botocore', 'urllib3') if m in sys.modules))"
    output = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="lambdas"
    )
    assert output.stdout.strip() == "[]"


def outcome(fate: Fate, seq: str = "1") -> Outcome:
    from search.documents import parse_change

    raw = record("INSERT", "a", int(seq))
    result = Outcome(0, raw, seq, f"event-{seq}", fate)
    result.change = parse_change(raw)
    return result


def test_summary_log_lists_record_ids_by_outcome_and_emf_carries_the_counts() -> None:
    from stream_sync.sync import BatchResult

    result = BatchResult(
        [outcome(Fate.INDEXED, "1"), outcome(Fate.DEAD_LETTERED, "2"), outcome(Fate.RETRY, "3")]
    )
    for item in result.outcomes:
        item.record = {
            **item.record,
            "eventSourceARN": "arn:aws:dynamodb:ca-central-1:1:table/refdata-bookings/stream/x",
        }
    result.outcomes[1].reason_kind, result.outcomes[1].reason = "mapping-rejected", "bad field"
    result.bulk_requests, result.lag_seconds = 1, 2.5
    lines: list[str] = []
    telemetry.emit(result, settings(environment="dev"), now=1_764_531_060.0, write=lines.append)
    parsed = [json.loads(line) for line in lines]
    summary = next(line for line in parsed if line.get("message") == "batch synced")
    assert summary["recordIds"] == {
        "indexed": ["event-1"],
        "dead-lettered": ["event-2"],
        "retry": ["event-3"],
    }
    assert summary["batchItemFailures"] == [{"itemIdentifier": "3"}]
    assert summary["table"] == "refdata-bookings"  # which table's stream: one mapping per table
    failed = [line for line in parsed if line.get("message") == "record outcome"]
    assert {line["outcome"] for line in failed} == {"dead-lettered", "retry"}
    emf = parsed[-1]
    directive = emf["_aws"]["CloudWatchMetrics"][0]
    assert directive["Namespace"] == "RefData/StreamSync"
    # Per environment and per table (issue 16.7): two environments or tables in one account never mix.
    assert directive["Dimensions"] == [["Environment", "Table"]]
    assert (emf["Environment"], emf["Table"]) == ("dev", "refdata-bookings")
    names = {metric["Name"] for metric in directive["Metrics"]}
    assert {"DocumentsIndexed", "DocumentsDeleted", "DocumentsRetried", "DocumentsDeadLettered"} <= names
    assert (
        emf["DocumentsIndexed"] == 1
        and emf["DocumentsDeadLettered"] == 1
        and emf["RecordsReportedForRetry"] == 1
    )
    assert emf["ReplicationLagSeconds"] == 2.5 and emf["_aws"]["Timestamp"] == 1_764_531_060_000


def test_every_fate_the_function_reaches_has_its_own_metric_carrying_its_count() -> None:
    """The dashboard graphs records by fate and two alarms read fate metrics: each fate's count must land in its
    own metric (``rejected`` happens only in the redrive, which emits no metrics)."""
    from stream_sync.sync import BatchResult

    reached = [fate for fate in Fate if fate is not Fate.REJECTED]
    assert set(telemetry.FATE_METRICS) == set(reached)
    assert len(set(telemetry.FATE_METRICS.values())) == len(reached)
    result = BatchResult([outcome(fate, str(n)) for n, fate in enumerate(reached, start=1) for _ in range(n)])
    emf = json.loads(telemetry.emf_line(result, settings(), now=0.0))
    declared = {metric["Name"] for metric in emf["_aws"]["CloudWatchMetrics"][0]["Metrics"]}
    for n, fate in enumerate(reached, start=1):
        name = telemetry.FATE_METRICS[fate]
        assert (emf[name], name in declared, name in telemetry.METRIC_NAMES) == (n, True, True), fate


def test_dead_letter_body_drops_images_rather_than_exceed_the_sqs_limit() -> None:
    big = outcome(Fate.DEAD_LETTERED)
    big.record["dynamodb"]["NewImage"]["blob"] = {"S": "x" * 5000}
    big.reason_kind, big.reason = "document-too-large", "too big"
    body = json.loads(dead_letter_body(big, 0.0, 2000))
    assert "NewImage" not in body["record"]["dynamodb"] and body["truncated"]
    assert body["record"]["dynamodb"]["Keys"] == {"pk": {"S": "geozone::bcparks_1"}, "sk": {"S": "a"}}
    assert body["record"]["dynamodb"]["SequenceNumber"] == "1"


def test_dead_letters_are_sent_ten_per_call_within_the_batch_size_limit() -> None:
    letters = [DeadLetter(i, "x" * 100, "k") for i in range(23)]
    assert [len(batch) for batch in aws.sqs_batches(letters)] == [10, 10, 3]
    large = [DeadLetter(i, "x" * 100_000, "k") for i in range(5)]
    assert [len(batch) for batch in aws.sqs_batches(large)] == [2, 2, 1]


@pytest.mark.parametrize(
    ("code", "missing"), [("NoSuchKey", True), ("AccessDenied", True), ("SlowDown", False), ("500", False)]
)
def test_geometry_fetch_tells_missing_objects_from_transient_errors(code: str, missing: bool) -> None:
    from botocore.exceptions import ClientError
    from stream_sync.sync import GeometryMissing

    fetcher = fetcher_answering(ClientError({"Error": {"Code": code, "Message": "x"}}, "GetObject"))
    with pytest.raises(GeometryMissing if missing else ClientError):
        fetcher("geometry-bucket", "geometries/abc.json", 1024)


def fetcher_answering(answer: Any) -> aws.GeometryFetcher:
    """The geometry fetcher over an S3 client whose GetObject returns `answer`, or raises it."""

    class Stub:
        def get_object(self, **_: Any) -> Any:
            if isinstance(answer, Exception):
                raise answer
            return answer

    fetcher = aws.GeometryFetcher(settings())
    fetcher._client = Stub()
    return fetcher


class _Body:
    def __init__(self, data: bytes) -> None:
        self.data, self.read_sizes, self.closed = data, [], False

    def read(self, amount: int | None = None) -> bytes:
        self.read_sizes.append(amount)
        return self.data if amount is None else self.data[:amount]

    def close(self) -> None:
        self.closed = True


def test_geometry_fetch_reads_the_objects_size_before_its_body() -> None:
    """An object larger than the caller allows is closed unread (GetObject sends ContentLength before the body)."""
    from stream_sync.sync import GeometryTooLarge

    body = _Body(b"x" * 100)
    fetcher = fetcher_answering({"ContentLength": 100, "Body": body})
    with pytest.raises(GeometryTooLarge) as raised:
        fetcher("geometry-bucket", "geometries/big.json", 99)
    assert raised.value.size == 100 and body.read_sizes == [] and body.closed
    assert fetcher("geometry-bucket", "geometries/big.json", 100) == b"x" * 100


def test_geometry_fetch_never_reads_more_than_allowed_whatever_the_header_says() -> None:
    from stream_sync.sync import GeometryTooLarge

    body = _Body(b"x" * 100)
    fetcher = fetcher_answering({"ContentLength": 10, "Body": body})  # a header that lies
    with pytest.raises(GeometryTooLarge):
        fetcher("geometry-bucket", "geometries/x.json", 50)
    assert body.read_sizes == [51]


def test_the_work_budget_follows_the_functions_memory_unless_set() -> None:
    assert Settings.from_env(ENV).work_budget_bytes == 128 * 1024 * 1024  # 1024 MB: an eighth
    assert (
        Settings.from_env({**ENV, "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "2048"}).work_budget_bytes
        == 256 * 1024**2
    )
    assert Settings.from_env({**ENV, "WORK_BUDGET_BYTES": "5000000"}).work_budget_bytes == 5_000_000
    with pytest.raises(ConfigError, match="WORK_BUDGET_BYTES"):
        Settings.from_env({**ENV, "WORK_BUDGET_BYTES": "10"})


def test_the_handler_refuses_to_run_without_its_environment_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every metric is published per Environment: without the name, alarms would read nothing."""
    deployed(monkeypatch, Harness())
    monkeypatch.delenv("ENVIRONMENT_NAME")
    with pytest.raises(ConfigError, match="ENVIRONMENT_NAME is required"):
        handler.handler({"Records": [record("INSERT", "a", 1)]}, SimpleNamespace())
    handler.reset()


def test_every_metric_line_carries_the_environment_and_the_table() -> None:
    """The one helper every sync metric goes through (the batch's, and any other such as a heartbeat's)."""
    line = json.loads(
        telemetry.metric_line(
            "RefData/StreamSync", {"Lag": ("Seconds", 3.0)}, environment="prod", table="refdata", now=1.5
        )
    )
    assert line["_aws"] == {
        "Timestamp": 1500,
        "CloudWatchMetrics": [
            {
                "Namespace": "RefData/StreamSync",
                "Dimensions": [["Environment", "Table"]],
                "Metrics": [{"Name": "Lag", "Unit": "Seconds"}],
            }
        ],
    }
    assert (line["Environment"], line["Table"], line["Lag"]) == ("prod", "refdata", 3.0)
