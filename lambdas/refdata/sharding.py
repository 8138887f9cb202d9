"""Write sharding (seed 001): a deterministic shard suffix on the pk, and a merged query over all shards.

The shard is sha256(attribute value) mod N, so a writer and a reader who know the attribute agree on it
without coordination (Python's `hash()` is salted per process and would not do). Reading a whole
logical partition fans out over the N shard pks and merges their items in sort-key order; the page token
records, per shard, the last sort key handed out, so pages never skip or repeat an item.
"""

from __future__ import annotations

import base64
import hashlib
import heapq
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from refdata.exceptions import ArgumentError
from refdata.keys import build_pk
from refdata.registry import KeyConventionError, Schema, Sharding, get_schema

SHARD = "shard"


@dataclass(frozen=True)
class Page:
    items: list[dict[str, Any]]
    next_token: str | None


def _sharding(schema_name: str) -> tuple[Schema, Sharding]:
    schema = get_schema(schema_name)
    if schema.sharding is None:
        raise KeyConventionError(f"schema {schema_name!r} is not write-sharded")
    return schema, schema.sharding


def shard_of(schema_name: str, attribute_value: str) -> int:
    """The shard an item goes to, from its sharding attribute's value."""
    _, sharding = _sharding(schema_name)
    digest = hashlib.sha256(attribute_value.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % sharding.shards


def sharded_pk(schema_name: str, values: Mapping[str, object]) -> str:
    """The pk of an item: its scope values plus the shard of its sharding attribute (read from `values`,
    which may also hold other key fields and the attribute itself)."""
    schema, sharding = _sharding(schema_name)
    attribute = values.get(sharding.attribute)
    if not isinstance(attribute, str):
        raise KeyConventionError(f"sharding attribute {sharding.attribute!r} must be a str: {attribute!r}")
    key_fields = {f.name for f in schema.pk_fields + schema.sk_fields}
    key_values = {name: value for name, value in values.items() if name in key_fields}
    return build_pk(schema_name, {**key_values, SHARD: shard_of(schema_name, attribute)})


def shard_pks(schema_name: str, scope_values: Mapping[str, object]) -> list[str]:
    """The pks of every shard of one logical partition."""
    _, sharding = _sharding(schema_name)
    return [build_pk(schema_name, {**scope_values, SHARD: n}) for n in range(sharding.shards)]


def _decode(token: str | None, pks: list[str]) -> dict[str, str | None]:
    if token is None:
        return dict.fromkeys(pks)
    try:
        cursors = json.loads(base64.urlsafe_b64decode(token.encode("ascii")))
    except ValueError:
        raise KeyConventionError(f"page token {token!r} is not one this query issued") from None
    if not isinstance(cursors, dict) or not set(cursors) <= set(pks):
        raise KeyConventionError(f"page token {token!r} belongs to another partition")
    if not all(after is None or isinstance(after, str) for after in cursors.values()):
        raise KeyConventionError(f"page token {token!r} is not one this query issued")
    return cursors


def _encode(cursors: Mapping[str, str | None]) -> str | None:
    if not cursors:
        return None
    return base64.urlsafe_b64encode(json.dumps(cursors, sort_keys=True).encode()).decode("ascii")


def _key_condition(pk: str, sk_begins_with: str) -> dict[str, Any]:
    """A Query's key condition as text (boto3's condition builder is not needed: the conventions import without it)."""
    if not sk_begins_with:
        return {"KeyConditionExpression": "pk = :pk", "ExpressionAttributeValues": {":pk": pk}}
    return {
        "KeyConditionExpression": "pk = :pk AND begins_with(sk, :sk)",
        "ExpressionAttributeValues": {":pk": pk, ":sk": sk_begins_with},
    }


def query_all_shards(
    table: Any,
    schema_name: str,
    scope_values: Mapping[str, object],
    *,
    sk_begins_with: str = "",
    limit: int = 100,
    page_token: str | None = None,
) -> Page:
    """Up to `limit` items of all shards, in ascending (sk, pk) order, and the token of the next page.

    `page_token` is the `next_token` of the previous page; it is None after the last page.
    """
    if limit < 1:
        raise ArgumentError(f"limit must be at least 1, got {limit}")
    cursors = _decode(page_token, shard_pks(schema_name, scope_values))
    fetched: dict[str, list[dict[str, Any]]] = {}
    exhausted: set[str] = set()
    for pk, after in cursors.items():
        request: dict[str, Any] = {**_key_condition(pk, sk_begins_with), "Limit": limit}
        if after is not None:
            request["ExclusiveStartKey"] = {"pk": pk, "sk": after}
        response = table.query(**request)
        fetched[pk] = response["Items"]
        if "LastEvaluatedKey" not in response:
            exhausted.add(pk)
    merged = heapq.merge(*fetched.values(), key=lambda item: (item["sk"], item["pk"]))
    page = [item for _, item in zip(range(limit), merged, strict=False)]
    taken: dict[str, int] = {}
    for item in page:
        taken[item["pk"]] = taken.get(item["pk"], 0) + 1
    next_cursors: dict[str, str | None] = {}
    for pk, after in cursors.items():
        count = taken.get(pk, 0)
        if pk in exhausted and count == len(fetched[pk]):
            continue
        next_cursors[pk] = fetched[pk][count - 1]["sk"] if count else after
    return Page(page, _encode(next_cursors))
