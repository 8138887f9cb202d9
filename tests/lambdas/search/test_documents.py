"""Record -> document transform on real-format DynamoDB stream events (as Lambda delivers them)."""

from __future__ import annotations

import base64
import json
from decimal import Decimal
from functools import partial
from typing import Any

import pytest
from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from hypothesis import given, settings
from hypothesis import strategies as st
from refdata.exact_numbers import apply_exact_numbers
from search import documents
from search.documents import Change, RecordError

from tests.lambdas.stream_sync.stream_sync_fakes import PK, SK, record

STREAM_ARN = "arn:aws:dynamodb:ca-central-1:123456789012:table/refdata/stream/2026-11-30T00:00:00.000"
BUCKET = "geometry-bucket"
# A record exactly as the Lambda event for a DynamoDB stream carries it.
stream_record = partial(record, arn=STREAM_ARN)


def transform(record: dict[str, Any], bucket: str | None = BUCKET) -> Change:
    change = documents.parse_change(record)
    documents.build_document(change, bucket)
    return change


def bulk_lines(change: Change) -> list[Any]:
    text = documents.encode_update(change)
    assert text.endswith("\n") and text.count("\n") == 2
    return [json.loads(line) for line in text.splitlines()]


def sent_document(attributes: dict[str, Any]) -> dict[str, Any]:
    """The document the bulk update of an INSERT of `attributes` sends to the stored script."""
    doc: dict[str, Any] = bulk_lines(transform(stream_record("INSERT", new=attributes)))[1]["script"][
        "params"
    ]["doc"]
    return doc


ALL_TYPES = {
    "name": {"S": "Golden Ears"},
    "count": {"N": "42"},
    "ratio": {"N": "0.25"},
    "big": {"N": "12345678901234567890123456789012345678"},
    "precise": {"N": "3.1415926535897932384626433832795028"},
    "tiny": {"N": "1E-130"},
    "blob": {"B": "AAECAw=="},
    "open": {"BOOL": True},
    "closed": {"BOOL": False},
    "nothing": {"NULL": True},
    "tags": {"SS": ["trail", "lake", "camp"]},
    "sizes": {"NS": ["10", "2.5", "-1"]},
    "blobs": {"BS": ["Aw==", "AQ=="]},
    # A list's elements are one field to the engine: values of one kind (strings, numbers or booleans), or objects,
    # never two (refdata.limits; tests/lambdas/refdata/test_refdata_limits_engine.py asks the engine).
    "nested": {
        "M": {
            "list": {"L": [{"S": "a"}, {"S": "b"}, {"L": []}]},
            "numbers": {"L": [{"N": "1"}, {"L": [{"N": "2.5"}]}]},
            "maps": {"L": [{"M": {"deep": {"BOOL": True}}}]},
        }
    },
    "empty": {"M": {}},
}


def test_every_attribute_type_becomes_plain_json() -> None:
    doc = transform(stream_record("INSERT", new=ALL_TYPES)).doc
    assert doc is not None
    assert doc["name"] == "Golden Ears"
    assert doc["count"] == 42 and type(doc["count"]) is int
    assert doc["ratio"] == 0.25
    assert doc["big"] == 12345678901234567890123456789012345678
    assert doc["precise"] == Decimal("3.1415926535897932384626433832795028")
    assert doc["tiny"] == 1e-130  # the float whose shortest repr is this number
    assert doc["blob"] == "AAECAw=="
    assert doc["open"] is True and doc["closed"] is False and doc["nothing"] is None
    assert doc["tags"] == ["camp", "lake", "trail"]
    assert doc["sizes"] == [-1, 2.5, 10]
    assert doc["blobs"] == ["AQ==", "Aw=="]
    assert doc["nested"] == {"list": ["a", "b", []], "numbers": [1, [2.5]], "maps": [{"deep": True}]}
    assert doc["empty"] == {}


def test_binary_from_boto3_bytes_is_base64_encoded() -> None:
    assert documents.from_dynamodb({"B": b"\x00\x01"}) == base64.b64encode(b"\x00\x01").decode()
    assert documents.from_dynamodb({"BS": [b"\x02", b"\x01"]}) == ["AQ==", "Ag=="]


