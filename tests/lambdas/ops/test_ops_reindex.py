"""reindex: the mapping-change flow end to end against moto and the loopback OpenSearch server."""

from __future__ import annotations

import pytest
from ops.reindex import Reindex
from ops.runs import MemoryRunStore, Run
from ops.table import keys_of
from ops.workflow import finish_run, prepared, run_part
from ops.writes import Write, apply_writes
from ops_harness import ZONE, ZONES, DynamoProxy, OpsEnv, seq
from search import indices
from stream_sync.sync import Fate, HttpReply

from tests.support.opensearch_server import ROUTE_ALIASES, ROUTE_BULK

pytestmark = pytest.mark.integration

FILTER = {"filter": indices.read_alias_filter()}
WRITE = {"is_write_index": True}


def test_reindex_moves_both_aliases_and_backfills_every_item(changed: OpsEnv) -> None:
    summary = changed.reindex("geozone")

    assert summary["complete"] and summary["target"] == "geozone-v2" and summary["status"] == "done"
    assert changed.aliases("geozone-v1") == {}
    assert changed.aliases("geozone-v2") == {"geozone": FILTER, "geozone-write": WRITE}
    assert changed.visible("geozone-v2") == changed.expected("geozone")
    assert {doc["stream_seq"] for doc in changed.documents("geozone-v2").values()} == {seq(0)}
    assert summary["backfill"] == {"indexed": ZONES}
    assert summary["tableItems"] == summary["indexLiveDocuments"] == ZONES


def test_segments_read_the_table_in_parallel_to_the_same_result(changed: OpsEnv) -> None:
    summary = changed.reindex("geozone", segments=4)

    assert summary["complete"] and summary["parts"] == {"total": 4, "done": 4}
    assert summary["backfill"] == {"indexed": ZONES} and summary["tableItems"] == ZONES
    assert changed.visible("geozone-v2") == changed.expected("geozone")


def test_reindex_leaves_other_schemas_and_the_old_version_alone(changed: OpsEnv) -> None:
    before = {name: changed.documents(name) for name in ("geozone-v1", "productdate-v1")}

    changed.reindex("geozone")

    assert "productdate-v2" not in changed.server.index_names()
    assert changed.aliases("productdate-v1") == {"productdate": FILTER, "productdate-write": WRITE}
    assert {name: changed.documents(name) for name in before} == before


def test_rerun_after_completion_is_a_no_op(changed: OpsEnv) -> None:
    changed.reindex("geozone")
    requests = (changed.server.count(ROUTE_ALIASES), changed.server.count(ROUTE_BULK))

    again = changed.reindex("geozone")

    assert again["complete"] and again["backfill"] == {} and again["planned"] == []
    assert (changed.server.count(ROUTE_ALIASES), changed.server.count(ROUTE_BULK)) == requests


def test_reindex_of_a_schema_without_a_new_version_is_a_no_op(changed: OpsEnv) -> None:
    summary = changed.reindex("productDate")

    assert summary["complete"] and summary["target"] == "productdate-v1"
    assert changed.server.count(ROUTE_ALIASES) == 0


def test_a_stream_change_applied_during_the_backfill_is_not_overwritten(changed: OpsEnv) -> None:
    sk = f"{3:010d}"
    before = changed.snapshot()
    newer = changed.put(ZONE, sk, name={"S": "renamed while the backfill ran"})
    real_bulk = changed.ports.bulk
    applied: list[str] = []

    def bulk(body: bytes) -> HttpReply:
        if not applied:  # the sync writes the change into v2 (the write alias moved) before the backfill
            applied.append(changed.stream_apply(newer, ZONE, sk, seq(500)))
        return real_bulk(body)

    changed.ports.bulk = bulk
    summary = changed.reindex("geozone", dynamodb=DynamoProxy(changed.dynamodb, snapshot=before))

    assert applied == ["created"]
    assert summary["complete"] and summary["backfill"] == {"indexed": ZONES - 1, "stale-skipped": 1}
    document = changed.documents("geozone-v2")[f"{ZONE}#{sk}"]
    assert document["name"] == "renamed while the backfill ran" and document["stream_seq"] == seq(500)


def test_a_rerun_after_a_failed_backfill_finishes_the_flow(changed: OpsEnv) -> None:
    changed.server.fail_next(ROUTE_BULK, 503, times=2)  # both of the sync path's attempts for a page

    first = changed.reindex("geozone")

    assert not first["complete"] and first["status"] == "work-left"
    assert "TransientFailure" in first["errors"][0]  # the page is not given up: the part stops before it
    assert changed.aliases("geozone-v1") == {"geozone": FILTER}  # readers stay on v1
    assert changed.aliases("geozone-v2") == {"geozone-write": WRITE}  # the sync writes to v2 already

    second = changed.reindex("geozone")

    assert second["complete"] and second["writeAliasActions"] == []
    assert changed.aliases("geozone-v2") == {"geozone": FILTER, "geozone-write": WRITE}
    assert changed.visible("geozone-v2") == changed.expected("geozone")


