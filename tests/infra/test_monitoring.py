"""Alarms, the composite alarm and the dashboard of every environment.

The expected alarm set is written out here, metric by metric, with thresholds from the environment's config (or
from the stateful resource they depend on: the domain's volume and node count, the function's timeout). Every
alarm must evaluate (its metric's real dimensions, naming the real resources), reach someone (alarm and OK
actions on the stateful alarm topic) and say what missing data means.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from stream_sync.heartbeat import METRIC as HEARTBEAT_METRIC
from stream_sync.telemetry import METRIC_NAMES

from infra.config import EnvironmentConfig
from infra.constructs.heartbeat import DUE_METRIC
from infra.constructs.ops_workflows import OPERATIONS
from tests.infra.conftest import table_ids
from tests.infra.templates_helpers import (
    GTE,
    alarm_name,
    alarms_by_name,
    dashboard,
    dead_letter_queue_id,
    framework_dead_letter_queue_id,
    mapping_refs,
    one,
    resolve,
    sync_function,
    sync_namespace,
)
from tests.support.template import Template

COMPOSITE = "AWS::CloudWatch::CompositeAlarm"
DOMAIN = "AWS::OpenSearchService::Domain"
TABLE = "AWS::DynamoDB::Table"
STATE_MACHINE = "AWS::StepFunctions::StateMachine"
MASTER_KINDS = {"MasterCPUUtilization", "MasterJVMMemoryPressure", "MasterOldGenJVMMemoryPressure"}


@dataclass(frozen=True)
class Expected:
    """One alarm on one plain metric: what it reads and when it fires."""

    namespace: str
    metric: str
    statistic: str
    period: int
    threshold: float
    missing: str
    evaluation_periods: int = 1
    comparison: str = GTE


def expected_alarms(
    config: EnvironmentConfig, stateful: Template, stateless: Template
) -> dict[str, Expected]:
    """Alarm name -> expectation, for the alarms that watch one metric (the metric-math ones are tested apart)."""
    settings = config.monitoring
    _, domain = one(stateful, DOMAIN)
    cluster = domain["Properties"]["ClusterConfig"]
    nodes = cluster["InstanceCount"] + cluster.get("DedicatedMasterCount", 0)
    volume_mib = domain["Properties"]["EBSOptions"]["VolumeSize"] * 1024
    _, function = sync_function(stateless)
    namespace = sync_namespace(stateless)

    def es(
        metric: str, statistic: str, period: int, threshold: float, missing: str = "missing", **kw: Any
    ) -> Expected:
        return Expected("AWS/ES", metric, statistic, period, threshold, missing, **kw)

    def sync(metric: str, statistic: str, period: int, threshold: float, **kw: Any) -> Expected:
        return Expected(namespace, metric, statistic, period, threshold, "notBreaching", **kw)

    def aws_lambda(metric: str, statistic: str, period: int, threshold: float) -> Expected:
        return Expected("AWS/Lambda", metric, statistic, period, threshold, "notBreaching")

    timeout_ms = function["Properties"]["Timeout"] * 1000
    dead_letters = Expected("AWS/SQS", "ApproximateNumberOfMessagesVisible", "Maximum", 60, 1, "notBreaching")
    alarms = {
        "ClusterStatusRed": es("ClusterStatus.red", "Maximum", 60, 1, "breaching"),
        "ClusterStatusYellow": es("ClusterStatus.yellow", "Maximum", 60, 1, evaluation_periods=5),
        "Nodes": es("Nodes", "Minimum", 86400, nodes, comparison="LessThanThreshold"),
        "FreeStorageSpace": es(
            "FreeStorageSpace",
            "Minimum",
            60,
            volume_mib * settings.free_storage_percent / 100,
            comparison="LessThanOrEqualToThreshold",
        ),
        "ClusterIndexWritesBlocked": es("ClusterIndexWritesBlocked", "Maximum", 300, 1),
        "AutomatedSnapshotFailure": es("AutomatedSnapshotFailure", "Maximum", 60, 1),
        "KMSKeyError": es("KMSKeyError", "Maximum", 60, 1, "notBreaching"),
        "KMSKeyInaccessible": es("KMSKeyInaccessible", "Maximum", 60, 1, "notBreaching"),
        "SyncIteratorAge": aws_lambda("IteratorAge", "Maximum", 60, settings.iterator_age_seconds * 1000),
        "SyncErrors": aws_lambda("Errors", "Sum", 300, 1),
        "SyncThrottles": aws_lambda("Throttles", "Sum", 300, 1),
        "SyncDuration": aws_lambda(
            "Duration", "Maximum", 300, timeout_ms * settings.duration_timeout_percent / 100
        ),
        **{f"{source}DeadLetters": dead_letters for source in ("StreamSync", "Bootstrap", "PurgeSchedule")},
    }
    # The domain's CPU and memory: its data nodes' always, its dedicated masters' where it has them.
    pressure = {
        "CPUUtilization": settings.cpu_percent,
        "JVMMemoryPressure": settings.jvm_memory_pressure_percent,
        "OldGenJVMMemoryPressure": settings.old_gen_jvm_memory_pressure_percent,
    }
    if cluster.get("DedicatedMasterEnabled"):
        pressure |= {
            "MasterCPUUtilization": settings.master_cpu_percent,
            "MasterJVMMemoryPressure": settings.master_jvm_memory_pressure_percent,
            "MasterOldGenJVMMemoryPressure": settings.master_old_gen_jvm_memory_pressure_percent,
        }
    for metric, threshold in pressure.items():
        period = 900 if metric.endswith("CPUUtilization") else 60
        alarms[metric] = es(metric, "Maximum", period, threshold, evaluation_periods=3)
    for label, indexes in table_indexes(stateful, config).items():
        # The sync's alarms per table: its metrics carry the Table dimension (issue 16.7), and each table's
        # event source mapping reports what it gave up on.
        per_table = {
            "SyncReplicationLag": sync(
                "ReplicationLagSeconds", "Maximum", 60, settings.replication_lag_seconds
            ),
            "SyncDeadLettered": sync("DocumentsDeadLettered", "Sum", 300, settings.dead_lettered_documents),
            "SyncRecordsHeldForRetry": sync(
                "RecordsReportedForRetry", "Sum", 300, settings.records_held_for_retry, evaluation_periods=3
            ),
        }
        for access in ("Read", "Write"):
            throttles = Expected(
                "AWS/DynamoDB",
                f"{access}ThrottleEvents",
                "Sum",
                300,
                settings.throttle_events,
                "notBreaching",
            )
            per_table[f"Table{access}Throttles"] = throttles
            for index in indexes:
                alarms["-".join(filter(None, (f"Index{access}Throttles", label, index)))] = throttles
        for kind, expected in per_table.items():
            alarms["-".join(filter(None, (kind, label)))] = expected
    heartbeat = config.heartbeat
    for plan in config.source_tables:
        # Slow heartbeats: an interval without one is not this alarm's concern (issue 25.1).
        alarms["-".join(filter(None, ("HeartbeatLag", plan.label)))] = sync(
            "HeartbeatLagSeconds",
            "Maximum",
            heartbeat.interval_minutes * 60,
            heartbeat.lag_alarm_seconds,
            evaluation_periods=heartbeat.alarm_periods,
        )
    return {f"refdata-{config.name}-{kind}": expected for kind, expected in alarms.items()}


MATH_ALARMS = ("ThreadpoolWriteRejected", "Domain5xx", "SyncScriptErrors")
# The event source mapping's own metrics (published per EventSourceMappingUUID).
MAPPING_METRICS = ("OnFailureDestinationDeliveredEventCount", "DroppedEventCount")


def math_alarms(config: EnvironmentConfig) -> set[str]:
    """The metric-math alarms: the domain's two, the sync's script errors over every table, and per table its system
    errors, what its event source mapping gave up on and its heartbeats due but not indexed (subject: its label;
    test_heartbeat.py)."""
    per_table = {
        "-".join(filter(None, (kind, plan.label)))
        for plan in config.source_tables
        for kind in ("TableSystemErrors", "SyncRecordsDiscarded", "HeartbeatMissing")
    }
    return {f"refdata-{config.name}-{kind}" for kind in (*MATH_ALARMS, *per_table)}


# --- helpers ----------------------------------------------------------------------------------------------------


def resolved_alarms(stateful: Template, stateless: Template) -> dict[str, Any]:
    """Alarm name -> its properties, each deploy-time value resolved to the stateful resource."""
    return dict(resolve(stateful, stateless, {name: p for name, (_, p) in alarms_by_name(stateless).items()}))


def metric_math(properties: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A metric-math alarm's expression, and the metric it reads under each id."""
    (expression,) = [q["Expression"] for q in properties["Metrics"] if q.get("ReturnData")]
    return expression, {q["Id"]: q["MetricStat"] for q in properties["Metrics"] if "MetricStat" in q}