def test_decimals_no_double_holds_are_sent_as_doubles_with_their_exact_text_beside() -> None:
    doc = sent_document(ALL_TYPES)
    # Jackson parses a fraction into a double: send the nearest double, and the exact text where it differs.
    assert doc["precise"] == 3.141592653589793
    assert doc["exactNumbers"] == {"/precise": "3.1415926535897932384626433832795028"}
    # Integers stay exact at any size (Jackson reads them as int, long or BigInteger); short decimals are
    # doubles that read back as the same decimal.
    assert doc["big"] == 12345678901234567890123456789012345678
    assert doc["tiny"] == 1e-130 and doc["ratio"] == 0.25


def test_exact_numbers_are_keyed_by_json_pointer() -> None:
    attributes = {
        "rates": {"L": [{"M": {"value": {"N": "0.12345678901234567890"}}}, {"M": {"value": {"N": "1.5"}}}]},
        "a/b~c": {"N": "2.000000000000000000001"},
        "sizes": {"NS": ["7", "0.30000000000000000001"]},
    }
    doc = sent_document(attributes)

    assert doc["exactNumbers"] == {
        "/rates/0/value": "0.12345678901234567890",
        "/a~1b~0c": "2.000000000000000000001",
        "/sizes/0": "0.30000000000000000001",  # sets are sorted: the pointer names the sorted position
    }
    assert doc["rates"] == [{"value": 0.12345678901234568}, {"value": 1.5}]
    assert doc["sizes"] == [0.3, 7]  # the nearest double


@pytest.mark.parametrize(
    "attribute",
    [
        {"exactNumbers": {"M": {}}},
        {"stream_seq": {"S": "9" * 40}},
        {"tombstone": {"BOOL": True}},
        {"deletedAt": {"N": "1"}},
        {"schema": {"S": "booking"}},
    ],
    ids=["exactNumbers", "stream_seq", "tombstone", "deletedAt", "another schema"],
)
def test_an_item_with_a_field_the_sync_writes_is_a_permanent_failure(attribute: dict[str, Any]) -> None:
    with pytest.raises(documents.RecordError) as refused:
        transform(stream_record("INSERT", new=attribute))

    assert refused.value.kind == "reserved-attribute"
    assert repr(next(iter(attribute))) in refused.value.detail


def test_an_item_may_carry_its_own_schema_name() -> None:
    assert sent_document({"schema": {"S": "geozone"}})["schema"] == "geozone"


def test_documents_without_inexact_decimals_are_sent_unchanged() -> None:
    assert "exactNumbers" not in sent_document({"n": {"N": "12.5"}, "i": {"N": "7"}})


def test_short_decimals_are_plain_floats() -> None:
    assert documents.from_dynamodb({"N": "-123.456789"}) == -123.456789
    assert documents.from_dynamodb({"N": "49.2827291234567891"}) == Decimal("49.2827291234567891")
    assert documents.from_dynamodb({"N": "0.1000000000000000000"}) == 0.1  # same value as the float


def test_modify_replaces_the_document_so_removed_attributes_disappear() -> None:
    record = stream_record(
        "MODIFY", new={"name": {"S": "new"}}, old={"name": {"S": "old"}, "gone": {"S": "x"}}
    )
    doc = transform(record).doc
    assert doc is not None and "gone" not in doc and doc["name"] == "new"


def test_remove_becomes_a_tombstone_with_keys_and_schema() -> None:
    change = transform(stream_record("REMOVE", old={"name": {"S": "old"}}))
    assert change.tombstone and not change.expired
    assert change.doc == {"pk": PK, "sk": SK, "schema": "geozone", "deletedAt": 1_764_531_000}
    _action, update = bulk_lines(change)
    assert update["script"]["params"]["tombstone"] is True


