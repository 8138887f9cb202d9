"""The batch under hostile input (issue 18): no input fails the invocation or the batch, a request refused for one
document's content is bisected to it, and memory and time are bounded by design whatever the batch holds."""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

import pytest
from stream_sync import telemetry
from stream_sync.sync import DEFERRED, HttpReply, process_batch
from stream_sync_fakes import Harness, always, fates, name, record, redelivery, run, settings

BUCKET = "geometry-bucket"


def polygon(vertices: int, offset: float = 0.0) -> bytes:
    """A valid GeoJSON polygon of `vertices` positions, as the writers store it (compact)."""
    ring = [[-123.0 + offset + i * 1e-6, 49.0 + (i % 2) * 1e-6] for i in range(vertices)]
    ring.append(ring[0])
    return json.dumps({"type": "Polygon", "coordinates": [ring]}, separators=(",", ":")).encode()


def with_geometry(harness: Harness, sk: str, seq: int, body: bytes) -> dict[str, Any]:
    harness.geometry.objects[(BUCKET, f"geometries/{sk}.geojson")] = body
    return record("INSERT", sk, seq, {"geometryUrl": {"S": f"s3://{BUCKET}/geometries/{sk}.geojson"}})


# --- finding 1: one document refused by the request parser --------------------------------------------------------


def test_a_request_refused_for_one_documents_content_is_bisected_to_that_document(harness: Harness) -> None:
    """Before: every record of the request was retried five times, then the batch reported whole, until the
    mapping discarded it with its range only. Now the refusal is bisected and only the poison fails, with its
    payload."""
    harness.opensearch.unparseable = [b'"poison"']
    records = [record("INSERT", f"{i:03d}", 100 + i, name(f"n{i}")) for i in range(20)]
    records[13] = record("INSERT", "013", 113, name("poison"))

    result = run(harness, records)

    assert fates(result) == ["indexed"] * 13 + ["dead-lettered"] + ["indexed"] * 6
    assert result.batch_item_failures() == []
    (letter,) = harness.dlq.bodies()
    assert letter["record"] == records[13] and letter["reasonKind"] == "document-unparseable"
    assert "the domain refused the request holding only this document" in letter["reason"]
    assert "x_content_parse_exception" in letter["reason"]
    assert len(harness.opensearch.bodies) <= 2 * 5 + 1  # a bisection: about 2 log2(20) requests, not 20


def test_a_refusal_that_is_systemic_is_held_not_bisected(harness: Harness) -> None:
    harness.opensearch.replies = [HttpReply(403, {}, b'{"Message":"not authorized"}')] * 5
    result = run(harness, [record("INSERT", f"{i}", 10 + i, name("x")) for i in range(4)], max_attempts=2)
    assert fates(result) == ["retry"] * 4 and harness.dlq.sent == []
    assert len(harness.opensearch.bodies) == 2  # one request per attempt: never blamed on the documents


# --- finding 2: exceptions that escaped per-record handling ---------------------------------------------------------


