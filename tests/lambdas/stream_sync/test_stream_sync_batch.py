"""Batch logic: coalescing, one bulk request, per-item outcomes, retries, dead letters, reported failures."""

from __future__ import annotations

import json

import pytest
from stream_sync import telemetry
from stream_sync.sync import BatchIncompleteError, BulkUnavailable, HttpReply
from stream_sync.tables import SchemaTables, table_of_arn
from stream_sync_fakes import MISSING_SCRIPT, RUNTIME_ERROR, Harness, fates, name, record, run, settings


def test_a_batch_is_one_bulk_request_and_every_record_is_indexed(harness: Harness) -> None:
    records = [record("INSERT", f"{i:010d}", 100 + i, name(f"n{i}")) for i in range(50)]
    result = run(harness, records)
    assert len(harness.opensearch.bodies) == 1
    assert fates(result) == ["indexed"] * 50
    assert result.batch_item_failures() == []
    assert harness.opensearch.doc("0000000007") == {
        "pk": "geozone::bcparks_1",
        "sk": "0000000007",
        "name": "n7",
        "schema": "geozone",
        "tombstone": False,
        "stream_seq": "107".zfill(40),
    }


def test_changes_to_one_key_are_coalesced_to_the_last(harness: Harness) -> None:
    records = [
        record("INSERT", "a", 1, name("first")),
        record("MODIFY", "a", 2, name("second")),
        record("INSERT", "b", 3, name("other")),
        record("REMOVE", "a", 4),
        record("INSERT", "a", 5, name("again")),
    ]
    result = run(harness, records)
    assert fates(result) == ["coalesced", "coalesced", "indexed", "coalesced", "indexed"]
    assert [o.superseded_by for o in result.outcomes[:2]] == [4, 4]
    assert harness.opensearch.bodies[0].count(b"\n") == 4  # two actions
    assert harness.opensearch.doc("a")["name"] == "again"  # type: ignore[index]


def test_remove_writes_a_tombstone_and_counts_as_deleted(harness: Harness) -> None:
    run(harness, [record("INSERT", "a", 1, name("x"))])
    result = run(harness, [record("REMOVE", "a", 2)])
    assert fates(result) == ["deleted"]
    assert harness.opensearch.doc("a") == {
        "pk": "geozone::bcparks_1",
        "sk": "a",
        "schema": "geozone",
        "deletedAt": 1_764_531_000,  # the REMOVE record's ApproximateCreationDateTime
        "tombstone": True,
        "stream_seq": "2".zfill(40),
    }


def test_throttled_request_is_retried_after_retry_after(harness: Harness) -> None:
    harness.opensearch.replies = [HttpReply(429, {"retry-after": "0.04"}, b'{"error":"throttled"}')]
    result = run(harness, [record("INSERT", "a", 1, name("x"))])
    assert fates(result) == ["indexed"]
    assert harness.sleeps == [0.04]
    assert result.item_retries == 1 and result.bulk_requests == 2


def test_persistent_5xx_is_reported_from_the_smallest_unfinished_sequence_number(harness: Harness) -> None:
    harness.opensearch.replies = [HttpReply(503, {}, b"unavailable")] * 3
    result = run(harness, [record("INSERT", "a", 12, name("x")), record("INSERT", "b", 7)], max_attempts=3)
    assert fates(result) == ["retry", "retry"]
    assert result.batch_item_failures() == [{"itemIdentifier": "7"}]
    assert len(harness.sleeps) == 2 and harness.dlq.sent == []


def test_timeouts_and_refused_connections_are_transient(harness: Harness) -> None:
    harness.opensearch.replies = [BulkUnavailable("timed out"), BulkUnavailable("connection refused")]
    result = run(harness, [record("INSERT", "a", 1, name("x"))])
    assert fates(result) == ["indexed"]
    assert [o.attempts for o in result.outcomes] == [3]


def test_no_retry_when_the_invocation_has_no_time_left(harness: Harness) -> None:
    harness.opensearch.replies = [HttpReply(500, {}, b"boom")]
    result = run(harness, [record("INSERT", "a", 5, name("x"))], remaining=0.5)
    assert fates(result) == ["retry"] and harness.sleeps == []
    assert result.batch_item_failures() == [{"itemIdentifier": "5"}]


@pytest.mark.parametrize(
    ("status", "kind"), [(429, "rejected_execution_exception"), (409, "version_conflict")]
)
def test_per_item_transient_errors_are_retried(status: int, kind: str, harness: Harness) -> None:
    harness.opensearch.item_errors["geozone::bcparks_1#a"] = [(status, kind)]
    result = run(harness, [record("INSERT", "a", 1, name("x")), record("INSERT", "b", 2, name("y"))])
    assert fates(result) == ["indexed", "indexed"]
    assert result.item_retries == 1
    assert harness.opensearch.bodies[1].count(b"\n") == 2  # only the failed item is sent again


