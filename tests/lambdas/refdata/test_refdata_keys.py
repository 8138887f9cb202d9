import re
from datetime import date, datetime
from functools import partial

import pytest
from boto3.dynamodb.conditions import Key
from hypothesis import given, settings
from hypothesis import strategies as st
from refdata.keys import (
    ItemKey,
    build_key,
    build_pk,
    build_sk,
    document_id,
    encode,
    parse_document_id,
    parse_key,
    parse_pk,
    parse_sk,
    pk_prefix,
    sk_prefix,
)
from refdata.registry import COUNTER, REGISTRY, Field, KeyConventionError, Kind, Schema

texts = st.text(st.characters(codec="utf-8", exclude_characters="#"), min_size=1, max_size=20).filter(
    lambda s: "::" not in s and not s.startswith(":") and not s.endswith(":")
)
uuids = st.uuids(version=4).map(str)


def _value(field: Field) -> st.SearchStrategy[object]:
    if field.kind is Kind.NUMBER:
        return st.integers(0, 10**field.width - 1)
    if field.kind is Kind.DATE:
        return st.dates()
    if field.kind is Kind.UUID:
        return uuids
    if field.kind is Kind.KEY:
        return st.builds(lambda c: f"geozone::{c}", texts)
    return texts


def _sk_values(schema: Schema) -> st.SearchStrategy[dict[str, object]]:
    if schema.name == "thread":
        return st.one_of(
            st.sampled_from([{"part": "META"}, {"part": "TEXT"}]),
            st.builds(lambda ts: {"part": "COMMENT", "ts": ts}, st.integers(0, 10**13 - 1)),
        )
    return st.fixed_dictionaries({f.name: _value(f) for f in schema.sk_fields})


@st.composite
def item_keys(draw: st.DrawFn) -> ItemKey:
    schema = draw(st.sampled_from(list(REGISTRY.values())))
    values = draw(st.fixed_dictionaries({f.name: _value(f) for f in schema.pk_fields}))
    values.update(draw(_sk_values(schema)))
    return ItemKey(schema.name, values)


@settings(max_examples=300, deadline=None)
@given(item_keys())
def test_parse_inverts_build_for_every_schema(key):
    pk, sk = build_key(key)
    assert parse_key(pk, sk) == key


@settings(max_examples=200, deadline=None)
@given(item_keys())
def test_document_id_round_trips(key):
    pk, sk = build_key(key)
    assert parse_document_id(document_id(pk, sk)) == (pk, sk)


@settings(max_examples=200, deadline=None)
@given(item_keys(), item_keys())
def test_different_items_never_share_a_document_id(a, b):
    keys_a, keys_b = build_key(a), build_key(b)
    if keys_a != keys_b:
        assert document_id(*keys_a) != document_id(*keys_b)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 10**6 - 1), st.integers(0, 10**6 - 1))
def test_padded_numbers_sort_as_text_in_numeric_order(a, b):
    field = Field("n", Kind.NUMBER, width=6)
    assert (encode(field, a) < encode(field, b)) == (a < b)


def test_seed_examples_build_exactly():
    assert build_pk("geozone", {"collectionId": "bcparks_1"}) == "geozone::bcparks_1"
    pd = {"collectionId": "bcparks_1", "activityType": "dayuse", "activityId": "1"}
    assert build_pk("productDate", pd) == "productDate::bcparks_1::dayuse::1"
    assert build_sk("productDate", {"productId": "1", "date": date(2025, 12, 31)}) == "1::2025-12-31"
    assert build_sk("geozone", {"seq": 7}) == "0000000007"
    assert build_sk("thread", {"part": "COMMENT", "ts": 1234567890}) == "COMMENT#0001234567890"


def test_counter_pk_wraps_the_data_pk():
    assert build_pk(COUNTER, {"partition": "geozone::bcparks_1"}) == "counter::geozone::bcparks_1"


@pytest.mark.parametrize("value", ["a::b", "a#b", "a:", ":a", "", "a\n:"])
def test_separator_in_a_value_is_rejected_naming_field_and_value(value):
    with pytest.raises(KeyConventionError, match=re.escape(f"field 'collectionId' value {value!r}")):
        build_pk("geozone", {"collectionId": value})


