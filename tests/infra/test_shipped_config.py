"""What the SHIPPED configuration is: the one place that names environments, counts and pinned logical ids.

Every other test states a contract over whatever ``environments()``, the schema registry and the configured tables
and read roles hold, and covers a new environment, schema, table or role without being told. This module alone
changes when the shipped configuration does (README, "Routine changes"):

- the environments, which of them are production and which retain their data;
- the tables and read roles each ships, and the capacity each table is on;
- the logical ids of today's stateful resources (never edit one to make a test pass: a different id means
  CloudFormation deletes the old resource and creates an empty one; `make pins` pins a new table's ids);
- the cost model against hand computations over the shipped templates.
"""

from __future__ import annotations

import pytest
from refdata.registry import COUNTER, REGISTRY, indexable_schemas

from infra import cost
from infra.config import CapacityMode, EnvironmentConfig
from infra.environments import environments
from infra.templates import Stack
from tests.infra.conftest import Synthesized
from tests.infra.templates_helpers import GiB

SHIPPED = ("dev", "test", "prod")


def shipped() -> dict[str, EnvironmentConfig]:
    """The shipped environments as config has them now. Each assertion below is about them alone: an environment,
    schema, table or read role added by a routine change leaves this module untouched (README, "Routine
    changes"); changing or removing what ships is what it exists to catch."""
    return {name: config for name, config in environments().items() if name in SHIPPED}


def test_the_shipped_environments_exist_in_delivery_order() -> None:
    assert tuple(shipped()) == SHIPPED


def test_prod_is_the_production_environment_and_test_and_prod_retain_their_data() -> None:
    assert {name: (c.production, c.retains_data) for name, c in shipped().items()} == {
        "dev": (False, False),
        "test": (False, True),
        "prod": (True, True),
    }


def test_todays_schemas_stay_registered_and_indexed() -> None:
    """Items exist under these pk prefixes: removing or renaming a schema strands them (adding one is routine)."""
    assert {"geozone", "productDate", "booking", "thread", COUNTER} <= set(REGISTRY)
    assert {"geozone", "productDate", "booking"} <= {schema.name for schema in indexable_schemas()}


def test_dev_keeps_bookings_in_a_table_of_their_own() -> None:
    """dev runs every check on at least two tables (README, "Add a source table")."""
    claimed = {t.construct_id: t.schemas for t in shipped()["dev"].additional_tables}
    assert claimed["TableBookings"] == ("booking",)


def test_dev_and_prod_are_on_demand_and_test_is_provisioned() -> None:
    modes = {name: c.table.capacity_mode for name, c in shipped().items()}
    assert modes == {
        "dev": CapacityMode.ON_DEMAND,
        "test": CapacityMode.PROVISIONED,
        "prod": CapacityMode.ON_DEMAND,
    }


def test_every_shipped_environment_has_the_public_read_role_for_zones_and_product_dates_never_bookings() -> (
    None
):
    for name, config in shipped().items():
        (role,) = [role for role in config.search.read_roles if role.name == "public_search"]
        assert role.schemas == ("geozone", "productDate")
        assert role.iam_role_arns == (f"arn:aws:iam::{config.account}:role/refdata-{name}-public-search",)


def test_dev_reserves_no_concurrency_so_a_new_account_can_deploy_it_and_test_and_prod_do() -> None:
    quotas = {name: c.required_concurrency_quota() for name, c in shipped().items()}
    assert quotas == {"dev": 10, "test": 124, "prod": 146}


def test_dev_is_one_node_and_prod_three_zones_with_three_dedicated_masters() -> None:
    search = {name: c.search for name, c in shipped().items()}
    assert (search["dev"].data_node_count, search["dev"].availability_zone_count) == (1, 1)
    assert (search["prod"].availability_zone_count, search["prod"].master_node_count) == (3, 3)


# --- pinned logical ids --------------------------------------------------------------------------------------------

