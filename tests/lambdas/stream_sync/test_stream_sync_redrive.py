"""Redrive logic with fakes: message shapes, current state under the dead-lettered sequence number."""

from __future__ import annotations

import json
from typing import Any

import pytest
from stream_sync.redrive import (
    Message,
    MessageReport,
    Target,
    UnreadableMessageError,
    current_state_record,
    item_reader,
    redrive_messages,
    targets_of,
)
from stream_sync.tables import SchemaTables
from stream_sync_fakes import Harness, record, settings

KEYS = {"pk": {"S": "geozone::bcparks_1"}, "sk": {"S": "a"}}
STREAM = "arn:aws:dynamodb:ca-central-1:123456789012:table/refdata/stream/x"
BOOKINGS_STREAM = "arn:aws:dynamodb:ca-central-1:123456789012:table/refdata-bookings/stream/y"


def no_stream(*_: str) -> list[Any]:
    raise AssertionError("the stream must not be read for a full dead letter")


def esm_message(start: str, end: str) -> dict[str, Any]:
    return {
        "requestContext": {
            "requestId": "r",
            "condition": "RetryAttemptsExhausted",
            "approximateInvokeCount": 3,
        },
        "responseContext": {"statusCode": 200, "functionError": "Unhandled"},
        "version": "1.0",
        "DDBStreamBatchInfo": {
            "shardId": "shardId-1",
            "startSequenceNumber": start,
            "endSequenceNumber": end,
            "batchSize": 2,
            "streamArn": STREAM,
        },
    }


def test_a_sync_dead_letter_names_its_record_keys_sequence_number_and_stream() -> None:
    body = {"reason": "x", "record": {**record("INSERT", "a", 42), "eventSourceARN": STREAM}}
    assert targets_of(body, no_stream) == [Target(KEYS, "42", STREAM)]
    assert targets_of({"record": record("INSERT", "a", 42)}, no_stream) == [Target(KEYS, "42", None)]


def test_an_esm_failure_message_is_resolved_through_the_stream_range() -> None:
    calls = []

    def read_range(arn: str, shard: str, start: str, end: str) -> list[Any]:
        calls.append((shard, start, end))
        return [record("INSERT", "a", 5), record("REMOVE", "b", 6)]

    targets = targets_of(esm_message("5", "6"), read_range)
    assert [t.sequence_number for t in targets] == ["5", "6"] and calls == [("shardId-1", "5", "6")]
    assert {t.source_arn for t in targets} == {STREAM}  # read from the stream's own table


class GetItemClient:
    def __init__(self) -> None:
        self.tables: list[str] = []

    def get_item(self, TableName: str, Key: dict[str, Any], ConsistentRead: bool) -> dict[str, Any]:
        self.tables.append(TableName)
        return {"Item": Key}


def test_the_item_is_read_from_the_table_its_record_came_from_else_from_its_schemas_table() -> None:
    client = GetItemClient()
    tables = SchemaTables.of({"geozone": "refdata", "booking": "refdata-bookings"})
    get_item = item_reader(client, tables)
    booking = {"pk": {"S": "booking::bcparks_1::0"}, "sk": {"S": "a"}}
    get_item(booking, BOOKINGS_STREAM)
    get_item(KEYS, BOOKINGS_STREAM)  # a wrong-table record: read where it was written (then refused again)
    get_item(booking, None)
    get_item(KEYS, None)
    assert client.tables == ["refdata-bookings", "refdata-bookings", "refdata-bookings", "refdata"]
    with pytest.raises(LookupError, match="no table holds"):
        get_item({"pk": {"S": "thread::c::t"}, "sk": {"S": "META"}}, None)


@pytest.mark.parametrize(
    "body",
    [
        {"something": "else"},
        {"record": {"dynamodb": {}}},
        {"record": {"dynamodb": {"Keys": KEYS}}},
        esm_message("1", "2"),
    ],
)
def test_messages_that_name_no_record_are_unreadable(body: dict[str, Any]) -> None:
    with pytest.raises(UnreadableMessageError):
        targets_of(body, lambda *_: [])


def test_current_state_replaces_the_old_image_and_keeps_the_old_sequence_number() -> None:
    current = {**KEYS, "name": {"S": "now"}}
    fresh = current_state_record(KEYS, "7", current, 1_764_531_000.5)
    assert fresh["eventName"] == "MODIFY" and fresh["dynamodb"]["NewImage"] == current
    assert fresh["dynamodb"]["SequenceNumber"] == "7"
    assert "eventSourceARN" not in fresh
    gone = current_state_record(KEYS, "7", None, 1_764_531_000.5, STREAM)
    assert gone["eventName"] == "REMOVE" and "NewImage" not in gone["dynamodb"]
    assert gone["eventSourceARN"] == STREAM  # checked against the schema's table like a streamed record
    # stamped with when the state was read: a tombstone's deletedAt never predates the deletion it records
    assert gone["dynamodb"]["ApproximateCreationDateTime"] == 1_764_531_000.5


