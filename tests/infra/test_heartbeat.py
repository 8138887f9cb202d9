"""The heartbeat in every environment (infra/constructs/heartbeat.py): a schedule per source table writing exactly
that table's heartbeat item at the configured interval, a role that may write nothing else, an event filter that
admits the item, the sync's environment name; a second schedule per table counting each heartbeat due, after the
table's mapping and heartbeat schedule exist, with a role that may publish nothing else; two alarms per table (a
slow heartbeat; heartbeats due and none indexed for longer than a new mapping's start-up), neither breaching on
missing data. Replays on an injected clock, under the CloudWatch guide's rules (tests/support/alarm_evaluation.py)
and every reading of what it leaves open: a first deploy, an added table and a recreated mapping page no one, a
stopped pipeline pages. The dashboard graphs; only stateless resources; the heartbeat's settings a frozen record."""

from __future__ import annotations

import json
import math
from itertools import product
from typing import Any

import pytest
from refdata.keys import parse_key
from refdata.reserved import HEARTBEAT_AT, heartbeat_key, is_heartbeat

from infra.config import (
    MAX_SMOKE_STARTUP_MINUTES,
    MIN_SMOKE_STARTUP_MINUTES,
    EnvironmentConfig,
    HeartbeatSettings,
)
from infra.constructs.heartbeat import (
    DUE_METRIC,
    PUT_ITEM_TARGET,
    PUT_METRIC_DATA_TARGET,
    SCHEDULED_TIME,
    due_metric_data,
    heartbeat_item,
    rate,
)
from tests.infra.conftest import table_ids
from tests.infra.templates_helpers import (
    GTE,
    MANAGED_POLICY,
    admitted_prefixes,
    alarm_name,
    alarms_by_name,
    allow,
    dashboard,
    data_key_arn,
    kms_via,
    mapping_refs,
    mappings,
    permissions,
    resolve,
    schema_tables,
    stream_arns,
    sync_namespace,
    table_arns,
)
from tests.support.alarm_evaluation import (
    INSUFFICIENT_DATA,
    OK,
    AlarmDefinition,
    History,
    NoOperand,
    any_of,
    replay,
)
from tests.support.template import Template

SCHEDULE = "AWS::Scheduler::Schedule"


def schedules_of(
    stateful: Template, stateless: Template, config: EnvironmentConfig, target: str
) -> dict[str, tuple[str, Any]]:
    """Construct id of each source table -> (logical id, properties) of the one schedule of ``target`` that names
    the table in its input."""
    by_table = {logical_id: construct_id for construct_id, logical_id in table_ids(stateful, config).items()}
    found: dict[str, tuple[str, Any]] = {}
    for logical_id, schedule in stateless.find_resources(SCHEDULE).items():
        properties = schedule["Properties"]
        if properties["Target"]["Arn"] != target:
            continue
        _input_parts(properties["Target"]["Input"])  # joined without a separator
        # The input's table name is a CloudFormation expression: read it as SCHEMA_TABLES is read.
        named = json.dumps(schema_tables(stateful, stateless, properties["Target"]["Input"]))
        (construct_id,) = [c for table, c in by_table.items() if json.dumps(table) in named]
        assert construct_id not in found, f"two schedules of {target} for {construct_id}"
        found[construct_id] = (logical_id, properties)
    return found


def role_of(schedule: dict[str, Any]) -> str:
    return str(schedule["Target"]["RoleArn"]["Fn::GetAtt"][0])


def policy_of(stateless: Template, role_id: str) -> Any:
    """The properties of the one managed policy of a role."""
    (policy,) = [
        p["Properties"]
        for p in stateless.find_resources(MANAGED_POLICY).values()
        if p["Properties"]["Roles"] == [{"Ref": role_id}]
    ]
    return policy


def assert_fires_every_interval(properties: dict[str, Any], config: EnvironmentConfig) -> None:
    assert properties["ScheduleExpression"] == rate(config.heartbeat.interval_minutes)
    assert properties["State"] == "ENABLED" and properties["FlexibleTimeWindow"] == {"Mode": "OFF"}