# Logical id → resource type. Never edit an entry to make this test pass: a different id means CloudFormation
# deletes the old resource (test and prod orphan it, dev loses it) and creates an empty one.
PINNED = {
    "DataKey5CEB6F76": "AWS::KMS::Key",
    "Table7ABB320E": "AWS::DynamoDB::Table",
    "GeometryBucket1F491C5F": "AWS::S3::Bucket",
    "GeometryBucketAccessLogsDBD8D12C": "AWS::S3::Bucket",
    # Ops workflow runs: their summaries (the record of every repair and purge) and a run's exports.
    "OpsBucket4D3C0B7D": "AWS::S3::Bucket",
    "SearchC313AE8E": "AWS::OpenSearchService::Domain",
    "NetworkFlowLogs2BEC3212": "AWS::Logs::LogGroup",
    "SearchSearchSlowLogsBB1667C5": "AWS::Logs::LogGroup",
    "SearchIndexSlowLogs5D1D98AC": "AWS::Logs::LogGroup",
    "SearchApplicationLogsBEFD87C3": "AWS::Logs::LogGroup",
    "SearchAuditLogsF1B55D26": "AWS::Logs::LogGroup",
    # Holds the on-call subscriptions people add after deploying.
    "AlarmTopicB56431CA": "AWS::SNS::Topic",
}
# Only environments whose config turns table backups on have a vault.
PINNED_WITH_BACKUP = {"TableVault6854F4A8": "AWS::Backup::BackupVault"}
# Additional source tables (infra/config.py ``additional_tables``), by construct id: the table, and its vault where
# its settings turn backups on. Only the environments that declare the table have it. `make pins` (infra/pins.py)
# adds a new table's entry, after review; it never changes one.
PINNED_ADDITIONAL_TABLES = {
    "TableBookings": (
        {"TableBookingsD1978FDB": "AWS::DynamoDB::Table"},
        {"TableBookingsVault45B27EDA": "AWS::Backup::BackupVault"},
    ),
}


def test_dev_declares_the_bookings_table_whose_logical_id_is_pinned(synthesized: Synthesized) -> None:
    assert "TableBookingsD1978FDB" in pinned(synthesized, "dev")


# --- the cost model against hand computations over the shipped templates ------------------------------------------

HOURS = 730


def items_of(estimate: list[cost.LineItem], service: str, item: str | None = None) -> float:
    chosen = [i for i in estimate if i.service == service and (item is None or i.item == item)]
    assert chosen, f"no {service} {item or ''} line"
    return sum(i.usd for i in chosen)


def test_dev_matches_a_hand_computation(
    cost_environments: dict[str, list[Stack]], prices: cost.PriceTable
) -> None:
    dev = cost.estimate(cost_environments["dev"], cost.Workload(), prices)
    tables = [plan.construct_id for plan in environments()["dev"].source_tables]
    # One t3.small.search data node all month, a 10 GiB gp3 volume at the baseline IOPS and throughput.
    assert items_of(dev, "OpenSearch") == pytest.approx(730 * 0.040 + 10 * 0.134)
    # Each of dev's tables (reference data, bookings, any added since), on demand: 2M writes of 2 KiB items = 2 WRU each + 1 WRU
    # for the KEYS_ONLY globalId index; 10M eventually consistent reads of up to 4 KiB = 0.5 RRU each; 1M items of
    # 2 KiB + 100 bytes of overhead, the index 1M × (100 bytes of keys + 100 of overhead); point-in-time recovery
    # on the table's data.
    table_gib = 1_000_000 * (2 + 100 / 1024) / GiB
    index_gib = 1_000_000 * (200 / 1024) / GiB
    one_table = (
        2_000_000 * 3 / 1e6 * 0.6875
        + 10_000_000 * 0.5 / 1e6 * 0.1375
        + (table_gib + index_gib) * 0.275
        + table_gib * 0.22
    )
    for table in tables:
        assert items_of(dev, "DynamoDB", f"{table}: on-demand writes (table and 1 GSI)") == pytest.approx(
            2_000_000 * 3 / 1e6 * 0.6875
        )
    # ... and each table's heartbeat: dev's every five minutes, 30 days of 288 one-unit writes.
    heartbeats = 30 * 288 / 1e6 * 0.6875
    assert items_of(dev, "DynamoDB") == pytest.approx(len(tables) * (one_table + heartbeats))
    assert items_of(dev, "DynamoDB") == pytest.approx(len(tables) * 5.860, abs=0.001 * len(tables))
    # SQS, Lambda and STS interface endpoints in dev's two zones, 1 GB through each.
    for service in ("sqs", "lambda", "sts"):
        assert items_of(dev, "VPC endpoints", f"{service} (interface) in 2 AZ") == pytest.approx(
            2 * 730 * 0.011
        )
    # One key, 100,000 requests.
    assert items_of(dev, "KMS") == pytest.approx(1.00 + 10 * 0.03)
    # The sync: 2M records from each table's stream in batches of 100 = 20,000 invocations per table of 0.5 s at
    # 1 GB (arm64), each traced.
    calls = 20_000 * len(tables)
    sync = (
        f"StreamSyncFunction: {calls:,} invocations (one per stream batch of {len(tables)} streams) of 500 ms at "
        "1,024 MB arm64"
    )
    assert items_of(dev, "Lambda", sync) == pytest.approx(calls / 1e6 * 0.20 + calls * 0.5 * 1 * 0.0000133334)
    assert items_of(dev, "X-Ray", "StreamSyncFunction: traces") == pytest.approx(calls / 1e6 * 5.00)


