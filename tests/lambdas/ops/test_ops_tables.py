"""Several source tables: each reindex or reconcile run reads the table that holds its schema, never another."""

from __future__ import annotations

import pytest
from ops_harness import TABLE, ZONE, ZONES, OpsEnv
from stream_sync.tables import SchemaTables

from tests.support.aws import single_table

pytestmark = pytest.mark.integration

BOOKINGS = "refdata-bookings"
BOOKING = "booking::bcparks_1::2"
UUID = "0b9a3c1e-6f1d-4c8e-9a51-3c2f0e4d5a6b"
TABLES = SchemaTables.of({"geozone": TABLE, "productDate": TABLE, "thread": TABLE, "booking": BOOKINGS})


def put(env: OpsEnv, table: str, pk: str, sk: str) -> None:
    env.dynamodb.put_item(TableName=table, Item={"pk": {"S": pk}, "sk": {"S": sk}, "name": {"S": sk}})


def test_a_reindex_backfills_from_the_table_that_holds_its_schema(changed: OpsEnv) -> None:
    changed.dynamodb.create_table(**single_table(BOOKINGS))
    put(changed, BOOKINGS, ZONE, "stray")  # a zone written to the bookings table: never indexed

    summary = changed.reindex("geozone", tables=TABLES)

    assert summary["backfill"] == {"indexed": ZONES} and summary["tableItems"] == ZONES
    assert changed.visible("geozone-v2") == changed.expected("geozone")
    assert f"{ZONE}#stray" not in changed.documents("geozone-v2")


def test_a_reconcile_compares_the_index_with_its_schemas_own_table_and_repairs_from_it(
    ops_env: OpsEnv,
) -> None:
    ops_env.dynamodb.create_table(**single_table(BOOKINGS))
    for day in ("2026-07-01", "2026-07-02"):
        put(ops_env, BOOKINGS, BOOKING, f"{day}::{UUID}")
    put(ops_env, TABLE, BOOKING, f"2026-07-03::{UUID}")  # in the wrong table

    found = ops_env.reconcile("booking", tables=TABLES)
    fixed = ops_env.reconcile("booking", fix=True, tables=TABLES, run_id="reconcile-fix")

    assert found["documentIds"]["missing"] == [f"{BOOKING}#2026-07-0{day}::{UUID}" for day in (1, 2)]
    assert fixed["fix"] == {"repaired": 2} and fixed["clean"]
    assert sorted(ops_env.visible("booking-v1")) == found["documentIds"]["missing"]


def test_a_schema_no_table_holds_fails_the_run_with_its_name(ops_env: OpsEnv) -> None:
    summary = ops_env.reconcile("booking", tables=SchemaTables.of({"geozone": TABLE}))

    assert summary["status"] == "failed" and "no table holds schema 'booking'" in summary["error"]
