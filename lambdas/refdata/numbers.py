"""DynamoDB's number type: the text it sends numbers as, and the range and precision it stores.

DynamoDB sends every number as a string (`{"N": "12.5"}`) of ASCII digits with an optional minus sign, fraction
and exponent (`-12.5`, `1E-130`, `1.5E+3`). Python's `int`, `float` and `Decimal` accept much more (`1_000`,
` 12 `, `+5`, `٣`, `NaN`, `Infinity`): text DynamoDB never produces, so it is refused here rather than indexed as
a number. Within the grammar a number has at most 38 significant digits and a magnitude of 1E-130 to
9.99...E+125 (or is zero): anything else cannot come from DynamoDB either, and could not be written to it.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Final

from refdata.exceptions import RefdataError

MAX_NUMBER_DIGITS: Final = 38
MIN_NUMBER_EXPONENT: Final = -130
MAX_NUMBER_EXPONENT: Final = 125
NUMBER_TEXT: Final = re.compile(r"-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")


class NumberError(RefdataError, ValueError):
    """A value that is not a DynamoDB number; the message says why."""


def range_error(number: Decimal) -> str | None:
    """Why DynamoDB could not hold this finite Decimal (`has more than ...`, `is outside ...`), or None."""
    if number.is_zero():
        return None
    # Not normalize(): it rounds to the context precision (28 digits) and would hide a 39-digit number.
    digits = len("".join(map(str, number.as_tuple().digits)).strip("0"))
    if digits > MAX_NUMBER_DIGITS:
        return f"has more than {MAX_NUMBER_DIGITS} significant digits"
    if not MIN_NUMBER_EXPONENT <= number.adjusted() <= MAX_NUMBER_EXPONENT:
        return "is outside DynamoDB's range 1E-130 .. 9.99E+125"
    return None


def parse_number_text(text: object) -> int | Decimal:
    """A DynamoDB number's text as an exact int (no fraction, no exponent) or Decimal; NumberError for any text
    DynamoDB would not send."""
    if type(text) is not str or NUMBER_TEXT.fullmatch(text) is None:
        raise NumberError(f"not a DynamoDB number: {text!r:.60}")
    plain = "." not in text and "e" not in text and "E" not in text
    if plain and len(text) <= MAX_NUMBER_DIGITS:
        return int(text)
    exact = Decimal(text)
    problem = range_error(exact)
    if problem is not None:
        raise NumberError(f"number {text!r:.60} {problem}")
    return int(text) if plain else exact
