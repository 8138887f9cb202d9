"""Fault matrix: for every fault, every input record's fate is counted (indexed, deleted, stale-skipped,
coalesced, ignored, reported for retry, or in the DLQ with its payload) and, once Lambda's redelivery
and the DLQ redrive have run, the index equals DynamoDB."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from refdata.keys import parse_pk
from search.indices import APPLY_SCRIPT_ID, APPLY_SCRIPT_SOURCE
from sync_harness import (
    ADMIN_KEY,
    BOOKINGS,
    BUCKET,
    TABLE,
    Invocation,
    Pipeline,
    account,
    bootstrap,
    signed_as,
    unused_port,
)

from tests.support.opensearch_server import ROUTE_BULK

pytestmark = pytest.mark.integration

ZONE = "geozone::bcparks_1"
SCHEMA = parse_pk(ZONE)[0].name
SQUARE = {
    "type": "Polygon",
    "coordinates": [[[-123.0, 49.0], [-122.0, 49.0], [-122.0, 50.0], [-123.0, 50.0], [-123.0, 49.0]]],
}
OPEN_RING = {"type": "Polygon", "coordinates": [SQUARE["coordinates"][0][:-1]]}


def doc_id(sk: str) -> str:
    return f"{ZONE}#{sk}"


def write_mix(pipeline: Pipeline, count: int = 12) -> list[dict[str, Any]]:
    """INSERTs, MODIFYs and REMOVEs over `count` keys, read back from the stream."""
    for i in range(count):
        pipeline.put(ZONE, f"{i:010d}", name={"S": f"zone {i}"}, capacity={"N": str(i)})
    for i in range(0, count, 3):
        pipeline.put(ZONE, f"{i:010d}", name={"S": f"zone {i} v2"})
    for i in range(1, count, 4):
        pipeline.delete(ZONE, f"{i:010d}")
    return pipeline.read_stream()


def converges(pipeline: Pipeline, records: list[dict[str, Any]]) -> list[Invocation]:
    """Lambda's redelivery leaves no record unaccounted for or reported, and the index equals DynamoDB."""
    _, invocations = pipeline.converge(records)
    pipeline.assert_index_equals_dynamodb()
    return invocations


def redrive_all(pipeline: Pipeline) -> None:
    """Every DLQ message is redriven and deleted, and the index equals DynamoDB."""
    reports = pipeline.redrive()
    assert all(report.deleted for report in reports), [r.error for r in reports if not r.deleted]
    assert pipeline.dlq_messages() == []
    pipeline.assert_index_equals_dynamodb()


def dead_lettered(pipeline: Pipeline, records: list[dict[str, Any]], fates: dict[str, int]) -> dict[str, Any]:
    """Delivered, the records end with `fates`, and the one DLQ message."""
    final, _ = pipeline.deliver(records)
    assert account(final, records, pipeline.dlq_messages()) == fates
    (message,) = pipeline.dlq_messages()
    return message


def test_429_storm_is_absorbed_by_backoff_honouring_retry_after(pipeline: Pipeline) -> None:
    records = write_mix(pipeline)
    pipeline.server.fail_next(ROUTE_BULK, 429, times=3, retry_after=2)
    fates, _ = pipeline.converge(records)
    assert set(fates) <= {"indexed", "deleted", "coalesced"}
    assert pipeline.sleeps[:3] == [2.0, 2.0, 2.0]  # Retry-After honoured (recorded, not slept)
    assert pipeline.server.count(ROUTE_BULK) == 4
    pipeline.assert_index_equals_dynamodb()


