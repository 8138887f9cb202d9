"""Item writes that assign a globalId once at creation and never change it, and lookup by globalId.

The `globalId` GSI projects KEYS_ONLY, so a lookup is a GSI Query for the item's key followed by a
GetItem on the base table.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from refdata.exceptions import ItemNotFoundError, RefdataError
from refdata.item_size import check_item
from refdata.keys import document_id, parse_key
from refdata.registry import KeyConventionError, Schema, get_schema

GLOBAL_ID = "globalId"
GLOBAL_ID_INDEX = "globalId"
KEY_ATTRIBUTES = frozenset({"pk", "sk"})


class GlobalIdError(RefdataError, ValueError):
    """A write would set or change a globalId, or one globalId names more than one item."""


class ItemExistsError(RefdataError, ValueError):
    """A create found an item already stored under the same pk and sk."""


def schema_of(item: Mapping[str, Any]) -> Schema:
    """The item's schema; its keys must follow the conventions, and an indexable item's keys must also
    make a valid OpenSearch document id, so a bad key fails here rather than in the stream sync."""
    pk, sk = item.get("pk"), item.get("sk")
    if not isinstance(pk, str) or not isinstance(sk, str):
        raise KeyConventionError("an item needs string 'pk' and 'sk' attributes")
    schema = get_schema(parse_key(pk, sk).schema)
    if schema.indexable:
        document_id(pk, sk)
    return schema


def error_code(error: Exception) -> str | None:
    """The error code of botocore's ClientError, read from its response (no botocore import: the conventions import
    without boto3, and the table is whatever the caller passes); None for any other error."""
    response = getattr(error, "response", None)
    if not isinstance(response, Mapping):
        return None
    code = response.get("Error", {}).get("Code")
    return code if isinstance(code, str) else None


def is_conditional_failure(error: Exception) -> bool:
    """botocore's ClientError for a failed condition."""
    return error_code(error) == "ConditionalCheckFailedException"


def new_item(item: Mapping[str, Any]) -> dict[str, Any]:
    """The item a create stores (no I/O): its keys checked, a fresh globalId if its schema has one, its values and
    size checked (`refdata.item_size`)."""
    schema = schema_of(item)
    if GLOBAL_ID in item:
        raise GlobalIdError(f"globalId is assigned at creation, not given ({item['pk']!r} {item['sk']!r})")
    stored = dict(item)
    if schema.global_id:
        stored[GLOBAL_ID] = str(uuid.uuid4())
    check_item(stored)
    return stored


