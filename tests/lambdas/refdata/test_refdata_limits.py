"""The engine's document limits, checked before an item is sent (refdata.limits), and agreeing with the real engine's
document parser and mapping limits (tests/support/engine_node.py)."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from boto3.dynamodb.types import Binary
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from refdata.limits import (
    DOCUMENT_LIMIT,
    ENGINE_LIMITS,
    FIELD_CONFLICT,
    INVALID_FIELD_NAME,
    DocumentLimitError,
    Limits,
    check_item,
    mapped_tree,
)
from search.indices import index_mappings

from tests.support.engine_node import EngineNode

TEMPLATE = index_mappings("geozone")
MAPPED = TEMPLATE["properties"]
MAPPED_FIELDS = mapped_tree(MAPPED)[1]
TEMPLATE_INDEX = {"settings": {"index.number_of_replicas": 0}, "mappings": TEMPLATE}


def nested(levels: int) -> dict[str, Any]:
    """An item of `levels` objects (itself the first), one inside the other."""
    value: dict[str, Any] = {"x": "leaf"}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def refusal(
    item: Any, mapped: dict[str, Any] | None = MAPPED, limits: Limits = ENGINE_LIMITS
) -> tuple[str, str]:
    with pytest.raises(DocumentLimitError) as raised:
        check_item(item, mapped, limits=limits)
    return raised.value.kind, raised.value.detail


def test_an_ordinary_item_passes() -> None:
    check_item(
        {
            "pk": "geozone::bcparks_1",
            "name": "Zone",
            "capacity": 5,
            "location": {"lat": 49.0, "lon": -123.0},  # geo_point: its mapper parses the object
            "geometry": {"type": "Point", "coordinates": [-123.0, 49.0]},  # geo_shape, likewise
            "openings": [{"day": "mon", "from": 800}, {"day": "tue", "to": 2000}],
            "tags": {"lake", "trail"},
            "dotted.name": "x",
        },
        MAPPED,
    )


def test_objects_nest_at_most_to_the_depth_limit_counting_the_item_itself() -> None:
    check_item(nested(20), MAPPED)
    kind, detail = refusal(nested(21))
    assert kind == DOCUMENT_LIMIT
    assert detail.startswith("index.mapping.depth.limit [20]: object field [a.a.a")
    assert "is at depth 21" in detail


def test_dotted_names_make_objects_that_count_towards_the_depth() -> None:
    check_item({".".join(["a"] * 19) + ".x": 1}, MAPPED)
    assert refusal({".".join(["a"] * 20) + ".x": 1})[0] == DOCUMENT_LIMIT


def test_arrays_nest_at_most_to_the_depth_limit() -> None:
    check_item({"a": json.loads("[" * 20 + '"x"' + "]" * 20)}, MAPPED)
    kind, detail = refusal({"a": json.loads("[" * 21 + '"x"' + "]" * 21)})
    assert kind == DOCUMENT_LIMIT and "arrays nest more than 20 deep at [a]" in detail


def test_every_string_costs_two_fields_and_the_templates_fields_count_too() -> None:
    strings = (1000 - MAPPED_FIELDS) // 2
    check_item({f"s{i}": "x" for i in range(strings)}, MAPPED)
    kind, detail = refusal({f"s{i}": "x" for i in range(strings + 1)})
    assert kind == DOCUMENT_LIMIT
    needed = MAPPED_FIELDS + 2 * (strings + 1)
    assert detail.startswith(f"index.mapping.total_fields.limit [1000]: the document needs {needed} fields")
    # Numbers, booleans and objects cost one each; a null maps nothing.
    check_item({**{f"n{i}": i for i in range(1000 - MAPPED_FIELDS)}, "none": None}, MAPPED)
    assert refusal({f"n{i}": i for i in range(1001 - MAPPED_FIELDS)})[0] == DOCUMENT_LIMIT


def test_a_field_counts_once_however_many_elements_hold_it() -> None:
    check_item({"rows": [{f"c{i}": "x" for i in range(400)} for _ in range(50)]}, MAPPED)


@pytest.mark.parametrize(
    "item",
    [
        {"label": "x", "label.sub": "y"},
        {"label.sub": "y", "label": "x"},
        {"rows": [{"a": "x"}, {"a": {"b": "y"}}]},
        {"rows": [{"a": {"b": "y"}}, {"a": "x"}]},
        {"mixed": ["x", {"y": 1}]},
        {"geometryUrl": {"nested": "x"}},  # mapped as a keyword by the template
        {"pk.part": "x"},
    ],
)
def test_one_path_cannot_be_both_a_value_and_an_object(item: dict[str, Any]) -> None:
    kind, detail = refusal(item)
    assert kind == FIELD_CONFLICT
    assert "holds a value" in detail or "is an object" in detail


def test_dotted_names_and_objects_meet_in_one_object() -> None:
    item = {"label": {"sub": "y"}, "label.other": 1, "label.deep.x": "z", "label.deep": {"y": "w"}}
    check_item(item, MAPPED)


@pytest.mark.parametrize(
    ("name", "why"),
    [
        (".", "is only dots"),
        ("..", "is only dots"),
        ("a..b", "an empty part"),
        (".a", "an empty part"),
        ("a. .b", "a part of only whitespace"),
        ("", "cannot be an empty string"),
    ],
)
def test_names_the_engine_cannot_split_into_an_object_path_are_refused(name: str, why: str) -> None:
    kind, detail = refusal({name: 1})
    assert kind == INVALID_FIELD_NAME and why in detail


def test_a_trailing_dot_is_dropped_as_javas_split_drops_it() -> None:
    check_item({"a.": 1}, MAPPED)


# The engine keeps an object's name as written in the path of what it maps beneath it, trailing dot included, and
# splits that path again only for the objects a dotted name's array adds when the array maps nothing else: then the
# doubled dot ("x..b") is refused. Found by the property test below on {"a.": {"a.b": []}}.
@pytest.mark.parametrize(
    ("item", "refused"),
    [
        ({"x.": {"b.c": []}}, True),
        ({"x.": {"b.c": [None, [[]]]}}, True),
        ({"x..": {"b.c.d": []}}, True),
        ({"x": {"y.": [{"b.c": []}]}}, True),
        ({"x.": {"y": {"b.c.": []}}}, True),
        ({"x.": {"b": {"z": "x"}, "b.c": []}}, True),
        ({"x.": {"b.c": [None, "x"]}}, False),
        ({"x.": {"b.c": [{}]}}, False),
        ({"x.": {"b.c": None}}, False),
        ({"x.": {"b": []}}, False),
        ({"x": {"b.c": []}}, False),
        ({"b.c.": []}, False),
    ],
    ids=json.dumps,
)
def test_a_dotted_names_empty_array_beneath_a_trailing_dot_is_refused_as_the_engine_refuses_it(
    engine: EngineNode, item: dict[str, Any], refused: bool
) -> None:
    answer = engine_refusal(engine, item, TEMPLATE_INDEX)
    assert (answer is not None) == refused, answer
    if refused:
        kind, detail = refusal(item)
        assert kind == INVALID_FIELD_NAME and "name ends with a dot" in detail, detail
    else:
        check_item(item, MAPPED)


def test_names_over_the_parsers_limit_are_refused_counting_utf16_units() -> None:
    check_item({"n" * 50_000: 1}, MAPPED)
    kind, detail = refusal({"n" * 50_001: 1})
    assert kind == DOCUMENT_LIMIT and "field name of 50001 characters" in detail
    # A character beyond the basic plane is two UTF-16 units, as Java counts a String's length.
    check_item({"\U0001f600" * 25_000: 1}, MAPPED)
    assert refusal({"\U0001f600" * 25_000 + "n": 1})[0] == DOCUMENT_LIMIT


def test_writers_check_boto3_resource_values() -> None:
    """An item as the boto3 resource API holds it: Decimal numbers, sets, binaries (indexed as base64 text)."""
    item = {"price": Decimal("12.50"), "tags": {"a", "b"}, "blob": Binary(b"\x00"), "raw": b"\x01"}
    check_item(item, MAPPED)
    small = Limits(total_fields=MAPPED_FIELDS + 6)  # price 1, tags 2, blob 2, raw 2 = 7
    assert refusal(item, limits=small)[0] == DOCUMENT_LIMIT


def test_without_a_template_only_the_items_own_fields_count() -> None:
    check_item({f"s{i}": "x" for i in range(500)})
    assert refusal({f"s{i}": "x" for i in range(501)}, mapped=None)[0] == DOCUMENT_LIMIT


# Property: the check before sending refuses exactly what the engine refuses, in an index of the template whose
# depth and total-fields limits are small enough for short documents to reach them (strings only as values: a path
# given two kinds of value is test_refdata_limits_engine.py's).
names = st.sampled_from(["a", "b", "c", "a.b", "b.c", "a.", ".a", "a..b", "geometryUrl", "pk"])
values = st.recursive(
    st.none() | st.just("x"),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(names, children, max_size=3),
    max_leaves=12,
)
SMALL = Limits(depth=4, total_fields=MAPPED_FIELDS + 8)
SMALL_LIMITS = {
    "index.mapping.depth.limit": SMALL.depth,
    "index.mapping.total_fields.limit": SMALL.total_fields,
}
SMALL_INDEX = {"settings": TEMPLATE_INDEX["settings"] | SMALL_LIMITS, "mappings": TEMPLATE}


def engine_refusal(engine: EngineNode, item: dict[str, Any], index: dict[str, Any]) -> Any:
    """The engine's answer to `item` in a new index of `index`'s settings and mappings: None when it took it."""
    created = engine.request("PUT", "/limits-property", index)
    assert created.status == 200, created.body
    try:
        answer = engine.request("PUT", "/limits-property/_doc/id", json.loads(json.dumps(item)))
    finally:
        engine.request("DELETE", "/limits-property")
    return None if answer.status < 300 else answer.body


# Each example creates and deletes its own index (the engine fixture's wipe between examples is not needed).
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(names, values, max_size=4))
@example({"a.": {"a.b": []}})  # a random draw in CI found it: the engine refuses it, the check let it through
def test_the_check_refuses_exactly_what_the_engine_refuses(engine: EngineNode, item: dict[str, Any]) -> None:
    try:
        check_item(item, MAPPED, limits=SMALL)
        checked = None
    except DocumentLimitError as error:
        checked = error.kind
    refused = engine_refusal(engine, item, SMALL_INDEX)
    assert (checked is None) == (refused is None), (checked, refused)