def test_record_close_to_max_age_goes_to_the_dlq_instead_of_retrying(harness: Harness) -> None:
    harness.opensearch.replies = [HttpReply(503, {}, b"down")] * 2
    old = record("INSERT", "a", 1, name("x"), created_at=harness.clock - 3500)
    young = record("INSERT", "b", 2, name("y"), created_at=harness.clock - 10)
    result = run(
        harness, [old, young], max_attempts=2, max_record_age_seconds=3600, record_age_margin_seconds=300
    )
    assert fates(result) == ["dead-lettered", "retry"]
    assert harness.dlq.bodies()[0]["reasonKind"] == "transient-exhausted"
    assert result.batch_item_failures() == [{"itemIdentifier": "2"}]


def test_dlq_failure_falls_back_to_reporting_the_record(harness: Harness) -> None:
    harness.opensearch.item_errors["geozone::bcparks_1#a"] = [(400, "mapper_parsing_exception")]
    harness.dlq.down = True
    result = run(harness, [record("INSERT", "a", 3, name("x")), record("INSERT", "b", 4, name("y"))])
    assert fates(result) == ["retry", "indexed"]
    assert result.outcomes[0].reason_kind == "dead-letter-failed"
    assert result.batch_item_failures() == [{"itemIdentifier": "3"}]


def test_a_rejected_dlq_entry_is_reported_for_retry(harness: Harness) -> None:
    harness.dlq.fail_positions = {1}
    records = [
        record("INSERT", "a", 3, {"geometry": {"S": "nope"}}),
        record("INSERT", "b", 4, {"geometry": {"N": "1"}}),
    ]
    result = run(harness, records)
    assert fates(result) == ["dead-lettered", "retry"]


def test_undeliverable_record_without_sequence_number_fails_the_invocation(harness: Harness) -> None:
    harness.dlq.down = True
    with pytest.raises(BatchIncompleteError):
        run(harness, [{"eventName": "INSERT"}])


def test_malformed_record_never_blocks_the_batch(harness: Harness) -> None:
    broken = record("INSERT", "a", 1)
    broken["dynamodb"]["NewImage"]["bad"] = {"Q": "?"}
    result = run(
        harness, [broken, {"eventName": "MODIFY", "dynamodb": {}}, record("INSERT", "b", 3, name("y"))]
    )
    assert fates(result) == ["dead-lettered", "dead-lettered", "indexed"]
    assert {m["reasonKind"] for m in harness.dlq.bodies()} == {"malformed-record"}


def test_request_too_large_for_the_domain_is_bisected(harness: Harness) -> None:
    harness.opensearch.replies = [HttpReply(413, {}, b"too large")]
    result = run(harness, [record("INSERT", f"{i}", i + 1, name("x")) for i in range(4)])
    assert fates(result) == ["indexed"] * 4
    assert [body.count(b"\n") for body in harness.opensearch.bodies] == [8, 4, 4]


def test_geometry_problems_are_permanent_or_transient_as_they_should_be(harness: Harness) -> None:
    harness.geometry.objects[("geometry-bucket", "bad.json")] = (
        b'{"type": "Polygon", "coordinates": [[[0,0],[1,1]]]}'
    )
    records = [
        record("INSERT", "missing", 1, {"geometryUrl": {"S": "s3://geometry-bucket/none.json"}}),
        record("INSERT", "invalid", 2, {"geometryUrl": {"S": "s3://geometry-bucket/bad.json"}}),
        record("INSERT", "foreign", 3, {"geometryUrl": {"S": "s3://elsewhere/x.json"}}),
    ]
    result = run(harness, records)
    assert fates(result) == ["dead-lettered"] * 3
    assert [m["reasonKind"] for m in harness.dlq.bodies()] == [
        "missing-geometry-object",
        "invalid-geometry",
        "geometry-bucket-not-allowed",
    ]
    harness.geometry.broken = True
    result = run(
        harness, [record("INSERT", "later", 4, {"geometryUrl": {"S": "s3://geometry-bucket/x.json"}})]
    )
    assert fates(result) == ["retry"] and result.outcomes[0].reason_kind == "geometry-fetch-failed"


def test_non_indexable_schemas_are_ignored(harness: Harness) -> None:
    result = run(harness, [record("INSERT", "counter", 1, pk="counter::geozone::bcparks_1")])
    assert fates(result) == ["ignored"] and harness.opensearch.bodies == []


def test_replication_lag_is_measured_from_approximate_creation_time(harness: Harness) -> None:
    result = run(harness, [record("INSERT", "a", 1, created_at=harness.clock - 42.0)])
    assert result.lag_seconds == pytest.approx(42.0)


