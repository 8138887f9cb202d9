"""The cost estimate (infra/cost.py) over the synthesized templates: every resource type is priced or named free,
dev's figures match a hand computation, and docs/cost.md and the README table are what `make cost` writes."""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path

import pytest

from infra import cost
from infra.templates import Stack, load_assembly
from tests.infra.conftest import ENVIRONMENTS, Synthesized

ROOT = Path(__file__).resolve().parents[2]
HOURS = 730
GiB = 2**20  # KiB


@pytest.fixture(scope="module")
def environments(synthesized: Synthesized) -> dict[str, list[Stack]]:
    return cost.by_environment(load_assembly(synthesized.outdir))


@pytest.fixture(scope="module")
def prices() -> cost.PriceTable:
    return cost.load_prices()


def items_of(estimate: list[cost.LineItem], service: str, item: str | None = None) -> float:
    chosen = [i for i in estimate if i.service == service and (item is None or i.item == item)]
    assert chosen, f"no {service} {item or ''} line"
    return sum(i.usd for i in chosen)


def test_every_resource_type_in_the_templates_is_priced_or_named_free(
    environments: dict[str, list[Stack]],
) -> None:
    assert list(environments) == list(ENVIRONMENTS)
    types = {
        cost.resource_type(r)
        for stacks in environments.values()
        for s in stacks
        for r in s.resources.values()
    }
    assert sorted(types - cost.RULES.keys() - cost.FREE.keys()) == []
    assert cost.RULES.keys() & cost.FREE.keys() == set()
    assert all(len(reason.split()) >= 2 for reason in cost.FREE.values())


def test_an_unpriced_resource_type_stops_the_estimate_and_names_it(
    environments: dict[str, list[Stack]], prices: cost.PriceTable
) -> None:
    stack = environments["dev"][0]
    template = copy.deepcopy(dict(stack.template))
    template["Resources"]["Cache"] = {"Type": "AWS::ElastiCache::CacheCluster", "Properties": {}}
    with pytest.raises(
        cost.CostError, match=r"dev/Stateful/Cache: no price for AWS::ElastiCache::CacheCluster"
    ):
        cost.estimate([replace(stack, template=template)], cost.Workload(), prices)


def test_every_price_names_its_aws_pricing_page(prices: cost.PriceTable) -> None:
    assert prices.region == "ca-central-1" and prices.currency == "USD" and prices.recorded
    assert {
        key for key, p in prices.prices.items() if not p.source.startswith("https://aws.amazon.com/")
    } == set()
    assert all(p.usd > 0 and p.per for p in prices.prices.values())


def test_dev_matches_a_hand_computation(
    environments: dict[str, list[Stack]], prices: cost.PriceTable
) -> None:
    dev = cost.estimate(environments["dev"], cost.Workload(), prices)
    # One t3.small.search data node all month, a 10 GiB gp3 volume at the baseline IOPS and throughput.
    assert items_of(dev, "OpenSearch") == pytest.approx(730 * 0.040 + 10 * 0.134)
    # Each of the two tables (reference data, bookings), on demand: 2M writes of 2 KiB items = 2 WRU each + 1 WRU
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
    for table in ("Table", "TableBookings"):
        assert items_of(dev, "DynamoDB", f"{table}: on-demand writes (table and 1 GSI)") == pytest.approx(
            2_000_000 * 3 / 1e6 * 0.6875
        )
    assert items_of(dev, "DynamoDB") == pytest.approx(2 * one_table)
    assert items_of(dev, "DynamoDB") == pytest.approx(2 * 5.854, abs=0.002)
    # SQS, Lambda and STS interface endpoints in dev's two zones, 1 GB through each.
    for service in ("sqs", "lambda", "sts"):
        assert items_of(dev, "VPC endpoints", f"{service} (interface) in 2 AZ") == pytest.approx(
            2 * 730 * 0.011
        )
    # One key, 100,000 requests.
    assert items_of(dev, "KMS") == pytest.approx(1.00 + 10 * 0.03)
    # The sync: 2M records from each table's stream in batches of 100 = 40,000 invocations of 0.5 s at 1 GB
    # (arm64), each traced.
    sync = "StreamSyncFunction: 40,000 invocations (one per stream batch of 2 streams) of 500 ms at 1,024 MB arm64"
    assert items_of(dev, "Lambda", sync) == pytest.approx(
        40_000 / 1e6 * 0.20 + 40_000 * 0.5 * 1 * 0.0000133334
    )
    assert items_of(dev, "X-Ray", "StreamSyncFunction: traces") == pytest.approx(40_000 / 1e6 * 5.00)


