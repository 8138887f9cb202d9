"""Build and parse pk, sk and OpenSearch document ids, following the registry's declarations.

Key values that contain a separator are rejected, not escaped: keys stay readable in the console and in
OpenSearch, `begins_with` prefixes stay plain text, and the stream filter's pk prefixes stay exact. The
error names the field and the value. Every builder has a parser with `parse(build(x)) == x`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime

from refdata.registry import (
    SEPARATOR,
    CounterSk,
    Field,
    FieldsSk,
    FixedSk,
    KeyConventionError,
    Kind,
    PartsSk,
    Schema,
    get_schema,
    schema_of_pk,
)

DOC_ID_SEPARATOR = "#"
PART_SEPARATOR = "#"
META = "META"
TEXT = "TEXT"
COMMENT = "COMMENT"
# DynamoDB's limits on key attribute values, and OpenSearch's on a document's _id, in UTF-8 bytes.
MAX_PK_BYTES = 2048
MAX_SK_BYTES = 1024
MAX_DOCUMENT_ID_BYTES = 512
# Values of a schema's first scope field that only the platform writes (refdata.reserved).
RESERVED_PREFIX = "refdata-"
HEARTBEAT_SCOPE = f"{RESERVED_PREFIX}heartbeat"
CANARY_SCOPE = f"{RESERVED_PREFIX}canary"
RESERVED_SCOPES = frozenset({HEARTBEAT_SCOPE, CANARY_SCOPE})

Value = str | int | date

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


@dataclass(frozen=True)
class ItemKey:
    """A key in its logical form: the schema name and the values of its pk and sk fields."""

    schema: str
    values: Mapping[str, Value]


def _reject(field: Field, value: object, why: str) -> KeyConventionError:
    return KeyConventionError(f"field {field.name!r} value {value!r}: {why}")


def _check_text(field: Field, value: str) -> str:
    """A text segment: non-empty, no `::` or `#`, and no `:` at either end (it would fuse with `::`)."""
    if not value:
        raise _reject(field, value, "must not be empty")
    if SEPARATOR in value or DOC_ID_SEPARATOR in value:
        raise _reject(field, value, "must not contain '::' or '#'")
    if value[0] == ":" or value[-1] == ":":
        raise _reject(field, value, "must not start or end with ':'")
    return value


def encode(field: Field, value: object) -> str:
    """One segment's text for a typed value."""
    if field.kind is Kind.NUMBER:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 10**field.width:
            raise _reject(field, value, f"must be an int in [0, 10**{field.width})")
        return str(value).zfill(field.width)
    if field.kind is Kind.DATE:
        if isinstance(value, datetime) or not isinstance(value, date):
            raise _reject(field, value, "must be a datetime.date")
        return value.isoformat()
    if not isinstance(value, str):
        raise _reject(field, value, "must be a str")
    if field.kind is Kind.UUID:
        if not _UUID.fullmatch(value):
            raise _reject(field, value, "must be a lower-case canonical UUID")
        return value
    if field.kind is Kind.KEY:
        if DOC_ID_SEPARATOR in value:
            raise _reject(field, value, "must not contain '#'")
        inner_schema, _ = parse_pk(value)
        if any(f.kind is Kind.KEY for f in inner_schema.pk_fields):
            raise _reject(field, value, "must be the pk of a data schema")
        return value
    return _check_text(field, value)


def decode(field: Field, text: str) -> Value:
    """The typed value of one segment; only the canonical text `encode` writes is accepted."""
    if field.kind is Kind.NUMBER:
        if len(text) != field.width or not text.isascii() or not text.isdigit():
            raise _reject(field, text, f"must be exactly {field.width} digits")
        return int(text)
    if field.kind is Kind.DATE:
        if not _DATE.fullmatch(text):
            raise _reject(field, text, "must be YYYY-MM-DD")
        try:
            return date.fromisoformat(text)
        except ValueError:
            raise _reject(field, text, "is not a calendar date") from None
    return encode(field, text)


