"""Monthly cost estimate per environment: ``make cost`` writes docs/cost.md and the README's table.

    python -m infra.cost [cdk.out] [--writes-per-month N ...]      (prints the estimate for other assumptions)
    python -m infra.cost cdk.out --write docs/cost.md --readme README.md

Every resource of the synthesized templates is priced by a rule for its type, or named free with the reason
(``FREE``); a type with neither stops the estimate, so a new kind of resource cannot go unpriced. The shape of each
resource (instance types and counts, volumes, capacity mode and auto-scaling range, endpoints and their zones,
retention, memory, alarms and their metrics) comes from the templates, which come from config; what the resources
are used for comes from the assumed ``Workload``; the prices come from infra/prices.toml.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import tomllib
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from infra.files import write
from infra.templates import Stack, command_assembly, referenced_names

ROOT = Path(__file__).resolve().parent.parent
PRICES = Path(__file__).resolve().parent / "prices.toml"
HOURS = 730  # hours in the average month, as AWS's pricing pages count them
SECONDS = HOURS * 3600
DAYS = 30
KiB_PER_GiB = 1024 * 1024
ITEM_OVERHEAD_KIB = 100 / 1024  # DynamoDB's per-item storage overhead (100 bytes)
INDEX_KEYS_KIB = 100 / 1024  # a KEYS_ONLY index item: the table and index keys, about 100 bytes
README_BEGIN, README_END = "<!-- cost-table:begin (make cost) -->", "<!-- cost-table:end -->"


class CostError(ValueError):
    """The estimate cannot be made: an unpriced resource type, a missing price, a bad assumption."""


# --- prices and workload ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Price:
    usd: float
    per: str
    source: str


@dataclass(frozen=True)
class PriceTable:
    region: str
    currency: str
    recorded: str
    note: str
    prices: Mapping[str, Price]

    def __getitem__(self, key: str) -> float:
        if key not in self.prices:
            raise CostError(f"no price {key!r} in infra/prices.toml: add it with its source")
        return self.prices[key].usd


def load_prices(path: Path = PRICES) -> PriceTable:
    data = tomllib.loads(path.read_text())
    return PriceTable(
        region=data["region"],
        currency=data["currency"],
        recorded=data["recorded"],
        note=data["note"],
        prices={key: Price(**entry) for key, entry in data["prices"].items()},
    )


def _assumption(default: float, help: str) -> Any:
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True, kw_only=True)
class Workload:
    """What the environment is used for in a month; every field is a ``--flag`` of ``python -m infra.cost``."""

    writes_per_month: int = _assumption(2_000_000, "item writes (puts, updates, deletes) to each table")
    reads_per_month: int = _assumption(10_000_000, "eventually consistent item reads from each table")
    item_kib: float = _assumption(2.0, "average item size in KiB (also each indexed document)")
    documents: int = _assumption(1_000_000, "items in each table, each one a search document")
    records_per_batch: int = _assumption(100, "stream records per sync invocation")
    ms_per_batch: int = _assumption(500, "duration of one sync invocation in milliseconds")
    other_invocations: int = _assumption(1_000, "invocations of each function no event source drives")
    other_ms: int = _assumption(1_000, "duration of those invocations in milliseconds")
    log_gib: float = _assumption(0.5, "GiB ingested into each log group")
    endpoint_gib: float = _assumption(1.0, "GiB through each interface VPC endpoint")
    kms_requests: int = _assumption(100_000, "requests to each KMS key")
    bucket_gib: float = _assumption(5.0, "GiB stored in each bucket")
    bucket_puts: int = _assumption(10_000, "PUT/LIST requests to each bucket")
    bucket_gets: int = _assumption(100_000, "GET requests to each bucket")
    queue_requests: int = _assumption(10_000, "requests to each queue")
    notifications: int = _assumption(1_000, "email notifications from each topic")
    state_transitions: int = _assumption(
        10_000, "state transitions (or express requests) of each state machine"
    )
    heartbeat_ms: int = _assumption(
        100, "duration of the sync invocation one heartbeat causes, in milliseconds"
    )

    def __post_init__(self) -> None:
        for f in fields(self):
            if getattr(self, f.name) < 0:
                raise CostError(f"workload.{f.name}: must not be negative")
        if self.records_per_batch < 1 or self.item_kib <= 0:
            raise CostError("workload.records_per_batch and workload.item_kib: must be positive")

    @property
    def write_units(self) -> int:
        """Write request units of one item write (1 KiB each)."""
        return math.ceil(self.item_kib)

    @property
    def read_units(self) -> float:
        """Read request units of one eventually consistent item read (4 KiB each, half a unit)."""
        return math.ceil(self.item_kib / 4) / 2

    @property
    def table_gib(self) -> float:
        return self.documents * (self.item_kib + ITEM_OVERHEAD_KIB) / KiB_PER_GiB


# --- line items -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Quantity:
    amount: float
    unit: str

    def __str__(self) -> str:
        amount = f"{self.amount:,.0f}" if self.amount == int(self.amount) else f"{self.amount:,.2f}"
        return f"{amount} {self.unit}"


@dataclass(frozen=True)
class LineItem:
    service: str
    item: str
    quantity: Quantity | str
    usd: float


def merged(items: Iterable[LineItem]) -> list[LineItem]:
    """Items of the same service, description and unit summed into one, grouped by service."""
    kept: dict[tuple[str, str, str], LineItem] = {}
    for item in items:
        unit = item.quantity.unit if isinstance(item.quantity, Quantity) else item.quantity
        key = (item.service, item.item, unit)
        if key in kept:
            before = kept[key]
            quantity = (
                Quantity(before.quantity.amount + item.quantity.amount, unit)
                if isinstance(before.quantity, Quantity) and isinstance(item.quantity, Quantity)
                else item.quantity
            )
            kept[key] = LineItem(item.service, item.item, quantity, before.usd + item.usd)
        else:
            kept[key] = item
    return sorted(kept.values(), key=lambda item: item.service)


@dataclass(frozen=True)
class Context:
    """What a rule can read: the resource's stack, the other stacks of its environment, workload and prices."""

    stack: Stack
    environment: list[Stack]
    workload: Workload
    prices: PriceTable

    def resources_of(self, *types: str) -> list[tuple[str, Mapping[str, Any]]]:
        return [(i, r) for i, r in self.stack.resources.items() if r.get("Type") in types]

    def charge(
        self, service: str, item: str, amount: float, unit: str, price: str, *, per: float = 1
    ) -> LineItem:
        """``amount`` of ``unit``, at the price ``price`` for every ``per`` of them."""
        return LineItem(service, item, Quantity(amount, unit), amount / per * self.prices[price])


