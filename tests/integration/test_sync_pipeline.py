"""Real stream records through the handler into the loopback OpenSearch: the happy path and the ordering rule."""

from __future__ import annotations

import json

import pytest
from sync_harness import ADMIN_KEY, BOOKINGS, BUCKET, READER_KEY, TABLE, Pipeline, signed_as

from tests.support.engine_node import EngineNode
from tests.support.opensearch_server import ROUTE_BULK

pytestmark = pytest.mark.integration

ZONE = "geozone::bcparks_1"
DAY = "productDate::bcparks_1::dayuse::1"
BOOKING = "booking::bcparks_1::2"
BOOKING_SK = "2026-07-01::0b9a3c1e-6f1d-4c8e-9a51-3c2f0e4d5a6b"
SQUARE = {
    "type": "Polygon",
    "coordinates": [[[-123.0, 49.0], [-122.0, 49.0], [-122.0, 50.0], [-123.0, 50.0], [-123.0, 49.0]]],
}
EVERY_TYPE = {
    "name": {"S": "Golden Ears"},
    "capacity": {"N": "120"},
    "area": {"N": "555.25"},
    "precise": {"N": "3.1415926535897932384626433832795028"},
    "huge": {"N": "12345678901234567890123456789"},
    "open": {"BOOL": True},
    "note": {"NULL": True},
    "logo": {"B": b"\x89PNG"},
    "tags": {"SS": ["lake", "camp"]},
    "sizes": {"NS": ["1", "2.5"]},
    "thumbs": {"BS": [b"\x01", b"\x02"]},
    "contact": {"M": {"email": {"S": "ranger@example.com"}, "phones": {"L": [{"S": "555"}, {"S": "556"}]}}},
    "location": {"M": {"lat": {"N": "49.35"}, "lon": {"N": "-122.45"}}},
}


def test_mixed_batch_lands_in_one_bulk_request_and_index_equals_dynamodb(pipeline: Pipeline) -> None:
    pipeline.s3.put_object(Bucket=BUCKET, Key="zones/3.json", Body=json.dumps(SQUARE).encode())
    pipeline.put(ZONE, "0000000001", **EVERY_TYPE)
    pipeline.put(ZONE, "0000000002", name={"S": "first"}, extra={"S": "goes away"})
    pipeline.put(ZONE, "0000000002", name={"S": "second"})  # MODIFY drops `extra`
    pipeline.put(ZONE, "0000000003", geometryUrl={"S": f"s3://{BUCKET}/zones/3.json"})
    pipeline.put(ZONE, "0000000004", name={"S": "doomed"})
    pipeline.delete(ZONE, "0000000004")
    pipeline.put(DAY, "1::2025-12-31", inline={"M": {"geometry": {"S": "not geometry, just a nested attr"}}})
    pipeline.put("counter::geozone::bcparks_1", "counter", value={"N": "4"})  # not indexable
    records = pipeline.read_stream()
    assert [r["eventName"] for r in records].count("REMOVE") == 1

    fates, invocations = pipeline.converge(records)

    assert pipeline.server.count(ROUTE_BULK) == 1
    assert fates == {"indexed": 4, "coalesced": 2, "deleted": 1, "ignored": 1}
    pipeline.assert_index_equals_dynamodb()
    doc = pipeline.server.document("geozone", f"{ZONE}#0000000003")
    assert doc is not None and doc["geometry"] == SQUARE
    removed = pipeline.server.document("geozone", f"{ZONE}#0000000004")
    assert removed is not None and removed["tombstone"] is True  # a tombstone, never a real delete
    emf = invocations[0].lines[-1]
    assert emf["DocumentsIndexed"] == 4 and emf["DocumentsDeleted"] == 1 and emf["BulkRequests"] == 1
    assert emf["ReplicationLagSeconds"] >= 0


def test_two_tables_feed_one_domain_each_through_its_own_stream(pipeline: Pipeline) -> None:
    pipeline.put(ZONE, "0000000001", name={"S": "Golden Ears"})
    pipeline.put(BOOKING, BOOKING_SK, startDate={"S": "2026-07-01"}, guestName={"S": "A. Camper"})
    pipeline.put(BOOKING, BOOKING_SK, startDate={"S": "2026-07-02"})
    reference, bookings = pipeline.read_stream(TABLE), pipeline.read_stream(BOOKINGS)
    assert {r["dynamodb"]["Keys"]["pk"]["S"] for r in reference} == {ZONE}
    assert {r["dynamodb"]["Keys"]["pk"]["S"] for r in bookings} == {BOOKING}

    fates, (invocation,) = pipeline.converge(bookings)  # each table's mapping invokes the one function
    assert fates == {"indexed": 1, "coalesced": 1} and invocation.summary["table"] == BOOKINGS
    fates, (invocation,) = pipeline.converge(reference)
    assert fates == {"indexed": 1} and invocation.summary["table"] == TABLE

    booking = pipeline.server.document("booking", f"{BOOKING}#{BOOKING_SK}")
    assert booking is not None and booking["startDate"] == "2026-07-02"
    assert pipeline.server.document("geozone", f"{ZONE}#0000000001") is not None
    assert pipeline.dlq_messages() == []
    pipeline.assert_index_equals_dynamodb()


