"""The DynamoDB side of the ops tools: a schema's items by consistent, paginated scan, and single reads."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from datamodel.registry import Schema

Item = dict[str, Any]  # DynamoDB JSON, as the low-level client returns it


def scan_pages(
    dynamodb: Any, table: str, schema: Schema, *, page_items: int | None = None
) -> Iterator[list[Item]]:
    """Every item of `schema`, one scan page at a time (strongly consistent; filtered on the pk prefix).

    The filter is `begins_with(pk, "<schema>::")`: the separator is part of the prefix, so a schema whose
    name starts with another's never matches it. A page can be empty while the scan goes on.
    """
    request: dict[str, Any] = {
        "TableName": table,
        "ConsistentRead": True,
        "FilterExpression": "begins_with(#pk, :prefix)",
        "ExpressionAttributeNames": {"#pk": "pk"},
        "ExpressionAttributeValues": {":prefix": {"S": schema.pk_prefix}},
    }
    if page_items is not None:
        request["Limit"] = page_items
    while True:
        page = dynamodb.scan(**request)
        yield page.get("Items", [])
        if "LastEvaluatedKey" not in page:
            return
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def keys_of(item: Item) -> Item:
    return {"pk": item["pk"], "sk": item["sk"]}
