"""Turn DynamoDB stream records into OpenSearch documents and `_bulk` update actions (pure, no I/O).

Everything here is on the hot path of the stream sync (about a thousand records per invocation), so the
DynamoDB-JSON decoder is a hand-written type dispatch rather than boto3's `TypeDeserializer`, and every
document is encoded by one call of the C JSON encoder.

Numbers are sent as the engine will hold them. OpenSearch parses script `params` into Java numbers (Jackson:
integers exact at any size, fractions as doubles) and writes the script-rebuilt `_source` from those, so:
- an integer is sent exactly (a Python int) and stays exact in `_source`;
- a decimal whose shortest double representation names the same value is sent as that double;
- any other decimal is sent as its nearest double, and its exact DynamoDB text goes into the top-level object
  `exactNumbers` (mapped `enabled: false`), keyed by the RFC 6901 JSON Pointer of its place (`/price`,
  `/rates/0/value`). `_source` with `exactNumbers` applied (`refdata.exact_numbers.apply_exact_numbers`) is the
  item, digit for digit.
The decoder marks such decimals as `Decimal`; `engine_document` turns them into doubles plus `exactNumbers`.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from json.encoder import encode_basestring_ascii
from typing import Any, Final

from refdata import geometry as geometry_rules
from refdata import limits
from refdata.exact_numbers import EXACT_NUMBERS_FIELD, pointer_token
from refdata.indexnames import write_alias
from refdata.keys import document_id
from refdata.mappings import DELETED_AT_FIELD, mapped_fields
from refdata.numbers import NUMBER_TEXT, NumberError, parse_number_text
from refdata.registry import schema_of_pk

from search import indices

SEQUENCE_DIGITS: Final = indices.STREAM_SEQ_WIDTH
REPAIR_SUFFIX: Final = "r"
TTL_PRINCIPAL: Final = "dynamodb.amazonaws.com"
GEOMETRY_URL_ATTRIBUTE: Final = "geometryUrl"
GEOMETRY_ATTRIBUTE: Final = "geometry"
LOCATION_ATTRIBUTE: Final = "location"
SCHEMA_FIELD: Final = "schema"


class RecordError(Exception):
    """A record that can never be indexed as it is (a permanent failure): it belongs in the DLQ."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail


# --------------------------------------------------------------------------- DynamoDB JSON -> plain JSON


def _number(text: Any) -> int | float | Decimal:
    """A DynamoDB number's text (its grammar and range: `refdata.numbers`) as an int, as the double that names
    the same value, or else as the exact Decimal."""
    if (
        type(text) is str
        and len(text) <= 16
        and "e" not in text
        and "E" not in text
        and NUMBER_TEXT.fullmatch(text)
    ):
        # Sixteen characters hold at most 15 significant digits, well inside DynamoDB's range: an int, or a float
        # whose shortest repr is the same value, without a Decimal.
        return float(text) if "." in text else int(text)
    try:
        exact = parse_number_text(text)
    except NumberError as error:
        raise RecordError("malformed-record", str(error)) from None
    if type(exact) is int:
        return exact
    approx = float(exact)  # finite: DynamoDB's range ends at 9.99E+125
    if Decimal(repr(approx)) == exact:
        return approx
    return exact


def _binary(value: Any) -> str:
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, str):
        return value  # a Lambda event already carries binary values as base64 text
    raise RecordError("malformed-record", f"not a binary value: {type(value).__name__}")


def _members(inner: Any, what: str) -> list[Any]:
    """A set's members: a non-empty JSON array (DynamoDB has no empty sets)."""
    if type(inner) is not list or not inner:
        raise RecordError("malformed-record", f"{what} is not a non-empty list: {inner!r:.100}")
    return inner


def _strings(inner: Any) -> list[str]:
    members = _members(inner, "SS")
    if not all(type(member) is str for member in members):
        raise RecordError("malformed-record", f"SS holds a value that is not a string: {inner!r:.100}")
    return sorted(members)