def test_provisioned_capacity_follows_the_auto_scaling_range(
    environments: dict[str, list[Stack]], prices: cost.PriceTable
) -> None:
    def capacity(workload: cost.Workload) -> float:
        return items_of(
            cost.estimate(environments["test"], workload, prices),
            "DynamoDB",
            "Table: provisioned write capacity, table (auto-scaled 5-200 at 70%)",
        )

    # 2M writes × 2 WCU a month is under 2 units a second: the minimum of 5 holds.
    assert capacity(cost.Workload()) == pytest.approx(5 * HOURS * 0.000715)
    # 150M writes × 2 WCU over 2,628,000 seconds = 114.2 units a second; at 70% utilization 163.1, so 164 units.
    assert capacity(cost.Workload(writes_per_month=150_000_000)) == pytest.approx(164 * HOURS * 0.000715)
    # Far more is capped at the maximum of 200.
    assert capacity(cost.Workload(writes_per_month=10**10)) == pytest.approx(200 * HOURS * 0.000715)


def test_backups_keep_one_full_copy_per_day_of_retention(
    environments: dict[str, list[Stack]], prices: cost.PriceTable
) -> None:
    table_gib = 1_000_000 * (2 + 100 / 1024) / GiB
    for env, days in (("test", 14), ("prod", 35)):
        estimate = cost.estimate(environments[env], cost.Workload(), prices)
        assert items_of(estimate, "AWS Backup") == pytest.approx(days * table_gib * 0.11)


def test_prod_pays_for_three_zones_of_endpoints_and_dedicated_masters(
    environments: dict[str, list[Stack]], prices: cost.PriceTable
) -> None:
    prod = cost.estimate(environments["prod"], cost.Workload(), prices)
    assert items_of(prod, "OpenSearch", "m7g.large.search dedicated masters") == pytest.approx(
        3 * HOURS * 0.150
    )
    assert items_of(prod, "OpenSearch", "r7g.large.search data nodes") == pytest.approx(3 * HOURS * 0.195)
    assert items_of(prod, "VPC endpoints", "sts (interface) in 3 AZ") == pytest.approx(3 * HOURS * 0.011)


def test_a_workload_flag_changes_the_estimate(
    synthesized: Synthesized, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cost.main([str(synthesized.outdir), "--writes-per-month", "4000000"]) == 0
    printed = capsys.readouterr().out
    assert (
        "| item writes (puts, updates, deletes) to each table | 4,000,000 | `--writes-per-month` |" in printed
    )
    assert (
        "| DynamoDB | Table: on-demand writes (table and 1 GSI) | 12,000,000 write request units | 8.25 |"
        in printed
    )


def test_a_negative_assumption_is_refused_by_name() -> None:
    with pytest.raises(cost.CostError, match=r"^workload\.documents: must not be negative$"):
        cost.Workload(documents=-1)


def test_docs_cost_and_the_readme_table_are_current(
    environments: dict[str, list[Stack]], prices: cost.PriceTable
) -> None:
    estimates = {env: cost.estimate(stacks, cost.Workload(), prices) for env, stacks in environments.items()}
    expected = cost.document(estimates, cost.Workload(), prices)
    assert (ROOT / "docs" / "cost.md").read_text() == expected, "stale: run `make cost`"
    readme = (ROOT / "README.md").read_text()
    assert cost.with_readme_table(readme, cost.summary_table(estimates)) == readme, "stale: run `make cost`"
