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
from refdata.keys import document_id, parse_key
from refdata.mappings import mapped_fields
from refdata.registry import COUNTER, PLATFORM_ATTRIBUTES, KeyConventionError, Schema, get_schema
from refdata.reserved import is_reserved

GEOMETRY: Final = "geometry"
# Platform attributes an application item may carry: its keys, the GeoJSON geometry (the writer offloads it and
# derives bbox and location) and its expiry time (the table's TTL attribute).
WRITABLE_PLATFORM_ATTRIBUTES: Final = frozenset({"pk", "sk", GEOMETRY, "expiresAt"})
# What a stored item carries besides: its globalId and what the writer derived; a replacement keeps them.
STORED_PLATFORM_ATTRIBUTES: Final = frozenset({"globalId", "geometryUrl", "bbox", "location"})


class WriteError(ValueError):
    """An item or a change the writer refuses before any call; the message names the item and the reason."""


def keys_of(item: Mapping[str, Any]) -> tuple[str, str]:
    pk, sk = item.get("pk"), item.get("sk")
    if not isinstance(pk, str) or not isinstance(sk, str):
        raise WriteError("an item needs string 'pk' and 'sk' attributes")
    return pk, sk


def check_key(pk: str, sk: str) -> Schema:
    """The schema of an application item's key; refuses keys the conventions, the counters or the platform own."""
    try:
        schema = parse_key(pk, sk).schema
    except KeyConventionError as error:
        raise WriteError(f"{pk!r} {sk!r}: {error}") from None
    found = get_schema(schema)
    if found.name == COUNTER:
        raise WriteError(f"{pk!r}: counter items are written by the writer's counter only")
    if is_reserved(pk):
        raise WriteError(f"{pk!r}: the scope is reserved for the platform's own items (heartbeat, canaries)")
    if found.indexable:
        try:
            document_id(pk, sk)
        except KeyConventionError as error:
            raise WriteError(f"{pk!r} {sk!r}: {error}") from None
    return found


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