@pytest.mark.parametrize(
    ("field", "value"),
    [
        (Field("d", Kind.DATE), datetime(2025, 1, 1)),
        (Field("d", Kind.DATE), "2025-01-01"),
        (Field("n", Kind.NUMBER, width=3), 1000),
        (Field("n", Kind.NUMBER, width=3), -1),
        (Field("n", Kind.NUMBER, width=3), True),
        (Field("u", Kind.UUID), "046C8F4C-B838-40A4-8836-C27BDF6F45C6"),
        (Field("u", Kind.UUID), "c4ebd2e9-b9a2-4ff5-82c9-f22ba113a43e\n"),
        (Field("t"), 5),
    ],
)
def test_values_of_the_wrong_type_or_range_are_rejected(field, value):
    with pytest.raises(KeyConventionError, match=f"field '{field.name}'"):
        encode(field, value)


def test_sk_prefix_stops_at_a_segment_boundary():
    assert sk_prefix("productDate", {"productId": "1"}) == "1::"
    assert not "10::2025-01-01".startswith(sk_prefix("productDate", {"productId": "1"}))
    assert sk_prefix("productDate", {}) == ""


def test_pk_prefix_stops_at_a_segment_boundary_unless_it_is_the_whole_pk():
    assert pk_prefix("productDate", {"collectionId": "bcparks_1"}) == "productDate::bcparks_1::"
    assert not "productDate::bcparks_10::dayuse::1".startswith(
        pk_prefix("productDate", {"collectionId": "bcparks_1"})
    )
    assert pk_prefix("booking", {"collectionId": "bcparks_1"}) == "booking::bcparks_1::"  # the shard follows
    assert pk_prefix("geozone", {"collectionId": "bcparks_1"}) == "geozone::bcparks_1"


UNPARSABLE = [
    *((parse_sk, "geozone", sk) for sk in ["7", "000000000x"]),
    (parse_sk, "thread", "OTHER"),
    *((parse_sk, "productDate", sk) for sk in ["1::2025-02-30", "1::20250101", "1"]),
    (parse_sk, "thread", "COMMENT#12"),
    (parse_sk, COUNTER, "seq"),
    *((parse_pk, pk) for pk in ["geozone::a::b", "productDate::a::b", "counter::counter::geozone::a"]),
    (parse_pk, "counter::nope::a"),
    *((parse_document_id, doc_id) for doc_id in ["nohash", "#sk", "pk#"]),
]


@pytest.mark.parametrize("call", UNPARSABLE, ids=lambda call: f"{call[0].__name__}{call[1:]}")
def test_keys_off_the_conventions_do_not_parse(call):
    parse, *args = call
    with pytest.raises(KeyConventionError):
        parse(*args)


UNBUILDABLE = {
    "unknown field": (partial(build_pk, "geozone", {"collectionId": "c", "colectionId": "typo"}), "no field"),
    "pk beyond DynamoDB's 2048": (partial(build_pk, "geozone", {"collectionId": "x" * 2048}), "2048"),
    "id beyond OpenSearch's 512": (partial(document_id, "geozone::" + "x" * 500, "0000000001"), "512"),
    "pk prefix of nothing": (partial(pk_prefix, "productDate", {}), ""),
    "pk prefix, no leading field": (partial(pk_prefix, "productDate", {"activityType": "dayuse"}), ""),
    "pk prefix of a bad value": (partial(pk_prefix, "productDate", {"collectionId": "a::b"}), ""),
    "sk prefix, no leading field": (
        partial(sk_prefix, "productDate", {"date": date(2025, 1, 1)}),
        "leading fields",
    ),
}


@pytest.mark.parametrize(("build", "why"), UNBUILDABLE.values(), ids=UNBUILDABLE)
def test_keys_off_the_conventions_are_not_built(build, why):
    with pytest.raises(KeyConventionError, match=why or None):
        build()


@pytest.mark.integration
def test_segment_boundary_prefix_query_never_returns_a_longer_id(table):
    pk = build_pk("productDate", {"collectionId": "bcparks_1", "activityType": "dayuse", "activityId": "1"})
    for product in ("1", "10", "11", "2"):
        table.put_item(
            Item={"pk": pk, "sk": build_sk("productDate", {"productId": product, "date": date(2025, 12, 31)})}
        )
    condition = Key("pk").eq(pk) & Key("sk").begins_with(sk_prefix("productDate", {"productId": "1"}))
    assert [i["sk"] for i in table.query(KeyConditionExpression=condition)["Items"]] == ["1::2025-12-31"]
