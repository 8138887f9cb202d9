"""Reserved scopes: the platform's own items in the source tables, built through the key conventions and never
seen by readers.

Two kinds of item live in an indexable schema's partitions but belong to the platform, each in a scope of its own:
the value of the schema's first pk scope field (a text field, checked by the registry) is reserved:

- `HEARTBEAT` (`<schema>::refdata-heartbeat[::...]`): one item per source table, rewritten on a schedule with the
  time it was written; the sync recognises it and emits the end-to-end lag (stream_sync.heartbeat);
- `CANARY` (`<schema>::refdata-canary[::...]`): the post-deploy smoke run's canaries (ops.smoke), one per run and
  schema, written, updated, deleted and cleaned up by that run.

Both go through the whole pipeline like any item (stream filter, sync, index), which is the point; document-level
security hides both scopes from every read role (search.readers), reconcile leaves them out, and application
writers cannot build their keys (refdata.keys refuses a reserved value unless `reserved=True`).
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Mapping
from datetime import UTC, date, datetime
from typing import Any, Final

from refdata.keys import CANARY_SCOPE, HEARTBEAT_SCOPE, RESERVED_PREFIX, build_pk, build_sk, pk_prefix
from refdata.registry import (
    SEPARATOR,
    AttributeKind,
    CounterSk,
    Field,
    FieldsSk,
    FixedSk,
    KeyConventionError,
    Kind,
    PartsSk,
    Schema,
    get_schema,
    indexable_schemas,
)
from refdata.sharding import shard_of

HEARTBEAT: Final = HEARTBEAT_SCOPE
CANARY: Final = CANARY_SCOPE
SCOPES: Final = (HEARTBEAT, CANARY)
_MARK: Final = SEPARATOR + RESERVED_PREFIX  # in every reserved pk
# What a fixed (non-unique) key field of a reserved item holds, by kind.
_FIXED_TEXT: Final = "platform"
_FIXED_NUMBER: Final = 0
_FIXED_UUID: Final = "00000000-0000-0000-0000-000000000000"
_FIXED_DATE: Final = date(2000, 1, 1)
_UNIQUE_KINDS: Final = frozenset({Kind.TEXT, Kind.NUMBER, Kind.UUID})
# The heartbeat item's attribute with the time it was written (ISO 8601, as EventBridge Scheduler renders it).
HEARTBEAT_AT: Final = "heartbeatAt"


def scope_field(schema: Schema) -> Field:
    """The pk field whose value is reserved: the schema's first scope field (the registry makes it text)."""
    return schema.scope[0]


def scope_prefix(schema_name: str, scope: str) -> str:
    """Every pk of `scope` in the schema starts with this: the whole pk when the scope field is the pk's only
    field, else the pk up to and including the `::` after the reserved value."""
    if scope not in SCOPES:
        raise KeyConventionError(f"{scope!r} is not a reserved scope ({', '.join(SCOPES)})")
    schema = get_schema(schema_name)
    return pk_prefix(schema.name, {scope_field(schema).name: scope})


def scope_of(pk: str) -> str | None:
    """The reserved scope a pk belongs to, or None for an ordinary item (or a pk of no known schema)."""
    if _MARK not in pk:  # the sync asks this of every record it indexes: most answers take one substring test
        return None
    name, separator, rest = pk.partition(SEPARATOR)
    if not separator:
        return None
    value = rest.split(SEPARATOR, 1)[0]
    return value if value in SCOPES and name in {s.name for s in indexable_schemas()} else None


def is_reserved(pk: str) -> bool:
    return scope_of(pk) is not None


def is_heartbeat(pk: str) -> bool:
    return scope_of(pk) == HEARTBEAT


def _fixed(field: Field) -> object:
    if field.kind is Kind.NUMBER:
        return _FIXED_NUMBER
    if field.kind is Kind.UUID:
        return _FIXED_UUID
    if field.kind is Kind.DATE:
        return _FIXED_DATE
    if field.kind is Kind.TEXT:
        return _FIXED_TEXT
    raise KeyConventionError(f"field {field.name!r}: a reserved item cannot fill a {field.kind.value} field")


