"""What an application write must satisfy before it is sent (pure, no I/O): the checks behind `refdata.writer`.

An item passes when its keys follow the conventions of a registered data schema (not the counters' own schema,
not a reserved scope), it sets no attribute the platform writes itself, and its values are values DynamoDB stores
(numbers in DynamoDB's range and precision, no floats, sets of one kind, at most 32 levels) within 400 KB
(`refdata.item_size`). Everything the stream sync would refuse later (a key too long for a document id, a
document the engine could never index) is refused here, so an item that could never be searched is never written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from refdata import limits
from refdata.globalid import schema_of
from refdata.mappings import mapped_fields
from refdata.registry import COUNTER, PLATFORM_ATTRIBUTES, KeyConventionError, Schema
from refdata.reserved import is_reserved

GEOMETRY: Final = "geometry"
# Platform attributes an application item may carry: its keys, the GeoJSON geometry (the writer offloads it and
# derives bbox and location) and its expiry time (the table's TTL attribute).
WRITABLE_PLATFORM_ATTRIBUTES: Final = frozenset({"pk", "sk", GEOMETRY, "expiresAt"})
# What a stored item carries besides: its globalId and what the writer derived; a replacement keeps them.
STORED_PLATFORM_ATTRIBUTES: Final = frozenset({"globalId", "geometryUrl", "bbox", "location"})


class WriteError(ValueError):
    """An item or a change the writer refuses before any call; the message names the item and the reason."""


def check_key(item: Mapping[str, Any]) -> Schema:
    """The schema of an application item's key (`refdata.globalid.schema_of`: the conventions, and a document id
    for an indexable schema); also refuses the counters' own items and the platform's reserved scopes."""
    try:
        schema = schema_of(item)
    except KeyConventionError as error:
        raise WriteError(f"{item.get('pk')!r} {item.get('sk')!r}: {error}") from None
    if schema.name == COUNTER:
        raise WriteError(f"{item['pk']!r}: counter items are written by the writer's counter only")
    if is_reserved(item["pk"]):
        raise WriteError(
            f"{item['pk']!r}: the scope is reserved for the platform's own items (heartbeat, canaries)"
        )
    return schema


def check_attributes(pk: str, names: Mapping[str, Any], *, allowed: frozenset[str]) -> None:
    """Refuse the platform's own attributes outside `allowed`."""
    owned = sorted((set(names) & PLATFORM_ATTRIBUTES) - allowed)
    if owned:
        raise WriteError(f"{pk!r}: {owned} are written by the platform, not by application items")


def check_indexable(pk: str, schema: Schema, attributes: Mapping[str, Any]) -> None:
    """The search engine's document limits (`refdata.limits`) against the schema's mappings: what the stream sync
    would dead-letter as `document-limit` or `invalid-field-name` is refused before it is stored."""
    if not schema.indexable:
        return
    try:
        limits.check_item(attributes, tree=mapped_fields(schema.name))
    except limits.DocumentLimitError as error:
        raise WriteError(f"{pk!r}: search could never index it: {error}") from None
