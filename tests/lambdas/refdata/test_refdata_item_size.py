from decimal import Decimal

import pytest
from boto3.dynamodb.types import Binary
from refdata.item_size import MAX_ITEM_BYTES, ItemSizeError, check_item, item_size, value_size


def test_published_example_shirt_item_is_23_bytes():
    # The example quoted from the DynamoDB developer guide: "shirt-color" = "R" and "shirt-size" = "M"
    # make an item of 23 bytes (names 11 + 10, values 1 + 1).
    assert item_size({"shirt-color": "R", "shirt-size": "M"}) == 23


@pytest.mark.parametrize(
    ("value", "size"),
    [
        ("", 0),
        ("héllo", 6),
        (True, 1),
        (None, 1),
        (b"\x00\x01\x02", 3),
        (Binary(b"abcd"), 4),
        (0, 1),
        (7, 2),
        (12, 2),
        (123, 3),
        (Decimal("0012300"), 3),
        (Decimal("-1.5"), 2),
        (Decimal("3.14159"), 4),
        ([], 3),
        ({}, 3),
        (["a", "bc"], 3 + (1 + 1) + (2 + 1)),
        ({"k": "v", "kk": 1}, 3 + (1 + 1 + 1) + (2 + 2 + 1)),
        ({"a", "bcd"}, 4),
        ({1, 22, 333}, 2 + 2 + 3),
        ({b"ab", b"c"}, 3),
    ],
)
def test_value_sizes_follow_the_documented_rules(value, size):
    assert value_size(value) == size


def test_attribute_names_count_in_utf8_bytes():
    assert item_size({"ñ": "x"}) == 3


def test_an_item_of_exactly_400_kb_is_accepted_and_one_byte_more_is_not():
    base = {"pk": "p", "sk": "s", "d": ""}
    filler = MAX_ITEM_BYTES - item_size(base)
    assert check_item({**base, "d": "x" * filler}) == MAX_ITEM_BYTES
    with pytest.raises(ItemSizeError, match="400 KB"):
        check_item({**base, "d": "x" * (filler + 1)})


@pytest.mark.parametrize(
    "value",
    [
        1.5,
        Decimal("NaN"),
        Decimal("1" * 39),
        Decimal("1E+126"),
        Decimal("1E-131"),
        set(),
        {"a", 1},
        {True},
        object(),
    ],
)
def test_values_dynamodb_refuses_are_rejected(value):
    with pytest.raises(ItemSizeError):
        value_size(value)


def test_nesting_deeper_than_32_levels_is_rejected():
    deep: object = "x"
    for _ in range(32):
        deep = [deep]
    with pytest.raises(ItemSizeError, match="32"):
        value_size(deep)


@pytest.mark.parametrize(
    "item",
    [
        {"sk": "s"},
        {"pk": "", "sk": "s"},
        {"pk": "p", "sk": 1},
        {"pk": "p" * 2049, "sk": "s"},
        {"pk": "p", "sk": "s" * 1025},
    ],
)
def test_items_with_bad_keys_are_rejected(item):
    with pytest.raises(ItemSizeError, match="key attribute"):
        check_item(item)


def test_empty_attribute_names_are_rejected():
    with pytest.raises(ItemSizeError, match="attribute name"):
        item_size({"": "x"})