def test_429_storm_longer_than_the_retry_budget_is_reported_then_redelivered(pipeline: Pipeline) -> None:
    records = write_mix(pipeline)
    pipeline.server.fail_next(ROUTE_BULK, 429, times=4, retry_after=1)
    first = pipeline.invoke(records)
    assert set(first.fates.values()) == {"retry", "coalesced"}
    unfinished = [r["dynamodb"]["SequenceNumber"] for r in records if first.fates[r["eventID"]] == "retry"]
    assert first.response["batchItemFailures"] == [{"itemIdentifier": min(unfinished, key=int)}]
    assert first.lines[-1]["RecordsReportedForRetry"] > 0
    converges(pipeline, records)


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_5xx_is_retried(pipeline: Pipeline, status: int) -> None:
    records = write_mix(pipeline)
    pipeline.server.fail_next(ROUTE_BULK, status, times=2)
    assert len(converges(pipeline, records)) == 1


def test_timeouts_that_applied_anyway_turn_into_stale_skips(pipeline: Pipeline) -> None:
    records = write_mix(pipeline, count=4)
    pipeline.server.lose_response_next(ROUTE_BULK)  # applied by the domain, its answer never reaches the sync
    fates, _ = pipeline.converge(records)
    assert fates["stale-skipped"] > 0
    pipeline.assert_index_equals_dynamodb()


def test_connection_refused_is_reported_until_the_domain_is_back(pipeline: Pipeline) -> None:
    records = write_mix(pipeline)
    pipeline.configure(OPENSEARCH_ENDPOINT=f"http://127.0.0.1:{unused_port()}")
    first = pipeline.invoke(records)
    assert set(first.fates.values()) == {"retry", "coalesced"} and pipeline.dlq_messages() == []
    pipeline.configure()  # the domain is reachable again
    converges(pipeline, records)


def test_dropped_connections_are_retried(pipeline: Pipeline) -> None:
    records = write_mix(pipeline)
    pipeline.server.drop_next(ROUTE_BULK, times=2)
    converges(pipeline, records)


def test_malformed_records_go_to_the_dlq_and_never_block_the_shard(pipeline: Pipeline) -> None:
    records = write_mix(pipeline)
    bad_type = next(r for r in records if r["eventName"] == "INSERT")
    bad_type["dynamodb"]["NewImage"]["capacity"] = {"Q": "7"}
    bad_event = next(r for r in reversed(records) if r["eventName"] == "MODIFY")
    bad_event["eventName"] = "UPSERT"
    garbage = {"eventID": "garbage-1", "eventName": "INSERT", "dynamodb": {"SequenceNumber": "1"}}
    batch = [*records, garbage]
    final, invocations = pipeline.deliver(batch)
    fates = account(final, batch, pipeline.dlq_messages())
    assert len(invocations) == 1
    assert final["garbage-1"] == "dead-lettered" and final[bad_event["eventID"]] == "dead-lettered"
    assert fates["dead-lettered"] >= 2
    kinds = {m["_attributes"]["reasonKind"]["StringValue"] for m in pipeline.dlq_messages()}
    assert kinds == {"malformed-record"}
    # The items themselves are fine in DynamoDB: the redrive re-reads them. The garbage record names no key.
    reports = pipeline.redrive()
    assert sorted(r.deleted for r in reports) == [False] + [True] * (len(reports) - 1)
    pipeline.assert_index_equals_dynamodb()


