"""DynamoDB's number grammar and range: what it sends is parsed exactly, anything else is refused."""

from __future__ import annotations

from decimal import Decimal

import pytest
from refdata.numbers import NumberError, parse_number_text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("42", 42),
        ("-7", -7),
        ("007", 7),
        ("12345678901234567890123456789012345678", 12345678901234567890123456789012345678),
        ("1" + "0" * 125, 10**125),  # one significant digit, the largest magnitude
        ("12.5", Decimal("12.5")),
        ("-0.25", Decimal("-0.25")),
        ("1E-130", Decimal("1E-130")),
        ("1.5e+3", Decimal("1.5E+3")),
        (
            "9.9999999999999999999999999999999999999E+125",
            Decimal("9.9999999999999999999999999999999999999E+125"),
        ),
        ("0", 0),
        ("0E-200", Decimal("0")),  # zero has no magnitude
    ],
)
def test_the_texts_dynamodb_sends_are_parsed_exactly(text: str, expected: int | Decimal) -> None:
    value = parse_number_text(text)
    assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize(
    "text",
    [
        "1_000",  # Python's int() and Decimal() accept digit separators
        " 12 ",  # ... and surrounding spaces
        "\u0661\u0662",  # ... and other scripts' digits (Arabic-Indic 12)
        "\uff11",  # fullwidth 1
        "+5",
        ".5",
        "5.",
        "1e",
        "NaN",
        "Infinity",
        "-Infinity",
        "0x10",
        "",
        "1 000",
        "12345678901234567890123456789012345678.9",  # 39 significant digits
        "123456789012345678901234567890123456789",  # 39 digits
        "1E+126",
        "1E400",  # would be Infinity as a double
        "1E-131",
    ],
)
def test_texts_dynamodb_never_sends_are_refused(text: str) -> None:
    with pytest.raises(NumberError):
        parse_number_text(text)


@pytest.mark.parametrize("value", [12, 1.5, None, b"12", ["1"]])
def test_a_number_is_always_text(value: object) -> None:
    with pytest.raises(NumberError, match="not a DynamoDB number"):
        parse_number_text(value)
