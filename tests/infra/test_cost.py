"""The cost estimate (infra/cost.py) over the synthesized templates: every resource type is priced or named free,
dev's figures match a hand computation, and docs/cost.md and the README table are what `make cost` writes."""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path

import pytest

from infra import cost
from infra.config import EnvironmentConfig
from infra.templates import Stack
from tests.infra.conftest import ENVIRONMENTS, Synthesized
from tests.infra.templates_helpers import GiB

ROOT = Path(__file__).resolve().parents[2]


def test_every_resource_type_in_the_templates_is_priced_or_named_free(
    cost_environments: dict[str, list[Stack]],
) -> None:
    assert list(cost_environments) == list(ENVIRONMENTS)
    types = {
        cost.resource_type(r)
        for stacks in cost_environments.values()
        for s in stacks
        for r in s.resources.values()
    }
    assert sorted(types - cost.RULES.keys() - cost.FREE.keys()) == []
    assert cost.RULES.keys() & cost.FREE.keys() == set()
    assert all(len(reason.split()) >= 2 for reason in cost.FREE.values())


def test_an_unpriced_resource_type_stops_the_estimate_and_names_it(
    cost_environments: dict[str, list[Stack]], prices: cost.PriceTable
) -> None:
    name = ENVIRONMENTS[0]
    stack = cost_environments[name][0]
    template = copy.deepcopy(dict(stack.template))
    template["Resources"]["Cache"] = {"Type": "AWS::ElastiCache::CacheCluster", "Properties": {}}
    with pytest.raises(
        cost.CostError, match=rf"{name}/Stateful/Cache: no price for AWS::ElastiCache::CacheCluster"
    ):
        cost.estimate([replace(stack, template=template)], cost.Workload(), prices)


def test_every_price_names_its_aws_pricing_page(prices: cost.PriceTable) -> None:
    assert prices.region == "ca-central-1" and prices.currency == "USD" and prices.recorded
    assert {
        key for key, p in prices.prices.items() if not p.source.startswith("https://aws.amazon.com/")
    } == set()
    assert all(p.usd > 0 and p.per for p in prices.prices.values())


def test_backups_keep_one_full_copy_per_day_of_retention(
    cost_environments: dict[str, list[Stack]], prices: cost.PriceTable, config: EnvironmentConfig
) -> None:
    table_gib = 1_000_000 * (2 + 100 / 1024) / GiB
    days = sum(
        plan.settings.backup_retention_days for plan in config.source_tables if plan.settings.backup_enabled
    )
    estimate = cost.estimate(cost_environments[config.name], cost.Workload(), prices)
    charged = sum(item.usd for item in estimate if item.service == "AWS Backup")
    assert charged == pytest.approx(days * table_gib * prices.prices["dynamodb.backup"].usd if days else 0.0)


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
    cost_environments: dict[str, list[Stack]], prices: cost.PriceTable
) -> None:
    estimates = {
        env: cost.estimate(stacks, cost.Workload(), prices) for env, stacks in cost_environments.items()
    }
    heartbeats = {
        env: cost.heartbeat_cost(stacks, cost.Workload(), prices) for env, stacks in cost_environments.items()
    }
    expected = cost.document(
        estimates, cost.Workload(), prices, heartbeats, cost.regions_of(cost_environments)
    )
    assert (ROOT / "docs" / "cost.md").read_text() == expected, "stale: run `make cost`"
    readme = (ROOT / "README.md").read_text()
    assert cost.with_readme_table(readme, cost.summary_table(estimates)) == readme, "stale: run `make cost`"


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_the_heartbeat_costs_what_its_schedules_writes_invocations_alarms_and_metrics_add_up_to(
    cost_environments: dict[str, list[Stack]], prices: cost.PriceTable, env: str
) -> None:
    from infra.environments import environments as configured

    config = configured()[env]
    tables = len(config.source_tables)
    runs = 30 * 1440 / config.heartbeat.interval_minutes  # per table and month
    stacks = cost_environments[env]
    resources = [r for s in stacks for r in s.resources.values()]
    declared = [r["Properties"] for r in resources if r["Type"] == "AWS::DynamoDB::Table"]
    on_demand = sum(1 for table in declared if table.get("BillingMode") == "PAY_PER_REQUEST")
    functions = [r["Properties"] for r in resources if r["Type"] == "AWS::Lambda::Function"]
    (sync,) = [function for function in functions if function.get("Handler") == "stream_sync.handler.handler"]
    gb = sync["MemorySize"] / 1024
    invocation = (
        0.1 * gb * prices[f"lambda.{sync['Architectures'][0]}.gb_second"] + prices["lambda.requests"] / 1e6
    )
    expected = (
        tables
        * runs
        * (
            2 * prices["scheduler.invocations"] / 1e6  # the schedules: the write and the count due
            + prices["cloudwatch.requests"] / 1e3  # the count's PutMetricData
            + invocation  # the sync invocation its stream record causes (100 ms assumed)
            + prices["xray.traces"] / 1e6  # traced
            + 1.5 / 2**20 * prices["logs.ingestion"]  # its log lines
        )
    )
    # The heartbeat's writes to on-demand tables (provisioned tables absorb them).
    expected += on_demand * runs * prices["dynamodb.write_request"] / 1e6
    # Two alarms per table: HeartbeatLag on the lag, HeartbeatMissing on the lag's count and the count due.
    expected += tables * (3 * prices["cloudwatch.alarm_metric"] + 2 * prices["cloudwatch.custom_metric"])

    heartbeat = cost.heartbeat_cost(stacks, cost.Workload(), prices)

    assert sum(item.usd for item in heartbeat) == pytest.approx(expected)
    estimate = cost.estimate(stacks, cost.Workload(), prices)
    for item in heartbeat:  # every heartbeat line is inside the environment's estimate
        if item.service not in ("CloudWatch alarms and dashboards", "CloudWatch metrics"):
            assert any(i.item == item.item and i.usd == pytest.approx(item.usd) for i in estimate), item


def test_an_environment_outside_the_price_tables_region_is_named_not_priced_silently(
    cost_environments: dict[str, list[Stack]], prices: cost.PriceTable
) -> None:
    estimates = {
        env: cost.estimate(stacks, cost.Workload(), prices) for env, stacks in cost_environments.items()
    }
    moved = {env: prices.region for env in estimates} | {"dev": "eu-west-1"}
    text = cost.document(estimates, cost.Workload(), prices, None, moved)
    (line,) = [line for line in text.splitlines() if "eu-west-1" in line]
    assert line.startswith(
        f"**dev is deployed in eu-west-1, and the price table has {prices.region} prices only"
    )
    assert "eu-west-1" not in cost.document(estimates, cost.Workload(), prices, None, {"dev": prices.region})


def test_every_priced_instance_type_is_one_config_accepts_in_the_price_tables_region() -> None:
    """A price for a type AWS does not offer there (a typo, a retired type) would price a domain no config builds."""
    from infra.config import instance_type_problem

    prices = cost.load_prices()
    instance_types = [
        key.removeprefix("opensearch.")
        for key in prices.prices
        if key.startswith("opensearch.") and key.endswith(".search")
    ]
    assert instance_types
    problems = {t: p for t in instance_types if (p := instance_type_problem(t, prices.region)) is not None}
    assert problems == {}