def _unique(field: Field, token: str, today: date) -> object:
    if field.kind is Kind.NUMBER:
        return secrets.randbelow(10**field.width)
    if field.kind is Kind.UUID:
        return str(uuid.uuid4())
    if field.kind is Kind.DATE:
        return today
    return token


def _sk_values(schema: Schema, choose: Any) -> dict[str, object]:
    if isinstance(schema.sk, PartsSk):
        return {"part": "META"}
    if isinstance(schema.sk, FixedSk):
        return {}
    return {field.name: choose(field) for field in schema.sk_fields}


def _key(
    schema: Schema, scope: str, values: dict[str, object], extra: Mapping[str, object]
) -> tuple[str, str, dict[str, object]]:
    """(pk, sk, attributes the key needs) of a reserved item: the sharding attribute goes into the item when it
    is not a key field, so the shard can be recomputed from the item as the conventions compute it."""
    attributes: dict[str, object] = {}
    if schema.sharding is not None:
        attribute = schema.sharding.attribute
        source = values.get(attribute, extra.get(attribute))
        if not isinstance(source, str):
            raise KeyConventionError(
                f"schema {schema.name!r}: sharding attribute {attribute!r} needs a value"
            )
        if attribute not in values:
            attributes[attribute] = source
        values = {**values, "shard": shard_of(schema.name, source)}
    pk = build_pk(schema.name, {scope_field(schema).name: scope, **values}, reserved=True)
    return pk, build_sk(schema.name, values), attributes


def heartbeat_key(schema_name: str) -> tuple[str, str, dict[str, object]]:
    """(pk, sk, attributes) of the heartbeat item of a table whose heartbeat lives in `schema_name`: every key
    field fixed, so each table has exactly one heartbeat item, rewritten in place."""
    schema = get_schema(schema_name)
    pk_values = {field.name: _fixed(field) for field in schema.scope[1:]}
    values = {**pk_values, **_sk_values(schema, _fixed)}
    extra = {schema.sharding.attribute: _FIXED_TEXT} if schema.sharding else {}
    return _key(schema, HEARTBEAT, values, extra)


def canary_key(
    schema_name: str, token: str, *, today: date | None = None
) -> tuple[str, str, dict[str, object]]:
    """(pk, sk, attributes) of a new canary: the scope's other pk fields fixed (so every canary of a schema lives
    in one partition per shard), the sk fields unique (`token` in text fields, a random number or UUID, today's
    date). A schema whose sk has no field that can be unique gets the token in its last pk field that can be."""
    schema = get_schema(schema_name)
    today = today or datetime.now(UTC).date()
    sk_fields = (
        schema.sk_fields if isinstance(schema.sk, CounterSk | FieldsSk) else ()
    )  # a PartsSk or FixedSk has no field the canary may fill
    pk_values: dict[str, object] = {field.name: _fixed(field) for field in schema.scope[1:]}
    if not any(field.kind in _UNIQUE_KINDS for field in sk_fields):
        candidates = [field for field in schema.scope[1:] if field.kind in _UNIQUE_KINDS]
        if not candidates:
            raise KeyConventionError(
                f"schema {schema.name!r}: no key field besides the reserved scope can make a canary unique"
            )
        pk_values[candidates[-1].name] = _unique(candidates[-1], token, today)
    values = {**pk_values, **_sk_values(schema, lambda field: _unique(field, token, today))}
    extra = {schema.sharding.attribute: token} if schema.sharding else {}
    return _key(schema, CANARY, values, extra)


def sample_attributes(schema_name: str, text: str, today: date) -> dict[str, object]:
    """A value of its kind for every attribute the schema declares (internal ones included), the hidden flag
    false: a canary exercises every explicit mapping, and only its reserved scope hides it from readers."""
    schema = get_schema(schema_name)
    values: dict[AttributeKind, object] = {
        AttributeKind.TEXT: text,
        AttributeKind.KEYWORD: text.replace(" ", "-"),
        AttributeKind.DATE: today.isoformat(),
        AttributeKind.BOOLEAN: False,
    }
    return {attribute.name: values[attribute.kind] for attribute in schema.attributes}
