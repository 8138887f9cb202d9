"""The heartbeat's lag metric (stream_sync.heartbeat): one EMF line, dimensions Environment and Table, only for a
heartbeat the index accepted, its lag measured from the write, for every indexable schema a table's heartbeat may
live in. Through the real handler: tests/integration/test_heartbeat_pipeline.py."""

from __future__ import annotations

import json
from typing import Any

import pytest
from refdata.registry import indexable_schemas
from refdata.reserved import HEARTBEAT_AT, heartbeat_key
from stream_sync import heartbeat
from stream_sync_fakes import Harness, record, run, settings

STREAM = (
    "arn:aws:dynamodb:ca-central-1:123456789012:table/refdata-dev-Table1A2B/stream/2026-12-01T00:00:00.000"
)
TABLE = "refdata-dev-Table1A2B"
WRITTEN = 1_764_531_000.0


def heartbeat_record(schema: str, seq: int, *, created_at: float | None = WRITTEN) -> dict[str, Any]:
    pk, sk, attributes = heartbeat_key(schema)
    values = {HEARTBEAT_AT: {"S": "2025-11-30T19:30:00Z"}} | {k: {"S": str(v)} for k, v in attributes.items()}
    raw = record("MODIFY", sk, seq, values, pk=pk)
    raw["eventSourceARN"] = STREAM
    if created_at is None:
        del raw["dynamodb"]["ApproximateCreationDateTime"]
    return raw


@pytest.mark.parametrize("schema", [schema.name for schema in indexable_schemas()])
def test_an_indexed_heartbeat_emits_its_lag_with_the_environment_and_the_table(schema: str) -> None:
    harness = Harness()
    result = run(harness, [heartbeat_record(schema, 10)])
    lines: list[str] = []

    heartbeat.emit(result, settings(environment="dev"), now=WRITTEN + 2.5, write=lines.append)

    (line,) = [json.loads(text) for text in lines]
    assert line["_aws"]["CloudWatchMetrics"] == [
        {
            "Namespace": "RefData/StreamSync",
            "Dimensions": [["Environment", "Table"]],
            "Metrics": [{"Name": "HeartbeatLagSeconds", "Unit": "Seconds"}],
        }
    ]
    assert (line["Environment"], line["Table"], line["HeartbeatLagSeconds"]) == ("dev", TABLE, 2.5)
    assert line["_aws"]["Timestamp"] == int((WRITTEN + 2.5) * 1000)


def test_a_heartbeat_the_index_did_not_accept_emits_nothing() -> None:
    schema = indexable_schemas()[0].name
    pk, sk, _ = heartbeat_key(schema)
    for status, kind in ((503, "unavailable"), (400, "mapper_parsing_exception")):  # held, dead-lettered
        harness = Harness()
        harness.opensearch.item_errors[f"{pk}#{sk}"] = [(status, kind)] * 20
        result = run(harness, [heartbeat_record(schema, 10)])
        assert heartbeat.lags(result, WRITTEN + 1) == []
    harness = Harness()
    run(harness, [heartbeat_record(schema, 11)])
    replayed = run(
        harness, [heartbeat_record(schema, 11)]
    )  # stale-skipped: its lag was emitted the first time
    assert heartbeat.lags(replayed, WRITTEN + 1) == []


def test_ordinary_records_emit_no_heartbeat_and_a_batch_emits_the_last_heartbeat_once() -> None:
    schema = indexable_schemas()[0].name
    ordinary = record("INSERT", "0000000001", 9)
    ordinary["eventSourceARN"] = STREAM
    result = run(Harness(), [ordinary, heartbeat_record(schema, 10), heartbeat_record(schema, 12)])
    assert heartbeat.lags(result, WRITTEN + 3) == [heartbeat.HeartbeatLag(TABLE, 3.0)]


def test_a_record_without_a_creation_time_measures_from_the_items_heartbeat_time() -> None:
    schema = indexable_schemas()[0].name
    result = run(Harness(), [heartbeat_record(schema, 10, created_at=None)])
    written = 1_764_531_000.0  # 2025-11-30T19:30:00Z
    assert heartbeat.lags(result, written + 7) == [heartbeat.HeartbeatLag(TABLE, 7.0)]