def test_a_record_of_a_schema_another_table_holds_is_dead_lettered_as_wrong_table(pipeline: Pipeline) -> None:
    booking, sk = "booking::bcparks_1::2", "2026-07-01::0b9a3c1e-6f1d-4c8e-9a51-3c2f0e4d5a6b"
    pipeline.put(booking, sk, table=TABLE, startDate={"S": "2026-07-01"})  # written to the wrong table
    pipeline.put(ZONE, "0000000001", name={"S": "fine"})
    records = pipeline.read_stream(TABLE)
    final, invocations = pipeline.deliver(records)
    assert account(final, records, pipeline.dlq_messages()) == {"dead-lettered": 1, "indexed": 1}
    assert invocations[0].response == {"batchItemFailures": []}  # permanent: never holds the shard
    (message,) = pipeline.dlq_messages()
    assert message["reasonKind"] == "wrong-table" and message["schema"] == "booking"
    assert message["_attributes"]["reasonKind"]["StringValue"] == "wrong-table"
    assert (
        f"belongs to table '{BOOKINGS}'" in message["reason"] and f"from table '{TABLE}'" in message["reason"]
    )
    assert message["record"]["eventSourceARN"] == pipeline.stream_arns[TABLE]  # the payload, as streamed
    assert pipeline.server.document("booking", f"{booking}#{sk}") is None

    # The fix: move the item to its own table, whose stream indexes it. (While it stays in the wrong table, a
    # redrive refuses it again: tests/lambdas/stream_sync/test_stream_sync_redrive.py.)
    pipeline.dynamodb.delete_item(TableName=TABLE, Key={"pk": {"S": booking}, "sk": {"S": sk}})
    pipeline.put(booking, sk, startDate={"S": "2026-07-01"})
    pipeline.deliver(pipeline.read_stream(BOOKINGS))
    (report,) = pipeline.redrive()  # gone from the wrong table: nothing left to refuse or apply
    assert report.deleted and report.fates == {"ignored": 1}
    assert pipeline.server.document("booking", f"{booking}#{sk}") is not None
    pipeline.assert_index_equals_dynamodb()


def test_missing_geometry_object_is_dead_lettered_then_redriven_once_uploaded(pipeline: Pipeline) -> None:
    pipeline.put(ZONE, "0000000001", geometryUrl={"S": f"s3://{BUCKET}/zones/1.json"})
    pipeline.put(ZONE, "0000000002", name={"S": "fine"})
    message = dead_lettered(pipeline, pipeline.read_stream(), {"dead-lettered": 1, "indexed": 1})
    assert (message["reasonKind"], message["documentId"]) == ("missing-geometry-object", doc_id("0000000001"))
    pipeline.s3.put_object(Bucket=BUCKET, Key="zones/1.json", Body=json.dumps(SQUARE).encode())
    redrive_all(pipeline)


def test_invalid_geometry_is_dead_lettered_and_a_later_fix_wins(pipeline: Pipeline) -> None:
    pipeline.s3.put_object(Bucket=BUCKET, Key="zones/bad.json", Body=json.dumps(OPEN_RING).encode())
    pipeline.put(ZONE, "0000000001", geometryUrl={"S": f"s3://{BUCKET}/zones/bad.json"})
    pipeline.put(
        ZONE, "0000000002", geometry={"M": {"type": {"S": "Point"}, "coordinates": {"L": [{"N": "500"}]}}}
    )
    records = pipeline.read_stream()
    final, _ = pipeline.deliver(records)
    assert account(final, records, pipeline.dlq_messages()) == {"dead-lettered": 2}
    assert {m["reasonKind"] for m in pipeline.dlq_messages()} == {"invalid-geometry"}
    # Owners fix the items; the fixes stream through; the old messages redrive as no-ops afterwards.
    pipeline.s3.put_object(Bucket=BUCKET, Key="zones/good.json", Body=json.dumps(SQUARE).encode())
    pipeline.put(ZONE, "0000000001", geometryUrl={"S": f"s3://{BUCKET}/zones/good.json"})
    pipeline.put(
        ZONE,
        "0000000002",
        geometry={"M": {"type": {"S": "Point"}, "coordinates": {"L": [{"N": "1"}, {"N": "2"}]}}},
    )
    pipeline.deliver(pipeline.read_stream())
    reports = pipeline.redrive()
    assert all(r.deleted and r.fates == {"stale-skipped": 1} for r in reports)
    pipeline.assert_index_equals_dynamodb()