def heartbeat_schedules(stateful: Template, stateless: Template, config: EnvironmentConfig) -> dict[str, Any]:
    """Construct id of each source table -> the properties of the one schedule that writes its heartbeat."""
    return {c: p for c, (_, p) in schedules_of(stateful, stateless, config, PUT_ITEM_TARGET).items()}


def _input_parts(value: Any) -> list[Any]:
    separator, parts = value["Fn::Join"]
    assert separator == ""
    return list(parts)


def the_input(stateful: Template, stateless: Template, properties: dict[str, Any]) -> dict[str, Any]:
    parts = _input_parts(properties["Target"]["Input"])
    text = "".join(part if isinstance(part, str) else "<table>" for part in parts)
    return dict(json.loads(text))


def test_every_source_table_has_one_heartbeat_at_the_configured_interval(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    found = heartbeat_schedules(stateful, stateless, config)
    assert sorted(found) == sorted(plan.construct_id for plan in config.source_tables)
    for properties in found.values():
        assert_fires_every_interval(properties, config)
        retry = properties["Target"]["RetryPolicy"]
        assert retry["MaximumEventAgeInSeconds"] == 60 * config.heartbeat.interval_minutes


def test_each_heartbeat_puts_its_tables_heartbeat_item_with_the_scheduled_time(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    found = heartbeat_schedules(stateful, stateless, config)
    for plan in config.source_tables:
        schema = plan.indexable_schemas[0]
        written = the_input(stateful, stateless, found[plan.construct_id])
        assert written == {"TableName": "<table>", "Item": heartbeat_item(schema)}
        item = written["Item"]
        # Every write changes the item: a stream record each time.
        assert item[HEARTBEAT_AT] == {"S": SCHEDULED_TIME}
        assert parse_key(item["pk"]["S"], item["sk"]["S"]).schema == schema  # a key of the conventions
        assert is_heartbeat(item["pk"]["S"]) and schema in plan.schemas


def test_each_tables_event_filter_admits_its_heartbeat(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    found = mappings(stateful, stateless, config)
    for plan in config.source_tables:
        pk, _, _ = heartbeat_key(plan.indexable_schemas[0])
        assert any(pk.startswith(prefix) for prefix in admitted_prefixes(found[plan.construct_id])), pk


def test_the_heartbeat_role_may_put_only_the_heartbeat_items(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    (properties, *_) = heartbeat_schedules(stateful, stateless, config).values()
    role_id = role_of(properties)
    role = stateless.to_json()["Resources"][role_id]["Properties"]
    assert role["AssumeRolePolicyDocument"]["Statement"] == [
        {
            "Action": "sts:AssumeRole",
            "Effect": "Allow",
            "Principal": {"Service": "scheduler.amazonaws.com"},
            "Condition": {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}},
        }
    ]
    document = resolve(stateful, stateless, policy_of(stateless, role_id)["PolicyDocument"])
    tables = table_arns(stateful, config)
    expected: set[tuple[str, str, str]] = set()
    for plan in config.source_tables:
        pk, _, _ = heartbeat_key(plan.indexable_schemas[0])
        only = {"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [pk]}}
        expected |= allow(["dynamodb:PutItem"], tables[plan.construct_id], when=only)
    data_key_actions = ["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey"]
    expected |= allow(data_key_actions, data_key_arn(stateful), when=kms_via("dynamodb"))
    assert permissions(document) == expected


def heartbeat_alarm(stateless: Template, config: EnvironmentConfig, kind: str, label: str) -> tuple[str, Any]:
    """(logical id, properties) of one table's heartbeat alarm of a kind."""
    return alarms_by_name(stateless)[alarm_name(config, kind, label)]


def assert_reads_the_tables_heartbeat(
    stateful: Template,
    stateless: Template,
    config: EnvironmentConfig,
    properties: Any,
    construct_id: str,
    metric: str = "HeartbeatLagSeconds",
) -> None:
    assert properties["MetricName"] == metric
    assert properties["Period"] == 60 * config.heartbeat.interval_minutes
    dims = {d["Name"]: d["Value"] for d in resolve(stateful, stateless, properties["Dimensions"])}
    assert dims["Environment"] == config.name
    assert dims["Table"]["Fn::Select"][1]["Fn::Split"][1] == stream_arns(stateful, config)[construct_id]


def evaluation(properties: dict[str, Any]) -> tuple[Any, ...]:
    """(missing data, comparison, threshold, evaluation periods, datapoints to alarm) of an alarm."""
    periods = properties["EvaluationPeriods"]
    return (
        properties["TreatMissingData"],
        properties["ComparisonOperator"],
        properties["Threshold"],
        periods,
        properties.get("DatapointsToAlarm", periods),
    )


def test_each_tables_heartbeat_lag_alarm_watches_the_heartbeats_that_arrive_missing_data_not_breaching(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    """An interval without a heartbeat is HeartbeatMissing's concern: were it breaching here, a new mapping that
    has not started polling yet would page after ``alarm_periods`` intervals (issue 25.1)."""
    for plan in config.source_tables:
        _, properties = heartbeat_alarm(stateless, config, "HeartbeatLag", plan.label)
        assert_reads_the_tables_heartbeat(stateful, stateless, config, properties, plan.construct_id)
        assert properties["Statistic"] == "Maximum"
        lag, periods = config.heartbeat.lag_alarm_seconds, config.heartbeat.alarm_periods
        assert evaluation(properties) == ("notBreaching", GTE, lag, periods, periods)


def missing_periods(config: EnvironmentConfig) -> int:
    """HeartbeatMissing's evaluation periods N: N - 1 intervals cover a new mapping's start-up plus two intervals
    (the next heartbeat, its indexing and the periods' alignment), and at least ``alarm_periods``."""
    interval = 60 * config.heartbeat.interval_minutes
    periods = config.heartbeat.alarm_periods
    while (periods - 1) * interval < 60 * config.ops.smoke_startup_minutes + 2 * interval:
        periods += 1
    return periods


def test_each_tables_heartbeat_missing_alarm_compares_heartbeats_due_with_heartbeats_indexed(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    """Issue 32.4: missing data never breaches here (the periods before a table's first heartbeat, which a new alarm
    evaluates, are missing); a stopped pipeline shows as real data points: a heartbeat due, none indexed."""
    interval = 60 * config.heartbeat.interval_minutes
    for plan in config.source_tables:
        _, properties = heartbeat_alarm(stateless, config, "HeartbeatMissing", plan.label)
        queries = {q["Id"]: q for q in properties["Metrics"]}
        (watched,) = [q for q in queries.values() if "Expression" in q]
        assert watched["Expression"] == "due > indexed" and watched.get("ReturnData", True)
        for name, metric in (("due", DUE_METRIC), ("indexed", "HeartbeatLagSeconds")):
            stat, returned = queries[name]["MetricStat"], queries[name]["ReturnData"]
            assert (stat["Stat"], stat["Period"], returned) == ("SampleCount", interval, False)
            read = stat["Metric"] | {"Period": interval}
            assert_reads_the_tables_heartbeat(stateful, stateless, config, read, plan.construct_id, metric)
        periods = missing_periods(config)
        assert evaluation(properties) == ("notBreaching", GTE, 1, periods, periods)


def test_each_tables_heartbeats_are_counted_due_at_the_heartbeats_rate_into_the_syncs_namespace(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    found = schedules_of(stateful, stateless, config, PUT_METRIC_DATA_TARGET)
    assert sorted(found) == sorted(plan.construct_id for plan in config.source_tables)
    namespace = sync_namespace(stateless)
    for _, properties in found.values():
        assert_fires_every_interval(properties, config)
        assert the_input(stateful, stateless, properties) == due_metric_data(
            namespace, config.name, "<table>"
        )


def test_heartbeats_are_counted_due_only_once_the_tables_mapping_and_heartbeat_schedule_exist(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    """HeartbeatMissing's window counts from the first heartbeat due: were it counted before the mapping existed,
    a slow deploy could spend the window before the mapping even started."""
    due = schedules_of(stateful, stateless, config, PUT_METRIC_DATA_TARGET)
    written = schedules_of(stateful, stateless, config, PUT_ITEM_TARGET)
    mapping_of = mapping_refs(stateful, stateless, config)
    resources = stateless.to_json()["Resources"]
    for plan in config.source_tables:
        logical_id, _ = due[plan.construct_id]
        after = set(resources[logical_id].get("DependsOn", []))
        assert {mapping_of[plan.label]["Ref"], written[plan.construct_id][0]} <= after, plan.construct_id


def test_the_due_count_role_may_publish_only_into_the_syncs_namespace(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    counting = schedules_of(stateful, stateless, config, PUT_METRIC_DATA_TARGET)
    (role_id,) = {role_of(p) for _, p in counting.values()}
    written = {role_of(p) for p in heartbeat_schedules(stateful, stateless, config).values()}
    assert role_id not in written  # the heartbeat's writer may not publish, nor the counter write
    into_the_namespace = {"StringEquals": {"cloudwatch:namespace": sync_namespace(stateless)}}
    assert permissions(policy_of(stateless, role_id)["PolicyDocument"]) == allow(
        ["cloudwatch:PutMetricData"], "*", when=into_the_namespace
    )


def test_both_heartbeat_alarms_of_every_table_feed_the_composite(
    stateless: Template, config: EnvironmentConfig
) -> None:
    (composite,) = stateless.find_resources("AWS::CloudWatch::CompositeAlarm").values()
    rule = json.dumps(composite["Properties"]["AlarmRule"])
    for plan in config.source_tables:
        for kind in ("HeartbeatLag", "HeartbeatMissing"):
            logical_id, _ = heartbeat_alarm(stateless, config, kind, plan.label)
            assert json.dumps({"Fn::GetAtt": [logical_id, "Arn"]}) in rule, (kind, plan.label)


def test_heartbeat_missing_evaluates_within_cloudwatchs_day_for_every_setting_config_accepts() -> None:
    """CloudWatch evaluates at most a day (EvaluationPeriods × Period ≤ 86,400 s). Config bounds alarm_periods ×
    interval_minutes to a day, and the start-up budget to MAX_SMOKE_STARTUP_MINUTES: over every combination config
    accepts, HeartbeatMissing's periods stay within it too, so it needs no validation of its own."""
    for interval in range(1, 61):
        for periods in range(2, 11):
            if periods * interval > 1440:
                continue
            settings = HeartbeatSettings(interval_minutes=interval, alarm_periods=periods)
            for startup in (60 * MIN_SMOKE_STARTUP_MINUTES, 60 * MAX_SMOKE_STARTUP_MINUTES):
                assert settings.missing_alarm_periods(startup) * interval * 60 <= 86400, (interval, periods)


# --- the alarms over a deploy's timeline (an injected clock: tests/support/alarm_evaluation.py) ------------------

INDEX_DELAY = 2.0  # seconds from a heartbeat's write to its metric, once a mapping polls
# What the CloudWatch guide leaves open, swept: the evaluation range's extra periods (at least one) and what a
# comparison gives for a period in which neither metric has a value.
NO_OPERAND: tuple[NoOperand, ...] = ("missing", "zero")
# HeartbeatMissing's comparison, treatment of missing data, statistics and expression, as monitoring.py builds it.
MISSING_RULE = (GTE, "notBreaching", {"due": "SampleCount", "indexed": "SampleCount"}, "due > indexed")


def heartbeat_alarms(
    stateless: Template, config: EnvironmentConfig, label: str
) -> dict[str, AlarmDefinition]:
    """Kind -> the evaluation settings of each heartbeat alarm of one table, as synthesized."""
    found = {}
    for name, (_, properties) in alarms_by_name(stateless).items():
        kind, _, subject = name.removeprefix(f"refdata-{config.name}-").partition("-")
        if kind.startswith("Heartbeat") and subject == label:
            found[kind] = AlarmDefinition.from_template(properties)
    assert set(found) == {"HeartbeatLag", "HeartbeatMissing"}, label
    return found


def ticks(first: float, interval: int, until: float) -> list[float]:
    return (
        [first + interval * n for n in range(int((until - first) // interval) + 1)] if first <= until else []
    )


def heartbeat_metrics(
    interval: int, *, written_from: float, due_from: float, polling: list[tuple[float, float]], until: float
) -> dict[str, list[tuple[float, float]]]:
    """One table's metrics: ``due`` (HeartbeatsDue, one a heartbeat from ``due_from``) and ``indexed``
    (HeartbeatLagSeconds). The schedule writes every ``interval`` from ``written_from``; a mapping polls over each
    ``(start, stop)`` of ``polling`` and reads what it missed from TRIM_HORIZON in one batch, which coalesces the
    heartbeat's versions into the newest; a write is indexed ``INDEX_DELAY`` after it is read."""
    newest: dict[float, float] = {}
    for write in ticks(written_from, interval, until):
        for start, stop in polling:
            at = max(write, start) + INDEX_DELAY
            if at < stop:
                newest[at] = max(newest.get(at, write), write)
                break
    return {
        "due": [(at, 1.0) for at in ticks(due_from, interval, until)],
        "indexed": sorted((at, at - write) for at, write in newest.items() if at < until),
    }


def fed(alarm: AlarmDefinition, metrics: dict[str, list[tuple[float, float]]]) -> Any:
    """What an alarm reads of a table's metrics: a heartbeat alarm on one metric reads HeartbeatLagSeconds, one
    with an expression reads both by their ids (asserted above)."""
    return metrics["indexed"] if alarm.expression is None else metrics


def startup_cases(budget: int) -> list[float]:
    """A mapping that starts polling after 5 minutes, and one that takes the whole start-up budget."""
    return sorted({min(300.0, budget), float(budget)})


def missing_periods_of(alarms: dict[str, AlarmDefinition]) -> int:
    return alarms["HeartbeatMissing"].evaluation_periods


def ranges(alarms: dict[str, AlarmDefinition]) -> list[int]:
    return sorted({1, 2, missing_periods_of(alarms)})


def first_deploys(interval: int, budget: int) -> list[tuple[float, float, float]]:
    """(first heartbeat written, first counted due, mapping polling from) after a deploy that creates the mapping
    at t = 0. The due count is created after the heartbeat's schedule (and the mapping): at the same rate it fires
    no earlier than an interval before the first write (their first firings after creation may differ), or later.
    The heartbeat's schedule may be created early or after the mapping has started."""
    return [
        (written_from, due_from, polling_from)
        for polling_from in startup_cases(budget)
        for written_from in (1.0, polling_from + 1)
        for due_from in (max(0.0, written_from - interval + 1), written_from + interval - 1)
    ]


def after_deploy(interval: int, case: tuple[float, float, float], until: float) -> dict[str, Any]:
    """One table's metrics after a deploy of ``first_deploys``: the new mapping polls from then on."""
    written_from, due_from, polling_from = case
    polling = [(polling_from, math.inf)]
    return heartbeat_metrics(
        interval, written_from=written_from, due_from=due_from, polling=polling, until=until
    )


def steady(interval: int, until: float, stop: float = math.inf) -> dict[str, list[tuple[float, float]]]:
    """A table whose heartbeats have flowed for hours (and are indexed until ``stop``)."""
    return heartbeat_metrics(
        interval,
        written_from=-6 * 3600.0,
        due_from=-6 * 3600.0 + 7,
        polling=[(-7 * 3600.0, stop)],
        until=until,
    )


def replayed(
    alarms: dict[str, AlarmDefinition], metrics: Any, extra: int, **window: Any
) -> dict[str, History]:
    """Kind -> the history of each of one table's alarms over its metrics, ``window`` as ``replay`` takes it."""
    return {
        kind: replay(alarm, fed(alarm, metrics), extra_range_periods=extra, **window)
        for kind, alarm in alarms.items()
    }


def test_a_first_deploy_pages_no_one_however_cloudwatch_reads_what_its_guide_leaves_open(
    stateless: Template, config: EnvironmentConfig
) -> None:
    """Issue 32.4: a new environment's alarms are created before their metrics exist and evaluate the periods
    before (PutMetricAlarm; the guide's missing-data table). No heartbeat alarm, and not the composite over them,
    may page while the mapping starts within the start-up budget, nor once heartbeats flow."""
    interval = 60 * config.heartbeat.interval_minutes
    for plan in config.source_tables:
        alarms = heartbeat_alarms(stateless, config, plan.label)
        for deploy in first_deploys(interval, 60 * config.ops.smoke_startup_minutes):
            written_from, due_from, polling_from = deploy
            until = max(written_from, polling_from) + (missing_periods_of(alarms) + 6) * interval
            metrics = after_deploy(interval, deploy, until)
            sweep = product((0.0, polling_from + INDEX_DELAY), ranges(alarms), NO_OPERAND)
            for created_at, extra, no_operand in sweep:
                histories = replayed(
                    alarms, metrics, extra, since=created_at, until=until, no_operand=no_operand
                )
                case = (
                    f"{plan.label or 'main'}: written from {written_from:.0f} s, due from {due_from:.0f} s, "
                    f"polling from {polling_from:.0f} s, alarms created at {created_at:.0f} s, range "
                    f"+{extra}, neither operand {no_operand}"
                )
                for kind, history in histories.items():
                    assert not history.pages(before=INSUFFICIENT_DATA), f"{kind} pages: {case}"
                composite = any_of(list(histories.values()), since=created_at, until=until)
                assert not composite.pages(before=INSUFFICIENT_DATA), f"the composite pages: {case}"


def test_heartbeat_missings_periods_outlast_a_first_deploy_and_catch_a_stop_for_every_setting_config_accepts() -> (
    None
):
    """The alarm as monitoring.py builds it, for intervals and start-up budgets across the ranges config accepts
    (the environments' own are replayed from their templates above)."""
    for minutes in (1, 2, 3, 5, 7, 10, 15, 30, 60):
        interval = 60 * minutes
        for budget in sorted({60 * MIN_SMOKE_STARTUP_MINUTES, 300, 420, 60 * MAX_SMOKE_STARTUP_MINUTES}):
            periods = HeartbeatSettings(interval_minutes=minutes).missing_alarm_periods(budget)
            alarm = AlarmDefinition(interval, periods, periods, 1, *MISSING_RULE)
            for deploy in first_deploys(interval, budget):
                until = max(deploy[0], deploy[2]) + (periods + 4) * interval
                metrics = after_deploy(interval, deploy, until)
                for extra in (1, periods):
                    history = replay(alarm, metrics, since=0.0, until=until, extra_range_periods=extra)
                    assert not history.pages(before=INSUFFICIENT_DATA), (minutes, budget, *deploy)
            until = (periods + 2) * interval
            stopped = heartbeat_metrics(
                interval, written_from=-86400.0, due_from=-86400.0 + 7, polling=[(-86400.0, 0.0)], until=until
            )
            history = replay(
                alarm, stopped, since=-interval * 20.0, until=until, extra_range_periods=2, created=False
            )
            assert history.pages(before=OK), (minutes, budget)


def test_an_added_table_pages_no_one_and_its_neighbours_alarms_and_the_composite_stay_ok(
    stateless: Template, config: EnvironmentConfig
) -> None:
    """Each table in turn is the one a deploy adds (its alarms, mapping and schedules created; the composite and the
    other tables' alarms updated, their states left unchanged: PutMetricAlarm, PutCompositeAlarm)."""
    interval = 60 * config.heartbeat.interval_minutes
    for added in config.source_tables:
        alarms = heartbeat_alarms(stateless, config, added.label)
        until = float(60 * config.ops.smoke_startup_minutes) + (missing_periods_of(alarms) + 6) * interval
        neighbours = [
            heartbeat_alarms(stateless, config, o.label) for o in config.source_tables if o is not added
        ]
        flowing = steady(interval, until)
        for deploy in first_deploys(interval, 60 * config.ops.smoke_startup_minutes):
            metrics = after_deploy(interval, deploy, until)
            for extra in ranges(alarms):
                histories = list(replayed(alarms, metrics, extra, since=0.0, until=until).values())
                for other in neighbours:
                    histories += replayed(
                        other, flowing, extra, since=0.0, until=until, created=False
                    ).values()
                assert {value for history in histories for _, value in history.states} <= {
                    OK,
                    INSUFFICIENT_DATA,
                }
                composite = any_of(histories, since=0.0, until=until)
                assert not composite.pages(before=OK), (added.label, *deploy, extra)


def test_a_recreated_mapping_pages_no_one_while_the_new_one_starts_within_the_startup_budget(
    stateless: Template, config: EnvironmentConfig
) -> None:
    """A deploy replaces a table's event source mapping at t = 0: the old one reads nothing more, the new one starts
    polling within the start-up budget and reads what it missed. The schedules and alarms are left as they were."""
    interval = 60 * config.heartbeat.interval_minutes
    for plan in config.source_tables:
        alarms = heartbeat_alarms(stateless, config, plan.label)
        for polling_from in startup_cases(60 * config.ops.smoke_startup_minutes):
            until = polling_from + (missing_periods_of(alarms) + 6) * interval
            for phase in (0.0, interval / 2, interval - 1.0):
                metrics = heartbeat_metrics(
                    interval,
                    written_from=-6 * 3600.0 + phase,
                    due_from=-6 * 3600.0 + 1,
                    polling=[(-7 * 3600.0, 0.0), (polling_from, math.inf)],
                    until=until,
                )
                for extra, no_operand in product(ranges(alarms), NO_OPERAND):
                    window = {"since": -interval * 20.0, "until": until, "no_operand": no_operand}
                    for kind, history in replayed(alarms, metrics, extra, created=False, **window).items():
                        case = (kind, plan.label, polling_from, phase, extra, no_operand)
                        assert not history.pages(before=OK), case


def test_a_pipeline_that_stops_pages_heartbeat_missing_and_the_composite_within_its_window(
    stateless: Template, config: EnvironmentConfig
) -> None:
    """Heartbeats flow, then none is indexed any more (a disabled mapping, a failing sync, a blocked index, a
    heartbeat no longer written): each period now holds a heartbeat due and none indexed, real breaching data
    points, so HeartbeatMissing pages within its evaluation periods, whatever the range's length."""
    interval = 60 * config.heartbeat.interval_minutes
    for plan in config.source_tables:
        alarms = heartbeat_alarms(stateless, config, plan.label)
        stop = 0.0
        until = stop + (missing_periods_of(alarms) + 2) * interval
        metrics = steady(interval, until, stop=stop)
        for extra, no_operand in product(ranges(alarms), NO_OPERAND):
            window = {"since": -interval * 20.0, "until": until, "no_operand": no_operand}
            histories = replayed(alarms, metrics, extra, created=False, **window)
            paged = histories["HeartbeatMissing"].pages(before=OK)
            assert paged and stop < paged[0] <= until, (plan.label, extra, no_operand)
            composite = any_of(list(histories.values()), since=-interval * 20.0, until=until)
            assert composite.pages(before=OK), (plan.label, extra, no_operand)


def test_the_dashboard_shows_heartbeat_lag_beside_iterator_age(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    body = dashboard(stateful, stateless)
    (graph,) = [
        w for w in body["widgets"] if w["properties"].get("title") == "Heartbeat lag beside iterator age (s)"
    ]
    rows = graph["properties"]["metrics"]
    lags = [row for row in rows if "HeartbeatLagSeconds" in row]
    assert len(lags) == len(config.source_tables)
    assert any(isinstance(row[0], dict) and "IteratorAge" in json.dumps(rows) for row in rows)


def test_the_dashboard_shows_each_tables_heartbeats_due_beside_those_indexed(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    """What HeartbeatMissing compares, per table: a gap between the two lines is heartbeats not indexed."""
    body = dashboard(stateful, stateless)
    (graph,) = [
        w
        for w in body["widgets"]
        if w["properties"].get("title") == "Heartbeats due and indexed (per interval)"
    ]
    rows = graph["properties"]["metrics"]
    for metric in (DUE_METRIC, "HeartbeatLagSeconds"):
        counted = [row for row in rows if metric in row]
        assert len(counted) == len(config.source_tables), metric
        assert all(row[-1].get("stat") == "SampleCount" for row in counted), metric


def test_the_heartbeat_adds_nothing_to_the_stateful_stack(stateful: Template) -> None:
    resources = stateful.to_json()["Resources"]
    assert not [i for i, r in resources.items() if r["Type"] == SCHEDULE or "Heartbeat" in i or "Smoke" in i]


# --- config ---------------------------------------------------------------------------------------------------


# Each heartbeat setting out of its range is rejected with its path: test_config.py.


def test_the_heartbeat_settings_are_a_frozen_keyword_only_record() -> None:
    with pytest.raises(TypeError):
        HeartbeatSettings(1)  # type: ignore[misc]
    settings = HeartbeatSettings()
    with pytest.raises(AttributeError):
        settings.interval_minutes = 2  # type: ignore[misc]
