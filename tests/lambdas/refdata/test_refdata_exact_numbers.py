"""exactNumbers: the exact text of decimals a double cannot hold, applied back to a document by JSON Pointer."""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

import pytest
from refdata.exact_numbers import EXACT_NUMBERS_FIELD, ExactNumbersError, apply_exact_numbers, pointer_token

PI = "3.1415926535897932384626433832795028"


def test_each_pointer_gets_its_exact_decimal_and_the_field_goes() -> None:
    source: dict[str, Any] = {
        "price": float(PI),
        "rates": [{"value": 0.1}, {"value": 2}],
        "a/b": {"~c": 1e-130},
        "name": "x",
        EXACT_NUMBERS_FIELD: {
            "/price": PI,
            "/rates/0/value": "0.1000000000000000055511151231257827",
            f"/{pointer_token('a/b')}/{pointer_token('~c')}": "1E-130",
        },
    }
    before = copy.deepcopy(source)

    doc = apply_exact_numbers(source)

    assert str(doc["price"]) == PI
    assert doc["rates"] == [{"value": Decimal("0.1000000000000000055511151231257827")}, {"value": 2}]
    assert doc["a/b"] == {"~c": Decimal("1E-130")}
    assert doc["name"] == "x" and EXACT_NUMBERS_FIELD not in doc
    assert source == before  # a copy: the answer it came from is left as it was


def test_a_document_without_exact_numbers_is_copied_as_it_is() -> None:
    assert apply_exact_numbers({"n": 1, "f": 0.5}) == {"n": 1, "f": 0.5}


def test_pointer_tokens_escape_tilde_before_slash() -> None:
    assert pointer_token("a~/b") == "a~0~1b"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ({"price": 1.5, EXACT_NUMBERS_FIELD: {"/missing": "1.5"}}, "nothing at 'missing'"),
        ({"price": "1.5", EXACT_NUMBERS_FIELD: {"/price": "1.5"}}, "not a number"),
        ({"price": True, EXACT_NUMBERS_FIELD: {"/price": "1"}}, "not a number"),
        ({"price": 1.5, EXACT_NUMBERS_FIELD: {"/price": "1.5x"}}, "not a DynamoDB number"),
        ({"price": 1.5, EXACT_NUMBERS_FIELD: {"price": "1.5"}}, "not a JSON Pointer"),
        ({"l": [1.5], EXACT_NUMBERS_FIELD: {"/l/01": "1.5"}}, "nothing at '01'"),
        ({"l": [1.5], EXACT_NUMBERS_FIELD: {"/l/1": "1.5"}}, "nothing at '1'"),
        ({"s": "x", EXACT_NUMBERS_FIELD: {"/s/0": "1.5"}}, "no object or array"),
        ({EXACT_NUMBERS_FIELD: ["/price"]}, "not an object"),
    ],
)
def test_an_entry_that_names_no_number_of_the_document_is_refused(
    source: dict[str, Any], message: str
) -> None:
    with pytest.raises(ExactNumbersError, match=message):
        apply_exact_numbers(source)