def test_oversize_document_is_dead_lettered_and_the_rest_split_under_the_cap(pipeline: Pipeline) -> None:
    pipeline.configure(BULK_MAX_BYTES="4096")
    for i in range(12):
        pipeline.put(ZONE, f"{i:010d}", blurb={"S": "x" * 600})
    pipeline.put(ZONE, "big", blurb={"S": "y" * 6000})
    message = dead_lettered(pipeline, pipeline.read_stream(), {"indexed": 12, "dead-lettered": 1})
    assert message["reasonKind"] == "document-too-large"
    bodies = [r.body for r in pipeline.server.requests_to(ROUTE_BULK)]
    assert len(bodies) >= 3 and all(len(body) <= 4096 for body in bodies)  # 12 x 600 bytes: split in three
    pipeline.put(ZONE, "big", blurb={"S": "y" * 600})  # the owner trims the item
    pipeline.deliver(pipeline.read_stream())
    redrive_all(pipeline)


def test_a_geometry_the_engine_cannot_index_is_dead_lettered_with_the_engines_reason(
    pipeline: Pipeline,
) -> None:
    # Well-formed GeoJSON that passes the sync's own check, but a ring that crosses itself: the engine cannot
    # tessellate it and refuses the document.
    bowtie = [[0, 0], [2, 2], [2, 0], [0, 2], [0, 0]]
    ring = {"L": [{"L": [{"N": str(x)}, {"N": str(y)}]} for x, y in bowtie]}
    pipeline.put(ZONE, "0000000001", geometry={"M": {"type": {"S": "Polygon"}, "coordinates": {"L": [ring]}}})
    pipeline.put(ZONE, "0000000002", name={"S": "fine"})

    message = dead_lettered(pipeline, pipeline.read_stream(), {"dead-lettered": 1, "indexed": 1})

    assert (message["documentId"], message["reasonKind"]) == (doc_id("0000000001"), "mapping-rejected")
    assert (
        "mapper_parsing_exception: failed to parse field [geometry] of type [geo_shape]" in message["reason"]
    )
    assert "Unable to Tessellate shape" in message["reason"]  # the engine's own words
    assert pipeline.server.document("geozone", doc_id("0000000001")) is None


def test_mapping_rejection_is_dead_lettered_and_redriven_after_the_mapping_fix(pipeline: Pipeline) -> None:
    records = write_mix(pipeline)
    rejected = doc_id("0000000002")
    pipeline.server.fail_item(rejected, status=400, error_type="mapper_parsing_exception", times=1)
    fates, (_,) = pipeline.converge(records)  # permanent: one invocation, nothing reported for retry
    assert fates["dead-lettered"] == 1
    (message,) = pipeline.dlq_messages()
    assert (message["documentId"], message["schema"]) == (rejected, SCHEMA)
    assert message["reasonKind"] == message["_attributes"]["reasonKind"]["StringValue"] == "mapping-rejected"
    assert "mapper_parsing_exception" in message["reason"]
    redrive_all(pipeline)


def test_version_conflicts_and_per_item_429_are_retried(pipeline: Pipeline) -> None:
    records = write_mix(pipeline)
    pipeline.server.fail_item(
        doc_id("0000000000"), status=409, error_type="version_conflict_engine_exception"
    )
    pipeline.server.fail_item(
        doc_id("0000000002"), status=429, error_type="rejected_execution_exception", times=2
    )
    (invocation,) = converges(pipeline, records)
    assert invocation.lines[-1]["DocumentsRetried"] == 3


def test_dead_lettered_record_delivered_again_long_after_newer_changes(pipeline: Pipeline) -> None:
    pipeline.put(ZONE, "0000000001", name={"S": "v1"})
    first = pipeline.read_stream()
    pipeline.server.fail_item(doc_id("0000000001"), status=400, times=1)
    pipeline.deliver(first)
    assert len(pipeline.dlq_messages()) == 1
    pipeline.put(ZONE, "0000000001", name={"S": "v2"})
    pipeline.delete(ZONE, "0000000001")
    pipeline.put(ZONE, "0000000001", name={"S": "v3"})
    pipeline.deliver(pipeline.read_stream())
    pipeline.assert_index_equals_dynamodb()

    final, _ = pipeline.deliver(first)  # the old record itself, replayed late
    assert list(final.values()) == ["stale-skipped"]
    reports = pipeline.redrive()  # the DLQ redrive, long after
    assert [r.fates for r in reports] == [{"stale-skipped": 1}] and reports[0].deleted
    pipeline.assert_index_equals_dynamodb()