def table_indexes(stateful: Template, config: EnvironmentConfig) -> dict[str, list[str]]:
    """Each source table's label in alarm names ("" for the main table) -> the indexes its template declares."""
    tables = stateful.find_resources(TABLE)
    labels = {plan.construct_id: plan.label for plan in config.source_tables}
    return {
        labels[construct_id]: [
            index["IndexName"] for index in tables[logical_id]["Properties"]["GlobalSecondaryIndexes"]
        ]
        for construct_id, logical_id in table_ids(stateful, config).items()
    }


def table_names(stateful: Template, config: EnvironmentConfig) -> dict[str, dict[str, Any]]:
    """Each table's label -> its name as the stateless stack knows it: the second part of its stream ARN (handed
    over in SSM)."""
    labels = {plan.construct_id: plan.label for plan in config.source_tables}
    return {
        labels[construct_id]: {
            "Fn::Select": [1, {"Fn::Split": ["/", {"Fn::GetAtt": [table_id, "StreamArn"]}]}]
        }
        for construct_id, table_id in table_ids(stateful, config).items()
    }


def dimensions(metric: dict[str, Any]) -> dict[str, Any]:
    return {d["Name"]: d["Value"] for d in metric.get("Dimensions") or []}


def alarm_topic(stateful: Template) -> dict[str, str]:
    (topic_id,) = stateful.find_resources("AWS::SNS::Topic")
    return {"Ref": topic_id}