def test_numbers_are_held_as_the_engine_holds_them_with_the_exact_text_beside(
    pipeline: Pipeline, engine_as_left: EngineNode
) -> None:
    pipeline.put(ZONE, "0000000001", **EVERY_TYPE)
    records = pipeline.read_stream()

    final, _ = pipeline.deliver(records)

    assert list(final.values()) == ["indexed"]
    doc = pipeline.server.document("geozone", f"{ZONE}#0000000001")
    assert doc is not None
    # Script params are parsed into Java numbers: fractions become doubles, integers stay exact at any size.
    assert doc["precise"] == 3.141592653589793
    assert doc["exactNumbers"] == {"/precise": "3.1415926535897932384626433832795028"}
    assert doc["huge"] == 12345678901234567890123456789 and doc["capacity"] == 120 and doc["area"] == 555.25
    # Indexed as doubles: a 29-digit integer does not fit the default dynamic `long`, fractions would be 32-bit.
    properties = engine_as_left.request("GET", "/geozone-v1/_mapping").body["geozone-v1"]["mappings"][
        "properties"
    ]
    numbers = ("capacity", "area", "precise", "huge")
    assert {name: properties[name]["type"] for name in numbers} == dict.fromkeys(numbers, "double")
    assert properties["exactNumbers"] == {"type": "object", "enabled": False}


def test_a_list_mixing_strings_and_numbers_is_dead_lettered_with_its_reason_before_the_engine_refuses_it(
    pipeline: Pipeline,
) -> None:
    """DynamoDB lists may mix types; the engine refuses a dynamically mapped array that mixes a string and a number
    (each value asks for its own field type: tests/lambdas/refdata/test_refdata_limits_engine.py). The sync's check
    says so before the bulk request (the writer refuses such an item before any call), and the record is not lost:
    it reaches the dead-letter queue with the reason."""
    pipeline.put(ZONE, "0000000001", phones={"L": [{"S": "555"}, {"N": "1"}]})

    final, _ = pipeline.deliver(pipeline.read_stream())

    assert list(final.values()) == ["dead-lettered"]
    (message,) = pipeline.dlq_messages()
    assert message["reasonKind"] == "field-conflict"
    assert "[phones] is given a text value and a double value" in message["reason"]
    assert not any(
        "555" in request.body.decode(errors="replace") for request in pipeline.server.requests_to("_bulk")
    )


def test_ttl_expiry_writes_a_tombstone(pipeline: Pipeline) -> None:
    pipeline.put(ZONE, "0000000001", expiresAt={"N": "1764531000"})
    pipeline.deliver(pipeline.read_stream())
    pipeline.delete(ZONE, "0000000001")
    (remove,) = pipeline.read_stream()
    remove["userIdentity"] = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}  # as TTL deletes
    final, invocations = pipeline.deliver([remove])
    assert final == {remove["eventID"]: "deleted"}
    assert invocations[0].lines[-1]["DocumentsExpired"] == 1
    pipeline.assert_index_equals_dynamodb()


def test_an_older_batch_replayed_after_newer_ones_changes_nothing(pipeline: Pipeline) -> None:
    pipeline.put(ZONE, "0000000001", name={"S": "v1"})
    pipeline.put(ZONE, "0000000002", name={"S": "v1"})
    old_batch = pipeline.read_stream()
    pipeline.deliver(old_batch)
    pipeline.put(ZONE, "0000000001", name={"S": "v2"})
    pipeline.delete(ZONE, "0000000002")
    pipeline.deliver(pipeline.read_stream())

    final, _ = pipeline.deliver(old_batch)  # e.g. a retried batch arriving late

    assert set(final.values()) == {"stale-skipped"}
    pipeline.assert_index_equals_dynamodb()  # the deleted item did not come back


def test_records_split_out_of_order_across_invocations_still_converge(pipeline: Pipeline) -> None:
    for version in range(5):
        pipeline.put(ZONE, "0000000001", name={"S": f"v{version}"})
        pipeline.put(ZONE, f"000000010{version}", name={"S": "x"})
    pipeline.delete(ZONE, "0000000001")
    records = pipeline.read_stream()
    # Bisected halves and retries can arrive in any order; only the newest change per key may stand.
    for piece in (records[6:], records[:3], records[3:6], records[:6], records):
        pipeline.deliver(piece)
    pipeline.assert_index_equals_dynamodb()