def test_provisioned_capacity_follows_the_auto_scaling_range(
    cost_environments: dict[str, list[Stack]], prices: cost.PriceTable
) -> None:
    def capacity(workload: cost.Workload) -> float:
        return items_of(
            cost.estimate(cost_environments["test"], workload, prices),
            "DynamoDB",
            "Table: provisioned write capacity, table (auto-scaled 5-200 at 70%)",
        )

    # 2M writes × 2 WCU a month is under 2 units a second: the minimum of 5 holds.
    assert capacity(cost.Workload()) == pytest.approx(5 * HOURS * 0.000715)
    # 150M writes × 2 WCU over 2,628,000 seconds = 114.2 units a second; at 70% utilization 163.1, so 164 units.
    assert capacity(cost.Workload(writes_per_month=150_000_000)) == pytest.approx(164 * HOURS * 0.000715)
    # Far more is capped at the maximum of 200.
    assert capacity(cost.Workload(writes_per_month=10**10)) == pytest.approx(200 * HOURS * 0.000715)


def test_prod_pays_for_three_zones_of_endpoints_and_dedicated_masters(
    cost_environments: dict[str, list[Stack]], prices: cost.PriceTable
) -> None:
    prod = cost.estimate(cost_environments["prod"], cost.Workload(), prices)
    assert items_of(prod, "OpenSearch", "m7g.large.search dedicated masters") == pytest.approx(
        3 * HOURS * 0.150
    )
    assert items_of(prod, "OpenSearch", "r7g.large.search data nodes") == pytest.approx(3 * HOURS * 0.195)
    assert items_of(prod, "VPC endpoints", "sts (interface) in 3 AZ") == pytest.approx(3 * HOURS * 0.011)


def test_the_shipped_indexable_schemas_keep_their_admin_notes_internal() -> None:
    """A property of the shipped schemas, by name (a new schema need not have admin notes at all)."""
    from refdata.registry import REGISTRY, Visibility

    for name in ("booking", "geozone", "productDate"):
        assert "adminNotes" in REGISTRY[name].attributes_of(visibility=Visibility.INTERNAL), name


# The pins above, as a synthesized environment holds them (also read by test_logical_ids and test_single_table: the
# pins live in this module, which `make pins` writes).
def pinned(synthesized: Synthesized, env_name: str) -> dict[str, str]:
    children = synthesized.stack(env_name, "Stateful")["children"]  # construct id -> its children's ids
    found = dict(PINNED)
    for construct_id, (table, vault) in {
        "Table": ({}, PINNED_WITH_BACKUP),
        **PINNED_ADDITIONAL_TABLES,
    }.items():
        if construct_id in children:
            found |= table | (vault if "Vault" in children[construct_id] else {})
    return found
