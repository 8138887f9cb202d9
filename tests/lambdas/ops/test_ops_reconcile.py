"""reconcile: finds each kind of difference, repairs them, and a repair never beats a newer change."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from ops.table import Item
from ops_harness import ZONE, DynamoProxy, OpsEnv, seq

pytestmark = pytest.mark.integration

INDEX = "geozone-v1"


def doc_id(sk: str) -> str:
    return f"{ZONE}#{sk}"


@pytest.fixture
def drifted(ops_env: OpsEnv) -> OpsEnv:
    """Ten zones in sync, then one difference of each kind (and a missing one hidden by a tombstone)."""
    for i in range(10):
        ops_env.put_and_sync(ZONE, f"{i:010d}", 100 + i, name={"S": f"zone {i}"}, area={"N": "1.25"})
    ops_env.put(ZONE, "missing", name={"S": "never indexed"})
    ops_env.put(ZONE, "0000000001", name={"S": "renamed, change lost"})  # stale: index keeps "zone 1"
    ops_env.delete(ZONE, "0000000002")  # deleted in DynamoDB: the REMOVE was lost
    ops_env.put_and_sync(ZONE, "recreated", 300, name={"S": "back again"})
    ops_env.stream_apply(None, ZONE, "recreated", seq(301))  # deleted, re-created; the re-creation was lost
    return ops_env


def test_reconcile_reports_each_kind_of_difference(drifted: OpsEnv) -> None:
    summary = drifted.reconcile("geozone")

    assert summary["index"] == INDEX and summary["tableItems"] == 11
    assert summary["documentIds"] == {
        "missing": [doc_id("missing"), doc_id("recreated")],
        "stale": [doc_id("0000000001")],
        "deleted": [doc_id("0000000002")],
    }
    assert not summary["clean"] and summary["fix"] is None and summary["status"] == "work-left"


def test_table_segments_and_index_slices_find_the_same_differences(drifted: OpsEnv) -> None:
    summary = drifted.reconcile("geozone", segments=3)

    assert summary["parts"] == {"total": 6, "done": 6}  # three table segments, three point-in-time slices
    assert summary["differences"] == {"missing": 2, "stale": 1, "deleted": 1} and summary["tableItems"] == 11
    open_points_in_time = drifted.transport.request("GET", "_search/point_in_time/_all").json()["pits"]
    assert drifted.server.documents(INDEX) and open_points_in_time == []  # each slice closed its own


def test_fix_repairs_every_difference_and_a_second_run_is_clean(drifted: OpsEnv) -> None:
    before = int(time.time())
    fixed = drifted.reconcile("geozone", fix=True)
    drifted.transport.request("POST", f"{INDEX}/_refresh")  # a second run comes after the domain refreshed
    again = drifted.reconcile("geozone")

    assert fixed["fix"] == {"repaired": 4} and fixed["clean"] and fixed["status"] == "done"
    assert again["differences"] == {"missing": 0, "stale": 0, "deleted": 0} and again["clean"]
    assert drifted.visible(INDEX) == drifted.expected("geozone")
    stored = drifted.documents(INDEX)
    assert stored[doc_id("missing")]["stream_seq"] == seq(0)
    assert stored[doc_id("0000000001")]["stream_seq"] == seq(101) + "r"
    deleted_at = stored[doc_id("0000000002")].pop("deletedAt")
    assert before <= deleted_at <= time.time()  # when the repair found the item gone
    tombstone = {"pk": ZONE, "sk": "0000000002", "schema": "geozone", "tombstone": True}
    assert stored[doc_id("0000000002")] == tombstone | {"stream_seq": seq(102) + "r"}
    assert stored[doc_id("recreated")]["stream_seq"] == seq(301) + "r"


def test_a_repair_loses_to_every_newer_stream_change_and_beats_replays(drifted: OpsEnv) -> None:
    drifted.reconcile("geozone", fix=True)
    sk = "0000000001"
    stale_replay = drifted.put(ZONE, sk, name={"S": "zone 1"})

    assert drifted.stream_apply(stale_replay, ZONE, sk, seq(101)) == "noop"  # the change the repair beat
    newer = drifted.put(ZONE, sk, name={"S": "a genuinely newer change"})
    assert drifted.stream_apply(newer, ZONE, sk, seq(102)) == "updated"
    assert drifted.documents(INDEX)[doc_id(sk)]["name"] == "a genuinely newer change"


def test_a_change_that_lands_between_the_index_read_and_the_repair_wins(drifted: OpsEnv) -> None:
    sk = "0000000001"

    def before_get_item(keys: Item) -> None:
        if keys["sk"]["S"] == sk:  # the stream delivers a newer change while the repair is prepared
            newest = drifted.put(ZONE, sk, name={"S": "newest"})
            drifted.stream_apply(newest, ZONE, sk, seq(900))

    proxy = DynamoProxy(drifted.dynamodb, before_get_item=before_get_item)
    summary = drifted.reconcile("geozone", fix=True, dynamodb=proxy)

    assert summary["fix"] == {"repaired": 3, "superseded": 1}
    document = drifted.documents(INDEX)[doc_id(sk)]
    assert document["name"] == "newest" and document["stream_seq"] == seq(900)


def test_a_change_still_in_flight_is_left_to_the_stream(drifted: OpsEnv) -> None:
    scanned = drifted.snapshot()  # DynamoDB read before the change below
    sk = "0000000004"
    changed = drifted.put(ZONE, sk, name={"S": "changed after the scan"})
    drifted.stream_apply(changed, ZONE, sk, seq(950))  # ... and synced before the index is read

    summary = drifted.reconcile("geozone", fix=True, dynamodb=DynamoProxy(drifted.dynamodb, snapshot=scanned))

    assert doc_id(sk) in summary["documentIds"]["stale"]
    assert summary["fix"] == {"repaired": 4, "consistent-on-reread": 1}
    assert drifted.documents(INDEX)[doc_id(sk)]["stream_seq"] == seq(950)


def test_an_item_deleted_after_the_scan_is_not_resurrected(drifted: OpsEnv) -> None:
    scanned = drifted.snapshot()
    drifted.delete(ZONE, "missing")  # gone before the repair re-reads it

    summary = drifted.reconcile("geozone", fix=True, dynamodb=DynamoProxy(drifted.dynamodb, snapshot=scanned))

    assert summary["fix"] == {"repaired": 3, "consistent-on-reread": 1}
    assert doc_id("missing") not in drifted.documents(INDEX)


def small_pages(drifted: OpsEnv, between: Callable[[], None]) -> None:
    """Slices read three documents a page, and `between()` runs before the second and the fourth request."""
    real = drifted.client.point_in_time_page
    pages = iter(range(1000))

    def page(*args: Any, **kwargs: Any) -> Any:
        if next(pages) in (1, 4):
            between()
        return real(*args, **(kwargs | {"page_size": 3}))

    drifted.client.point_in_time_page = page  # type: ignore[method-assign]


def test_a_slice_whose_point_in_time_is_gone_opens_another_and_goes_on(drifted: OpsEnv) -> None:
    # The engine frees a point in time at a node restart, a blue/green deployment or past its keep-alive alike;
    # a search with it then answers 404 (no search context found). Here the test frees every one on the engine.
    lost = []

    def lose() -> None:
        lost.append("lost")  # twice in the run, as a slow export-sourced run meets it
        drifted.server.lose_points_in_time()

    small_pages(drifted, lose)
    summary = drifted.reconcile("geozone")

    assert len(lost) == 2
    assert summary["status"] == "work-left" and not summary["errors"]
    assert summary["documentIds"]["deleted"] == [doc_id("0000000002")]
    assert summary["differences"] == {"missing": 2, "stale": 1, "deleted": 1}
