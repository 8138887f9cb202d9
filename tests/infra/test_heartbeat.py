"""The heartbeat in every environment (infra/constructs/heartbeat.py): a schedule per source table writing exactly
that table's heartbeat item at the configured interval, a role that may write nothing else, an event filter that
admits the item, the sync's environment name, two alarms per table (a slow heartbeat; no heartbeat for longer
than a new mapping's start-up: a replayed deploy's timeline pages neither, a stopped pipeline pages the second), the
dashboard graph beside iterator age; only stateless resources; and the heartbeat's config validated by field."""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from typing import Any

import pytest
from refdata.keys import parse_key
from refdata.reserved import HEARTBEAT_AT, heartbeat_key, is_heartbeat

from infra.config import (
    MAX_SMOKE_STARTUP_MINUTES,
    MIN_SMOKE_STARTUP_MINUTES,
    ConfigError,
    EnvironmentConfig,
    HeartbeatSettings,
)
from infra.constructs.heartbeat import PUT_ITEM_TARGET, SCHEDULED_TIME, heartbeat_item, rate
from tests.infra.test_monitoring import alarms_by_name, dashboard
from tests.infra.test_ops_workflows import handed_table_arns
from tests.infra.test_stream_sync import (
    MANAGED_POLICY,
    admitted_prefixes,
    allow,
    data_key_arn,
    mappings,
    permissions,
    resolve,
    schema_tables,
    stream_arns,
)
from tests.support.alarm_evaluation import ALARM, AlarmDefinition, state
from tests.support.template import Template

SCHEDULE = "AWS::Scheduler::Schedule"


def heartbeat_schedules(stateful: Template, stateless: Template, config: EnvironmentConfig) -> dict[str, Any]:
    """Construct id of each source table -> the properties of the one schedule that writes its heartbeat."""
    by_table = {
        arn["Fn::GetAtt"][0]: construct_id for construct_id, arn in stream_arns(stateful, config).items()
    }
    found: dict[str, Any] = {}
    for schedule in stateless.find_resources(SCHEDULE).values():
        target = schedule["Properties"]["Target"]
        if target["Arn"] != PUT_ITEM_TARGET:
            continue
        # The input's table name is a CloudFormation expression: read it as SCHEMA_TABLES is read.
        table_id = schema_tables(stateful, stateless, {"Fn::Join": ["", [*_input_parts(target["Input"])]]})
        construct_id = by_table[table_id["TableName"]]
        assert construct_id not in found, f"two heartbeats for {construct_id}"
        found[construct_id] = schedule["Properties"]
    return found


def table_arns(stateful: Template, config: EnvironmentConfig) -> dict[str, Any]:
    """Construct id of each source table -> its ARN as the stateless stack builds it."""
    pairs = zip(
        (plan.construct_id for plan in config.source_tables), handed_table_arns(stateful, config), strict=True
    )
    return dict(pairs)


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
        assert properties["ScheduleExpression"] == rate(config.heartbeat.interval_minutes)
        assert properties["State"] == "ENABLED" and properties["FlexibleTimeWindow"] == {"Mode": "OFF"}
        assert (
            properties["Target"]["RetryPolicy"]["MaximumEventAgeInSeconds"]
            == 60 * config.heartbeat.interval_minutes
        )


def test_each_heartbeat_puts_its_tables_heartbeat_item_with_the_scheduled_time(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    found = heartbeat_schedules(stateful, stateless, config)
    for plan in config.source_tables:
        schema = plan.indexable_schemas[0]
        written = the_input(stateful, stateless, found[plan.construct_id])
        assert written == {"TableName": "<table>", "Item": heartbeat_item(schema)}
        item = written["Item"]
        assert item[HEARTBEAT_AT] == {
            "S": SCHEDULED_TIME
        }  # every write changes the item: a stream record each time
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
    role_id = properties["Target"]["RoleArn"]["Fn::GetAtt"][0]
    role = stateless.to_json()["Resources"][role_id]["Properties"]
    assert role["AssumeRolePolicyDocument"]["Statement"] == [
        {
            "Action": "sts:AssumeRole",
            "Effect": "Allow",
            "Principal": {"Service": "scheduler.amazonaws.com"},
            "Condition": {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}},
        }
    ]
    (policy,) = [
        p["Properties"]
        for p in stateless.find_resources(MANAGED_POLICY).values()
        if p["Properties"]["Roles"] == [{"Ref": role_id}]
    ]
    document = resolve(stateful, stateless, policy["PolicyDocument"])
    tables = table_arns(stateful, config)
    expected: set[tuple[str, str, str]] = set()
    for plan in config.source_tables:
        only = {
            "ForAllValues:StringEquals": {
                "dynamodb:LeadingKeys": [heartbeat_key(plan.indexable_schemas[0])[0]]
            }
        }
        expected |= allow(["dynamodb:PutItem"], tables[plan.construct_id], when=only)
    through = {
        "StringEquals": {
            "kms:ViaService": {"Fn::Join": ["", ["dynamodb.", {"Ref": "AWS::Region"}, ".amazonaws.com"]]}
        }
    }
    expected |= allow(
        ["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey"],
        data_key_arn(stateful),
        when=through,
    )
    assert permissions(document) == expected