def from_dynamodb(value: Mapping[str, Any]) -> Any:
    """One DynamoDB-JSON value (`{"S": "x"}`, `{"M": {...}}`, ...) as plain JSON-able Python."""
    try:
        ((tag, inner),) = value.items()
    except (AttributeError, TypeError, ValueError):
        raise RecordError("malformed-record", f"not a DynamoDB value: {value!r:.200}") from None
    if tag == "S":
        if type(inner) is str:
            return inner
    elif tag == "N":
        return _number(inner)
    elif tag == "M":
        return _map(inner)
    elif tag == "L":
        return _list(inner)
    elif tag == "BOOL":
        if inner is True or inner is False:
            return inner
    elif tag == "NULL":
        if inner is True:
            return None
    elif tag == "SS":
        return _strings(inner)
    elif tag == "NS":
        return sorted(_number(member) for member in _members(inner, "NS"))
    elif tag == "B":
        return _binary(inner)
    elif tag == "BS":
        return sorted(_binary(member) for member in _members(inner, "BS"))
    raise RecordError("malformed-record", f"unsupported DynamoDB value: {value!r:.200}")


def _map(members: Mapping[str, Any]) -> dict[str, Any]:
    # The hot loop: strings, numbers, maps and lists skip the generic call.
    plain: dict[str, Any] = {}
    try:
        for name, value in members.items():
            ((tag, inner),) = value.items()
            if tag == "S" and type(inner) is str:
                plain[name] = inner
            elif tag == "N" and type(inner) is str:
                # Plain ASCII digits within DynamoDB's 38 are an int; `isdigit` alone admits other scripts' digits.
                plain[name] = (
                    int(inner) if len(inner) <= 38 and inner.isascii() and inner.isdigit() else _number(inner)
                )
            elif tag == "M":
                plain[name] = _map(inner)
            elif tag == "L":
                plain[name] = _list(inner)
            else:
                plain[name] = from_dynamodb(value)
    except (AttributeError, TypeError, ValueError):
        raise RecordError("malformed-record", f"not a DynamoDB map: {members!r:.200}") from None
    return plain


def _list(members: Sequence[Any]) -> list[Any]:
    if type(members) is not list:
        raise RecordError("malformed-record", f"L is not a list: {members!r:.200}")
    plain: list[Any] = []
    append = plain.append
    try:
        for value in members:
            ((tag, inner),) = value.items()
            if tag == "S" and type(inner) is str:
                append(inner)
            elif tag == "N" and type(inner) is str:
                append(
                    int(inner) if len(inner) <= 38 and inner.isascii() and inner.isdigit() else _number(inner)
                )
            elif tag == "M":
                append(_map(inner))
            elif tag == "L":
                append(_list(inner))
            else:
                append(from_dynamodb(value))
    except (AttributeError, TypeError, ValueError):
        raise RecordError("malformed-record", f"not a DynamoDB list: {members!r:.200}") from None
    return plain