def test_redrive_before_the_newer_changes_arrive_still_converges(pipeline: Pipeline) -> None:
    pipeline.put(ZONE, "0000000001", name={"S": "v1"})
    first = pipeline.read_stream()
    pipeline.server.fail_item(doc_id("0000000001"), status=400, times=1)
    pipeline.deliver(first)
    pipeline.delete(ZONE, "0000000001")  # DynamoDB moves on; its record has not been synced yet
    later = pipeline.read_stream()
    assert [r.fates for r in pipeline.redrive()] == [{"deleted": 1}]  # current state (gone) under the old seq
    pipeline.assert_index_equals_dynamodb()
    final, _ = pipeline.deliver(later)
    assert list(final.values()) == ["deleted"]
    pipeline.assert_index_equals_dynamodb()


def test_event_source_mapping_failure_message_is_redriven_from_the_stream_range(pipeline: Pipeline) -> None:
    records = write_mix(pipeline, count=6)
    stream = pipeline.stream_arns[TABLE]
    shard = pipeline.streams.describe_stream(StreamArn=stream)["StreamDescription"]["Shards"][0]
    failure = {
        "requestContext": {"condition": "RetryAttemptsExhausted", "approximateInvokeCount": 3},
        "responseContext": {"statusCode": 200, "functionError": "Unhandled"},
        "version": "1.0",
        "timestamp": "2026-11-30T20:00:00.000Z",
        "DDBStreamBatchInfo": {
            "shardId": shard["ShardId"],
            "startSequenceNumber": records[2]["dynamodb"]["SequenceNumber"],
            "endSequenceNumber": records[-1]["dynamodb"]["SequenceNumber"],
            "batchSize": len(records) - 2,
            "streamArn": stream,
        },
    }
    pipeline.sqs.send_message(QueueUrl=pipeline.dlq_url, MessageBody=json.dumps(failure))
    pipeline.deliver(records[:2])
    (report,) = pipeline.redrive()
    assert report.deleted and report.records == len(records) - 2
    pipeline.assert_index_equals_dynamodb()


def test_dlq_outage_falls_back_to_retrying_the_record(pipeline: Pipeline) -> None:
    records = write_mix(pipeline)
    pipeline.configure(DLQ_URL=pipeline.dlq_url + "-missing")
    pipeline.server.fail_item(doc_id("0000000002"), status=400, times=1)
    first = pipeline.invoke(records)
    failed = next(r for r in records if r["eventID"] in first.fates and first.fates[r["eventID"]] == "retry")
    assert first.response["batchItemFailures"] == [{"itemIdentifier": failed["dynamodb"]["SequenceNumber"]}]
    assert first.lines[-1]["DeadLetterSendFailures"] == 1
    pipeline.configure()
    converges(pipeline, records)


def test_records_near_max_age_go_to_the_dlq_with_payload_instead_of_retrying(pipeline: Pipeline) -> None:
    records = write_mix(pipeline, count=4)
    for record in records[:3]:
        record["dynamodb"]["ApproximateCreationDateTime"] = time.time() - 3500
    pipeline.configure(MAX_RECORD_AGE_SECONDS="3600", RECORD_AGE_MARGIN_SECONDS="300")
    pipeline.server.fail_next(ROUTE_BULK, 503, times=4)
    first = pipeline.invoke(records)
    old_fates = {first.fates[r["eventID"]] for r in records[:3]}
    assert old_fates <= {"dead-lettered", "coalesced"} and "dead-lettered" in old_fates
    kinds = {m["reasonKind"] for m in pipeline.dlq_messages()}
    assert kinds == {"transient-exhausted"}
    pipeline.converge(records)
    redrive_all(pipeline)