def put_new(table: Any, stored: Mapping[str, Any]) -> dict[str, Any]:
    """Put `stored` (from `new_item`) unless an item has its key. The SDK retries a put whose answer was lost (a
    timeout, a dropped connection) although its first attempt may have written the item: the retry then fails its
    condition. DynamoDB hands back the item that failed it (`ReturnValuesOnConditionCheckFailure`), so a stored item
    equal to this one, fresh globalId included, is this create's own write and the create succeeded; any other item is
    another's (`ItemExistsError`)."""
    try:
        table.put_item(
            Item=dict(stored),
            ConditionExpression="attribute_not_exists(pk)",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
    except Exception as error:
        if is_conditional_failure(error):
            if _failed_on(error) == stored:
                return dict(stored)
            raise ItemExistsError(f"item {stored['pk']!r} {stored['sk']!r} already exists") from error
        raise
    return dict(stored)


def _failed_on(error: Exception) -> dict[str, Any] | None:
    """The item a conditional failure returned (`ALL_OLD`), as the resource layer's values (the error carries it in
    the wire format); None when it returned none."""
    wire = getattr(error, "response", {}).get("Item")
    if not wire:
        return None
    from boto3.dynamodb.types import TypeDeserializer  # only a boto3 call can have failed

    deserialize = TypeDeserializer().deserialize
    return {name: deserialize(value) for name, value in wire.items()}


def create_item(table: Any, item: Mapping[str, Any]) -> dict[str, Any]:
    """Put a new item (never overwriting another's), giving it a fresh globalId if its schema has one."""
    return put_new(table, new_item(item))


def replacement_condition(item: Mapping[str, Any]) -> dict[str, Any]:
    """The condition a whole-item replacement is put under (no I/O): the item exists, and for globalId schemas with
    the globalId the item carries; checks its keys, values and size."""
    schema = schema_of(item)
    check_item(item)
    if schema.global_id:
        if not isinstance(item.get(GLOBAL_ID), str):
            raise GlobalIdError(f"replacing {item['pk']!r} {item['sk']!r} needs its stored globalId")
        return {
            "ConditionExpression": "#globalId = :globalId",
            "ExpressionAttributeNames": {"#globalId": GLOBAL_ID},
            "ExpressionAttributeValues": {":globalId": item[GLOBAL_ID]},
        }
    if GLOBAL_ID in item:
        raise GlobalIdError(f"schema {schema.name!r} items have no globalId")
    return {"ConditionExpression": "attribute_exists(pk)"}


def put_replacement(table: Any, item: Mapping[str, Any], condition: Mapping[str, Any]) -> dict[str, Any]:
    """Put `item` under `condition` (from `replacement_condition`)."""
    try:
        table.put_item(Item=dict(item), **condition)
    except Exception as error:
        if is_conditional_failure(error):
            raise GlobalIdError(
                f"item {item['pk']!r} {item['sk']!r} does not exist with globalId {item.get(GLOBAL_ID)!r}"
            ) from error
        raise
    return dict(item)


def replace_item(table: Any, item: Mapping[str, Any]) -> dict[str, Any]:
    """Replace an existing item whole; for globalId schemas the item must carry the stored globalId."""
    return put_replacement(table, item, replacement_condition(item))


def check_update(pk: str, sk: str, changes: Mapping[str, Any]) -> None:
    """What `update_attributes` refuses (no I/O): keys off the conventions, no change, the keys or globalId."""
    schema_of({"pk": pk, "sk": sk})
    forbidden = sorted(set(changes) & (KEY_ATTRIBUTES | {GLOBAL_ID}))
    if forbidden or not changes:
        raise GlobalIdError(f"update of {pk!r} {sk!r} must set other attributes than {forbidden or 'none'}")


def update_attributes(table: Any, pk: str, sk: str, changes: Mapping[str, Any]) -> dict[str, Any]:
    """SET the given attributes on an existing item; keys and globalId cannot be changed this way."""
    check_update(pk, sk, changes)
    names = {f"#a{i}": name for i, name in enumerate(changes)}
    values = {f":v{i}": value for i, value in enumerate(changes.values())}
    assignments = ", ".join(f"#a{i} = :v{i}" for i in range(len(changes)))
    try:
        response = table.update_item(
            Key={"pk": pk, "sk": sk},
            UpdateExpression=f"SET {assignments}",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
            ReturnValues="ALL_NEW",
        )
    except Exception as error:
        if is_conditional_failure(error):
            raise ItemNotFoundError(f"no item {pk!r} {sk!r}") from error
        raise
    return dict(response["Attributes"])


def lookup(table: Any, global_id: str) -> dict[str, Any] | None:
    """The one item with this globalId, or None: GSI Query for its key, then GetItem.

    GSI reads are eventually consistent, so an item created a moment ago may not be found yet.
    """
    response = table.query(
        IndexName=GLOBAL_ID_INDEX,
        KeyConditionExpression="#globalId = :globalId",
        ExpressionAttributeNames={"#globalId": GLOBAL_ID},
        ExpressionAttributeValues={":globalId": global_id},
        Limit=2,
    )
    keys = response["Items"]
    if len(keys) > 1:
        raise GlobalIdError(f"globalId {global_id!r} names more than one item")
    if not keys:
        return None
    found = table.get_item(Key={"pk": keys[0]["pk"], "sk": keys[0]["sk"]}).get("Item")
    return dict(found) if found is not None else None