def metric_stats(properties: dict[str, Any]) -> list[dict[str, Any]]:
    """Every metric an alarm reads: its own, or each one of its metric-math query."""
    if "Metrics" not in properties:
        return [{key: properties.get(key) for key in ("Namespace", "MetricName", "Dimensions")}]
    return [query["MetricStat"]["Metric"] for query in properties["Metrics"] if "MetricStat" in query]


def expected_dimensions(
    metric: dict[str, Any], kind: str, context: dict[str, Any], subject: str | None = None
) -> list[dict[str, Any]]:
    """The dimensions a metric may be read with: those it is published with, for the alarm's subject."""
    namespace = metric["Namespace"]
    # The main table's alarms have no label (an index alarm's subject is the index).
    table = subject if subject in context["tables"] else ""
    if namespace == context["sync_namespace"]:
        # The handler publishes per environment and table (stream_sync.telemetry); an alarm over every table
        # (its subject none) reads each table's.
        tables = [table] if subject else list(context["tables"]) if kind == "SyncScriptErrors" else [""]
        return [{"Environment": context["environment"], "Table": context["tables"][t]} for t in tables]
    if namespace == "AWS/Lambda" and metric["MetricName"] in MAPPING_METRICS:
        return [{"EventSourceMappingUUID": context["mappings"][table]}]
    return [
        {
            "AWS/ES": context["domain"],
            "AWS/DynamoDB": {"TableName": context["tables"][table]},
            "AWS/Lambda": {"FunctionName": context["function"]},
            "AWS/SQS": {"QueueName": context["queues"].get(kind.removesuffix("DeadLetters"))},
            "AWS/States": {"StateMachineArn": context["state_machines"].get(subject)},
        }.get(namespace, {})
    ]


def state_machines(stateless: Template) -> dict[str, dict[str, Any]]:
    """Operation -> the Ref of its workflow's state machine."""
    return {
        machine["Properties"]["StateMachineName"].rsplit("-", 1)[1]: {"Ref": logical_id}
        for logical_id, machine in stateless.find_resources(STATE_MACHINE).items()
    }