Rule = Callable[[Context, str, Mapping[str, Any]], list[LineItem]]


def number(value: Any, default: float = 0) -> float:
    return default if value is None else float(value)


def props(resource: Mapping[str, Any]) -> Mapping[str, Any]:
    return resource.get("Properties", {})  # type: ignore[no-any-return]


def construct(logical_id: str) -> str:
    """A logical id without CDK's hash suffix (``StreamSyncFunction5A8222E0`` -> ``StreamSyncFunction``)."""
    return re.sub(r"[0-9A-F]{8}$", "", logical_id) or logical_id


# --- rules ------------------------------------------------------------------------------------------------------


def opensearch_domain(ctx: Context, logical_id: str, resource: Mapping[str, Any]) -> list[LineItem]:
    p = props(resource)
    cluster, ebs = p.get("ClusterConfig", {}), p.get("EBSOptions", {})
    nodes, node_type = number(cluster.get("InstanceCount"), 1), cluster.get("InstanceType")
    items = [
        ctx.charge(
            "OpenSearch",
            f"{node_type} data nodes",
            nodes * HOURS,
            "instance-hours",
            f"opensearch.{node_type}",
        )
    ]
    if str(cluster.get("DedicatedMasterEnabled")).lower() == "true":
        masters, master_type = number(cluster.get("DedicatedMasterCount")), cluster.get("DedicatedMasterType")
        items.append(
            ctx.charge(
                "OpenSearch",
                f"{master_type} dedicated masters",
                masters * HOURS,
                "instance-hours",
                f"opensearch.{master_type}",
            )
        )
    if str(ebs.get("EBSEnabled")).lower() == "true":
        volume, kind = number(ebs.get("VolumeSize")), ebs.get("VolumeType", "gp3")
        item = f"{kind} storage, {volume:,.0f} GiB per data node"
        items.append(
            ctx.charge("OpenSearch", item, nodes * volume, "GiB-months", f"opensearch.storage.{kind}")
        )
        if kind == "gp3":
            # gp3 includes 3,000 IOPS and 125 MiB/s per volume; more is billed per volume.
            iops = max(0.0, number(ebs.get("Iops"), 3000) - 3000) * nodes
            throughput = max(0.0, number(ebs.get("Throughput"), 125) - 125) * nodes
            items += [
                ctx.charge("OpenSearch", "gp3 IOPS above 3,000", iops, "IOPS-months", "opensearch.gp3.iops"),
                ctx.charge(
                    "OpenSearch",
                    "gp3 throughput above 125 MiB/s",
                    throughput,
                    "MiB/s-months",
                    "opensearch.gp3.throughput",
                ),
            ]
    return [
        item for item in items if item.usd or (isinstance(item.quantity, Quantity) and item.quantity.amount)
    ]