@pytest.mark.parametrize(
    ("principal", "expired"), [("dynamodb.amazonaws.com", True), ("someone.amazonaws.com", False)]
)
def test_ttl_expiry_is_a_remove_by_the_dynamodb_service(principal: str, expired: bool) -> None:
    record = stream_record("REMOVE", old={"expiresAt": {"N": "1764531000"}})
    record["userIdentity"] = {"type": "Service", "principalId": principal}
    change = transform(record)
    assert change.tombstone and change.expired == expired


def test_bulk_action_is_a_scripted_upsert_through_the_stored_script() -> None:
    change = transform(stream_record("INSERT", new={"name": {"S": "x"}}, seq="17"))
    action, update = bulk_lines(change)
    # require_alias: a missing write alias is an error, never a new concrete index of that name.
    assert action == {"update": {"_index": "geozone-write", "_id": f"{PK}#{SK}", "require_alias": True}}
    assert update["scripted_upsert"] is True and update["upsert"] == {}
    assert update["script"]["id"] == "refdata-sync-apply"
    params = update["script"]["params"]
    assert params["seq"] == "17".zfill(40) and len(params["seq"]) == 40
    assert params["tombstone"] is False
    assert params["doc"] == {"pk": PK, "sk": SK, "name": "x", "schema": "geozone"}


def test_a_write_to_a_concrete_index_can_leave_require_alias_out() -> None:
    change = transform(stream_record("INSERT", new={"name": {"S": "x"}}))
    change.index = "scratch-index"

    action = json.loads(documents.encode_update(change, require_alias=False).splitlines()[0])

    assert action == {"update": {"_index": "scratch-index", "_id": f"{PK}#{SK}"}}


def test_bulk_body_is_ascii_so_length_is_bytes_and_unicode_round_trips() -> None:
    change = transform(stream_record("INSERT", new={"name": {"S": 'Tŝilhqot\'in "Nen" 🏔'}}))
    text = documents.encode_update(change)
    assert text.isascii()
    assert json.loads(text.splitlines()[1])["script"]["params"]["doc"]["name"] == 'Tŝilhqot\'in "Nen" 🏔'


def without(record: dict[str, Any], field: str) -> dict[str, Any]:
    del record["dynamodb"][field]
    return record


def with_sk(record: dict[str, Any], sk: dict[str, Any]) -> dict[str, Any]:
    record["dynamodb"]["Keys"]["sk"] = sk
    return record


MALFORMED = "malformed-record"


@pytest.mark.parametrize(
    ("record", "kind", "why"),
    [
        ({"eventName": "INSERT"}, MALFORMED, ""),
        (stream_record("UPSERT"), MALFORMED, ""),
        (
            {**stream_record("INSERT"), "dynamodb": {"Keys": {"pk": {"S": PK}}, "SequenceNumber": "1"}},
            MALFORMED,
            "",
        ),
        (stream_record("INSERT", seq="12a"), MALFORMED, ""),
        (stream_record("INSERT", seq="1" * 41), MALFORMED, ""),
        (stream_record("INSERT", pk="nosuchschema::x"), "unknown-schema", ""),
        (stream_record("INSERT", pk="geozone::a#b"), MALFORMED, ""),
        (without(stream_record("INSERT"), "NewImage"), MALFORMED, "without NewImage"),
        (with_sk(stream_record("INSERT"), {"N": "7"}), MALFORMED, "key attribute 'sk'"),
        # a remove without its creation time (the tombstone's deletedAt)
        (
            without(stream_record("REMOVE", old={"name": {"S": "o"}}), "ApproximateCreationDateTime"),
            MALFORMED,
            "ApproximateCreationDateTime",
        ),
    ],
)
def test_malformed_records_are_permanent_failures(record: dict[str, Any], kind: str, why: str) -> None:
    with pytest.raises(RecordError, match=why or None) as raised:
        transform(record)
    assert raised.value.kind == kind