def test_a_part_stopped_by_its_deadline_resumes_after_its_last_page(changed: OpsEnv) -> None:
    run = Run(MemoryRunStore(), "reindex", "resumed")
    env = changed.env()
    record = prepared(Reindex(), env, run, {"schema": "geozone"})
    (part,) = record["parts"]

    first = run_part(Reindex(), env, run, part, ports=changed.ports, deadline=lambda: True)
    second = run_part(Reindex(), env, run, part, ports=changed.ports)
    summary = finish_run(Reindex(), env, run)

    assert not first.done and first.cursor is not None and first.counts == {"backfill:indexed": first.matched}
    assert second.done and second.matched == ZONES  # one page each time: nothing read twice
    assert summary["complete"] and summary["backfill"] == {"indexed": ZONES}


def test_an_alias_move_whose_response_was_lost_is_recognised_as_done(changed: OpsEnv) -> None:
    # The first POST _aliases applies and its response is lost (a timeout or a reset); the retry's `remove` then
    # answers 404.
    changed.server.lose_response_next(ROUTE_ALIASES)

    summary = changed.reindex("geozone")

    assert summary["complete"]
    assert changed.server.count(ROUTE_ALIASES) == 3  # write move, its retry (404), read swap
    assert changed.aliases("geozone-v2") == {"geozone": FILTER, "geozone-write": WRITE}


def test_dry_run_reports_the_plan_and_changes_nothing(changed: OpsEnv) -> None:
    bulks = changed.server.count(ROUTE_BULK)

    summary = changed.reindex("geozone", dry_run=True)

    assert not summary["complete"] and summary["status"] == "done"
    assert summary["planned"] == ["move write alias", "backfill from DynamoDB", "swap read alias"]
    assert summary["writeAliasActions"] == [
        {"remove": {"index": "geozone-v1", "alias": "geozone-write"}},
        {"add": {"index": "geozone-v2", "alias": "geozone-write", "is_write_index": True}},
    ]
    assert changed.aliases("geozone-v2") == {} and changed.documents("geozone-v2") == {}
    assert changed.server.count(ROUTE_ALIASES) == 0 and changed.server.count(ROUTE_BULK) == bulks


def test_the_backfill_dereferences_offloaded_geometry(changed: OpsEnv) -> None:
    square = {
        "type": "Polygon",
        "coordinates": [[[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0], [0.0, 0.0]]],
    }
    url = changed.put_geometry("geometries/square.geojson", square)
    changed.put(ZONE, "big", geometryUrl={"S": url})

    summary = changed.reindex("geozone")

    assert summary["complete"]
    assert changed.documents("geozone-v2")[f"{ZONE}#big"]["geometry"] == square
    assert changed.reconcile("geozone")["clean"]  # compared by (content-addressed) URL, not fetched again


def test_an_item_that_cannot_be_indexed_holds_the_read_alias_unless_allowed(changed: OpsEnv) -> None:
    changed.put(ZONE, "bad", location={"M": {"lat": {"N": "95"}, "lon": {"N": "0"}}})

    held = changed.reindex("geozone")

    assert not held["complete"] and held["status"] == "work-left"
    reason = "location out of range: {'lat': 95, 'lon': 0}"
    assert held["failed"] == [{"documentId": f"{ZONE}#bad", "fate": "rejected", "reason": reason}]
    assert changed.aliases("geozone-v1") == {"geozone": FILTER}

    allowed = changed.reindex("geozone", max_rejected=1)

    assert allowed["complete"] and allowed["backfill"] == {"stale-skipped": ZONES, "rejected": 1}
    assert changed.aliases("geozone-v2") == {"geozone": FILTER, "geozone-write": WRITE}


def test_a_backfill_through_a_missing_write_alias_never_creates_an_index(ops_env: OpsEnv) -> None:
    item = ops_env.put(ZONE, "0000000001", name={"S": "x"})
    ops_env.client.update_aliases([{"remove": {"index": "geozone-v1", "alias": "geozone-write"}}])

    (result,) = apply_writes([Write(keys_of(item), item)], settings=ops_env.settings, ports=ops_env.ports)

    # As the FGAC admin the tools could create any index: require_alias makes the write fail instead.
    assert result.fate is Fate.RETRY
    refused = "[require_alias] request flag is [true] and [geozone-write] is not an alias"
    assert refused in (result.reason or "")
    assert "geozone-write" not in ops_env.server.index_names()