def item_from_dynamodb(image: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """A whole item image (attribute name -> DynamoDB-JSON value) as a plain dict."""
    if type(image) is not dict and not isinstance(image, Mapping):  # `type` first: the ABC check is slow
        raise RecordError("malformed-record", "item image is not a map")
    try:
        return _map(image)
    except RecursionError:  # DynamoDB nests at most 32 levels: only a forged record gets here
        raise RecordError("malformed-record", "item image nests too deeply") from None


# --------------------------------------------------------------------------- geometry


def _is_number(value: Any) -> bool:
    return type(value) is float or type(value) is int or isinstance(value, Decimal)


def validate_geometry(geometry: Any) -> None:
    """The same GeoJSON check the writers apply (`refdata.geometry.validate`), as a permanent failure."""
    try:
        geometry_rules.validate(geometry)
    except geometry_rules.GeometryError as error:
        raise RecordError("invalid-geometry", str(error)) from None


def _check_list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise RecordError("invalid-geometry", f"{what} must be a list")
    return value


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not a JSON number")


def geometry_from_geojson(raw: bytes) -> dict[str, Any]:
    """Parse a GeoJSON file fetched from S3 (a geometry, a Feature or a FeatureCollection) and validate it."""
    try:
        parsed = json.loads(raw, parse_constant=_not_json)
    except (ValueError, UnicodeDecodeError) as error:
        raise RecordError("invalid-geometry", f"geometry object is not JSON: {error}") from None
    except RecursionError:
        raise RecordError("invalid-geometry", "geometry object nests too deeply to be GeoJSON") from None
    if isinstance(parsed, dict) and parsed.get("type") == "Feature":
        parsed = parsed.get("geometry")
    elif isinstance(parsed, dict) and parsed.get("type") == "FeatureCollection":
        features = _check_list(parsed.get("features"), "features")
        parsed = {
            "type": "GeometryCollection",
            "geometries": [
                feature.get("geometry") if isinstance(feature, dict) else None for feature in features
            ],
        }
    validate_geometry(parsed)
    return parsed  # type: ignore[no-any-return]


def validate_location(location: Any) -> None:
    if not isinstance(location, dict) or not (
        _is_number(location.get("lat")) and _is_number(location.get("lon"))
    ):
        raise RecordError("invalid-geometry", "location must be {lat, lon} numbers")
    lat, lon = float(location["lat"]), float(location["lon"])
    if not (-90.0 <= lat <= 90.0 and -180.0 <= lon <= 180.0):
        raise RecordError("invalid-geometry", f"location out of range: {location!r:.100}")


def parse_geometry_url(url: Any, allowed_bucket: str | None) -> tuple[str, str]:
    """`s3://<bucket>/<key>` -> (bucket, key); only the configured geometry bucket is allowed."""
    if not isinstance(url, str) or not url.startswith("s3://"):
        raise RecordError("invalid-geometry", f"geometryUrl is not an s3:// URL: {url!r:.200}")
    bucket, _, key = url[5:].partition("/")
    if not bucket or not key:
        raise RecordError("invalid-geometry", f"geometryUrl has no bucket or key: {url!r:.200}")
    if bucket != allowed_bucket:
        raise RecordError("geometry-bucket-not-allowed", f"bucket {bucket!r} is not the geometry bucket")
    return bucket, key


# --------------------------------------------------------------------------- stream record -> change


@dataclass(slots=True)
class Change:
    """One stream record reduced to what the sync needs; `doc` is filled by `build_document`."""

    record: Mapping[str, Any]
    event_id: str
    seq: str
    pk: str
    sk: str
    doc_id: str
    tombstone: bool
    expired: bool
    created_at: float | None
    schema: str = ""
    index: str = ""
    indexable: bool = True
    doc: dict[str, Any] | None = None
    geometry_url: str | None = None


def _key_string(keys: Mapping[str, Any], name: str) -> str:
    value = keys.get(name)
    if (type(value) is not dict and not isinstance(value, Mapping)) or not isinstance(value.get("S"), str):
        raise RecordError("malformed-record", f"key attribute {name!r} is missing or not a string")
    text: str = value["S"]
    return text


def padded_sequence(sequence_number: Any) -> str:
    """A stream SequenceNumber as 40 zero-padded digits, so string order equals numeric order.

    A trailing ``r`` run (``REPAIR_SUFFIX``) is kept after the padded digits: the ops tools' repairs label a
    write ``<stored seq>r``, which sorts after the state it repairs and before any newer sequence number.
    DynamoDB Streams never produce it.
    """
    if not isinstance(sequence_number, str) or not sequence_number.isascii():
        raise RecordError("malformed-record", f"bad SequenceNumber {sequence_number!r:.60}")
    digits = sequence_number.rstrip(REPAIR_SUFFIX)
    if not digits.isdigit():
        raise RecordError("malformed-record", f"bad SequenceNumber {sequence_number!r:.60}")
    if len(digits) > SEQUENCE_DIGITS:
        raise RecordError("malformed-record", f"SequenceNumber longer than {SEQUENCE_DIGITS} digits")
    return digits.zfill(SEQUENCE_DIGITS) + sequence_number[len(digits) :]


def _creation_time(value: Any) -> float | None:
    if type(value) is float or type(value) is int:
        return value / 1000.0 if value > 100_000_000_000 else float(value)  # tolerate epoch milliseconds
    timestamp = getattr(value, "timestamp", None)  # boto3 hands out a datetime
    return float(timestamp()) if callable(timestamp) else None


def parse_change(record: Mapping[str, Any]) -> Change:
    """Read a record's event name, keys, sequence number and schema; cheap, so coalescing can run first."""
    try:
        event_name = record["eventName"]
        stream = record["dynamodb"]
        keys = stream["Keys"]
    except (KeyError, TypeError):
        raise RecordError("malformed-record", "record lacks eventName, dynamodb or dynamodb.Keys") from None
    if event_name not in ("INSERT", "MODIFY", "REMOVE"):
        raise RecordError("malformed-record", f"unknown eventName {event_name!r:.40}")
    if (type(stream) is not dict and not isinstance(stream, Mapping)) or (
        type(keys) is not dict and not isinstance(keys, Mapping)
    ):
        raise RecordError("malformed-record", "dynamodb or dynamodb.Keys is not a map")
    pk = _key_string(keys, "pk")
    sk = _key_string(keys, "sk")
    seq = padded_sequence(stream.get("SequenceNumber"))
    tombstone = event_name == "REMOVE"
    identity = record.get("userIdentity")
    expired = (
        tombstone
        and isinstance(identity, Mapping)
        and identity.get("type") == "Service"
        and identity.get("principalId") == TTL_PRINCIPAL
    )
    schema_name, indexable, index = _target(pk)
    try:
        doc_id = document_id(pk, sk)
    except ValueError as error:  # KeyConventionError
        raise RecordError("malformed-record", str(error)) from None
    return Change(
        record=record,
        event_id=str(record.get("eventID", "")),
        seq=seq,
        pk=pk,
        sk=sk,
        doc_id=doc_id,
        tombstone=tombstone,
        expired=bool(expired),
        created_at=_creation_time(stream.get("ApproximateCreationDateTime")),
        schema=schema_name,
        index=index,
        indexable=indexable,
    )


# Fields the sync (and its stored script) write into every document; an item attribute of the same name would be
# overwritten without a trace, so it is refused instead. `schema` may be carried if it names the item's schema.
RESERVED_FIELDS: Final = {
    EXACT_NUMBERS_FIELD: "the sync writes the exact text of decimals there",
    "stream_seq": "the stored script keeps the applied stream sequence number there",
    "tombstone": "the stored script marks deleted items there",
    DELETED_AT_FIELD: "the sync stamps tombstones with their deletion time there",
}


def item_document(image: Mapping[str, Mapping[str, Any]], schema: str) -> dict[str, Any]:
    """An item image as the body of its document, `schema` included: decoded, reserved names refused."""
    doc = item_from_dynamodb(image)
    for name, use in RESERVED_FIELDS.items():
        if name in doc:
            raise RecordError("reserved-attribute", f"attribute {name!r} is reserved: {use}")
    if doc.get(SCHEMA_FIELD, schema) != schema:
        raise RecordError(
            "reserved-attribute",
            f"attribute {SCHEMA_FIELD!r} is reserved: it is {doc[SCHEMA_FIELD]!r} but the key names {schema!r}",
        )
    doc[SCHEMA_FIELD] = schema
    return doc


def check_indexable(doc: Mapping[str, Any], schema: str) -> None:
    """The engine's document limits (`refdata.limits`) against the schema's template: a permanent failure
    naming the limit when the engine could never index `doc`."""
    try:
        limits.check_item(doc, tree=mapped_fields(schema))
    except limits.DocumentLimitError as error:
        raise RecordError(error.kind, error.detail) from None


@lru_cache(maxsize=4096)
def _target(pk: str) -> tuple[str, bool, str]:
    try:
        schema = schema_of_pk(pk)
    except Exception as error:  # KeyConventionError and anything else the registry rejects
        raise RecordError("unknown-schema", str(error)) from None
    indexable = bool(schema.indexable)
    return schema.name, indexable, write_alias(schema.name) if indexable else ""


def build_document(change: Change, geometry_bucket: str | None) -> None:
    """Fill `change.doc` from the record: the full new image plus `schema`, or a tombstone's keys and
    `deletedAt` (the REMOVE record's ApproximateCreationDateTime, whole seconds).

    An item that references its geometry by URL gets `geometry_url` set; the caller fetches the object
    and calls `attach_geometry`.
    """
    if change.tombstone:
        if change.created_at is None:
            raise RecordError(
                "malformed-record",
                "REMOVE record without ApproximateCreationDateTime: its tombstone needs it",
            )
        change.doc = {
            "pk": change.pk,
            "sk": change.sk,
            SCHEMA_FIELD: change.schema,
            DELETED_AT_FIELD: int(change.created_at),
        }
        return
    image = change.record["dynamodb"].get("NewImage")
    if image is None:
        raise RecordError("malformed-record", f"{change.record.get('eventName')} record without NewImage")
    doc = item_document(image, change.schema)
    check_indexable(doc, change.schema)
    if LOCATION_ATTRIBUTE in doc:
        validate_location(doc[LOCATION_ATTRIBUTE])
    url = doc.get(GEOMETRY_URL_ATTRIBUTE)
    if url is not None:
        parse_geometry_url(url, geometry_bucket)
        change.geometry_url = url
    elif GEOMETRY_ATTRIBUTE in doc:
        validate_geometry(doc[GEOMETRY_ATTRIBUTE])
    change.doc = doc


def attach_geometry(change: Change, raw: bytes) -> None:
    """Put the dereferenced GeoJSON into the document in full, as `geometry`."""
    assert change.doc is not None
    change.doc[GEOMETRY_ATTRIBUTE] = geometry_from_geojson(raw)


# --------------------------------------------------------------------------- numbers and encoding


def engine_document(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The document as OpenSearch will hold it: every `Decimal` (a decimal no double reads back as) becomes its
    nearest double, and its exact text goes into `exactNumbers` under the JSON Pointer of its place."""
    exact: dict[str, str] = {}

    def convert(value: Any, pointer: str) -> Any:
        if isinstance(value, Decimal):
            exact[pointer] = str(value)
            return float(value)
        if isinstance(value, dict):
            return {key: convert(member, f"{pointer}/{pointer_token(key)}") for key, member in value.items()}
        if isinstance(value, list):
            return [convert(member, f"{pointer}/{position}") for position, member in enumerate(value)]
        return value

    converted: dict[str, Any] = convert(doc, "")
    if exact:
        converted[EXACT_NUMBERS_FIELD] = exact
    return converted


class _HasDecimal(Exception):
    pass


def _refuse(value: Any) -> Any:
    if isinstance(value, Decimal):
        raise _HasDecimal
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


# Only finite numbers: OpenSearch's parser refuses `NaN` and `Infinity`, and it refuses the whole request.
_fast_encode: Callable[[Any], str] = json.JSONEncoder(
    ensure_ascii=True, check_circular=False, allow_nan=False, separators=(",", ":"), default=_refuse
).encode
_c_make_encoder = getattr(json.encoder, "c_make_encoder", None)
if _c_make_encoder is not None:
    # The C encoder that `JSONEncoder.encode` above builds on every call (same arguments), built once.
    _c_encode = _c_make_encoder(None, _refuse, encode_basestring_ascii, None, ":", ",", False, False, False)

    def _c_fast_encode(value: Any) -> str:
        return "".join(_c_encode(value, 0))

    _fast_encode = _c_fast_encode


def encode_json(value: Any) -> str:
    """Compact ASCII JSON (so its length in characters is its length in bytes) of plain JSON values; a
    `Decimal` is refused (TypeError): documents go through `encode_document`. A non-finite float is refused
    (ValueError)."""
    try:
        return _fast_encode(value)
    except _HasDecimal:
        raise TypeError("Decimal is not JSON serializable: encode documents with encode_document") from None


def encode_document(doc: Mapping[str, Any]) -> str:
    """`engine_document(doc)` as compact ASCII JSON (the conversion only runs when the document has a Decimal);
    a document that has no JSON text the engine accepts (a non-finite number) is a permanent failure."""
    try:
        try:
            return _fast_encode(doc)
        except _HasDecimal:
            return _fast_encode(engine_document(doc))
    except ValueError as error:  # only finite numbers are JSON
        raise RecordError("malformed-record", f"document cannot be sent: {error}") from None
    except RecursionError:
        raise RecordError("malformed-record", "document nests too deeply to encode") from None


def encode_update(change: Change, *, require_alias: bool = True) -> str:
    """The two NDJSON lines of a bulk `update` that applies this change through the stored script.

    `require_alias` (the default: every write goes through a schema's write alias) makes OpenSearch refuse the
    write when the alias does not exist, instead of auto-creating a concrete index of that name, which would
    then block the alias for good. Only a write that deliberately targets a concrete index turns it off.
    """
    doc = change.doc
    assert doc is not None, "build_document first"
    return (
        '{"update":{"_index":'
        + encode_basestring_ascii(change.index)
        + ',"_id":'
        + encode_basestring_ascii(change.doc_id)
        + (',"require_alias":true}}\n' if require_alias else "}}\n")
        + '{"scripted_upsert":true,"upsert":{},"script":{"id":"'
        + indices.APPLY_SCRIPT_ID
        + '","params":{"seq":"'
        + change.seq
        + ('","tombstone":true,"doc":' if change.tombstone else '","tombstone":false,"doc":')
        + encode_document(doc)
        + "}}}\n"
    )


def documents_from_records(records: Sequence[Mapping[str, Any]], geometry_bucket: str | None) -> list[Change]:
    """Convenience for tools and tests: parse and build every record (no coalescing, no geometry fetch)."""
    changes = []
    for record in records:
        change = parse_change(record)
        build_document(change, geometry_bucket)
        changes.append(change)
    return changes