def test_the_sync_role_indexes_a_document_that_introduces_a_new_field(fgac_pipeline: Pipeline) -> None:
    pipeline = fgac_pipeline
    pipeline.put(ZONE, "0000000001", name={"S": "first"})
    pipeline.deliver(pipeline.read_stream())
    pipeline.put(ZONE, "0000000002", name={"S": "second"}, openingHours={"M": {"mon": {"S": "8-20"}}})
    records = pipeline.read_stream()

    final, _ = pipeline.deliver(records)

    assert list(final.values()) == ["indexed"] and pipeline.dlq_messages() == []
    # The engine extended the mapping as the sync's user: indices:admin/mapping/put on geozone-v1.
    assert pipeline.server.engine is not None
    mapping = pipeline.server.engine.request("GET", "/geozone-v1/_mapping").body["geozone-v1"]["mappings"]
    assert "openingHours" in mapping["properties"]
    pipeline.assert_index_equals_dynamodb()


def test_a_configured_reader_sees_no_tombstone_hidden_item_or_internal_field_by_any_name_and_cannot_write(
    fgac_pipeline: Pipeline,
) -> None:
    pipeline = fgac_pipeline
    pipeline.put(ZONE, "0000000001", name={"S": "open"}, adminNotes={"S": "staff only"})
    pipeline.put(ZONE, "0000000002", name={"S": "closed"}, hidden={"BOOL": True})
    # An internal number a double cannot hold: its exact text in exactNumbers is internal too.
    pipeline.put(
        ZONE, "0000000003", name={"S": "exact"}, adminNotes={"N": "3.14159265358979323846264338327950288"}
    )
    pipeline.put(ZONE, "0000000004", name={"S": "gone"})
    pipeline.deliver(pipeline.read_stream())
    pipeline.delete(ZONE, "0000000004")
    pipeline.deliver(pipeline.read_stream())
    admin, reader = signed_as(pipeline.server, ADMIN_KEY), signed_as(pipeline.server, READER_KEY)
    assert admin.request("POST", "geozone-v1/_refresh").status == 200  # searchable, as a reader waits
    visible = [f"{ZONE}#0000000001", f"{ZONE}#0000000003"]
    everything = json.dumps({"query": {"match_all": {}}, "sort": [{"sk": "asc"}]}).encode()
    internal = json.dumps({"query": {"exists": {"field": "adminNotes"}}}).encode()

    for name in ("geozone", "geozone-v1", "geozone-v*", "geozone-write"):  # the alias, the index, any name
        found = reader.request("POST", f"{name}/_search", everything).json()["hits"]["hits"]
        counted = reader.request("POST", f"{name}/_count", b"{}").json()["count"]
        assert [hit["_id"] for hit in found] == visible, name
        assert counted == 2, name
        assert all("adminNotes" not in hit["_source"] for hit in found), name
        assert found[1]["_source"].get("exactNumbers", {}) == {}, name
        assert reader.request("POST", f"{name}/_search", internal).json()["hits"]["hits"] == [], name
    for doc_id, status in [("0000000001", 200), ("0000000002", 404), ("0000000004", 404)]:
        got = reader.request("GET", f"geozone-v1/_doc/{ZONE}%23{doc_id}")
        assert got.status == status, doc_id
        assert "adminNotes" not in got.json().get("_source", {})
    # The admin (and the ops tools) still see every document, tombstone and internal fields included.
    assert admin.request("POST", "geozone-v1/_count", b"{}").json()["count"] == 4
    assert admin.request("POST", "geozone-v1/_search", internal).json()["hits"]["total"]["value"] == 2

    write = (
        b'{"update":{"_index":"geozone-write","_id":"x","require_alias":true}}\n'
        b'{"doc":{"name":"x"},"doc_as_upsert":true}\n'
    )
    indices_before = pipeline.server.index_names()
    refused = [
        reader.request("POST", "_bulk", write, {"Content-Type": "application/x-ndjson"}),
        reader.request("PUT", "geozone-v9", b"{}"),
        reader.request("DELETE", "geozone-v1"),
        reader.request(
            "POST", "_aliases", json.dumps({"actions": [{"remove_index": {"index": "geozone-v1"}}]}).encode()
        ),
        reader.request("POST", "booking/_search", everything),  # a schema the role does not name
    ]
    assert [(r.status, r.json()["error"]["type"]) for r in refused] == [(403, "security_exception")] * 5
    assert pipeline.server.index_names() == indices_before  # the reader created and deleted nothing
    assert pipeline.server.documents("geozone-v1").keys() == {
        f"{ZONE}#{n}" for n in ("0000000001", "0000000002", "0000000003", "0000000004")
    }
