"""purge: deletes tombstones older than the bound and nothing else, never one a newer change replaced."""

from __future__ import annotations

from typing import Any

import pytest
from ops.index import Hit
from ops.purge import Purge, minimum_age_seconds, purgeable
from ops.runs import MemoryRunStore, Run
from ops.workflow import prepared
from ops_harness import MIN_AGE, ZONE, OpsEnv, seq
from refdata import indexnames
from refdata.registry import indexable_schemas

from tests.support.opensearch_server import ROUTE_BULK

pytestmark = pytest.mark.integration

INDEX = "geozone-v1"


def tombstones(ops_env: OpsEnv, ages: dict[str, float]) -> int:
    """One tombstone per name, deleted `age` seconds before the bound; returns the bound."""
    bound = int(ops_env.now) - MIN_AGE
    for number, (sk, age) in enumerate(ages.items(), start=1):
        ops_env.stream_apply(None, ZONE, sk, seq(number), deleted_at=int(bound - age))
    return bound


def test_the_minimum_age_outlives_the_stream_the_record_age_and_the_dead_letter_queue() -> None:
    assert minimum_age_seconds(21600) == 86400 + 21600 + 14 * 86400 == MIN_AGE


def test_the_purge_never_deletes_a_tombstone_younger_than_the_bound(ops_env: OpsEnv) -> None:
    ages = {f"old-{n:02d}": 1 + n * 3600 for n in range(12)}  # deleted before the bound
    ages |= {"at-bound": 0, "just-after": -1, "young": -86400, "fresh": -MIN_AGE}
    bound = tombstones(ops_env, ages)
    ops_env.put_and_sync(ZONE, "live", 900, name={"S": "a live document"})
    before = ops_env.documents(INDEX)

    summary = ops_env.run(Purge(page_size=5), {})  # pages of five: the cursor is exercised

    after = ops_env.documents(INDEX)
    kept = {doc_id: doc for doc_id, doc in before.items() if not (doc.get("deletedAt", bound) < bound)}
    assert after == kept  # every tombstone at or after the bound, and the live document, untouched
    assert sorted(doc["sk"] for doc in after.values()) == ["at-bound", "fresh", "just-after", "live", "young"]
    assert summary["status"] == "done" and summary["deleted"] == summary["found"] == 12
    assert summary["boundEpochSeconds"] == bound
    every = sorted(indexnames.index_name(schema.name, 1) for schema in indexable_schemas())
    assert sorted(summary["indices"]) == every
    assert summary["parts"] == {"total": len(every), "done": len(every)}


def test_a_resumed_purge_keeps_the_bound_it_started_with(ops_env: OpsEnv) -> None:
    run = Run(MemoryRunStore(), "purge", "resumed")
    first = prepared(Purge(), ops_env.env(), run, {})
    ops_env.now += 86400  # resumed a day later: a later bound would reach younger tombstones

    resumed = prepared(Purge(), ops_env.env(), run, {})

    assert resumed["bound"] == first["bound"] == int(first["startedAt"]) - MIN_AGE


def test_a_tombstone_replaced_between_the_read_and_the_delete_stays(ops_env: OpsEnv) -> None:
    tombstones(ops_env, {"revived": 60, "purged": 60})
    real = ops_env.client.search_page

    def search_page(index: str, **kwargs: Any) -> list[Hit]:
        hits = real(index, **kwargs)
        if index == INDEX and hits:  # the item is created again and synced while the purge holds the page
            item = ops_env.put(ZONE, "revived", name={"S": "back"})
            ops_env.stream_apply(item, ZONE, "revived", seq(700))
        return hits

    ops_env.client.search_page = search_page  # type: ignore[method-assign]
    summary = ops_env.purge()

    assert summary["deleted"] == 1 and summary["superseded"] == 1 and summary["status"] == "done"
    assert ops_env.documents(INDEX)[f"{ZONE}#revived"]["name"] == "back"
    assert f"{ZONE}#purged" not in ops_env.documents(INDEX)


def test_a_dry_run_counts_and_deletes_nothing(ops_env: OpsEnv) -> None:
    tombstones(ops_env, {"old": 10, "young": -10})
    bulks = ops_env.server.count(ROUTE_BULK)

    summary = ops_env.purge(dry_run=True)

    assert summary["found"] == 1 and summary["deleted"] == 0 and summary["status"] == "done"
    assert ops_env.server.count(ROUTE_BULK) == bulks and len(ops_env.documents(INDEX)) == 2


def test_throttled_deletes_stop_the_part_and_a_rerun_finishes_it(ops_env: OpsEnv) -> None:
    tombstones(ops_env, {"a": 10, "b": 10})
    ops_env.server.fail_item(f"{ZONE}#b", status=429, error_type="rejected_execution_exception", times=1)

    first = ops_env.purge()
    second = ops_env.purge()

    assert first["status"] == "work-left" and "TransientFailure" in first["errors"][0]
    assert second["status"] == "done" and second["deleted"] == 1  # `a` went with the first page already
    assert ops_env.documents(INDEX) == {}


@pytest.mark.parametrize(
    ("source", "seq_no", "kept"),
    [
        ({"tombstone": True, "deletedAt": 99}, 3, False),
        ({"tombstone": True, "deletedAt": 100}, 3, True),  # at the bound: not before it
        ({"tombstone": False, "deletedAt": 1}, 3, True),  # a live document, whatever it carries
        ({"tombstone": True}, 3, True),  # no deletion time: never purged
        ({"tombstone": True, "deletedAt": True}, 3, True),
        ({"tombstone": True, "deletedAt": 1}, None, True),  # no sequence number to delete it conditionally
    ],
)
def test_only_a_tombstone_deleted_before_the_bound_is_purgeable(
    source: dict[str, Any], seq_no: int | None, kept: bool
) -> None:
    assert purgeable(Hit("geozone::c#1", source, None, seq_no, 1), 100) is not kept