def test_an_unexpected_error_in_one_record_is_that_records_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug or a shape no rule foresaw becomes the record's outcome with its payload, never the batch's."""
    from search import documents

    real = documents.build_document

    def faulty(change: Any, bucket: str | None) -> None:
        if change.sk == "bad":
            raise KeyError("something nobody expected")
        real(change, bucket)

    monkeypatch.setattr("stream_sync.sync.build_document", faulty)
    harness = Harness()
    result = run(harness, [record("INSERT", "bad", 1, name("x")), record("INSERT", "ok", 2, name("y"))])
    assert fates(result) == ["dead-lettered", "indexed"]
    (letter,) = harness.dlq.bodies()
    assert letter["reasonKind"] == "unprocessable-record" and "KeyError" in letter["reason"]


def test_a_record_no_json_encoder_can_write_is_still_dead_lettered(harness: Harness) -> None:
    forged = record("INSERT", "x", 1, {"tags": {"SS": 5}})
    node: Any = forged["dynamodb"]
    for _ in range(5000):  # nested beyond what json.dumps recurses
        node["nested"] = {}
        node = node["nested"]
    result = run(harness, [forged, record("INSERT", "ok", 2, name("y"))])
    assert fates(result) == ["dead-lettered", "indexed"]
    (letter,) = harness.dlq.bodies()
    assert "cannot be written as JSON" in letter["truncated"] and letter["sequenceNumber"] == "1"


# --- finding 3: memory and time bounded by design --------------------------------------------------------------------


def created(body: bytes) -> HttpReply:
    """A `_bulk` answer that every update was applied, without keeping (or parsing) the documents."""
    items = [{"update": {"status": 201, "result": "created"}}] * (body.count(b"\n") // 2)
    return HttpReply(200, {}, json.dumps({"errors": False, "items": items}).encode())


def test_an_object_larger_than_the_bulk_cap_is_refused_from_its_size_without_reading_it(
    harness: Harness,
) -> None:
    records = [
        with_geometry(harness, "big", 1, polygon(80_000)),
        with_geometry(harness, "small", 2, polygon(10)),
    ]

    result = run(harness, records, bulk_max_bytes=1024 * 1024)

    assert fates(result) == ["dead-lettered", "indexed"]
    assert harness.geometry.bodies_read == ["geometries/small.geojson"]  # the large body was never read
    (letter,) = harness.dlq.bodies()
    assert letter["reasonKind"] == "document-too-large" and letter["record"] == records[0]
    assert "more than BULK_MAX_BYTES=1048576 (not read)" in letter["reason"]


def test_geometry_is_fetched_parsed_and_encoded_one_object_at_a_time(harness: Harness) -> None:
    """Before, every object of the batch was fetched and parsed (about 9 times its size in Python objects) before
    the first was encoded. Now only one is ever parsed at once, so the peak stays near the encoded lines plus one
    parse, whatever the batch holds."""
    size = len(polygon(8_000))
    records = [with_geometry(harness, f"g{i:02d}", 1 + i, polygon(8_000, offset=i * 0.01)) for i in range(12)]
    ports = harness.ports()
    ports.bulk = created  # a domain that keeps nothing: the peak is the sync's own
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        result = process_batch(
            records, settings=settings(bulk_max_bytes=4 * size), ports=ports, remaining_seconds=always(60.0)
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert fates(result) == ["indexed"] * 12
    # Twelve lines (12 x size), one request body (4 x) and one parse (~9 x): about 28 x here; before, twelve
    # parses at once made it about 98 x size.
    assert peak < 45 * size, f"peak {peak} for objects of {size} bytes"


def test_lines_are_held_within_the_work_budget_and_sent_before_the_next_object(harness: Harness) -> None:
    body = polygon(2_000)
    records = [with_geometry(harness, f"g{i}", 1 + i, body) for i in range(10)]

    result = run(harness, records, work_budget_bytes=3 * len(body) + 2_000)

    assert fates(result) == ["indexed"] * 10 and result.batch_item_failures() == []
    assert len(harness.opensearch.bodies) == 4  # slices of three objects' lines, then the last
    assert all(len(sent) <= 3 * len(body) + 2_000 for sent in harness.opensearch.bodies)


def test_the_first_object_is_always_fetched_even_beyond_the_budget(harness: Harness) -> None:
    body = polygon(2_000)
    result = run(harness, [with_geometry(harness, "g", 1, body)], work_budget_bytes=1024)
    assert fates(result) == ["indexed"]


def test_when_the_time_for_fetching_is_spent_the_rest_waits_for_the_next_invocation(harness: Harness) -> None:
    records = [with_geometry(harness, f"g{i}", 1 + i, polygon(100)) for i in range(5)]
    clock = iter([60.0] + [1.5] * 20)  # the first fetch asks no clock; the second has time, the third has not

    result = run(harness, records, remaining=lambda: next(clock))

    assert fates(result)[:2] == ["indexed", "indexed"] and set(fates(result)[2:]) == {"retry"}
    assert {o.reason_kind for o in result.outcomes[2:]} == {DEFERRED}
    assert result.batch_item_failures() == [{"itemIdentifier": "3"}]
    emf = json.loads(telemetry.emf_line(result, settings(environment="dev"), now=0.0))
    assert (emf["RecordsDeferred"], emf["RecordsReportedForRetry"]) == (3, 0)  # by design, not a failure


def test_a_transient_fetch_failure_holds_the_rest_of_the_batch(harness: Harness) -> None:
    records = [
        record("INSERT", "a", 1, name("a")),
        with_geometry(harness, "g", 2, polygon(10)),
        with_geometry(harness, "h", 3, polygon(10)),
        record("INSERT", "b", 4, name("b")),
    ]
    harness.geometry.broken = True
    result = run(harness, records)
    assert fates(result) == ["indexed", "retry", "retry", "retry"]
    assert [o.reason_kind for o in result.outcomes[1:]] == ["geometry-fetch-failed", DEFERRED, DEFERRED]
    assert result.batch_item_failures() == [{"itemIdentifier": "2"}]


def test_no_request_after_the_first_is_sent_without_room_for_it(harness: Harness) -> None:
    records = [record("INSERT", f"{i}", 1 + i, {"blob": {"S": "x" * 600}}) for i in range(6)]
    clock = iter([0.5] * 20)  # the first request is always sent; no time for another
    result = run(harness, records, remaining=lambda: next(clock), bulk_max_bytes=2048)
    assert len(harness.opensearch.bodies) == 1
    sent = fates(result).count("indexed")
    assert 0 < sent < 6 and set(fates(result)[sent:]) == {"retry"}
    assert {o.reason_kind for o in result.outcomes[sent:]} == {DEFERRED}


def test_redelivery_from_the_reported_record_drains_a_batch_larger_than_any_invocation(
    harness: Harness,
) -> None:
    """Lambda redelivers from the reported sequence number: each invocation makes progress, none fails."""
    records = [with_geometry(harness, f"g{i}", 1 + i, polygon(500)) for i in range(12)]
    invocations = 0
    pending = records
    while pending:
        invocations += 1
        ticks = iter([60.0] * 12 + [0.0] * 200)  # four objects' worth of time per invocation
        result = run(harness, pending, remaining=lambda ticks=ticks: next(ticks))
        if not (failures := result.batch_item_failures()):
            break
        resumed = redelivery(pending, failures)
        assert len(resumed) < len(pending), "every invocation makes progress"
        pending = resumed
        assert invocations < 12
    assert {harness.opensearch.doc(f"g{i}") is not None for i in range(12)} == {True}
