"""The ops tools' pure parts: sequence numbers for repairs, seq rewriting, alias plans, diff and fix plans."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ops.index import AliasState, Hit, alias_state, move_write_alias, swap_read_alias
from ops.reconcile import (
    Difference,
    index_differences,
    item_digest,
    plan_fix,
    stored_digest,
    table_differences,
)
from ops.writes import BACKFILL_SEQ, Write, apply_writes, repair_seq
from search.indices import read_alias_filter

SEQUENCE = st.integers(min_value=0, max_value=10**40 - 1).map(lambda n: str(n).zfill(40))
KEYS = {"pk": {"S": "geozone::c"}, "sk": {"S": "1"}}


@settings(deadline=None)
@given(SEQUENCE, SEQUENCE)
def test_a_repair_sorts_after_its_own_seq_and_before_every_newer_one(stored: str, other: str) -> None:
    repaired = repair_seq(stored)
    assert stored < repaired
    if other > stored:
        assert repaired < other
        assert repair_seq(repaired) < other  # repairing a repair stays below the newer change too


def test_two_writes_for_one_document_are_refused() -> None:
    with pytest.raises(ValueError, match="one write per document"):
        apply_writes([Write(KEYS, None), Write(KEYS, None)], settings=None, ports=None)  # type: ignore[arg-type]


def test_repair_seq_refuses_anything_the_platform_never_stores() -> None:
    for bad in ("", "12", "x" * 40, "0" * 40 + "q", "0" * 41):
        with pytest.raises(ValueError):
            repair_seq(bad)


def state(**aliases: dict[str, Any]) -> AliasState:
    answer = {name.replace("_", "-"): {"aliases": spec} for name, spec in aliases.items()}
    return alias_state("geozone", answer | {"geozone-other": {"aliases": {}}})


BOTH = {"geozone": {"filter": read_alias_filter()}, "geozone-write": {"is_write_index": True}}


def test_alias_plans_move_each_alias_in_one_request_and_nothing_when_done() -> None:
    before = state(geozone_v1=BOTH, geozone_v2={})
    assert before.versions == (1, 2) and before.newest == "geozone-v2" and before.write_index == "geozone-v1"
    assert [next(iter(a)) for a in move_write_alias(before, "geozone-v2")] == ["remove", "add"]
    assert swap_read_alias(before, "geozone-v2")[-1] == {
        "add": {"index": "geozone-v2", "alias": "geozone", "filter": read_alias_filter()}
    }
    after = state(geozone_v1={}, geozone_v2=BOTH)
    assert move_write_alias(after, "geozone-v2") == [] and swap_read_alias(after, "geozone-v2") == []


def test_a_read_alias_without_the_tombstone_filter_is_put_back_with_it() -> None:
    unfiltered = state(geozone_v2={"geozone": {}, "geozone-write": {"is_write_index": True}})
    assert swap_read_alias(unfiltered, "geozone-v2") == [
        {"add": {"index": "geozone-v2", "alias": "geozone", "filter": read_alias_filter()}}
    ]


def item(name: str, **extra: Any) -> dict[str, Any]:
    return {**KEYS, "name": {"S": name}, **extra}


def stored(name: str, seq: str = "1".zfill(40), **extra: Any) -> dict[str, Any]:
    keys = {"pk": "geozone::c", "sk": "1", "schema": "geozone"}
    return keys | {"name": name, "tombstone": False, "stream_seq": seq, **extra}


def test_digests_ignore_ordering_fields_key_order_and_number_spelling() -> None:
    number_item = item("z", area={"N": "1.50"}, count={"N": "3"})
    assert item_digest(number_item, "geozone") == stored_digest(stored("z", area=1.5, count=3.0))
    assert item_digest(item("z"), "geozone") != stored_digest(stored("y"))


def test_offloaded_geometry_is_compared_by_url_but_must_be_present() -> None:
    url = "s3://bucket/geometries/abc.geojson"
    offloaded = item("z", geometryUrl={"S": url})
    digest = item_digest(offloaded, "geozone")
    assert digest == stored_digest(stored("z", geometryUrl=url, geometry={"type": "Point"}))
    assert digest != stored_digest(stored("z", geometryUrl=url))


def keyed(sk: str, name: str) -> dict[str, Any]:
    return {"pk": {"S": "geozone::c"}, "sk": {"S": sk}, "name": {"S": name}}


def test_table_differences_are_missing_or_stale_items() -> None:
    items = [keyed("1", "same"), keyed("2", "new"), keyed("3", "x"), keyed("4", "x")]
    documents = {
        "geozone::c#1": stored("same") | {"sk": "1"},
        "geozone::c#2": stored("old", seq="2".zfill(40)) | {"sk": "2"},
        "geozone::c#3": {"tombstone": True, "stream_seq": "3".zfill(40)},
    }
    found = {(d.kind, d.doc_id, d.stored_seq) for d in table_differences(items, documents, "geozone")}
    assert found == {
        ("stale", "geozone::c#2", "2".zfill(40)),
        ("missing", "geozone::c#3", "3".zfill(40)),
        ("missing", "geozone::c#4", None),
    }


def test_index_differences_are_live_documents_without_an_item() -> None:
    hits = [
        Hit("geozone::c#1", stored("kept")),
        Hit("geozone::c#5", stored("gone")),
        Hit("geozone::c#6", {"tombstone": True, "stream_seq": "6".zfill(40)}),
    ]
    (deleted,) = index_differences(hits, existing={"geozone::c#1"})
    assert (deleted.kind, deleted.doc_id, deleted.stored_seq) == ("deleted", "geozone::c#5", "1".zfill(40))
    assert deleted.keys == {"pk": {"S": "geozone::c"}, "sk": {"S": "5"}}


@pytest.mark.parametrize(
    ("kind", "stored_seq", "stored_doc", "fresh", "expected"),
    [
        ("missing", None, None, item("a"), Write(KEYS, item("a"), BACKFILL_SEQ)),
        ("missing", "3".zfill(40), None, item("a"), Write(KEYS, item("a"), "3".zfill(40) + "r")),
        ("missing", None, None, None, None),
        ("stale", "2".zfill(40), "old", item("new"), Write(KEYS, item("new"), "2".zfill(40) + "r")),
        ("stale", "2".zfill(40), "new", item("new"), None),
        ("deleted", "4".zfill(40), "gone", None, Write(KEYS, None, "4".zfill(40) + "r")),
        ("deleted", "4".zfill(40), "back", item("back"), None),
        ("deleted", "4".zfill(40), "gone", item("back"), Write(KEYS, item("back"), "4".zfill(40) + "r")),
    ],
)
def test_plan_fix_uses_the_state_read_again(
    kind: Any, stored_seq: str | None, stored_doc: str | None, fresh: Any, expected: Write | None
) -> None:
    digest = stored_digest(stored(stored_doc)) if stored_doc else None
    difference = Difference(kind, "geozone::c#1", KEYS, stored_seq, digest)
    assert plan_fix(difference, fresh, "geozone") == expected