def test_redrive_cli_reports_and_empties_the_queue(
    pipeline: Pipeline, capsys: pytest.CaptureFixture[str]
) -> None:
    from stream_sync import redrive

    records = write_mix(pipeline, count=4)
    pipeline.server.fail_item(doc_id("0000000000"), status=400, times=1)
    pipeline.deliver(records)
    assert redrive.main(["--wait-seconds", "0", "--dry-run"]) == 1  # SCHEMA_TABLES says where items live
    assert len(pipeline.dlq_messages()) == 1
    assert redrive.main(["--table", "refdata", "--wait-seconds", "0"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[-1]["redriven"] == 1 and lines[-1]["leftInQueue"] == 0
    assert pipeline.dlq_messages() == []
    pipeline.assert_index_equals_dynamodb()


# --- the engine refuses: each error shape a real domain answers, through the loopback server -----------------


def as_admin(pipeline: Pipeline, method: str, path: str, body: Any = None) -> None:
    transport = signed_as(pipeline.server, ADMIN_KEY)
    response = transport.request(method, path, json.dumps(body).encode() if body is not None else None)
    assert response.ok, response.body


def reason_kinds(invocation: Invocation) -> set[str]:
    return {line["reasonKind"] for line in invocation.lines if line.get("message") == "record outcome"}


def held_until_fixed(
    pipeline: Pipeline, records: list[dict[str, Any]], kind: str, fix: Callable[[], Any]
) -> None:
    """Every record is held for retry (`kind`), none dead-lettered, until `fix`; then they converge."""
    first = pipeline.invoke(records)
    assert reason_kinds(first) == {kind} and pipeline.dlq_messages() == []
    fix()
    converges(pipeline, records)


def test_a_missing_stored_script_holds_every_record_until_a_deployment_puts_it_back(
    pipeline: Pipeline,
) -> None:
    records = write_mix(pipeline, count=4)
    old = next(
        r for r in records if r["dynamodb"]["Keys"]["sk"]["S"] == "0000000002"
    )  # its key's only record
    old["dynamodb"]["ApproximateCreationDateTime"] = time.time() - 3500
    pipeline.configure(MAX_RECORD_AGE_SECONDS="3600", RECORD_AGE_MARGIN_SECONDS="300")
    as_admin(pipeline, "DELETE", f"_scripts/{APPLY_SCRIPT_ID}")

    first = pipeline.invoke(records)

    # Systemic, so transient: held (retried, reported) rather than dead-lettered, up to the record-age bound.
    assert reason_kinds(first) == {"script-unavailable", "transient-exhausted"}
    assert first.fates[old["eventID"]] == "dead-lettered"
    assert set(first.fates.values()) - {"dead-lettered"} <= {"retry", "coalesced"}
    # Every record the script kept from being applied is counted: the alarm is ScriptErrors >= 1.
    assert first.lines[-1]["ScriptErrors"] == sum(fate != "coalesced" for fate in first.fates.values())
    (aged,) = pipeline.dlq_messages()
    assert aged["reasonKind"] == "transient-exhausted" and "script-unavailable" in aged["reason"]
    assert "unable to find script [refdata-sync-apply] in cluster state" in aged["reason"]
    bootstrap(pipeline.server)  # the next deployment puts the script back
    pipeline.converge(records)
    redrive_all(pipeline)


def test_a_stored_script_that_does_not_compile_holds_every_record(pipeline: Pipeline) -> None:
    records = write_mix(pipeline, count=4)
    edited = {"script": {"lang": "painless", "source": "ctx._source.putAll(params.doc) +"}}
    as_admin(pipeline, "PUT", f"_scripts/{APPLY_SCRIPT_ID}", edited)  # stored without a context: not compiled

    held_until_fixed(pipeline, records, "script-unavailable", lambda: bootstrap(pipeline.server))


def test_a_script_failing_on_one_document_dead_letters_that_record_only(pipeline: Pipeline) -> None:
    records = write_mix(pipeline, count=4)
    failing = doc_id("0000000000")
    # A scripted upsert's ctx has no _id: the document's own keys say which one it is.
    throws = "if (params.doc.get('sk') == '0000000000') { throw new IllegalStateException('planted'); }\n"
    edited = {"script": {"lang": "painless", "source": throws + APPLY_SCRIPT_SOURCE}}
    as_admin(pipeline, "PUT", f"_scripts/{APPLY_SCRIPT_ID}/update", edited)

    fates, invocations = pipeline.converge(records)

    assert fates["dead-lettered"] == 1
    assert [i.lines[-1]["ScriptErrors"] for i in invocations] == [1]
    (message,) = pipeline.dlq_messages()
    assert (message["documentId"], message["reasonKind"]) == (failing, "script-failed")
    assert "script_exception: runtime error" in message["reason"]
    bootstrap(pipeline.server)  # the script as the product stores it
    redrive_all(pipeline)


def test_a_missing_write_alias_holds_records_and_never_creates_an_index(pipeline: Pipeline) -> None:
    records = write_mix(pipeline, count=4)
    alias = {"index": "geozone-v1", "alias": "geozone-write"}
    as_admin(pipeline, "POST", "_aliases", {"actions": [{"remove": alias}]})

    def restore() -> None:
        assert "geozone-write" not in pipeline.server.index_names()
        as_admin(pipeline, "POST", "_aliases", {"actions": [{"add": {**alias, "is_write_index": True}}]})

    held_until_fixed(pipeline, records, "write-alias-missing", restore)


@pytest.mark.parametrize("block", ["write", "read_only_allow_delete"])
def test_a_write_blocked_index_holds_records_until_the_block_is_lifted(
    pipeline: Pipeline, block: str
) -> None:
    records = write_mix(pipeline, count=4)
    as_admin(pipeline, "PUT", "geozone-v1/_settings", {f"index.blocks.{block}": True})

    lift = {f"index.blocks.{block}": None}
    held_until_fixed(
        pipeline, records, "index-blocked", lambda: as_admin(pipeline, "PUT", "geozone-v1/_settings", lift)
    )


def test_a_value_conflicting_with_the_mapping_is_dead_lettered_with_the_engines_reason(
    pipeline: Pipeline,
) -> None:
    pipeline.put(ZONE, "0000000001", capacity={"N": "5"})
    pipeline.deliver(pipeline.read_stream())  # capacity is now mapped as a double
    pipeline.put(ZONE, "0000000002", capacity={"S": "many"})

    message = dead_lettered(pipeline, pipeline.read_stream(), {"dead-lettered": 1})

    assert message["reasonKind"] == "mapping-rejected"
    assert "failed to parse field [capacity] of type [double]" in message["reason"]
    assert 'number_format_exception: For input string: "many"' in message["reason"]
    pipeline.put(ZONE, "0000000002", capacity={"N": "6"})  # the owner fixes the item
    pipeline.deliver(pipeline.read_stream())
    redrive_all(pipeline)


def test_a_sync_role_without_its_mapping_is_refused_and_its_records_held(fgac_pipeline: Pipeline) -> None:
    pipeline = fgac_pipeline
    records = write_mix(pipeline, count=4)
    as_admin(
        pipeline, "PUT", "_plugins/_security/api/rolesmapping/refdata_stream_sync", {"backend_roles": []}
    )

    # A missing permission is a deployment fault, like a missing script: held, not dead-lettered, until the next
    # deployment maps the role again.
    held_until_fixed(pipeline, records, "forbidden", lambda: bootstrap(pipeline.server))