def redrive(harness: Harness, bodies: list[Any], get_item: Any, **overrides: Any) -> list[MessageReport]:
    """The dead letters (their bodies, or raw text) redriven with `get_item` as the table."""
    texts = [body if isinstance(body, str) else json.dumps(body) for body in bodies]
    messages = [Message(f"m{n}", f"r{n}", text) for n, text in enumerate(texts)]
    return redrive_messages(
        messages,
        settings=settings(**overrides),
        ports=harness.ports(),
        read_range=no_stream,
        get_item=get_item,
    )


def letter(sk: str, seq: int, attributes: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"record": record("INSERT", sk, seq, attributes)}


def test_redrive_applies_current_state_and_only_finished_messages_are_deleted(harness: Harness) -> None:
    harness.opensearch.item_errors["geozone::bcparks_1#b"] = [(400, "mapper_parsing_exception")]
    items = {"a": {**KEYS, "name": {"S": "current"}}, "b": {"pk": KEYS["pk"], "sk": {"S": "b"}}}
    bodies = [letter("a", 3, {"name": {"S": "stale image"}}), letter("b", 4), "not json"]
    reports = redrive(harness, bodies, lambda keys, arn: items.get(keys["sk"]["S"]))
    assert [r.deleted for r in reports] == [True, False, False]
    assert reports[0].fates == {"indexed": 1} and reports[1].fates == {"rejected": 1}
    assert "mapping-rejected" in (reports[1].error or "") and reports[2].error
    assert harness.opensearch.doc("a")["name"] == "current"  # type: ignore[index]
    assert harness.opensearch.doc("a")["stream_seq"] == "3".zfill(40)  # type: ignore[index]
    assert harness.dlq.sent == []  # a redrive never dead-letters again


def test_a_failed_read_keeps_only_that_message(harness: Harness) -> None:
    def get_item(keys: dict[str, Any], arn: str | None) -> dict[str, Any] | None:
        if keys["sk"]["S"] == "b":
            raise TimeoutError("throttled")
        return {**keys, "name": {"S": "x"}}

    reports = redrive(harness, [letter("a", 3), letter("b", 4)], get_item)
    assert [r.deleted for r in reports] == [True, False]
    assert "throttled" in (reports[1].error or "")


def test_a_wrong_table_record_is_refused_again_and_stays_in_the_queue(harness: Harness) -> None:
    wrong = {**record("INSERT", "a", 3, {"name": {"S": "x"}}), "eventSourceARN": BOOKINGS_STREAM}
    (report,) = redrive(
        harness,
        [{"reasonKind": "wrong-table", "record": wrong}],
        lambda keys, arn: {**keys, "name": {"S": "x"}},
        schema_tables=SchemaTables.of({"geozone": "refdata", "booking": "refdata-bookings"}),
    )
    assert not report.deleted and report.fates == {"rejected": 1}
    assert (report.error or "").startswith("wrong-table: schema 'geozone' belongs to table 'refdata'")
    assert harness.opensearch.docs == {}


def test_a_redrive_of_items_no_input_can_fail_keeps_their_messages_and_applies_the_rest(
    harness: Harness,
) -> None:
    """The redrive runs the batch code: an item that used to raise there (issue 18, finding 2) is rejected with its
    reason, its message stays, and the other messages are applied and deleted."""
    harness.geometry.objects[("geometry-bucket", "geometries/deep.geojson")] = b"[" * 100_000 + b"]" * 100_000
    deep = {"geometryUrl": {"S": "s3://geometry-bucket/geometries/deep.geojson"}}
    items = {
        "a": {**KEYS, "name": {"S": "fine"}},
        "b": {"pk": KEYS["pk"], "sk": {"S": "b"}, "tags": {"SS": 5}},
        "c": {"pk": KEYS["pk"], "sk": {"S": "c"}, **deep},
        "d": {"pk": KEYS["pk"], "sk": {"S": "d"}, "label": {"S": "x"}, "label.sub": {"S": "y"}},
    }
    bodies = [letter(sk, 3 + n) for n, sk in enumerate(items)]
    reports = redrive(harness, bodies, lambda keys, arn: items.get(keys["sk"]["S"]))
    assert [r.deleted for r in reports] == [True, False, False, False]
    assert [r.error.split(":")[0] if r.error else None for r in reports] == [
        None,
        "malformed-record",
        "invalid-geometry",
        "field-conflict",
    ]
    assert harness.opensearch.doc("a") is not None
