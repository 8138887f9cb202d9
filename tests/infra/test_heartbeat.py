"""The heartbeat in every environment (infra/constructs/heartbeat.py): a schedule per source table writing exactly
that table's heartbeat item at the configured interval, a role that may write nothing else, an event filter that
admits the item, the sync's environment name, an alarm per table whose missing data is breaching, the dashboard
graph beside iterator age; only stateless resources; and the heartbeat's config validated by field."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

import pytest
from refdata.keys import parse_key
from refdata.reserved import HEARTBEAT_AT, heartbeat_key, is_heartbeat

from infra.config import ConfigError, EnvironmentConfig, HeartbeatSettings
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


def test_each_tables_heartbeat_alarm_treats_a_missing_metric_as_breaching(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    found = alarms_by_name(stateless)
    for plan in config.source_tables:
        name = "-".join(filter(None, (f"refdata-{config.name}-HeartbeatLag", plan.label)))
        _, properties = found[name]
        assert properties["TreatMissingData"] == "breaching"
        assert properties["MetricName"] == "HeartbeatLagSeconds"
        assert properties["Period"] == 60 * config.heartbeat.interval_minutes
        assert properties["Threshold"] == config.heartbeat.lag_alarm_seconds
        assert properties["EvaluationPeriods"] == config.heartbeat.alarm_periods
        dims = {d["Name"]: d["Value"] for d in resolve(stateful, stateless, properties["Dimensions"])}
        assert dims["Environment"] == config.name
        assert (
            dims["Table"]["Fn::Select"][1]["Fn::Split"][1] == stream_arns(stateful, config)[plan.construct_id]
        )


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