@pytest.mark.parametrize(
    "value",
    [
        {"X": "1"},
        {"N": "abc"},
        {"N": "NaN"},
        {"N": "Infinity"},
        {"S": "a", "N": "1"},
        "S",
        {"BOOL": "yes"},
        # Shapes that used to escape as TypeError (issue 18, finding 2): values of the wrong JSON type.
        {"SS": 5},
        {"SS": [1, 2]},
        {"SS": []},
        {"NS": 5},
        {"BS": 5},
        {"L": 5},
        {"L": {"S": "x"}},
        {"M": 5},
        {"M": ["x"]},
        {"S": 5},
        {"N": 12},
        {"NULL": False},
        {"L": [{"SS": None}]},
        {"M": {"inner": {"NS": [["1"]]}}},
        # Number texts DynamoDB never sends, which Python would read as numbers (issue 18, finding 6).
        {"N": "1_000"},
        {"N": " 12 "},
        {"N": "\u0661\u0662"},
        {"N": "\u0661"},
        {"N": "1E400"},
        {"NS": ["1", "2_0"]},
        {"L": [{"N": "+5"}]},
        {"M": {"n": {"N": "123456789012345678901234567890123456789"}}},
    ],
)
def test_malformed_values_are_permanent_failures(value: Any) -> None:
    with pytest.raises(RecordError) as raised:
        transform(stream_record("INSERT", new={"bad": value}))
    assert raised.value.kind == "malformed-record"


def test_non_indexable_schema_is_flagged_not_failed() -> None:
    change = documents.parse_change(stream_record("INSERT", pk="counter::geozone::bcparks_1", sk="counter"))
    assert change.indexable is False and change.schema == "counter"


SQUARE = [[[-123.0, 49.0], [-122.0, 49.0], [-122.0, 50.0], [-123.0, 50.0], [-123.0, 49.0]]]


def dynamo(value: Any) -> Any:
    return TypeSerializer().serialize(json.loads(json.dumps(value), parse_float=Decimal))


def test_inline_geometry_and_location_are_kept() -> None:
    new = {
        "geometry": dynamo({"type": "Polygon", "coordinates": SQUARE}),
        "location": dynamo({"lat": 49.5, "lon": -122.5}),
    }
    doc = transform(stream_record("INSERT", new=new)).doc
    assert doc is not None
    assert doc["geometry"] == {"type": "Polygon", "coordinates": SQUARE}
    assert doc["location"] == {"lat": 49.5, "lon": -122.5}


@pytest.mark.parametrize(
    "geometry",
    [
        {"type": "Polygon", "coordinates": [SQUARE[0][:-1]]},  # ring not closed
        {"type": "Polygon", "coordinates": [[[0, 0], [1, 1], [0, 0]]]},  # ring too short
        {"type": "Point", "coordinates": [200, 10]},  # longitude out of range
        {"type": "Point", "coordinates": ["a", 10]},
        {"type": "LineString", "coordinates": [[0, 0]]},
        {"type": "Circle", "coordinates": [0, 0]},
        {"type": "MultiPolygon", "coordinates": SQUARE},  # one nesting level short
        {"coordinates": [0, 0]},
    ],
)
def test_invalid_inline_geometry_is_a_permanent_failure(geometry: dict[str, Any]) -> None:
    with pytest.raises(RecordError) as raised:
        transform(stream_record("INSERT", new={"geometry": dynamo(geometry)}))
    assert raised.value.kind == "invalid-geometry"


@pytest.mark.parametrize("location", [{"lat": 91, "lon": 0}, {"lat": "x", "lon": 0}, [1, 2]])
def test_invalid_location_is_a_permanent_failure(location: Any) -> None:
    with pytest.raises(RecordError, match="location"):
        transform(stream_record("INSERT", new={"location": dynamo(location)}))


def test_valid_geometries_of_every_type_pass() -> None:
    for geometry in [
        {"type": "Point", "coordinates": [-123.1, 49.2, 10]},
        {"type": "MultiPoint", "coordinates": [[0, 0], [1, 1]]},
        {"type": "LineString", "coordinates": [[0, 0], [1, 1]]},
        {"type": "MultiLineString", "coordinates": [[[0, 0], [1, 1]]]},
        {"type": "Polygon", "coordinates": SQUARE},
        {"type": "MultiPolygon", "coordinates": [SQUARE]},
        {"type": "GeometryCollection", "geometries": [{"type": "Point", "coordinates": [0, 0]}]},
    ]:
        documents.validate_geometry(geometry)


