"""Sort keys from an atomic counter: one UpdateItem ADD on a counter item outside the data partition.

The counter of data partition `<pk>` is the item (`counter::<pk>`, `counter`), so it never shows up in a
Query of `<pk>` and never matches the stream filter's indexable prefixes. There is no read-then-write:
ADD returns the incremented value, and the data item is then put with `attribute_not_exists(pk)`, so a
duplicate sk is impossible. A put that fails after the ADD leaves a gap in the sequence.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from refdata.keys import build_pk, build_sk
from refdata.registry import COUNTER, CounterSk, KeyConventionError, get_schema

COUNTER_ATTRIBUTE = "value"


def counter_key(data_pk: str) -> dict[str, str]:
    """Key of the counter item that numbers the items of `data_pk`."""
    return {"pk": build_pk(COUNTER, {"partition": data_pk}), "sk": build_sk(COUNTER, {})}


def next_value(table: Any, data_pk: str) -> int:
    """Atomically increment the partition's counter and return the new value (1 for the first call)."""
    response = table.update_item(
        Key=counter_key(data_pk),
        UpdateExpression="ADD #value :one",
        ExpressionAttributeNames={"#value": COUNTER_ATTRIBUTE},
        ExpressionAttributeValues={":one": 1},
        ReturnValues="UPDATED_NEW",
    )
    return int(response["Attributes"][COUNTER_ATTRIBUTE])


def next_key(table: Any, schema_name: str, pk_values: Mapping[str, object]) -> tuple[str, str]:
    """(pk, sk) for a new item of a counter-keyed schema; put it with `globalid.create_item`."""
    schema = get_schema(schema_name)
    if not isinstance(schema.sk, CounterSk):
        raise KeyConventionError(f"schema {schema_name!r} does not use counter sort keys")
    pk = build_pk(schema_name, pk_values)
    return pk, build_sk(schema_name, {schema.sk.field_name: next_value(table, pk)})
