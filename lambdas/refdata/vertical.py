"""Vertical partitioning (seed 004): one entity as `META`, `TEXT` and `COMMENT#<ts>` items under one pk.

Each part stays far below the item size limit however many comments accumulate, a comment is one small
put, and the whole entity comes back with one (paginated) Query of its pk. Comment timestamps are epoch
milliseconds padded to 13 digits, so comments sort chronologically; two comments in the same
millisecond collide, and the second `add_comment` fails rather than overwriting the first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from refdata.globalid import create_item
from refdata.item_size import check_item
from refdata.keys import COMMENT, META, TEXT, build_sk, parse_pk, parse_sk
from refdata.registry import KeyConventionError, PartsSk

TEXT_ATTRIBUTE = "value"
_KEYS = frozenset({"pk", "sk"})


@dataclass(frozen=True)
class Comment:
    ts: int
    attributes: Mapping[str, Any]


@dataclass(frozen=True)
class Entity:
    pk: str
    meta: Mapping[str, Any]
    text: str | None = None
    comments: tuple[Comment, ...] = field(default_factory=tuple)


def _schema_name(pk: str) -> str:
    schema, _ = parse_pk(pk)
    if not isinstance(schema.sk, PartsSk):
        raise KeyConventionError(f"pk {pk!r}: schema {schema.name!r} is not vertically partitioned")
    return schema.name


def _item(pk: str, sk_values: Mapping[str, object], attributes: Mapping[str, Any]) -> dict[str, Any]:
    clash = sorted(_KEYS & set(attributes))
    if clash:
        raise KeyConventionError(f"attributes of {pk!r} must not be named {clash}")
    return {**attributes, "pk": pk, "sk": build_sk(_schema_name(pk), sk_values)}


def comment_item(pk: str, comment: Comment) -> dict[str, Any]:
    return _item(pk, {"part": COMMENT, "ts": comment.ts}, comment.attributes)


def split(entity: Entity) -> list[dict[str, Any]]:
    """The items that store an entity."""
    items = [_item(entity.pk, {"part": META}, entity.meta)]
    if entity.text is not None:
        items.append(_item(entity.pk, {"part": TEXT}, {TEXT_ATTRIBUTE: entity.text}))
    items.extend(comment_item(entity.pk, c) for c in entity.comments)
    return items


def assemble(pk: str, items: Iterable[Mapping[str, Any]]) -> Entity | None:
    """The entity stored by `items` (all of one pk), or None when there are none."""
    schema_name = _schema_name(pk)
    meta: Mapping[str, Any] = {}
    text: str | None = None
    comments: list[Comment] = []
    found = False
    for item in items:
        found = True
        part = parse_sk(schema_name, item["sk"])
        attributes = {k: v for k, v in item.items() if k not in _KEYS}
        if part["part"] == META:
            meta = attributes
        elif part["part"] == TEXT:
            text = attributes[TEXT_ATTRIBUTE]
        else:
            comments.append(Comment(cast(int, part["ts"]), attributes))
    if not found:
        return None
    return Entity(pk, meta, text, tuple(sorted(comments, key=lambda c: c.ts)))


def put_entity(table: Any, entity: Entity) -> None:
    """Write (or overwrite) every part of an entity."""
    items = split(entity)
    for item in items:
        check_item(item)
    with table.batch_writer() as batch:
        for item in items:
            batch.put_item(Item=item)


def add_comment(table: Any, pk: str, comment: Comment) -> dict[str, Any]:
    """Add one comment item; refuses to overwrite a comment with the same timestamp."""
    return create_item(table, comment_item(pk, comment))


def load_entity(table: Any, pk: str, *, page_size: int | None = None) -> Entity | None:
    """Reassemble an entity from one Query of its pk, following every page (of `page_size` items)."""
    _schema_name(pk)
    items: list[dict[str, Any]] = []
    request: dict[str, Any] = {"KeyConditionExpression": "pk = :pk", "ExpressionAttributeValues": {":pk": pk}}
    if page_size is not None:
        request["Limit"] = page_size
    while True:
        response = table.query(**request)
        items.extend(response["Items"])
        if "LastEvaluatedKey" not in response:
            return assemble(pk, items)
        request["ExclusiveStartKey"] = response["LastEvaluatedKey"]
