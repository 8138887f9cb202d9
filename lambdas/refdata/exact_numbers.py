"""Decimals a double cannot hold, as search documents keep them: `exactNumbers`.

OpenSearch holds every fraction as a double. The sync sends a decimal whose shortest double representation names
another value as its nearest double, and stores its exact DynamoDB text in the document's top-level object
`exactNumbers`, keyed by the RFC 6901 JSON Pointer of its place (`/price`, `/rates/0/value`, `/a~1b` for the key
`a/b`). `apply_exact_numbers` turns an engine `_source` back into the numbers DynamoDB holds, digit for digit.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Final

from refdata.exceptions import RefdataError
from refdata.numbers import NumberError, parse_number_text

EXACT_NUMBERS_FIELD: Final = "exactNumbers"
_INDEX: Final = re.compile(r"0|[1-9][0-9]*")  # an array index token (RFC 6901: no leading zeros)


class ExactNumbersError(RefdataError, ValueError):
    """An `exactNumbers` entry that does not name a number of its document, or whose text is not a number."""


def pointer_token(key: str) -> str:
    """One member name as a JSON Pointer reference token (`~` -> `~0`, `/` -> `~1`)."""
    return key.replace("~", "~0").replace("/", "~1")


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def apply_exact_numbers(source: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `source` without `exactNumbers`, each number it names replaced by its exact text as a Decimal.

    Raises ExactNumbersError when a pointer does not lead to a number of `source` or its text is no DynamoDB
    number: the document is not one the sync wrote.
    """
    doc: dict[str, Any] = {name: value for name, value in source.items() if name != EXACT_NUMBERS_FIELD}
    exact = source.get(EXACT_NUMBERS_FIELD) or {}
    if not isinstance(exact, Mapping):
        raise ExactNumbersError(f"{EXACT_NUMBERS_FIELD} is not an object: {exact!r:.100}")
    for pointer, text in exact.items():
        _replace(doc, pointer, _exact(pointer, text))
    return doc


def _exact(pointer: str, text: Any) -> Decimal:
    try:
        number = parse_number_text(text)
    except NumberError as error:
        raise ExactNumbersError(f"{EXACT_NUMBERS_FIELD} {pointer!r}: {error}") from None
    return Decimal(number)


def _replace(doc: dict[str, Any], pointer: str, number: Decimal) -> None:
    """Replace the number at `pointer` in `doc`, copying each container on the way (`source` stays as it was)."""
    if not isinstance(pointer, str) or not pointer.startswith("/"):
        raise ExactNumbersError(f"{EXACT_NUMBERS_FIELD} key {pointer!r:.100} is not a JSON Pointer")
    container: Any = doc
    *path, last = (_unescape(token) for token in pointer[1:].split("/"))
    for token in path:
        key = _member(container, token, pointer)
        member = container[key]
        if not isinstance(member, dict | list):
            raise ExactNumbersError(f"{EXACT_NUMBERS_FIELD} {pointer!r}: {token!r} holds no object or array")
        container[key] = copied = dict(member) if isinstance(member, dict) else list(member)
        container = copied
    key = _member(container, last, pointer)
    held = container[key]
    if isinstance(held, bool) or not isinstance(held, int | float | Decimal):
        raise ExactNumbersError(f"{EXACT_NUMBERS_FIELD} {pointer!r} names {held!r:.100}, not a number")
    container[key] = number


def _member(container: dict[str, Any] | list[Any], token: str, pointer: str) -> Any:
    """The key or index `token` names in `container`."""
    if isinstance(container, dict):
        if token in container:
            return token
    elif _INDEX.fullmatch(token) and int(token) < len(container):
        return int(token)
    raise ExactNumbersError(f"{EXACT_NUMBERS_FIELD} {pointer!r}: the document has nothing at {token!r}")