def _literal_text(value: Any) -> str:
    """The literal parts of a (possibly ``Fn::Join``-ed) string, joined."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        return "".join(_literal_text(part) for part in value["Fn::Join"][1])
    return ""


def _scaled_capacity(
    ctx: Context, table_id: str, dimension: str, index: str | None, demand: float
) -> tuple[float, str] | None:
    """Units an auto-scaled dimension holds on average (the month's average demand at the target utilization,
    within the target's range), with how it was found; None when the dimension is not auto-scaled."""
    for target_id, target in ctx.resources_of("AWS::ApplicationAutoScaling::ScalableTarget"):
        tp = props(target)
        resource_id = tp.get("ResourceId")
        found = re.search(r"/index/([^/]+)$", _literal_text(resource_id))
        if (
            table_id not in referenced_names(resource_id)
            or tp.get("ScalableDimension") != dimension
            or (found.group(1) if found else None) != index
        ):
            continue
        utilization = next(
            (
                number(
                    props(policy).get("TargetTrackingScalingPolicyConfiguration", {}).get("TargetValue"), 70
                )
                for _, policy in ctx.resources_of("AWS::ApplicationAutoScaling::ScalingPolicy")
                if target_id in referenced_names(props(policy).get("ScalingTargetId"))
            ),
            70.0,
        )
        low, high = number(tp.get("MinCapacity")), number(tp.get("MaxCapacity"))
        units = min(high, max(low, math.ceil(demand / (utilization / 100))))
        return units, f"auto-scaled {low:,.0f}-{high:,.0f} at {utilization:,.0f}%"
    return None


def _provisioned(
    ctx: Context, logical_id: str, table: Mapping[str, Any], index_units: Mapping[str, int]
) -> list[LineItem]:
    w = ctx.workload
    throughput: dict[str | None, Any] = {None: table.get("ProvisionedThroughput", {})}
    throughput.update(
        {
            str(i.get("IndexName")): i.get("ProvisionedThroughput", {})
            for i in table.get("GlobalSecondaryIndexes", [])
        }
    )
    demands: list[tuple[str | None, str, float, float]] = [
        (None, "table", w.writes_per_month * w.write_units, w.reads_per_month * w.read_units)
    ]
    demands += [(name, f"GSI {name}", w.writes_per_month * units, 0.0) for name, units in index_units.items()]
    items = []
    for index, label, writes, reads in demands:
        for kind, demand, key in (
            ("write", writes, "WriteCapacityUnits"),
            ("read", reads, "ReadCapacityUnits"),
        ):
            dimension = f"dynamodb:{'index' if index else 'table'}:{key}"
            scaled = _scaled_capacity(ctx, logical_id, dimension, index, demand / SECONDS)
            units, how = scaled or (number(throughput[index].get(key)), "fixed")
            items.append(
                ctx.charge(
                    "DynamoDB",
                    f"provisioned {kind} capacity, {label} ({how})",
                    units * HOURS,
                    "capacity unit-hours",
                    f"dynamodb.{kind}_capacity",
                )
            )
    return items


def dynamodb_table(ctx: Context, logical_id: str, resource: Mapping[str, Any]) -> list[LineItem]:
    """One source table's writes, reads, storage, recovery and insights (each item named by the table's construct,
    so an environment with several tables shows each one's)."""
    name = construct(logical_id)
    return [replace(item, item=f"{name}: {item.item}") for item in _table_items(ctx, logical_id, resource)]


def _table_items(ctx: Context, logical_id: str, resource: Mapping[str, Any]) -> list[LineItem]:
    p, w = props(resource), ctx.workload
    indexes = [i for i in p.get("GlobalSecondaryIndexes", []) if isinstance(i, dict)]
    # Every write also writes each index the item appears in (assumed: every item): a KEYS_ONLY or INCLUDE
    # projection stays under 1 KiB, an ALL projection costs what the item does.
    projects_all = {
        str(i.get("IndexName")): i.get("Projection", {}).get("ProjectionType") == "ALL" for i in indexes
    }
    index_units = {name: w.write_units if everything else 1 for name, everything in projects_all.items()}
    if p.get("BillingMode") == "PAY_PER_REQUEST":
        items = [
            ctx.charge(
                "DynamoDB",
                f"on-demand writes (table and {len(indexes)} GSI)",
                w.writes_per_month * (w.write_units + sum(index_units.values())),
                "write request units",
                "dynamodb.write_request",
                per=1e6,
            ),
            ctx.charge(
                "DynamoDB",
                "on-demand reads",
                w.reads_per_month * w.read_units,
                "read request units",
                "dynamodb.read_request",
                per=1e6,
            ),
        ]
    else:
        items = _provisioned(ctx, logical_id, p, index_units)
    index_kib = sum(w.item_kib if everything else INDEX_KEYS_KIB for everything in projects_all.values())
    index_gib = w.documents * (index_kib + ITEM_OVERHEAD_KIB * len(indexes)) / KiB_PER_GiB
    storage = f"storage ({w.documents:,} items of {w.item_kib:g} KiB, {len(indexes)} GSI)"
    items.append(ctx.charge("DynamoDB", storage, w.table_gib + index_gib, "GiB-months", "dynamodb.storage"))
    if str(p.get("PointInTimeRecoverySpecification", {}).get("PointInTimeRecoveryEnabled")).lower() == "true":
        items.append(
            ctx.charge("DynamoDB", "point-in-time recovery", w.table_gib, "GiB-months", "dynamodb.pitr")
        )
    insights = [p.get("ContributorInsightsSpecification", {})]
    insights += [i.get("ContributorInsightsSpecification", {}) for i in indexes]
    watched = sum(1 for spec in insights if str(spec.get("Enabled")).lower() == "true")
    if watched:
        items.append(
            ctx.charge(
                "DynamoDB",
                f"contributor insights ({watched} of table and GSI)",
                (w.writes_per_month + w.reads_per_month) * watched,
                "events",
                "dynamodb.contributor_insights",
                per=1e5,
            )
        )
    if "StreamSpecification" in p:
        items.append(LineItem("DynamoDB", "stream reads by Lambda", "free for Lambda triggers", 0.0))
    return items


def _selected_tables(ctx: Context, plan_id: str) -> list[str]:
    return sorted(
        table
        for _, selection in ctx.resources_of("AWS::Backup::BackupSelection")
        if plan_id in referenced_names(props(selection).get("BackupPlanId"))
        for table in referenced_names(props(selection).get("BackupSelection", {}).get("Resources"))
        if ctx.stack.resources.get(table, {}).get("Type")
        in ("AWS::DynamoDB::Table", "AWS::DynamoDB::GlobalTable")
    )


def _per_day(expression: str) -> float:
    """Runs a day of a schedule expression: ``rate(N unit)`` exactly, ``cron(...)`` taken as daily."""
    rate = re.fullmatch(r"rate\((\d+) (minute|hour|day)s?\)", expression)
    if rate:
        return {"minute": 1440, "hour": 24, "day": 1}[rate.group(2)] / int(rate.group(1))
    return 1.0


def backup_plan(ctx: Context, logical_id: str, resource: Mapping[str, Any]) -> list[LineItem]:
    tables = _selected_tables(ctx, logical_id)
    items = []
    for rule in props(resource).get("BackupPlan", {}).get("BackupPlanRule", []):
        keep_days = number(rule.get("Lifecycle", {}).get("DeleteAfterDays"), 365)
        kept = keep_days * _per_day(str(rule.get("ScheduleExpression", "cron(daily)")))
        # DynamoDB backups are full copies of the table.
        items.append(
            ctx.charge(
                "AWS Backup",
                f"{rule.get('RuleName')}: {len(tables)} table(s), {kept:,.0f} full backups kept",
                kept * ctx.workload.table_gib * len(tables),
                "GiB-months",
                "dynamodb.backup",
            )
        )
    return items


def _event_sources(ctx: Context, logical_id: str) -> int:
    """How many event source mappings (one per table stream) invoke the function."""
    return sum(
        logical_id in referenced_names(props(mapping).get("FunctionName"))
        for _, mapping in ctx.resources_of("AWS::Lambda::EventSourceMapping")
    )


def lambda_function(ctx: Context, logical_id: str, resource: Mapping[str, Any]) -> list[LineItem]:
    p, w = props(resource), ctx.workload
    memory_gb = number(p.get("MemorySize"), 128) / 1024
    architecture = (p.get("Architectures") or ["x86_64"])[0]
    streams = _event_sources(ctx, logical_id)
    if streams:
        # Every table is written `writes_per_month` times, and each of its stream's records reaches the function.
        invocations, ms, why = (
            streams * w.writes_per_month / w.records_per_batch,
            w.ms_per_batch,
            "one per stream batch" + (f" of {streams} streams" if streams > 1 else ""),
        )
    else:
        invocations, ms, why = w.other_invocations, w.other_ms, "not event-driven"
    name = construct(logical_id)
    run = f"{name}: {invocations:,.0f} invocations ({why}) of {ms:,} ms at {memory_gb * 1024:,.0f} MB {architecture}"
    compute = ctx.charge(
        "Lambda", run, invocations * ms / 1000 * memory_gb, "GB-seconds", f"lambda.{architecture}.gb_second"
    )
    requests = ctx.charge("Lambda", run, invocations, "requests", "lambda.requests", per=1e6)
    items = [replace(compute, usd=compute.usd + requests.usd)]
    if p.get("TracingConfig", {}).get("Mode") == "Active":
        items.append(ctx.charge("X-Ray", f"{name}: traces", invocations, "traces", "xray.traces", per=1e6))
    return items


def vpc_endpoint(ctx: Context, logical_id: str, resource: Mapping[str, Any]) -> list[LineItem]:
    p = props(resource)
    service = _literal_text(p.get("ServiceName")).rsplit(".", 1)[-1]
    if p.get("VpcEndpointType", "Gateway") != "Interface":
        return [LineItem("VPC endpoints", f"{service} (gateway)", "free", 0.0)]
    zones = len(p.get("SubnetIds", []))
    return [
        ctx.charge(
            "VPC endpoints",
            f"{service} (interface) in {zones} AZ",
            zones * HOURS,
            "endpoint-hours",
            "vpc.interface_endpoint",
        ),
        ctx.charge(
            "VPC endpoints",
            "data processed by interface endpoints",
            ctx.workload.endpoint_gib,
            "GB",
            "vpc.endpoint_data",
        ),
    ]


def kms_key(ctx: Context, logical_id: str, resource: Mapping[str, Any]) -> list[LineItem]:
    return [
        ctx.charge(
            "KMS",
            "customer managed keys (each of the first two yearly rotations adds $1/month)",
            1,
            "keys",
            "kms.key",
        ),
        ctx.charge("KMS", "key requests", ctx.workload.kms_requests, "requests", "kms.requests", per=1e4),
    ]


def log_group(ctx: Context, logical_id: str, resource: Mapping[str, Any]) -> list[LineItem]:
    days = number(props(resource).get("RetentionInDays"), 365)
    ingested = ctx.workload.log_gib
    return [
        ctx.charge("CloudWatch Logs", "ingestion", ingested, "GB", "logs.ingestion"),
        # Steady state: each month's logs kept for the retention period.
        ctx.charge(
            "CloudWatch Logs",
            f"storage, {days:,.0f}-day retention",
            ingested * days / DAYS,
            "GB-months",
            "logs.storage",
        ),
    ]


def _alarm_metrics(p: Mapping[str, Any]) -> float:
    """Metrics CloudWatch bills an alarm for: each metric it reads (an anomaly band counts three)."""
    if "Metrics" not in p:
        return 1
    queries = [q for q in p["Metrics"] if isinstance(q, dict)]
    bands = sum(1 for q in queries if "ANOMALY_DETECTION_BAND" in str(q.get("Expression", "")))
    return sum(1 for q in queries if "MetricStat" in q) + 2 * bands


def alarm(ctx: Context, logical_id: str, resource: Mapping[str, Any]) -> list[LineItem]:
    p = props(resource)
    periods = [number(p.get("Period"), 60)]
    periods += [
        number(q["MetricStat"].get("Period"), 60)
        for q in p.get("Metrics", [])
        if isinstance(q, dict) and "MetricStat" in q
    ]
    high = min(periods) < 60
    key = "cloudwatch.high_resolution_alarm_metric" if high else "cloudwatch.alarm_metric"
    item = "high-resolution alarms" if high else "alarms"
    return [ctx.charge("CloudWatch alarms and dashboards", item, _alarm_metrics(p), "alarm metrics", key)]


def composite_alarm(ctx: Context, logical_id: str, resource: Mapping[str, Any]) -> list[LineItem]:
    return [
        ctx.charge(
            "CloudWatch alarms and dashboards", "composite alarms", 1, "alarms", "cloudwatch.composite_alarm"
        )
    ]


def dashboard(ctx: Context, logical_id: str, resource: Mapping[str, Any]) -> list[LineItem]:
    return [
        ctx.charge("CloudWatch alarms and dashboards", "dashboards", 1, "dashboards", "cloudwatch.dashboard")
    ]


def scaling_policy(ctx: Context, logical_id: str, resource: Mapping[str, Any]) -> list[LineItem]:
    p = props(resource)
    if p.get("PolicyType") != "TargetTrackingScaling":
        return []
    # Target tracking keeps its own alarms: a high and a low one, and for DynamoDB two more on the provisioned level.
    metric = str(
        p.get("TargetTrackingScalingPolicyConfiguration", {}).get("PredefinedMetricSpecification", {})
    )
    return [
        ctx.charge(
            "CloudWatch alarms and dashboards",
            "alarms kept by target-tracking scaling",
            4 if "DynamoDB" in metric else 2,
            "alarm metrics",
            "cloudwatch.alarm_metric",
        )
    ]


def metric_filter(ctx: Context, logical_id: str, resource: Mapping[str, Any]) -> list[LineItem]:
    count = len(props(resource).get("MetricTransformations", []))
    return [
        ctx.charge(
            "CloudWatch metrics", "metrics from log filters", count, "metrics", "cloudwatch.custom_metric"
        )
    ]


def sqs_queue(ctx: Context, logical_id: str, resource: Mapping[str, Any]) -> list[LineItem]:
    return [
        ctx.charge("SQS", "queue requests", ctx.workload.queue_requests, "requests", "sqs.requests", per=1e6)
    ]


def s3_bucket(ctx: Context, logical_id: str, resource: Mapping[str, Any]) -> list[LineItem]:
    w = ctx.workload
    return [
        ctx.charge("S3", "storage", w.bucket_gib, "GB-months", "s3.storage"),
        ctx.charge("S3", "PUT and LIST requests", w.bucket_puts, "requests", "s3.put", per=1e3),
        ctx.charge("S3", "GET requests", w.bucket_gets, "requests", "s3.get", per=1e3),
    ]


def sns_topic(ctx: Context, logical_id: str, resource: Mapping[str, Any]) -> list[LineItem]:
    sent = ctx.workload.notifications
    return [
        ctx.charge("SNS", "alarm publishes", sent, "publishes", "sns.publishes", per=1e6),
        ctx.charge("SNS", "alarm notifications by email", sent, "emails", "sns.email", per=1e5),
    ]


def ssm_parameter(ctx: Context, logical_id: str, resource: Mapping[str, Any]) -> list[LineItem]:
    if props(resource).get("Tier") not in ("Advanced", "Intelligent-Tiering"):
        return [LineItem("Systems Manager", "standard parameters", "free", 0.0)]
    return [ctx.charge("Systems Manager", "advanced parameters", 1, "parameters", "ssm.advanced_parameter")]


def state_machine(ctx: Context, logical_id: str, resource: Mapping[str, Any]) -> list[LineItem]:
    count, name = ctx.workload.state_transitions, construct(logical_id)
    if props(resource).get("StateMachineType") == "EXPRESS":
        # Express: per request, plus one second at the smallest (64 MB) billing size each.
        return [
            ctx.charge(
                "Step Functions",
                f"{name} (express)",
                count,
                "requests",
                "stepfunctions.express_requests",
                per=1e6,
            ),
            ctx.charge(
                "Step Functions",
                f"{name} (express) duration",
                count * 0.0625,
                "GB-seconds",
                "stepfunctions.express_gb_second",
            ),
        ]
    return [
        ctx.charge(
            "Step Functions",
            f"{name} (standard)",
            count,
            "state transitions",
            "stepfunctions.standard_transitions",
            per=1e3,
        )
    ]


def schedule(ctx: Context, logical_id: str, resource: Mapping[str, Any]) -> list[LineItem]:
    expression = str(props(resource).get("ScheduleExpression", ""))
    runs = 1 if expression.startswith("at(") else _per_day(expression) * DAYS
    items = [
        ctx.charge(
            "EventBridge Scheduler",
            f"{construct(logical_id)}: {expression}",
            runs,
            "invocations",
            "scheduler.invocations",
            per=1e6,
        )
    ]
    target = props(resource).get("Target", {}).get("Arn")
    if target == HEARTBEAT_TARGET:
        items += _heartbeat_writes(ctx, logical_id, resource, runs)
    if target == HEARTBEAT_DUE_TARGET:
        items.append(
            ctx.charge(
                "CloudWatch metrics",
                f"{construct(logical_id)}: PutMetricData of each heartbeat due",
                runs,
                "requests",
                "cloudwatch.requests",
                per=1e3,
            )
        )
    return items


HEARTBEAT_TARGET = "arn:aws:scheduler:::aws-sdk:dynamodb:putItem"  # infra/constructs/heartbeat.py
HEARTBEAT_DUE_TARGET = "arn:aws:scheduler:::aws-sdk:cloudwatch:putMetricData"  # infra/constructs/heartbeat.py
HEARTBEAT_METRIC = "HeartbeatLagSeconds"  # stream_sync/heartbeat.py
HEARTBEAT_DUE_METRIC = "HeartbeatsDue"  # infra/constructs/heartbeat.py
HEARTBEAT_LOG_KIB = 1.5  # the sync's log lines for a batch of one record: summary, EMF, heartbeat EMF


def _table_of_input(ctx: Context, value: Any) -> Mapping[str, Any] | None:
    """The source table a heartbeat schedule writes: its input names the table through the SSM-typed parameter of
    the table's stream ARN (infra/handoff.py), which the stateful stack writes from the table."""
    parameters = ctx.stack.template.get("Parameters", {})
    names = {parameters[name].get("Default") for name in referenced_names(value) if name in parameters}
    for stack in ctx.environment:
        for _, parameter in stack.resources.items():
            if parameter.get("Type") != "AWS::SSM::Parameter" or props(parameter).get("Name") not in names:
                continue
            for table_id in referenced_names(props(parameter).get("Value")):
                table: Mapping[str, Any] = stack.resources.get(table_id, {})
                if table.get("Type") in ("AWS::DynamoDB::Table", "AWS::DynamoDB::GlobalTable"):
                    return table
    return None


def _sync_function(ctx: Context) -> Mapping[str, Any] | None:
    """The function the tables' event source mappings invoke (the stream sync)."""
    for function_id, function in ctx.resources_of("AWS::Lambda::Function"):
        if _event_sources(ctx, function_id):
            return function
    return None


def _heartbeat_writes(
    ctx: Context, logical_id: str, resource: Mapping[str, Any], runs: float
) -> list[LineItem]:
    """What each heartbeat costs beyond its invocation: the item write (a small item: one write unit), the sync
    invocation its stream record causes (at worst one per heartbeat: a table without other traffic) and the log
    lines that invocation writes. The alarm and its metric are priced with the other alarms and custom metrics."""
    name = construct(logical_id)
    table = _table_of_input(ctx, props(resource).get("Target", {}).get("Input"))
    if table is not None and props(table).get("BillingMode") == "PAY_PER_REQUEST":
        items = [
            ctx.charge(
                "DynamoDB",
                f"{name}: heartbeat writes",
                runs,
                "write request units",
                "dynamodb.write_request",
                per=1e6,
            )
        ]
    else:
        items = [LineItem("DynamoDB", f"{name}: heartbeat writes", "within provisioned capacity", 0.0)]
    function = _sync_function(ctx)
    if function is not None:
        p = props(function)
        memory_gb = number(p.get("MemorySize"), 128) / 1024
        architecture = (p.get("Architectures") or ["x86_64"])[0]
        ms = ctx.workload.heartbeat_ms
        run = f"{name}: {runs:,.0f} sync invocations of {ms:,} ms (one per heartbeat)"
        compute = ctx.charge(
            "Lambda", run, runs * ms / 1000 * memory_gb, "GB-seconds", f"lambda.{architecture}.gb_second"
        )
        requests = ctx.charge("Lambda", run, runs, "requests", "lambda.requests", per=1e6)
        items.append(replace(compute, usd=compute.usd + requests.usd))
        if p.get("TracingConfig", {}).get("Mode") == "Active":
            items.append(
                ctx.charge(
                    "X-Ray", f"{name}: traces of those invocations", runs, "traces", "xray.traces", per=1e6
                )
            )
    items.append(
        ctx.charge(
            "CloudWatch Logs",
            f"{name}: the sync's log lines of each heartbeat",
            runs * HEARTBEAT_LOG_KIB / KiB_PER_GiB,
            "GB",
            "logs.ingestion",
        )
    )
    return items


def _heartbeat_metrics(resource: Mapping[str, Any]) -> set[str]:
    """The heartbeat metrics (namespace, name, dimensions) an alarm reads."""
    p = props(resource)
    metrics = [p] + [q["MetricStat"]["Metric"] for q in p.get("Metrics", []) if "MetricStat" in q]
    return {
        repr((metric.get("Namespace"), metric.get("MetricName"), metric.get("Dimensions")))
        for metric in metrics
        if metric.get("MetricName") in (HEARTBEAT_METRIC, HEARTBEAT_DUE_METRIC)
    }


def heartbeat_cost(stacks: list[Stack], workload: Workload, prices: PriceTable) -> list[LineItem]:
    """The heartbeat's share of an environment's estimate: its schedules (the writes and the counts due), writes,
    sync invocations, log lines and PutMetricData requests, its alarms and its metrics (two per table)."""
    items: list[LineItem] = []
    metrics: set[str] = set()  # its alarms read two metrics per table (HeartbeatLag and HeartbeatMissing)
    for stack in stacks:
        ctx = Context(stack=stack, environment=stacks, workload=workload, prices=prices)
        for logical_id, resource in stack.resources.items():
            kind = resource.get("Type")
            if kind == "AWS::Scheduler::Schedule" and props(resource).get("Target", {}).get("Arn") in (
                HEARTBEAT_TARGET,
                HEARTBEAT_DUE_TARGET,
            ):
                items += schedule(ctx, logical_id, resource)
            elif kind == "AWS::CloudWatch::Alarm" and (read := _heartbeat_metrics(resource)):
                items += alarm(ctx, logical_id, resource)
                metrics |= read
    if metrics:
        items.append(
            LineItem(
                "CloudWatch metrics",
                f"{HEARTBEAT_METRIC} and {HEARTBEAT_DUE_METRIC} (two per table)",
                Quantity(len(metrics), "metrics"),
                len(metrics) * prices["cloudwatch.custom_metric"],
            )
        )
    return merged(items)


RULES: dict[str, Rule] = {
    "AWS::OpenSearchService::Domain": opensearch_domain,
    "AWS::DynamoDB::Table": dynamodb_table,
    "AWS::Backup::BackupPlan": backup_plan,
    "AWS::Lambda::Function": lambda_function,
    "AWS::EC2::VPCEndpoint": vpc_endpoint,
    "AWS::KMS::Key": kms_key,
    "AWS::Logs::LogGroup": log_group,
    "AWS::Logs::MetricFilter": metric_filter,
    "AWS::CloudWatch::Alarm": alarm,
    "AWS::CloudWatch::CompositeAlarm": composite_alarm,
    "AWS::CloudWatch::Dashboard": dashboard,
    "AWS::ApplicationAutoScaling::ScalingPolicy": scaling_policy,
    "AWS::SQS::Queue": sqs_queue,
    "AWS::S3::Bucket": s3_bucket,
    "AWS::SNS::Topic": sns_topic,
    "AWS::SSM::Parameter": ssm_parameter,
    "AWS::StepFunctions::StateMachine": state_machine,
    "AWS::Scheduler::Schedule": schedule,
}

FREE: dict[str, str] = {
    "AWS::CDK::Metadata": "CDK's record of the construct library versions, not an AWS resource",
    "AWS::CloudFormation::CustomResource": "a custom resource costs what its provider function does (priced there)",
    "AWS::IAM::Role": "IAM has no charge",
    "AWS::IAM::ManagedPolicy": "IAM has no charge",
    "AWS::IAM::Policy": "IAM has no charge",
    "AWS::IAM::RolePolicy": "IAM has no charge",
    "AWS::EC2::VPC": "a VPC and its subnets, route tables and security groups have no charge (no NAT, no public IPv4)",
    "AWS::EC2::Subnet": "no charge (see AWS::EC2::VPC)",
    "AWS::EC2::RouteTable": "no charge (see AWS::EC2::VPC)",
    "AWS::EC2::SubnetRouteTableAssociation": "no charge (see AWS::EC2::VPC)",
    "AWS::EC2::SecurityGroup": "no charge (see AWS::EC2::VPC)",
    "AWS::EC2::SecurityGroupIngress": "no charge (see AWS::EC2::VPC)",
    "AWS::EC2::SecurityGroupEgress": "no charge (see AWS::EC2::VPC)",
    "AWS::EC2::FlowLog": "flow logs cost their log group's ingestion and storage (priced with the log group)",
    "AWS::Lambda::EventSourceMapping": "Lambda reads DynamoDB streams at no charge; the invocations are priced with the function",
    "AWS::Lambda::Permission": "no charge",
    "AWS::Lambda::EventInvokeConfig": "no charge",
    "AWS::Lambda::Version": "no charge; invocations are priced with the function",
    "AWS::Lambda::Alias": "no charge; invocations are priced with the function",
    "AWS::Lambda::LayerVersion": "no charge beyond the function's own code storage allowance",
    "AWS::Logs::ResourcePolicy": "no charge",
    "AWS::Logs::SubscriptionFilter": "no charge; its destination is priced",
    "AWS::Logs::QueryDefinition": "a saved query has no charge; running it is billed per GB scanned, like any query",
    "AWS::SSM::Document": "owned documents have no charge",
    "AWS::KMS::Alias": "aliases have no charge",
    "AWS::S3::BucketPolicy": "no charge",
    "AWS::SQS::QueuePolicy": "no charge",
    "AWS::SNS::TopicPolicy": "no charge",
    "AWS::SNS::Subscription": "deliveries are priced with the topic",
    "AWS::Backup::BackupVault": "a vault has no charge; the backups in it are priced with the plan",
    "AWS::Backup::BackupSelection": "no charge; the backups it selects are priced with the plan",
    "AWS::ApplicationAutoScaling::ScalableTarget": "Application Auto Scaling has no charge; the capacity it sets is priced with the table",
    "AWS::Events::Rule": "events AWS services deliver to the default bus have no charge (no custom events are published)",
    "AWS::Scheduler::ScheduleGroup": "no charge; its schedules are priced",
    "AWS::StepFunctions::Activity": "no charge; state transitions are priced with the state machine",
    "AWS::StepFunctions::StateMachineVersion": "no charge; executions are priced with the state machine",
    "AWS::StepFunctions::StateMachineAlias": "no charge; executions are priced with the state machine",
}


def resource_type(resource: Mapping[str, Any]) -> str:
    kind = str(resource.get("Type"))
    return "AWS::CloudFormation::CustomResource" if kind.startswith("Custom::") else kind


def custom_metrics(stacks: Iterable[Stack]) -> int:
    """Distinct metrics outside the AWS/ namespaces that alarms read: code publishes them, CloudWatch bills them."""
    found = set()
    for stack in stacks:
        for resource in stack.resources.values():
            if resource.get("Type") != "AWS::CloudWatch::Alarm":
                continue
            p = props(resource)
            metrics = [p] + [
                q["MetricStat"]["Metric"]
                for q in p.get("Metrics", [])
                if isinstance(q, dict) and "MetricStat" in q
            ]
            for metric in metrics:
                namespace = metric.get("Namespace")
                if isinstance(namespace, str) and not namespace.startswith("AWS/"):
                    found.add((namespace, metric.get("MetricName"), repr(metric.get("Dimensions"))))
    return len(found)


def estimate(stacks: list[Stack], workload: Workload, prices: PriceTable) -> list[LineItem]:
    """The monthly line items of one environment's stacks."""
    items = []
    for stack in stacks:
        ctx = Context(stack=stack, environment=stacks, workload=workload, prices=prices)
        for logical_id, resource in stack.resources.items():
            kind = resource_type(resource)
            if kind in RULES:
                items += RULES[kind](ctx, logical_id, resource)
            elif kind not in FREE:
                raise CostError(
                    f"{stack.name}/{logical_id}: no price for {kind}: add a rule to RULES or a reason to FREE in infra/cost.py"
                )
    count = custom_metrics(stacks)
    if count:
        items.append(
            LineItem(
                "CloudWatch metrics",
                "custom metrics alarms read",
                Quantity(count, "metrics"),
                count * prices["cloudwatch.custom_metric"],
            )
        )
    return merged(items)


def regions_of(groups: Mapping[str, list[Stack]]) -> dict[str, str]:
    """The region (or regions) each environment's stacks are deployed in."""
    return {env: ", ".join(sorted({stack.region for stack in group})) for env, group in groups.items()}


def by_environment(stacks: Mapping[str, Stack]) -> dict[str, list[Stack]]:
    """The stacks of each environment, environments in config order."""
    from infra.environments import environments

    grouped: dict[str, list[Stack]] = defaultdict(list)
    for name in sorted(stacks):
        grouped[stacks[name].environment].append(stacks[name])
    order = list(environments())
    return dict(
        sorted(
            grouped.items(),
            key=lambda entry: (order.index(entry[0]) if entry[0] in order else len(order), entry[0]),
        )
    )


# --- the document -----------------------------------------------------------------------------------------------


def money(usd: float) -> str:
    return f"{usd:,.2f}"


def summary_table(estimates: Mapping[str, list[LineItem]], total: str = "total") -> list[str]:
    """Each environment's items by service, and their total (a row named `total`)."""
    services = sorted({item.service for items in estimates.values() for item in items})
    lines = [
        "| monthly, USD | " + " | ".join(estimates) + " |",
        "|---|" + "---:|" * len(estimates),
    ]
    for service in services:
        cells = [money(sum(i.usd for i in items if i.service == service)) for items in estimates.values()]
        lines.append(f"| {service} | " + " | ".join(cells) + " |")
    lines.append(
        f"| **{total}** | "
        + " | ".join(f"**{money(sum(i.usd for i in items))}**" for items in estimates.values())
        + " |"
    )
    return lines


def document(
    estimates: Mapping[str, list[LineItem]],
    workload: Workload,
    prices: PriceTable,
    heartbeats: Mapping[str, list[LineItem]] | None = None,
    regions: Mapping[str, str] | None = None,
) -> str:
    flags = {f.name: f.metadata["help"] for f in fields(Workload)}
    heartbeats = heartbeats or {env: [] for env in estimates}
    elsewhere = {env: region for env, region in (regions or {}).items() if region != prices.region}
    lines = [
        "# Cost estimate",
        "",
        "Generated by `make cost` (`python -m infra.cost`) from the synthesized templates, the assumed workload and",
        f"the price table [`infra/prices.toml`](../infra/prices.toml) ({prices.region}, {prices.currency}, recorded",
        f"{prices.recorded}). On-demand list prices without free tiers, taxes or data transfer out of AWS; not a",
        "quote. " + prices.note,
        "",
        "## Monthly estimate per environment",
        "",
        *summary_table(estimates),
        "",
        *(
            f"**{env} is deployed in {region}, and the price table has {prices.region} prices only: its "
            f"estimate uses {prices.region}'s prices, not {region}'s.** Record {region}'s in "
            "`infra/prices.toml` before budgeting with it."
            for env, region in elsewhere.items()
        ),
        *([""] if elsewhere else []),
        "## Assumed workload",
        "",
        "Change any of them for a what-if: `.venv/bin/python -m infra.cost --writes-per-month 5000000` prints the",
        "estimate without touching this page.",
        "",
        "| assumption | value | flag |",
        "|---|---:|---|",
        *(
            f"| {help} | {value:,} | `--{name.replace('_', '-')}` |"
            for name, (help, value) in ((n, (flags[n], v)) for n, v in asdict(workload).items())
        ),
        "",
        "Rules of the model: a month is 730 hours; DynamoDB items are written and read eventually consistent at the",
        "item size (a GSI write costs one unit unless the index projects everything), auto-scaled capacity holds the",
        "month's average demand at the target utilization within its range (real peaks cost more), backups are full",
        "copies of the table, log storage is the retention period's worth of ingestion (before compression), and each",
        "function no event source drives runs `--other-invocations` times.",
        "",
        "## Line items",
    ]
    for env, items in estimates.items():
        lines += ["", f"### {env}", "", "| service | item | quantity | USD |", "|---|---|---|---:|"]
        lines += [f"| {i.service} | {i.item} | {i.quantity} | {money(i.usd)} |" for i in items]
    lines += [
        "",
        "## The heartbeat",
        "",
        "What the heartbeat (docs/sync.md, *Heartbeat*) adds to each environment, already inside the estimate above:",
        "two schedules per table (the heartbeat's write and its count due), each run's item write, the sync invocation",
        "and log lines its stream record causes (at worst one invocation per heartbeat), each count's PutMetricData",
        "request, the two alarms per table and their two metrics.",
        "",
        *summary_table(heartbeats, "heartbeat"),
    ]
    lines += ["", "## Resource types that cost nothing themselves", "", "| type | why |", "|---|---|"]
    lines += [f"| `{kind}` | {why} |" for kind, why in sorted(FREE.items())]
    lines += ["", "## Prices", "", f"| price | {prices.currency} | per | source |", "|---|---:|---|---|"]
    lines += [f"| `{key}` | {p.usd:g} | {p.per} | {p.source} |" for key, p in sorted(prices.prices.items())]
    return "\n".join(lines) + "\n"


def with_readme_table(readme: str, table: list[str]) -> str:
    begin, end = readme.find(README_BEGIN), readme.find(README_END)
    if begin < 0 or end < begin:
        raise CostError(f"README.md: the markers {README_BEGIN!r} and {README_END!r} are missing")
    return readme[: begin + len(README_BEGIN)] + "\n" + "\n".join(table) + "\n" + readme[end:]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m infra.cost", description=__doc__.split("\n\n")[0])
    parser.add_argument("cloud_assembly", nargs="?", type=Path, default=ROOT / "cdk.out")
    parser.add_argument("--write", type=Path, help="write the estimate to this Markdown file")
    parser.add_argument("--readme", type=Path, help="replace the estimate table in this README")
    for f in fields(Workload):
        kind = int if f.type in ("int", int) else float
        parser.add_argument(
            f"--{f.name.replace('_', '-')}", type=kind, default=f.default, help=f.metadata["help"]
        )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    stacks = command_assembly(args.cloud_assembly)
    try:
        workload = Workload(**{f.name: getattr(args, f.name) for f in fields(Workload)})
        prices = load_prices()
        groups = by_environment(stacks)
        estimates = {env: estimate(group, workload, prices) for env, group in groups.items()}
        heartbeats = {env: heartbeat_cost(group, workload, prices) for env, group in groups.items()}
    except CostError as error:
        print(f"cost: {error}", file=sys.stderr)
        return 2
    text = document(estimates, workload, prices, heartbeats, regions_of(groups))
    if args.write:
        write(args.write, text)
    if args.readme:
        write(args.readme, with_readme_table(args.readme.read_text(), summary_table(estimates)))
    if not args.write and not args.readme:
        print(text)
    return 0


if __name__ == "__main__":
    from infra.validation import run

    run(main)
