"""A batch mixing good records with every hostile input found in issue 18, through moto and the loopback server:
every good record is indexed in the first invocation, no invocation fails, and every poison record is in the DLQ
with its payload and a reason naming what is wrong with it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sync_harness import BUCKET, Pipeline, account

pytestmark = pytest.mark.integration

ZONE = "geozone::bcparks_1"


def nested_map(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"S": "leaf"}
    for _ in range(levels):
        value = {"M": {"m": value}}
    return value


def put_geometry(pipeline: Pipeline, key: str, body: bytes) -> dict[str, Any]:
    pipeline.s3.put_object(Bucket=BUCKET, Key=key, Body=body)
    return {"S": f"s3://{BUCKET}/{key}"}


def forged(record: dict[str, Any], image: dict[str, Any], sk: str) -> dict[str, Any]:
    """A copy of a real stream record whose image DynamoDB could never have sent (a hostile or broken producer)."""
    copy = json.loads(json.dumps(record))
    copy["eventID"] = f"forged-{sk}"
    copy["dynamodb"]["Keys"]["sk"] = {"S": sk}
    copy["dynamodb"]["NewImage"] = {**copy["dynamodb"]["Keys"], **image}
    copy["dynamodb"]["SequenceNumber"] = str(int(copy["dynamodb"]["SequenceNumber"]) + 1)
    return copy


POISON_KINDS = {
    "coordinate-401-digits": "invalid-geometry",
    "geojson-100000-deep": "invalid-geometry",
    "geometry-20-mb": "document-too-large",
    "map-21-deep": "document-limit",
    "fields-1200": "document-limit",
    "label-and-label-sub": "field-conflict",
    "name-dot": "invalid-field-name",
    "name-a..b": "invalid-field-name",
    "name-50001": "document-limit",
    "set-of-5": "malformed-record",
    "number-1_000": "malformed-record",
    "number-spaces": "malformed-record",
    "number-arabic-indic": "malformed-record",
    "number-1E400": "malformed-record",
}


def test_every_good_record_is_indexed_in_the_first_invocation_beside_every_poison(pipeline: Pipeline) -> None:
    for i in range(6):
        pipeline.put(ZONE, f"good{i}", name={"S": f"zone {i}"}, capacity={"N": str(i)})
    point = json.dumps({"type": "Point", "coordinates": [-123.1, 49.2]}).encode()
    pipeline.put(ZONE, "good-geometry", geometryUrl=put_geometry(pipeline, "geometries/good.geojson", point))
    poison_items: dict[str, dict[str, Any]] = {
        "coordinate-401-digits": {
            "geometryUrl": put_geometry(
                pipeline, "geometries/401.geojson", b'{"type":"Point","coordinates":[' + b"1" * 401 + b",0]}"
            )
        },
        "geojson-100000-deep": {
            "geometryUrl": put_geometry(pipeline, "geometries/deep.geojson", b"[" * 100_000 + b"]" * 100_000)
        },
        "geometry-20-mb": {
            "geometryUrl": put_geometry(
                pipeline, "geometries/20mb.geojson", b" " * (20 * 1024 * 1024) + point
            )
        },
        "map-21-deep": {"deep": nested_map(20)},  # DynamoDB nests 32 levels; the engine's limit is 20
        "fields-1200": {f"s{i}": {"S": "x"} for i in range(600)},
        "label-and-label-sub": {"label": {"S": "x"}, "label.sub": {"S": "y"}},
        "name-dot": {".": {"S": "x"}},
        "name-a..b": {"a..b": {"S": "x"}},
        "name-50001": {"n" * 50_001: {"S": "x"}},
    }
    for sk, attributes in poison_items.items():
        pipeline.put(ZONE, sk, **attributes)
    for i in range(6, 9):
        pipeline.put(ZONE, f"good{i}", name={"S": f"zone {i}"})
    records = pipeline.read_stream()
    template = records[0]
    records += [
        forged(template, {"tags": {"SS": 5}}, "set-of-5"),
        forged(template, {"n": {"N": "1_000"}}, "number-1_000"),
        forged(template, {"n": {"N": " 12 "}}, "number-spaces"),
        forged(template, {"n": {"N": "\u0661\u0662"}}, "number-arabic-indic"),
        forged(template, {"n": {"N": "1E400"}}, "number-1E400"),
    ]
    for position, record in enumerate(records):  # stream order: every forged record after the real ones
        record["dynamodb"]["SequenceNumber"] = str(10**20 + position)

    first = pipeline.invoke(records)

    assert first.response == {"batchItemFailures": []}
    by_sk = {r["dynamodb"]["Keys"]["sk"]["S"]: first.fates[r["eventID"]] for r in records}
    assert {sk for sk, fate in by_sk.items() if fate == "indexed"} == {
        *(f"good{i}" for i in range(9)),
        "good-geometry",
    }
    dlq = pipeline.dlq_messages()
    account(first.fates, records, dlq)
    kinds = {m["record"]["dynamodb"]["Keys"]["sk"]["S"]: m["reasonKind"] for m in dlq}
    assert kinds == POISON_KINDS
    reasons = {m["record"]["dynamodb"]["Keys"]["sk"]["S"]: m["reason"] for m in dlq}
    assert "index.mapping.depth.limit [20]" in reasons["map-21-deep"]
    assert "index.mapping.total_fields.limit [1000]" in reasons["fields-1200"]
    assert "(not read)" in reasons["geometry-20-mb"]
    visible = pipeline.visible_index()
    assert (
        f"{ZONE}#good-geometry" in visible and visible[f"{ZONE}#good-geometry"]["geometry"]["type"] == "Point"
    )


def test_a_document_the_check_misses_is_refused_by_the_engines_parser_and_bisected(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defense in depth: without the check before sending, a name over the parser's limit reaches the domain, which
    refuses the whole request; the sync bisects down to that document and indexes the others."""
    monkeypatch.setattr("search.documents.check_indexable", lambda doc, schema: None)
    for i in range(7):
        pipeline.put(ZONE, f"good{i}", name={"S": f"zone {i}"})
    pipeline.put(ZONE, "long-name", **{"n" * 50_001: {"S": "x"}})
    for i in range(7, 12):
        pipeline.put(ZONE, f"good{i}", name={"S": f"zone {i}"})
    records = pipeline.read_stream()

    first = pipeline.invoke(records)

    assert first.response == {"batchItemFailures": []}
    fates = {r["dynamodb"]["Keys"]["sk"]["S"]: first.fates[r["eventID"]] for r in records}
    assert fates.pop("long-name") == "dead-lettered" and set(fates.values()) == {"indexed"}
    (message,) = pipeline.dlq_messages()
    assert message["reasonKind"] == "document-limit" and "stream_constraints_exception" in message["reason"]
    assert first.summary["bulkRequests"] < 2 * 4 + 2  # a bisection of 13, not a request per record
