import random
import uuid
from datetime import date, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from refdata.globalid import create_item
from refdata.keys import build_sk, parse_pk
from refdata.registry import KeyConventionError
from refdata.sharding import query_all_shards, shard_of, shard_pks, sharded_pk

SCOPE = {"collectionId": "bcparks_1"}


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=40))
def test_shard_is_deterministic_and_in_range(value):
    assert shard_of("booking", value) == shard_of("booking", value)
    assert 0 <= shard_of("booking", value) < 4


def test_shards_spread_writes_over_every_shard():
    assert {shard_of("booking", str(n)) for n in range(100)} == {0, 1, 2, 3}


def test_sharded_pk_appends_the_shard_of_the_attribute():
    booking_id = str(uuid.UUID(int=7, version=4))
    pk = sharded_pk("booking", {**SCOPE, "bookingId": booking_id, "startDate": date(2026, 1, 1)})
    assert parse_pk(pk)[1] == {**SCOPE, "shard": shard_of("booking", booking_id)}


def test_shard_pks_lists_every_shard():
    assert shard_pks("booking", SCOPE) == [f"booking::bcparks_1::{n}" for n in range(4)]


def test_unsharded_schemas_are_refused():
    with pytest.raises(KeyConventionError, match="not write-sharded"):
        shard_pks("geozone", SCOPE)


def _write_bookings(table, count):
    rng = random.Random(42)
    items = []
    for _ in range(count):
        values = {
            **SCOPE,
            "startDate": date(2026, 7, 1) + timedelta(days=rng.randrange(5)),
            "bookingId": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        }
        item = {"pk": sharded_pk("booking", values), "sk": build_sk("booking", values)}
        items.append(create_item(table, item))
    return sorted(items, key=lambda i: (i["sk"], i["pk"]))


def _read_all(table, **query):
    items, token, sizes = [], None, []
    while True:
        page = query_all_shards(table, "booking", SCOPE, page_token=token, **query)
        items.extend(page.items)
        sizes.append(len(page.items))
        token = page.next_token
        if token is None:
            return items, sizes


@pytest.mark.integration
@pytest.mark.parametrize("limit", [1, 7, 40, 100])
def test_fan_out_query_merges_all_shards_in_sort_key_order_across_pages(table, limit):
    written = _write_bookings(table, 40)
    assert len({i["pk"] for i in written}) == 4
    items, sizes = _read_all(table, limit=limit)
    assert items == written
    assert all(size == limit for size in sizes[:-1])


@pytest.mark.integration
def test_fan_out_query_filters_by_sort_key_prefix(table):
    written = _write_bookings(table, 30)
    prefix = "2026-07-02::"
    items, _ = _read_all(table, limit=5, sk_begins_with=prefix)
    assert items == [i for i in written if i["sk"].startswith(prefix)]


@pytest.mark.integration
def test_page_token_of_another_partition_is_refused(table):
    _write_bookings(table, 3)
    token = query_all_shards(table, "booking", SCOPE, limit=1).next_token
    with pytest.raises(KeyConventionError, match="another partition"):
        query_all_shards(table, "booking", {"collectionId": "other"}, page_token=token)


@pytest.mark.integration
@pytest.mark.parametrize("token", ["not base64!", "bm90IGpzb24=", "eyJib29raW5nOjpiY3BhcmtzXzE6OjAiOiAxfQ=="])
def test_forged_page_tokens_are_refused(table, token):
    with pytest.raises(KeyConventionError, match="not one this query issued"):
        query_all_shards(table, "booking", SCOPE, page_token=token)