def heartbeat_alarm(stateless: Template, config: EnvironmentConfig, kind: str, label: str) -> tuple[str, Any]:
    """(logical id, properties) of one table's heartbeat alarm of a kind."""
    found: tuple[str, Any] = alarms_by_name(stateless)[
        "-".join(filter(None, (f"refdata-{config.name}-{kind}", label)))
    ]
    return found


def assert_reads_the_tables_heartbeat(
    stateful: Template, stateless: Template, config: EnvironmentConfig, properties: Any, construct_id: str
) -> None:
    assert properties["MetricName"] == "HeartbeatLagSeconds"
    assert properties["Period"] == 60 * config.heartbeat.interval_minutes
    dims = {d["Name"]: d["Value"] for d in resolve(stateful, stateless, properties["Dimensions"])}
    assert dims["Environment"] == config.name
    assert dims["Table"]["Fn::Select"][1]["Fn::Split"][1] == stream_arns(stateful, config)[construct_id]


def test_each_tables_heartbeat_lag_alarm_watches_the_heartbeats_that_arrive_missing_data_not_breaching(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    """An interval without a heartbeat is HeartbeatMissing's concern: were it breaching here, a new mapping that
    has not started polling yet would page after ``alarm_periods`` intervals (issue 25.1)."""
    for plan in config.source_tables:
        _, properties = heartbeat_alarm(stateless, config, "HeartbeatLag", plan.label)
        assert_reads_the_tables_heartbeat(stateful, stateless, config, properties, plan.construct_id)
        assert properties["TreatMissingData"] == "notBreaching"
        assert (properties["Statistic"], properties["ComparisonOperator"]) == (
            "Maximum",
            "GreaterThanOrEqualToThreshold",
        )
        assert properties["Threshold"] == config.heartbeat.lag_alarm_seconds
        assert properties["EvaluationPeriods"] == config.heartbeat.alarm_periods
        assert (
            properties.get("DatapointsToAlarm", properties["EvaluationPeriods"])
            == config.heartbeat.alarm_periods
        )


def test_each_tables_heartbeat_missing_alarm_outlasts_a_new_mappings_startup_plus_one_interval(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    interval = 60 * config.heartbeat.interval_minutes
    periods = max(
        config.heartbeat.alarm_periods,
        math.ceil((60 * config.ops.smoke_startup_minutes + interval) / interval),
    )
    for plan in config.source_tables:
        _, properties = heartbeat_alarm(stateless, config, "HeartbeatMissing", plan.label)
        assert_reads_the_tables_heartbeat(stateful, stateless, config, properties, plan.construct_id)
        assert properties["Statistic"] == "SampleCount"
        assert (properties["ComparisonOperator"], properties["Threshold"]) == ("LessThanThreshold", 1)
        assert properties["TreatMissingData"] == "breaching"  # a stopped pipeline publishes nothing
        assert properties["EvaluationPeriods"] == periods
        assert properties.get("DatapointsToAlarm", periods) == periods
        assert periods * interval > 60 * config.ops.smoke_startup_minutes + interval - 1


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

INDEX_DELAY = 2.0  # seconds from a heartbeat's write to its metric, once the mapping polls


def heartbeat_alarms(
    stateless: Template, config: EnvironmentConfig, label: str
) -> dict[str, AlarmDefinition]:
    """Kind -> the evaluation settings of each heartbeat alarm of one table, as synthesized."""
    found = {}
    for name, (_, properties) in alarms_by_name(stateless).items():
        kind, _, subject = name.removeprefix(f"refdata-{config.name}-").partition("-")
        if kind.startswith("Heartbeat") and subject == label:
            found[kind] = AlarmDefinition.from_template(properties)
    return found


def timeline(interval: int, polling_from: float, stop: float = math.inf) -> list[tuple[float, float]]:
    """The heartbeat metric's samples (time, lag) after a deploy at t = 0: the schedule writes every ``interval``
    seconds from t = interval; the mapping starts polling at ``polling_from`` and reads the writes it missed
    (TRIM_HORIZON) in one batch, which coalesces them into the newest; every write after is indexed
    ``INDEX_DELAY`` later; nothing is indexed from ``stop`` on."""
    writes = [interval * n for n in range(1, int((polling_from + 40 * interval) // interval) + 1)]
    backlog = [w for w in writes if w <= polling_from]
    samples = [(polling_from, polling_from - backlog[-1])] if backlog else []
    samples += [(w + INDEX_DELAY, INDEX_DELAY) for w in writes if w > polling_from]
    return [(at, lag) for at, lag in samples if at < stop]


def startup_cases(config: EnvironmentConfig) -> list[float]:
    """A mapping that starts polling after 5 minutes, and one that takes the whole configured start-up budget."""
    return sorted(
        {min(300.0, 60 * config.ops.smoke_startup_minutes), float(60 * config.ops.smoke_startup_minutes)}
    )


def test_no_heartbeat_alarm_pages_while_a_new_mapping_starts_within_the_startup_budget(
    stateless: Template, config: EnvironmentConfig
) -> None:
    """Issue 25.1: on a first deploy (or one that recreates a mapping) no heartbeat is indexed until the mapping
    starts polling, which "may take several minutes" and which the smoke run waits for up to
    ``ops.smoke_startup_minutes``. No heartbeat alarm may page in that time, nor once heartbeats flow."""
    interval = 60 * config.heartbeat.interval_minutes
    for plan in config.source_tables:
        alarms = heartbeat_alarms(stateless, config, plan.label)
        assert alarms, plan.label
        for polling_from in startup_cases(config):
            samples = timeline(interval, polling_from)
            horizon = polling_from + (max(a.evaluation_periods for a in alarms.values()) + 10) * interval
            for kind, alarm in alarms.items():
                for minute in range(int(horizon // 60) + 1):
                    assert state(alarm, samples, now=60.0 * minute) != ALARM, (
                        f"{kind}-{plan.label} pages at minute {minute} of a deploy whose mapping starts polling "
                        f"after {polling_from:.0f} s"
                    )


@pytest.mark.parametrize("extra_range_periods", [0, 2])
def test_a_pipeline_that_stops_puts_heartbeat_missing_into_alarm_within_its_window(
    stateless: Template, config: EnvironmentConfig, extra_range_periods: int
) -> None:
    """Heartbeats flow, then stop (a disabled mapping, a failing sync): HeartbeatMissing pages once its evaluation
    range holds no heartbeat, however long CloudWatch's range is beyond the evaluation periods."""
    interval = 60 * config.heartbeat.interval_minutes
    for plan in config.source_tables:
        missing = heartbeat_alarms(stateless, config, plan.label)["HeartbeatMissing"]
        polling_from = float(60 * config.ops.smoke_startup_minutes)
        stop = polling_from + 20 * interval
        samples = timeline(interval, polling_from, stop)
        assert state(missing, samples, now=stop, extra_range_periods=extra_range_periods) != ALARM
        window = (missing.evaluation_periods + extra_range_periods + 1) * missing.period
        paged = [
            t
            for t in range(int(stop), int(stop + window) + 1, 60)
            if state(missing, samples, now=t, extra_range_periods=extra_range_periods) == ALARM
        ]
        assert paged, f"HeartbeatMissing-{plan.label} never pages within {window} s of the pipeline stopping"


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


def test_the_heartbeat_adds_nothing_to_the_stateful_stack(stateful: Template) -> None:
    resources = stateful.to_json()["Resources"]
    assert not [i for i, r in resources.items() if r["Type"] == SCHEDULE or "Heartbeat" in i or "Smoke" in i]


# --- config ---------------------------------------------------------------------------------------------------


def with_heartbeat(config: EnvironmentConfig, **changes: object) -> EnvironmentConfig:
    return replace(config, heartbeat=replace(config.heartbeat, **changes))


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"interval_minutes": 0}, "interval_minutes"),
        ({"interval_minutes": 61}, "interval_minutes"),
        ({"lag_alarm_seconds": 59}, "lag_alarm_seconds"),
        ({"alarm_periods": 1}, "alarm_periods"),
        ({"alarm_periods": 11}, "alarm_periods"),
    ],
)
def test_an_invalid_heartbeat_setting_names_its_field(
    config: EnvironmentConfig, changes: dict[str, int], field: str
) -> None:
    with pytest.raises(ConfigError, match=rf"^{re.escape(config.name)}\.heartbeat\.{field}: "):
        with_heartbeat(config, **changes)


def test_a_heartbeat_alarm_beyond_the_record_age_is_rejected(config: EnvironmentConfig) -> None:
    with pytest.raises(ConfigError, match=rf"^{re.escape(config.name)}\.heartbeat\.lag_alarm_seconds: "):
        with_heartbeat(config, lag_alarm_seconds=config.sync.max_record_age_seconds)


def test_the_heartbeat_settings_are_a_frozen_keyword_only_record() -> None:
    with pytest.raises(TypeError):
        HeartbeatSettings(1)  # type: ignore[misc]
    settings = HeartbeatSettings()
    with pytest.raises(AttributeError):
        settings.interval_minutes = 2  # type: ignore[misc]
