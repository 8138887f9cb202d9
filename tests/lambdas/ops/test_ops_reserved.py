"""The platform's own items (the heartbeat and the smoke run's canaries, refdata.reserved) disturb no ops tool,
for every indexable schema: reconcile reports no drift for them (in flight they always look drifted) while it still
finds an ordinary item's, and the purge leaves the heartbeat's document alone."""

from __future__ import annotations

import pytest
from ops.purge import Purge
from ops_harness import MIN_AGE, OpsEnv, seq
from refdata.indexnames import index_name
from refdata.registry import indexable_schemas
from refdata.reserved import HEARTBEAT_AT, canary_key, heartbeat_key

pytestmark = pytest.mark.integration

SCHEMAS = [schema.name for schema in indexable_schemas()]


def as_item(attributes: dict[str, object]) -> dict[str, dict[str, str]]:
    return {name: {"S": str(value)} for name, value in attributes.items()}


@pytest.mark.parametrize("schema", SCHEMAS)
def test_reconcile_reports_no_drift_for_the_heartbeat_or_a_canary_and_still_finds_real_drift(
    ops_env: OpsEnv, schema: str
) -> None:
    pk, sk, attributes = heartbeat_key(schema)
    # The heartbeat's document shows the previous minute's write; the table already holds the next one.
    previous = ops_env.put(pk, sk, **as_item(attributes), **{HEARTBEAT_AT: {"S": "2026-12-01T10:00:00Z"}})
    ops_env.stream_apply(previous, pk, sk, seq(10))
    ops_env.put(pk, sk, **as_item(attributes), **{HEARTBEAT_AT: {"S": "2026-12-01T10:01:00Z"}})
    # A canary written a moment ago, not indexed yet; another one's delete not applied yet.
    written, written_sk, extra = canary_key(schema, "smoke-a")
    ops_env.put(written, written_sk, **as_item(extra), canaryVersion={"N": "1"})
    gone, gone_sk, extra = canary_key(schema, "smoke-b")
    ops_env.stream_apply(ops_env.put(gone, gone_sk, **as_item(extra)), gone, gone_sk, seq(11))
    ops_env.delete(gone, gone_sk)
    # And an ordinary item whose change was lost: real drift, still reported.
    ordinary, ordinary_sk, extra = canary_key(schema, "ordinary")
    ordinary = ordinary.replace("refdata-canary", "bcparks_1", 1)
    ops_env.put(ordinary, ordinary_sk, **as_item(extra))

    summary = ops_env.reconcile(schema)

    assert summary["differences"] == {"missing": 1, "stale": 0, "deleted": 0}
    assert summary["documentIds"]["missing"] == [f"{ordinary}#{ordinary_sk}"]


@pytest.mark.parametrize("schema", SCHEMAS)
def test_the_purge_leaves_the_heartbeat_alone(ops_env: OpsEnv, schema: str) -> None:
    pk, sk, attributes = heartbeat_key(schema)
    ops_env.stream_apply(ops_env.put(pk, sk, **as_item(attributes)), pk, sk, seq(10))
    old, old_sk, _ = canary_key(schema, "old-ordinary")
    old = old.replace("refdata-canary", "bcparks_1", 1)
    ops_env.stream_apply(None, old, old_sk, seq(11), deleted_at=int(ops_env.now) - MIN_AGE - 60)
    before = ops_env.documents(index_name(schema, 1))[f"{pk}#{sk}"]

    summary = ops_env.run(Purge(), {})

    assert summary["status"] == "done" and summary["deleted"] == 1  # the old tombstone, not the heartbeat
    assert ops_env.documents(index_name(schema, 1))[f"{pk}#{sk}"] == before