@pytest.fixture
def context(stateful: Template, stateless: Template, config: EnvironmentConfig) -> dict[str, Any]:
    _, domain = one(stateful, DOMAIN)
    function_id, _ = sync_function(stateless)
    return {
        "environment": config.name,
        "sync_namespace": sync_namespace(stateless),
        "mappings": mapping_refs(stateful, stateless, config),
        "domain": {"DomainName": domain["Properties"]["DomainName"], "ClientId": config.account},
        "tables": table_names(stateful, config),
        "function": {"Ref": function_id},
        "queues": {
            "StreamSync": {"Fn::GetAtt": [dead_letter_queue_id(stateless), "QueueName"]},
            "Bootstrap": {"Fn::GetAtt": [framework_dead_letter_queue_id(stateless), "QueueName"]},
            "PurgeSchedule": {"Fn::GetAtt": [schedule_dead_letter_queue_id(stateless), "QueueName"]},
        },
        "state_machines": state_machines(stateless),
    }


def schedule_dead_letter_queue_id(stateless: Template) -> str:
    """The purge schedule's dead-letter queue (the heartbeat's schedules have none: a missed heartbeat alarms)."""
    (queue,) = {
        schedule["Properties"]["Target"]["DeadLetterConfig"]["Arn"]["Fn::GetAtt"][0]
        for schedule in stateless.find_resources("AWS::Scheduler::Schedule").values()
        if "DeadLetterConfig" in schedule["Properties"]["Target"]
    }
    return str(queue)


# --- the alarm set ----------------------------------------------------------------------------------------------


