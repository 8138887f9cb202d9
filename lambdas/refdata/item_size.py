"""DynamoDB item size, by the documented sizing rules, and the checks DynamoDB applies on a put.

Rules (docs: "DynamoDB item sizes and formats"): every attribute counts the UTF-8 bytes of its name plus
its value. String: UTF-8 bytes. Number: 1 byte per two significant digits (leading and trailing zeros
trimmed), rounded up, plus 1. Binary: raw bytes. Boolean and null: 1. List and Map: 3 bytes plus 1 byte
per element plus the elements (a map element counts its key's bytes). Sets: the sum of their members.
The documentation calls the number rule approximate; it is the only published one, so write thresholds
leave a margin below the 400 KB limit rather than relying on the last byte.

Values are those the boto3 resource API takes: str, int, Decimal, bool, None, bytes, boto3 Binary,
list, dict and non-empty sets. Floats are refused as boto3 refuses them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence, Set
from datetime import date
from decimal import Decimal
from typing import Any

from refdata.exceptions import RefdataError
from refdata.keys import MAX_PK_BYTES, MAX_SK_BYTES
from refdata.numbers import range_error

MAX_ITEM_BYTES = 400 * 1024
MAX_NESTING = 32


class ItemSizeError(RefdataError, ValueError):
    """An item, or a value in it, that DynamoDB would refuse."""


def number_size(value: int | Decimal) -> int:
    """Bytes for a number: ceil(significant digits / 2) + 1."""
    number = Decimal(value)
    if not number.is_finite():
        raise ItemSizeError(f"number {value!r} is not finite")
    problem = range_error(number)
    if problem is not None:
        raise ItemSizeError(f"number {value!r} {problem}")
    if number.is_zero():
        return 1
    digits = len("".join(map(str, number.as_tuple().digits)).strip("0"))
    return math.ceil(digits / 2) + 1


def value_size(value: Any, depth: int = 1) -> int:
    """Bytes for one attribute value, without its name."""
    if depth > MAX_NESTING:
        raise ItemSizeError(f"value nests deeper than DynamoDB's {MAX_NESTING} levels")
    if value is None or isinstance(value, bool):
        return 1
    if isinstance(value, str):
        return len(value.encode("utf-8"))
    if isinstance(value, int | Decimal):
        return number_size(value)
    if isinstance(value, bytes | bytearray):
        return len(value)
    binary = _binary(value)
    if binary is not None:
        return len(binary)
    if isinstance(value, Mapping):
        return 3 + sum(len(str(k).encode("utf-8")) + value_size(v, depth + 1) + 1 for k, v in value.items())
    if isinstance(value, Set):
        return _set_size(value)
    if isinstance(value, Sequence):
        return 3 + sum(value_size(v, depth + 1) + 1 for v in value)
    raise ItemSizeError(f"value {value!r} of type {type(value).__name__} cannot be stored: {_advice(value)}")


def _advice(value: Any) -> str:
    """What to store instead of a value DynamoDB has no type for."""
    if isinstance(value, date):  # a datetime is a date too
        return f"DynamoDB stores dates as ISO-8601 text: pass {type(value).__name__}.isoformat() ({value.isoformat()!r})"
    if isinstance(value, float):
        return f"DynamoDB numbers are exact: pass Decimal({str(value)!r}) or an int"
    return "DynamoDB stores text, numbers (int, Decimal), booleans, bytes, None, lists, mappings and sets"


def _binary(value: Any) -> bytes | None:
    """The bytes of boto3's `Binary` wrapper (recognised by shape: the conventions import without boto3)."""
    if type(value).__name__ == "Binary" and isinstance(getattr(value, "value", None), bytes | bytearray):
        return bytes(value.value)
    return None


def _set_size(members: Set[Any]) -> int:
    if not members:
        raise ItemSizeError("sets must not be empty")
    kinds = {_set_kind(m) for m in members}
    if len(kinds) != 1 or None in kinds:
        raise ItemSizeError(f"set {members!r} must hold only strings, only numbers or only binaries")
    return sum(value_size(m) for m in members)


def _set_kind(member: Any) -> str | None:
    if isinstance(member, bool):
        return None
    if isinstance(member, str):
        return "S"
    if isinstance(member, int | Decimal):
        return "N"
    if isinstance(member, bytes) or _binary(member) is not None:
        return "B"
    return None


def item_size(item: Mapping[str, Any]) -> int:
    """Bytes of a whole item: attribute names plus values."""
    for name in item:
        if not isinstance(name, str) or not name:
            raise ItemSizeError(f"attribute name {name!r} must be a non-empty string")
    return sum(len(name.encode("utf-8")) + value_size(value) for name, value in item.items())


def check_item(item: Mapping[str, Any]) -> int:
    """The item's size, or ItemSizeError for anything a put would be refused for."""
    for name, limit in (("pk", MAX_PK_BYTES), ("sk", MAX_SK_BYTES)):
        key = item.get(name)
        if not isinstance(key, str) or not key or len(key.encode("utf-8")) > limit:
            raise ItemSizeError(f"key attribute {name!r} must be a string of 1..{limit} bytes, got {key!r}")
    size = item_size(item)
    if size > MAX_ITEM_BYTES:
        raise ItemSizeError(f"item {item['pk']!r} {item['sk']!r} is {size} bytes; DynamoDB's limit is 400 KB")
    return size
