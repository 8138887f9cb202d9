"""Redrive logic with fakes: message shapes, current state under the dead-lettered sequence number."""

from __future__ import annotations

import json
from typing import Any

import pytest
from stream_sync.redrive import (
    Message,
    UnreadableMessageError,
    current_state_record,
    redrive_messages,
    targets_of,
)
from stream_sync_fakes import Harness, record, settings

KEYS = {"pk": {"S": "geozone::bcparks_1"}, "sk": {"S": "a"}}


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
            "streamArn": "arn:aws:dynamodb:ca-central-1:123456789012:table/refdata/stream/x",
        },
    }


def test_a_sync_dead_letter_names_its_record_keys_and_sequence_number() -> None:
    body = {"reason": "x", "record": record("INSERT", "a", 42)}
    assert targets_of(body, no_stream) == [(KEYS, "42")]


def test_an_esm_failure_message_is_resolved_through_the_stream_range() -> None:
    calls = []

    def read_range(arn: str, shard: str, start: str, end: str) -> list[Any]:
        calls.append((shard, start, end))
        return [record("INSERT", "a", 5), record("REMOVE", "b", 6)]

    targets = targets_of(esm_message("5", "6"), read_range)
    assert [seq for _, seq in targets] == ["5", "6"] and calls == [("shardId-1", "5", "6")]


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
    gone = current_state_record(KEYS, "7", None, 1_764_531_000.5)
    assert gone["eventName"] == "REMOVE" and "NewImage" not in gone["dynamodb"]
    # stamped with when the state was read: a tombstone's deletedAt never predates the deletion it records
    assert gone["dynamodb"]["ApproximateCreationDateTime"] == 1_764_531_000.5


def test_redrive_applies_current_state_and_only_finished_messages_are_deleted() -> None:
    harness = Harness()
    harness.opensearch.item_errors["geozone::bcparks_1#b"] = [(400, "mapper_parsing_exception")]
    items = {"a": {**KEYS, "name": {"S": "current"}}, "b": {"pk": KEYS["pk"], "sk": {"S": "b"}}}
    messages = [
        Message("m1", "r1", json.dumps({"record": record("INSERT", "a", 3, {"name": {"S": "stale image"}})})),
        Message("m2", "r2", json.dumps({"record": record("INSERT", "b", 4)})),
        Message("m3", "r3", "not json"),
    ]
    reports = redrive_messages(
        messages,
        settings=settings(),
        ports=harness.ports(),
        read_range=no_stream,
        get_item=lambda keys: items.get(keys["sk"]["S"]),
    )
    assert [r.deleted for r in reports] == [True, False, False]
    assert reports[0].fates == {"indexed": 1} and reports[1].fates == {"rejected": 1}
    assert "mapping-rejected" in (reports[1].error or "") and reports[2].error
    assert harness.opensearch.doc("a")["name"] == "current"  # type: ignore[index]
    assert harness.opensearch.doc("a")["stream_seq"] == "3".zfill(40)  # type: ignore[index]
    assert harness.dlq.sent == []  # a redrive never dead-letters again


def test_redrive_of_an_old_record_after_newer_changes_is_a_no_op() -> None:
    harness = Harness()
    from stream_sync.sync import process_batch

    process_batch(
        [record("MODIFY", "a", 9, {"name": {"S": "newest"}})],
        settings=settings(),
        ports=harness.ports(),
        remaining_seconds=lambda: 60,
    )
    messages = [Message("m1", "r1", json.dumps({"record": record("INSERT", "a", 3)}))]
    (report,) = redrive_messages(
        messages,
        settings=settings(),
        ports=harness.ports(),
        read_range=no_stream,
        get_item=lambda keys: {**KEYS, "name": {"S": "newest"}},
    )
    assert report.deleted and report.fates == {"stale-skipped": 1}
    assert harness.opensearch.doc("a")["stream_seq"] == "9".zfill(40)  # type: ignore[index]


def test_a_failed_read_keeps_only_that_message() -> None:
    harness = Harness()

    def get_item(keys: dict[str, Any]) -> dict[str, Any] | None:
        if keys["sk"]["S"] == "b":
            raise TimeoutError("throttled")
        return {**keys, "name": {"S": "x"}}

    messages = [
        Message("m1", "r1", json.dumps({"record": record("INSERT", "a", 3)})),
        Message("m2", "r2", json.dumps({"record": record("INSERT", "b", 4)})),
    ]
    reports = redrive_messages(
        messages, settings=settings(), ports=harness.ports(), read_range=no_stream, get_item=get_item
    )
    assert [r.deleted for r in reports] == [True, False]
    assert "throttled" in (reports[1].error or "")