def test_the_environment_has_exactly_the_expected_alarms(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    expected = {
        *expected_alarms(config, stateful, stateless),
        *math_alarms(config),
        *(f"refdata-{config.name}-OpsRunFailed-{operation}" for operation in OPERATIONS),
    }
    assert set(alarms_by_name(stateless)) == expected


def test_each_alarm_reads_its_metric_with_the_configured_threshold(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    found = alarms_by_name(stateless)
    for name, expected in expected_alarms(config, stateful, stateless).items():
        _, properties = found[name]
        actual = Expected(
            properties["Namespace"],
            properties["MetricName"],
            properties["Statistic"],
            properties["Period"],
            properties["Threshold"],
            properties["TreatMissingData"],
            properties["EvaluationPeriods"],
            properties["ComparisonOperator"],
        )
        assert actual == expected, name
        assert properties.get("DatapointsToAlarm", expected.evaluation_periods) == expected.evaluation_periods


def test_write_rejections_alarm_on_the_increase_of_the_cumulative_counter(
    stateless: Template, config: EnvironmentConfig
) -> None:
    _, properties = alarms_by_name(stateless)[f"refdata-{config.name}-ThreadpoolWriteRejected"]
    (expression,) = [q for q in properties["Metrics"] if q.get("ReturnData")]
    (counter,) = [q for q in properties["Metrics"] if not q.get("ReturnData")]
    assert expression["Expression"] == f"DIFF({counter['Id']})"
    assert (counter["MetricStat"]["Metric"]["MetricName"], counter["MetricStat"]["Stat"]) == (
        "ThreadpoolWriteRejected",
        "Sum",
    )
    assert (properties["Threshold"], properties["ComparisonOperator"]) == (
        config.monitoring.write_rejections,
        GTE,
    )


def test_5xx_alarm_is_the_share_of_the_domains_requests(
    stateless: Template, config: EnvironmentConfig
) -> None:
    _, properties = alarms_by_name(stateless)[f"refdata-{config.name}-Domain5xx"]
    expression, members = metric_math(properties)
    ids = {stat["Metric"]["MetricName"]: member for member, stat in members.items()}
    assert expression == f"100 * {ids['5xx']} / {ids['OpenSearchRequests']}"
    assert all((stat["Stat"], stat["Period"]) == ("Sum", 60) for stat in members.values())
    assert (properties["Threshold"], properties["TreatMissingData"]) == (
        config.monitoring.server_error_percent,
        "notBreaching",
    )


def test_each_tables_system_errors_alarm_sums_every_operation_within_cloudwatchs_ten_metrics(
    stateless: Template, config: EnvironmentConfig
) -> None:
    for plan in config.source_tables:
        _, properties = alarms_by_name(stateless)[alarm_name(config, "TableSystemErrors", plan.label)]
        expression, members = metric_math(properties)
        assert sorted(expression.split(" + ")) == sorted(members) and len(members) <= 10
        operations = {dimensions(stat["Metric"])["Operation"] for stat in members.values()}
        assert {
            "GetItem",
            "PutItem",
            "UpdateItem",
            "DeleteItem",
            "Query",
            "Scan",
            "BatchWriteItem",
        } <= operations
        assert all(
            stat["Metric"]["MetricName"] == "SystemErrors" and stat["Stat"] == "Sum"
            for stat in members.values()
        )
        assert properties["Threshold"] == config.monitoring.table_system_errors


def test_a_failed_or_timed_out_run_of_each_ops_workflow_alarms(
    stateless: Template, config: EnvironmentConfig, context: dict[str, Any]
) -> None:
    found = alarms_by_name(stateless)
    for operation in OPERATIONS:
        _, properties = found[f"refdata-{config.name}-OpsRunFailed-{operation}"]
        expression, members = metric_math(properties)
        assert expression == f"{operation}Failed + {operation}TimedOut"
        assert {i: (m["Metric"]["MetricName"], m["Stat"], m["Period"]) for i, m in members.items()} == {
            f"{operation}Failed": ("ExecutionsFailed", "Sum", 300),
            f"{operation}TimedOut": ("ExecutionsTimedOut", "Sum", 300),
        }
        assert all(
            dimensions(m["Metric"]) == {"StateMachineArn": context["state_machines"][operation]}
            for m in members.values()
        )
        assert (properties["Threshold"], properties["TreatMissingData"]) == (1, "notBreaching")


def test_master_alarms_exist_exactly_where_the_domain_has_dedicated_masters(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    _, domain = one(stateful, DOMAIN)
    masters = bool(domain["Properties"]["ClusterConfig"].get("DedicatedMasterEnabled"))
    kinds = {name.removeprefix(f"refdata-{config.name}-") for name in alarms_by_name(stateless)}
    assert (kinds & MASTER_KINDS) == (MASTER_KINDS if masters else set())
    assert masters is (config.search.master_node_count > 0)


# --- every alarm evaluates and reaches someone -----------------------------------------------------------------


def test_every_alarm_reads_its_metrics_with_the_dimensions_they_are_published_with(
    stateful: Template, stateless: Template, context: dict[str, Any]
) -> None:
    for name, properties in resolved_alarms(stateful, stateless).items():
        for metric in metric_stats(properties):
            found = dimensions(metric)
            found.pop("GlobalSecondaryIndexName", None)
            found.pop("Operation", None)
            kind, *subject = name.split("-")[2:4]
            wanted = expected_dimensions(metric, kind, context, *subject)
            assert found in wanted, f"{name} reads {metric['MetricName']} with {found}, not one of {wanted}"


def test_index_throttle_alarms_cover_every_index_of_every_stateful_table(
    stateful: Template, stateless: Template, config: EnvironmentConfig, context: dict[str, Any]
) -> None:
    resolved = resolved_alarms(stateful, stateless)
    for kind in ("IndexReadThrottles", "IndexWriteThrottles"):
        watched = {
            (
                json.dumps(dimensions(properties)["TableName"]),
                dimensions(properties)["GlobalSecondaryIndexName"],
            )
            for name, properties in resolved.items()
            if name.startswith(f"refdata-{config.name}-{kind}-")
        }
        assert watched == {
            (json.dumps(context["tables"][label]), index)
            for label, indexes in table_indexes(stateful, config).items()
            for index in indexes
        }


def test_the_sync_alarms_read_only_metrics_the_handler_emits(stateless: Template) -> None:
    namespace = sync_namespace(stateless)
    emitted = {
        metric["MetricName"]
        for _, properties in alarms_by_name(stateless).values()
        for metric in metric_stats(properties)
        if metric["Namespace"] == namespace
    }
    assert emitted == {
        "ReplicationLagSeconds",
        "DocumentsDeadLettered",
        "RecordsReportedForRetry",
        "ScriptErrors",
        "HeartbeatLagSeconds",
        "HeartbeatsDue",
    }
    # stream_sync.heartbeat's, and the heartbeat's count of heartbeats due (its schedules publish it: test_heartbeat.py)
    assert emitted <= METRIC_NAMES | {HEARTBEAT_METRIC, DUE_METRIC}


def test_every_sync_metric_an_alarm_reads_names_an_environment_and_a_table(
    stateful: Template, stateless: Template, config: EnvironmentConfig, context: dict[str, Any]
) -> None:
    """Before issue 16.7 the sync's metrics had no dimensions: two environments or tables in one account mixed,
    and every alarm read the mix. Each now reads one environment's and one table's, and the per-table alarms
    cover every table."""
    resolved = resolved_alarms(stateful, stateless)
    read: dict[str, set[str]] = {}
    for name, properties in resolved.items():
        for metric in metric_stats(properties):
            if metric["Namespace"] == context["sync_namespace"]:
                found = dimensions(metric)
                assert found["Environment"] == config.name, name
                read.setdefault(metric["MetricName"], set()).add(json.dumps(found["Table"], sort_keys=True))
    every_table = {json.dumps(table, sort_keys=True) for table in context["tables"].values()}
    assert read == dict.fromkeys(read, every_table)


def test_what_each_mapping_gives_up_on_alarms_with_the_redrive_deadline(
    stateless: Template, config: EnvironmentConfig, context: dict[str, Any]
) -> None:
    """An event source mapping's on-failure message holds only the stream range: it must be redriven while the
    stream still has the records (24 h), so what each table's mapping gives up on pages. DroppedEventCount leaves
    out what reached the on-failure destination (OnFailureDestinationDeliveredEventCount): the alarm sums both."""
    found = alarms_by_name(stateless)
    for label, mapping in context["mappings"].items():
        _, properties = found[alarm_name(config, "SyncRecordsDiscarded", label)]
        expression, members = metric_math(properties)
        assert expression == " + ".join(f"FILL({member}, 0)" for member in members)
        assert sorted(stat["Metric"]["MetricName"] for stat in members.values()) == sorted(MAPPING_METRICS)
        assert all(
            dimensions(stat["Metric"]) == {"EventSourceMappingUUID": mapping} for stat in members.values()
        )
        assert all((stat["Stat"], stat["Period"]) == ("Sum", 300) for stat in members.values())
        assert (properties["Threshold"], properties["TreatMissingData"]) == (1, "notBreaching")
        assert "within 18 hours" in properties["AlarmDescription"]


def test_every_alarm_and_the_composite_notify_the_topic_on_alarm_and_on_ok(
    stateful: Template, stateless: Template
) -> None:
    every = {**alarms_by_name(stateless), **alarms_by_name(stateless, COMPOSITE)}
    resolved = resolve(stateful, stateless, {name: props for name, (_, props) in every.items()})
    topic = [alarm_topic(stateful)]
    for name, properties in resolved.items():
        assert (properties.get("AlarmActions"), properties.get("OKActions")) == (topic, topic), name
        assert properties.get("ActionsEnabled", True) is True, name


def test_every_alarm_states_what_missing_data_means(stateless: Template) -> None:
    for name, (_, properties) in alarms_by_name(stateless).items():
        assert properties.get("TreatMissingData") in {"breaching", "notBreaching", "missing"}, name


def test_every_description_links_its_runbook_section(stateless: Template, config: EnvironmentConfig) -> None:
    every = {**alarms_by_name(stateless), **alarms_by_name(stateless, COMPOSITE)}
    for name, (_, properties) in every.items():
        kind = name.removeprefix(f"refdata-{config.name}-").split("-")[0]
        assert properties["AlarmDescription"].endswith(f" Runbook: docs/runbook.md#{kind.lower()}"), name


def test_the_composite_alarm_fires_on_any_other_alarm(stateless: Template, config: EnvironmentConfig) -> None:
    (name,) = alarms_by_name(stateless, COMPOSITE)
    assert name == f"refdata-{config.name}-PlatformDegraded"
    _, properties = alarms_by_name(stateless, COMPOSITE)[name]
    separator, parts = properties["AlarmRule"]["Fn::Join"]
    literals = [part for part in parts if isinstance(part, str)]
    covered = [part["Fn::GetAtt"][0] for part in parts if isinstance(part, dict)]
    assert all(part["Fn::GetAtt"][1] == "Arn" for part in parts if isinstance(part, dict))
    assert sorted(covered) == sorted(logical_id for logical_id, _ in alarms_by_name(stateless).values())
    assert separator == "" and literals[0] == '(ALARM("' and literals[-1] == '"))'
    assert set(literals[1:-1]) == {'") OR ALARM("'}


# --- the dashboard ----------------------------------------------------------------------------------------------


TOKEN_KEYS = {"Ref", "Fn::GetAtt", "Fn::Select", "Fn::Join"}


def dashboard_dimensions(body: dict[str, Any]) -> dict[str, list[str]]:
    """Dimension name -> every value (as JSON) the dashboard's graphs use. A metric row is
    ``[namespace, name, key, value, ..., {options}]``; an expression row starts with a dict."""
    found: dict[str, list[str]] = {}
    for widget in body["widgets"]:
        for row in widget["properties"].get("metrics", []):
            if isinstance(row[0], dict):
                continue
            if isinstance(row[-1], dict) and not TOKEN_KEYS & row[-1].keys():
                row = row[:-1]
            for key, value in zip(row[2::2], row[3::2], strict=True):
                found.setdefault(key, []).append(json.dumps(value, sort_keys=True))
    return found


def as_json(*values: Any) -> set[str]:
    return {json.dumps(value, sort_keys=True) for value in values}


def test_dashboard_graphs_name_the_real_resources(
    stateful: Template, stateless: Template, config: EnvironmentConfig, context: dict[str, Any]
) -> None:
    found = {key: set(values) for key, values in dashboard_dimensions(dashboard(stateful, stateless)).items()}
    assert found == {
        "Environment": as_json(config.name),
        "Table": as_json(*context["tables"].values()),
        "EventSourceMappingUUID": as_json(*context["mappings"].values()),
        "FunctionName": as_json(context["function"]),
        "QueueName": as_json(*context["queues"].values()),
        "TableName": as_json(*context["tables"].values()),
        "GlobalSecondaryIndexName": as_json(
            *(i for names in table_indexes(stateful, config).values() for i in names)
        ),
        "Operation": found["Operation"],
        "DomainName": as_json(context["domain"]["DomainName"]),
        "ClientId": as_json(context["domain"]["ClientId"]),
        "StateMachineArn": as_json(*context["state_machines"].values()),
    }


def test_dashboard_shows_every_alarm_and_the_composite(stateful: Template, stateless: Template) -> None:
    body = dashboard(stateful, stateless)
    alarms = as_json(
        *({"Fn::GetAtt": [logical_id, "Arn"]} for logical_id, _ in alarms_by_name(stateless).values())
    )
    ((composite_id, _),) = alarms_by_name(stateless, COMPOSITE).values()
    (status,) = [w["properties"]["alarms"] for w in body["widgets"] if w["type"] == "alarm"]
    assert as_json(*status) == alarms | as_json({"Fn::GetAtt": [composite_id, "Arn"]})
    assert json.dumps(status[0]) == json.dumps({"Fn::GetAtt": [composite_id, "Arn"]})
    one_each = [
        w["properties"]["annotations"]["alarms"]
        for w in body["widgets"]
        if "alarms" in w["properties"].get("annotations", {})
    ]
    assert all(len(graphed) == 1 for graphed in one_each)
    assert len(one_each) == len(alarms) and as_json(*(graphed[0] for graphed in one_each)) == alarms


def test_dashboard_widgets_fit_the_grid_without_overlapping(stateful: Template, stateless: Template) -> None:
    cells: set[tuple[int, int]] = set()
    for widget in dashboard(stateful, stateless)["widgets"]:
        assert widget["x"] + widget["width"] <= 24
        area = {
            (x, y)
            for x in range(widget["x"], widget["x"] + widget["width"])
            for y in range(widget["y"], widget["y"] + widget["height"])
        }
        assert not area & cells, widget
        cells |= area