def _join(fields: tuple[Field, ...], values: Mapping[str, object], what: str) -> list[str]:
    missing = [f.name for f in fields if f.name not in values]
    if missing:
        raise KeyConventionError(f"{what} is missing field(s) {missing}")
    return [encode(f, values[f.name]) for f in fields]


def _check_known(schema: Schema, values: Mapping[str, object]) -> None:
    known = {f.name for f in schema.pk_fields + schema.sk_fields}
    if isinstance(schema.sk, PartsSk):
        known |= {"part", "ts"}
    unknown = sorted(set(values) - known)
    if unknown:
        raise KeyConventionError(f"schema {schema.name!r} has no field(s) {unknown}")


def _check_length(key: str, limit: int, what: str) -> str:
    if len(key.encode("utf-8")) > limit:
        raise KeyConventionError(f"{what} {key[:80]!r}... is longer than DynamoDB's {limit} bytes")
    return key


def build_pk(schema_name: str, values: Mapping[str, object], *, reserved: bool = False) -> str:
    """`<schema>::<scope values...>[::<shard>]`. The first scope field's reserved values (`RESERVED_SCOPES`: the
    platform's heartbeat and canaries, refdata.reserved) are refused unless `reserved`."""
    schema = get_schema(schema_name)
    _check_known(schema, values)
    if schema.scope and not reserved and values.get(schema.scope[0].name) in RESERVED_SCOPES:
        raise _reject(
            schema.scope[0], values[schema.scope[0].name], "is reserved for the platform's own items"
        )
    segments = _join(schema.pk_fields, values, f"{schema.name} pk")
    return _check_length(SEPARATOR.join([schema.name, *segments]), MAX_PK_BYTES, "pk")


def parse_pk(pk: str) -> tuple[Schema, dict[str, Value]]:
    """The schema and the field values of a partition key."""
    schema = schema_of_pk(pk)
    fields = schema.pk_fields
    rest = pk[len(schema.pk_prefix) :]
    greedy = bool(fields) and fields[-1].kind is Kind.KEY
    parts = rest.split(SEPARATOR, len(fields) - 1) if greedy else rest.split(SEPARATOR)
    if len(parts) != len(fields):
        raise KeyConventionError(
            f"pk {pk!r} has {len(parts)} segment(s) after the schema name; {schema.name} has {len(fields)}"
        )
    return schema, {f.name: decode(f, part) for f, part in zip(fields, parts, strict=True)}


def build_sk(schema_name: str, values: Mapping[str, object]) -> str:
    """The sort key of one item, per the schema's sk strategy."""
    schema = get_schema(schema_name)
    _check_known(schema, values)
    if isinstance(schema.sk, FixedSk):
        return schema.sk.value
    if isinstance(schema.sk, PartsSk):
        return _check_length(_build_part(schema.sk, values), MAX_SK_BYTES, "sk")
    segments = _join(schema.sk_fields, values, f"{schema.name} sk")
    return _check_length(SEPARATOR.join(segments), MAX_SK_BYTES, "sk")


def _build_part(sk: PartsSk, values: Mapping[str, object]) -> str:
    part = values.get("part")
    if part in (META, TEXT):
        if "ts" in values:
            raise KeyConventionError(f"part {part!r} takes no 'ts'")
        return str(part)
    if part == COMMENT:
        ts = Field("ts", Kind.NUMBER, width=sk.timestamp_width)
        return f"{COMMENT}{PART_SEPARATOR}{encode(ts, values.get('ts'))}"
    raise KeyConventionError(f"field 'part' value {part!r}: must be one of {META}, {TEXT}, {COMMENT}")