def test_geometry_url_marks_the_change_for_dereferencing() -> None:
    change = transform(stream_record("INSERT", new={"geometryUrl": {"S": f"s3://{BUCKET}/geozone/7.json"}}))
    assert change.geometry_url == f"s3://{BUCKET}/geozone/7.json"
    documents.attach_geometry(
        change,
        json.dumps({"type": "Feature", "geometry": {"type": "Polygon", "coordinates": SQUARE}}).encode(),
    )
    assert change.doc is not None and change.doc["geometry"]["coordinates"] == SQUARE


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("s3://another-bucket/x.json", "geometry-bucket-not-allowed"),
        ("https://example.com/x.json", "invalid-geometry"),
        (f"s3://{BUCKET}/", "invalid-geometry"),
    ],
)
def test_geometry_url_outside_the_geometry_bucket_is_rejected(url: str, kind: str) -> None:
    with pytest.raises(RecordError) as raised:
        transform(stream_record("INSERT", new={"geometryUrl": {"S": url}}))
    assert raised.value.kind == kind


def test_feature_collection_becomes_a_geometry_collection() -> None:
    raw = json.dumps(
        {
            "type": "FeatureCollection",
            "features": [{"type": "Feature", "geometry": {"type": "Point", "coordinates": [1, 2]}}],
        }
    ).encode()
    assert documents.geometry_from_geojson(raw) == {
        "type": "GeometryCollection",
        "geometries": [{"type": "Point", "coordinates": [1, 2]}],
    }


def test_creation_time_is_read_from_epoch_seconds_or_a_datetime() -> None:
    from datetime import UTC, datetime

    record = stream_record("INSERT")
    assert documents.parse_change(record).created_at == 1764531000.0
    record["dynamodb"]["ApproximateCreationDateTime"] = datetime(2026, 11, 30, tzinfo=UTC)
    assert documents.parse_change(record).created_at == datetime(2026, 11, 30, tzinfo=UTC).timestamp()


# Property: the fast decoder agrees with boto3's TypeDeserializer, and the document the engine holds (doubles,
# integers exact) with its exactNumbers applied gives back every digit.
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.text(max_size=20)
    | st.integers(min_value=-(10**38) + 1, max_value=10**38 - 1)
    | st.decimals(allow_nan=False, allow_infinity=False, places=None)
    .filter(lambda d: d == 0 or Decimal("1E-129") < abs(d) < Decimal("1E+125"))
    .map(lambda d: Decimal(f"{d:.20g}")),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_decoder_matches_boto3_and_exact_numbers_keep_every_digit(value: Any) -> None:
    typed = TypeSerializer().serialize(value)
    expected = TypeDeserializer().deserialize(typed)
    decoded = documents.from_dynamodb(typed)
    # Doubles as the engine writes them: their shortest decimal text.
    held = json.loads(documents.encode_document({"v": decoded}), parse_float=Decimal, parse_int=Decimal)

    def normalise(item: Any) -> Any:
        if isinstance(item, dict):
            return {key: normalise(member) for key, member in item.items()}
        if isinstance(item, list):
            return [normalise(member) for member in item]
        if isinstance(item, bool) or item is None or isinstance(item, str):
            return item
        return Decimal(item)

    assert normalise(apply_exact_numbers(held)["v"]) == normalise(expected)


def test_a_repair_label_keeps_its_suffix_after_the_padded_digits_and_sorts_between() -> None:
    stored = documents.padded_sequence("12345")
    repaired = documents.padded_sequence(stored + "r")
    newer = documents.padded_sequence("12346")

    assert repaired == stored + "r"
    assert stored < repaired < newer