def test_unreadable_bulk_response_is_transient(harness: Harness) -> None:
    harness.opensearch.replies = [
        HttpReply(200, {}, b"<html>proxy</html>"),
        HttpReply(200, {}, b'{"items": []}'),
    ]
    result = run(harness, [record("INSERT", "a", 1)])
    assert fates(result) == ["indexed"] and result.bulk_requests == 3


def test_script_errors_are_held_or_dead_lettered_by_cause_and_counted(harness: Harness) -> None:
    harness.opensearch.item_errors["geozone::bcparks_1#missing"] = [(400, MISSING_SCRIPT)] * 5
    harness.opensearch.item_errors["geozone::bcparks_1#failing"] = [(400, RUNTIME_ERROR)]
    records = [
        record("INSERT", "missing", 1, name("x")),
        record("INSERT", "failing", 2, name("y")),
        record("INSERT", "fine", 3, name("z")),
    ]

    result = run(harness, records, max_attempts=2)

    assert fates(result) == ["retry", "dead-lettered", "indexed"]
    assert [o.reason_kind for o in result.outcomes[:2]] == ["script-unavailable", "script-failed"]
    assert harness.dlq.bodies()[0]["reasonKind"] == "script-failed"
    assert result.script_errors == 2
    emf = json.loads(telemetry.emf_line(result, settings(), now=0.0))
    assert emf["ScriptErrors"] == 2
    assert {"Name": "ScriptErrors", "Unit": "Count"} in emf["_aws"]["CloudWatchMetrics"][0]["Metrics"]


def test_a_record_whose_script_error_clears_on_retry_is_not_counted(harness: Harness) -> None:
    harness.opensearch.item_errors["geozone::bcparks_1#a"] = [(400, MISSING_SCRIPT)]

    result = run(harness, [record("INSERT", "a", 1, name("x"))])

    assert fates(result) == ["indexed"] and result.script_errors == 0


REFDATA_STREAM = "arn:aws:dynamodb:ca-central-1:123456789012:table/refdata/stream/2026-11-30T00:00:00.000"
BOOKINGS_STREAM = (
    "arn:aws:dynamodb:ca-central-1:123456789012:table/refdata-bookings/stream/2026-11-30T00:00:00.000"
)


def test_a_schema_held_by_another_table_is_dead_lettered_as_wrong_table(harness: Harness) -> None:
    tables = SchemaTables.of({"geozone": "refdata", "booking": "refdata-bookings"})
    records = [
        {**record("INSERT", "a", 1, name("in its table")), "eventSourceARN": REFDATA_STREAM},
        {**record("INSERT", "b", 2, name("written to bookings")), "eventSourceARN": BOOKINGS_STREAM},
        {**record("REMOVE", "c", 3), "eventSourceARN": BOOKINGS_STREAM},  # a delete there is no less wrong
        {
            **record("INSERT", "d", 4, name("unknown stream")),
            "eventSourceARN": "arn:aws:dynamodb:ca-central-1:1:table/x/stream/y",
        },
        record("INSERT", "e", 5, name("no stream named: not checked")),
    ]
    result = run(harness, records, schema_tables=tables)
    assert fates(result) == ["indexed", "dead-lettered", "dead-lettered", "dead-lettered", "indexed"]
    assert [letter.reason_kind for letter in harness.dlq.sent] == ["wrong-table"] * 3
    (b, _, d) = harness.dlq.bodies()
    assert b["reason"].startswith(
        "wrong-table: schema 'geozone' belongs to table 'refdata', but this record "
    )
    assert b["record"] == records[1] and b["documentId"] == "geozone::bcparks_1#b"
    assert "from table 'x'" in d["reason"]
    assert harness.opensearch.doc("b") is None and harness.opensearch.doc("c") is None
    assert result.batch_item_failures() == []


def test_without_an_assignment_or_for_unindexed_schemas_nothing_is_checked(harness: Harness) -> None:
    counter = record("INSERT", "counter", 1, pk="counter::geozone::bcparks_1")
    records = [{**record("INSERT", "a", 2, name("x")), "eventSourceARN": BOOKINGS_STREAM}]
    assert fates(run(harness, records)) == ["indexed"]
    tables = SchemaTables.of({"geozone": "refdata"})
    assert fates(run(harness, [{**counter, "eventSourceARN": BOOKINGS_STREAM}], schema_tables=tables)) == [
        "ignored"
    ]


@pytest.mark.parametrize(
    ("arn", "table"),
    [
        (REFDATA_STREAM, "refdata"),
        ("arn:aws:dynamodb:ca-central-1:123456789012:table/refdata", "refdata"),
        ("arn:aws:sqs:ca-central-1:123456789012:table/refdata", None),
        ("arn:aws:dynamodb:ca-central-1:123456789012:global-table/x", None),
        (None, None),
    ],
)
def test_the_table_of_a_stream_arn(arn: str | None, table: str | None) -> None:
    assert table_of_arn(arn) == table