def parse_sk(schema_name: str, sk: str) -> dict[str, Value]:
    """The field values of a sort key of the given schema."""
    schema = get_schema(schema_name)
    if isinstance(schema.sk, FixedSk):
        if sk != schema.sk.value:
            raise KeyConventionError(f"sk {sk!r} of schema {schema.name!r} must be {schema.sk.value!r}")
        return {}
    if isinstance(schema.sk, PartsSk):
        return _parse_part(schema.sk, sk)
    fields = schema.sk_fields
    parts = sk.split(SEPARATOR)
    if len(parts) != len(fields):
        raise KeyConventionError(f"sk {sk!r} has {len(parts)} segment(s); {schema.name} has {len(fields)}")
    return {f.name: decode(f, part) for f, part in zip(fields, parts, strict=True)}


def _parse_part(sk: PartsSk, text: str) -> dict[str, Value]:
    if text in (META, TEXT):
        return {"part": text}
    head, sep, ts = text.partition(PART_SEPARATOR)
    if head == COMMENT and sep:
        return {"part": COMMENT, "ts": decode(Field("ts", Kind.NUMBER, width=sk.timestamp_width), ts)}
    raise KeyConventionError(f"sk {text!r} is not META, TEXT or COMMENT#<ts>")


def build_key(key: ItemKey) -> tuple[str, str]:
    """(pk, sk) of a logical key."""
    return build_pk(key.schema, key.values), build_sk(key.schema, key.values)


def parse_key(pk: str, sk: str) -> ItemKey:
    """The logical key of a (pk, sk) pair."""
    schema, values = parse_pk(pk)
    return ItemKey(schema.name, {**values, **parse_sk(schema.name, sk)})


def pk_prefix(schema_name: str, values: Mapping[str, object]) -> str:
    """The pks of a scope: `values` gives the leading pk fields (in declaration order, e.g. `collectionId`).

    The prefix ends at a segment boundary (`booking::bcparks_1::`, so `bcparks_1` never matches `bcparks_10`)
    unless every pk field is given, in which case it is the whole partition key (`geozone::bcparks_1`).
    """
    schema = get_schema(schema_name)
    fields = schema.pk_fields
    leading = fields[: len(values)]
    if not values or {f.name for f in leading} != set(values):
        raise KeyConventionError(
            f"prefix of {schema.name} pk must give leading fields of {[f.name for f in fields]}, "
            f"got {sorted(values)}"
        )
    segments = [schema.name, *(encode(f, values[f.name]) for f in leading)]
    return SEPARATOR.join(segments) + ("" if len(leading) == len(fields) else SEPARATOR)


def sk_prefix(schema_name: str, values: Mapping[str, object]) -> str:
    """A `begins_with` prefix that stops at a segment boundary: asking for `1` never matches `10`.

    `values` gives the leading sk fields (in declaration order); the prefix ends with `::` unless every
    field is given, in which case it is the whole sort key.
    """
    schema = get_schema(schema_name)
    fields = schema.sk_fields
    leading = fields[: len(values)]
    if not isinstance(schema.sk, CounterSk | FieldsSk) or {f.name for f in leading} != set(values):
        raise KeyConventionError(
            f"prefix of {schema.name} sk must give leading fields of {[f.name for f in fields]}, "
            f"got {sorted(values)}"
        )
    segments = [encode(f, values[f.name]) for f in leading]
    if not segments or len(segments) == len(fields):
        return SEPARATOR.join(segments)
    return SEPARATOR.join(segments) + SEPARATOR


def document_id(pk: str, sk: str) -> str:
    """OpenSearch document id `<pk>#<sk>`; unique per item because a pk never contains `#`."""
    if DOC_ID_SEPARATOR in pk:
        raise KeyConventionError(f"pk {pk!r} must not contain '#'")
    doc_id = f"{pk}{DOC_ID_SEPARATOR}{sk}"
    return _check_length(doc_id, MAX_DOCUMENT_ID_BYTES, "OpenSearch document id")


def parse_document_id(doc_id: str) -> tuple[str, str]:
    """(pk, sk) of a document id, split at the first `#` (an sk may contain `#`, a pk never does)."""
    pk, sep, sk = doc_id.partition(DOC_ID_SEPARATOR)
    if not sep or not pk or not sk:
        raise KeyConventionError(f"document id {doc_id!r} is not '<pk>#<sk>'")
    return pk, sk