@pytest.mark.parametrize("label", ["r", "12a4", "1r2", "-1", "1" * 41 + "r"])
def test_labels_other_than_digits_with_a_repair_suffix_are_malformed(label: str) -> None:
    with pytest.raises(documents.RecordError):
        documents.padded_sequence(label)


def test_a_forged_image_nested_beyond_pythons_recursion_is_malformed_not_an_error() -> None:
    with pytest.raises(RecordError, match="nests too deeply") as raised:
        transform(stream_record("INSERT", new={"deep": _maps(5000)}))
    assert raised.value.kind == "malformed-record"


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b'{"type":"Point","coordinates":[' + b"1" * 401 + b",0]}", "not finite"),
        (b"[" * 100_000 + b"]" * 100_000, "nests too deeply"),
        (b'{"type":"Point","coordinates":[NaN,0]}', "NaN is not a JSON number"),
        (b'{"type":"Point","coordinates":[Infinity,0]}', "Infinity is not a JSON number"),
        (b"\xff\xfe{", "not JSON"),
        (b"{not json", "not JSON"),
        (
            json.dumps({"type": "Polygon", "coordinates": [SQUARE[0][:-1]]}).encode(),
            "must end where it starts",
        ),
    ],
    ids=[
        "401-digit coordinate",
        "nested 100,000 deep",
        "NaN",
        "Infinity",
        "not UTF-8",
        "not JSON",
        "open ring",
    ],
)
def test_a_geojson_file_that_is_not_a_valid_geometry_is_an_invalid_geometry(raw: bytes, why: str) -> None:
    """The first five used to escape as OverflowError or RecursionError and fail the whole invocation (issue 18,
    finding 2)."""
    with pytest.raises(RecordError, match=why) as raised:
        documents.geometry_from_geojson(raw)
    assert raised.value.kind == "invalid-geometry"


def test_only_finite_numbers_are_encoded() -> None:
    """The engine's parser refuses `Infinity` and `NaN`, and the whole request with them (finding 1)."""
    for doc in ({"n": float("inf")}, {"n": float("nan")}, {"n": Decimal("1E400")}, {"l": [float("-inf")]}):
        with pytest.raises(RecordError, match="cannot be sent") as raised:
            documents.encode_document(doc)
        assert raised.value.kind == "malformed-record"
    with pytest.raises(ValueError):
        documents.encode_json({"n": float("inf")})


@pytest.mark.parametrize(
    ("attributes", "kind"),
    [
        ({"label": {"S": "x"}, "label.sub": {"S": "y"}}, "field-conflict"),
        ({".": {"S": "x"}}, "invalid-field-name"),
        ({"a..b": {"S": "x"}}, "invalid-field-name"),
        ({"n" * 50_001: {"S": "x"}}, "document-limit"),
        ({f"s{i}": {"S": "x"} for i in range(600)}, "document-limit"),
    ],
    ids=["label beside label.sub", "dot", "a..b", "long name", "1,200 string fields"],
)
def test_items_the_engine_can_never_index_are_refused_naming_the_limit(
    attributes: dict[str, Any], kind: str
) -> None:
    """DynamoDB accepts each of these; OpenSearch refuses them (issue 18, finding 5): refdata.limits, against the
    schema's index template."""
    with pytest.raises(RecordError) as raised:
        transform(stream_record("INSERT", new=attributes))
    assert raised.value.kind == kind


def test_maps_nest_in_a_document_at_most_to_the_engines_depth_limit() -> None:
    """DynamoDB nests 32 levels; the engine's index.mapping.depth.limit is 20, the document itself included."""
    transform(stream_record("INSERT", new={"deep": _maps(19)}))
    with pytest.raises(RecordError, match=r"index.mapping.depth.limit \[20\]") as raised:
        transform(stream_record("INSERT", new={"deep": _maps(20)}))
    assert raised.value.kind == "document-limit"


def _maps(levels: int) -> dict[str, Any]:
    """A DynamoDB map attribute of `levels` maps, one inside the other (the document is one more)."""
    value: dict[str, Any] = {"S": "leaf"}
    for _ in range(levels):
        value = {"M": {"m": value}}
    return value
