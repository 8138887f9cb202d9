"""The source tables (one in test and prod, two in dev): each one's keys, capacity, stream, recovery,
encryption, TTL, retention, indexes and backups follow its settings in config."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App
from aws_cdk.assertions import Capture, Match

from infra.app_builder import build_environment, committed_context
from infra.config import INVERTED_INDEX, CapacityMode, EnvironmentConfig, TablePlan
from infra.environments import environments
from tests.infra.conftest import ENVIRONMENTS, table_ids
from tests.infra.templates_helpers import data_key_arn, regional_endpoint
from tests.infra.test_shipped_config import PINNED_ADDITIONAL_TABLES
from tests.support.retention import removal_policies
from tests.support.template import Template

TABLE = "AWS::DynamoDB::Table"
SCALABLE_TARGET = "AWS::ApplicationAutoScaling::ScalableTarget"
SCALING_POLICY = "AWS::ApplicationAutoScaling::ScalingPolicy"
BACKUP_TYPES = ("AWS::Backup::BackupVault", "AWS::Backup::BackupPlan", "AWS::Backup::BackupSelection")


def index_names(plan: TablePlan) -> list[str]:
    return ["globalId", *(gsi.name for gsi in plan.settings.extra_gsis)]


_tables: dict[tuple[int, EnvironmentConfig], list[tuple[TablePlan, str, Template]]] = {}


def tables(stateful: Template, config: EnvironmentConfig) -> list[tuple[TablePlan, str, Template]]:
    """Each source table: its plan, logical id, and a template of that table alone (so a property that one table
    has never stands in for another that lacks it)."""
    key = (id(stateful), config)
    if key not in _tables:
        resources = stateful.find_resources(TABLE)
        _tables[key] = [
            (plan, logical_id, Template.from_json({"Resources": {logical_id: resources[logical_id]}}))
            for plan, logical_id in zip(
                config.source_tables, table_ids(stateful, config).values(), strict=True
            )
        ]
    return _tables[key]


def every_table_has(stateful: Template, config: EnvironmentConfig, properties: dict[str, Any]) -> None:
    for _, _, table in tables(stateful, config):
        table.has_resource_properties(TABLE, properties)


# --- keys and capacity --------------------------------------------------------------------------------------


def test_every_table_is_keyed_by_string_pk_and_sk(stateful: Template, config: EnvironmentConfig) -> None:
    keys = [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}]
    types = [{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"}]
    every_table_has(stateful, config, {"KeySchema": keys, "AttributeDefinitions": Match.array_with(types)})


def test_environment_has_exactly_its_configured_tables(stateful: Template, config: EnvironmentConfig) -> None:
    stateful.resource_count_is(TABLE, len(config.source_tables))
    assert list(table_ids(stateful, config)) == ["Table", *(t.construct_id for t in config.additional_tables)]


def test_billing_mode_follows_config(stateful: Template, config: EnvironmentConfig) -> None:
    for plan, _, table in tables(stateful, config):
        capacity = plan.settings.provisioned
        if plan.settings.capacity_mode is CapacityMode.ON_DEMAND:
            expected = {"BillingMode": "PAY_PER_REQUEST", "ProvisionedThroughput": Match.absent()}
        else:
            assert capacity is not None
            expected = {
                "BillingMode": Match.absent(),
                "ProvisionedThroughput": {
                    "ReadCapacityUnits": capacity.min_read,
                    "WriteCapacityUnits": capacity.min_write,
                },
            }
        table.has_resource_properties(TABLE, expected)


def test_provisioned_tables_and_every_gsi_autoscale_reads_and_writes(
    stateful: Template, config: EnvironmentConfig
) -> None:
    provisioned = [(p, i) for p, i, _ in tables(stateful, config) if p.settings.provisioned is not None]
    stateful.resource_count_is(SCALABLE_TARGET, sum(2 * len(index_names(p)) + 2 for p, _ in provisioned))
    for plan, logical_id in provisioned:
        assert plan.settings.provisioned is not None
        _assert_autoscaled(stateful, {"Ref": logical_id}, plan)


def _assert_autoscaled(stateful: Template, table: dict[str, Any], plan: TablePlan) -> None:
    capacity = plan.settings.provisioned
    assert capacity is not None
    resources = [["table/", table], *(["table/", table, f"/index/{name}"] for name in index_names(plan))]
    for resource_id in resources:
        for unit, low, high in (
            ("Read", capacity.min_read, capacity.max_read),
            ("Write", capacity.min_write, capacity.max_write),
        ):
            dimension = "index" if len(resource_id) == 3 else "table"
            target = {
                "ServiceNamespace": "dynamodb",
                "ScalableDimension": f"dynamodb:{dimension}:{unit}CapacityUnits",
            }
            bounds = {"MinCapacity": low, "MaxCapacity": high}
            stateful.has_resource_properties(
                SCALABLE_TARGET, {**target, "ResourceId": {"Fn::Join": ["", resource_id]}, **bounds}
            )


def test_every_scalable_target_has_a_target_tracking_policy(
    stateful: Template, config: EnvironmentConfig
) -> None:
    targets = stateful.find_resources(SCALABLE_TARGET)
    stateful.resource_count_is(SCALING_POLICY, len(targets))
    by_table = {f'{{"Ref": "{logical_id}"}}': plan for plan, logical_id, _ in tables(stateful, config)}
    for logical_id, target in targets.items():
        (plan,) = [p for ref, p in by_table.items() if ref in json.dumps(target["Properties"]["ResourceId"])]
        assert plan.settings.provisioned is not None
        unit = "Read" if "Read" in target["Properties"]["ScalableDimension"] else "Write"
        tracking = {
            "PredefinedMetricSpecification": {"PredefinedMetricType": f"DynamoDB{unit}CapacityUtilization"},
            "TargetValue": plan.settings.provisioned.target_utilization_percent,
        }
        policy = {"PolicyType": "TargetTrackingScaling", "ScalingTargetId": {"Ref": logical_id}}
        stateful.has_resource_properties(
            SCALING_POLICY, {**policy, "TargetTrackingScalingPolicyConfiguration": tracking}
        )


# --- stream, recovery, encryption, TTL ----------------------------------------------------------------------


def test_every_stream_carries_new_and_old_images(stateful: Template, config: EnvironmentConfig) -> None:
    every_table_has(stateful, config, {"StreamSpecification": {"StreamViewType": "NEW_AND_OLD_IMAGES"}})


def test_point_in_time_recovery_is_on_for_every_table(stateful: Template, config: EnvironmentConfig) -> None:
    recovery = {"PointInTimeRecoveryEnabled": True}
    every_table_has(stateful, config, {"PointInTimeRecoverySpecification": recovery})


def test_every_table_is_encrypted_with_the_customer_managed_data_key(
    stateful: Template, config: EnvironmentConfig
) -> None:
    encryption = {"SSEEnabled": True, "SSEType": "KMS", "KMSMasterKeyId": data_key_arn(stateful)}
    every_table_has(stateful, config, {"SSESpecification": encryption})


def test_data_key_rotates(stateful: Template) -> None:
    stateful.resource_count_is("AWS::KMS::Key", 1)
    stateful.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})


def test_data_key_admits_cloudwatch_logs_of_this_account_only(stateful: Template) -> None:
    # Log groups encrypted with the key fail to create unless the regional logs service may use it.
    statement = {
        "Effect": "Allow",
        "Principal": {"Service": regional_endpoint("logs")},
        "Condition": {"ArnLike": {"kms:EncryptionContext:aws:logs:arn": Match.any_value()}},
    }
    stateful.has_resource_properties(
        "AWS::KMS::Key", {"KeyPolicy": {"Statement": Match.array_with([Match.object_like(statement)])}}
    )


def test_ttl_is_enabled_on_the_configured_attribute(stateful: Template, config: EnvironmentConfig) -> None:
    for plan, _, table in tables(stateful, config):
        assert plan.settings.ttl_attribute == "expiresAt"
        table.has_resource_properties(
            TABLE,
            {"TimeToLiveSpecification": {"AttributeName": plan.settings.ttl_attribute, "Enabled": True}},
        )


def test_contributor_insights_follow_config(stateful: Template, config: EnvironmentConfig) -> None:
    for plan, _, table in tables(stateful, config):
        table.has_resource_properties(
            TABLE, {"ContributorInsightsSpecification": {"Enabled": plan.settings.contributor_insights}}
        )


# --- retention ----------------------------------------------------------------------------------------------


def test_deletion_protection_follows_data_retention(stateful: Template, config: EnvironmentConfig) -> None:
    every_table_has(stateful, config, {"DeletionProtectionEnabled": config.retains_data})


def test_every_table_is_retained_where_data_is_retained_and_deleted_elsewhere(
    stateful: Template, config: EnvironmentConfig
) -> None:
    deletion, replacement = removal_policies(config)
    for _, _, table in tables(stateful, config):
        table.has_resource(TABLE, {"DeletionPolicy": deletion, "UpdateReplacePolicy": replacement})


# --- indexes ------------------------------------------------------------------------------------------------


def test_every_table_has_the_sparse_global_id_index_projecting_keys_only(
    stateful: Template, config: EnvironmentConfig
) -> None:
    index = {
        "IndexName": "globalId",
        "KeySchema": [{"AttributeName": "globalId", "KeyType": "HASH"}],
        "Projection": {"ProjectionType": "KEYS_ONLY", "NonKeyAttributes": Match.absent()},
    }
    attribute = {"AttributeName": "globalId", "AttributeType": "S"}
    every_table_has(
        stateful,
        config,
        {
            "GlobalSecondaryIndexes": Match.array_with([Match.object_like(index)]),
            "AttributeDefinitions": Match.array_with([attribute]),
        },
    )


def indexes_of(table: Template) -> list[dict[str, Any]]:
    indexes = Capture()
    table.has_resource_properties(TABLE, {"GlobalSecondaryIndexes": indexes})
    return list(indexes.as_array())


def test_every_table_has_only_its_configured_indexes(stateful: Template, config: EnvironmentConfig) -> None:
    for plan, _, table in tables(stateful, config):
        assert [index["IndexName"] for index in indexes_of(table)] == index_names(plan)


def test_shipped_configs_have_no_inverted_index(stateful: Template, config: EnvironmentConfig) -> None:
    for _, _, table in tables(stateful, config):
        assert "inverted" not in {index["IndexName"] for index in indexes_of(table)}


def test_provisioned_gsis_start_at_minimum_capacity(stateful: Template, config: EnvironmentConfig) -> None:
    for plan, _, table in tables(stateful, config):
        capacity = plan.settings.provisioned
        expected = (
            {"ReadCapacityUnits": capacity.min_read, "WriteCapacityUnits": capacity.min_write}
            if capacity
            else None
        )
        found = [index.get("ProvisionedThroughput") for index in indexes_of(table)]
        assert found == [expected] * len(found)


def variant(config: EnvironmentConfig) -> EnvironmentConfig:
    """``config`` with ``INVERTED_INDEX`` added to its main table and backups on for its additional tables."""
    return replace(
        config,
        table=replace(config.table, extra_gsis=(INVERTED_INDEX,)),
        additional_tables=tuple(
            replace(table, settings=replace(table.settings, backup_enabled=True, backup_retention_days=7))
            for table in config.additional_tables
        ),
    )


@pytest.fixture(scope="module")
def inverted_index_app(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Template]:
    """Every environment as ``variant`` makes it: one extra app, synthesized once; (environment, stack kind) ->
    template."""
    outdir: Path = tmp_path_factory.mktemp("cdk.out.inverted")
    app = App(context=committed_context(), outdir=str(outdir))
    stages = {name: build_environment(app, variant(config)) for name, config in environments().items()}
    assembly = app.synth()
    templates = {}
    for name in ENVIRONMENTS:
        for kind in ("Stateful", "Stateless"):
            stack_name = stages[name].node.find_child(kind).artifact_id  # type: ignore[attr-defined]
            template = assembly.get_nested_assembly(stages[name].artifact_id).get_stack_artifact(stack_name)
            templates[(name, kind)] = Template.from_json(template.template)
    return templates


@pytest.fixture(scope="module")
def with_inverted_index(inverted_index_app: dict[tuple[str, str], Template]) -> dict[str, Template]:
    return {name: inverted_index_app[(name, "Stateful")] for name in ENVIRONMENTS}


def test_inverted_index_swaps_the_table_keys(with_inverted_index: dict[str, Template], env: str) -> None:
    index = {
        "IndexName": "inverted",
        "KeySchema": [
            {"AttributeName": "sk", "KeyType": "HASH"},
            {"AttributeName": "pk", "KeyType": "RANGE"},
        ],
        "Projection": {"ProjectionType": "KEYS_ONLY"},
    }
    with_inverted_index[env].has_resource_properties(
        TABLE, {"GlobalSecondaryIndexes": Match.array_with([Match.object_like(index)])}
    )


def test_inverted_index_keeps_the_global_id_index(
    with_inverted_index: dict[str, Template], config: EnvironmentConfig
) -> None:
    (_, _, main), *others = tables(with_inverted_index[config.name], config)
    assert [index["IndexName"] for index in indexes_of(main)] == ["globalId", "inverted"]
    assert all([i["IndexName"] for i in indexes_of(table)] == ["globalId"] for _, _, table in others)


def test_inverted_index_gets_its_own_throttle_alarms(
    inverted_index_app: dict[tuple[str, str], Template], env: str
) -> None:
    """Index alarms follow the table's indexes from config (infra/constructs/monitoring.py)."""
    alarms = inverted_index_app[(env, "Stateless")].find_resources("AWS::CloudWatch::Alarm")
    watched = {
        (alarm["Properties"]["MetricName"], dimension["Value"])
        for alarm in alarms.values()
        for dimension in alarm["Properties"].get("Dimensions", [])
        if dimension["Name"] == "GlobalSecondaryIndexName"
    }
    assert watched == {
        (metric, index)
        for metric in ("ReadThrottleEvents", "WriteThrottleEvents")
        for index in ("globalId", "inverted")
    }


def test_inverted_index_autoscales_when_provisioned(
    with_inverted_index: dict[str, Template], config: EnvironmentConfig
) -> None:
    template = with_inverted_index[config.name]
    main = {"Ref": tables(template, config)[0][1]}
    targets = template.find_resources(
        SCALABLE_TARGET,
        {"Properties": {"ResourceId": {"Fn::Join": ["", ["table/", main, "/index/inverted"]]}}},
    )
    assert len(targets) == (2 if config.table.provisioned else 0)


# --- backups ------------------------------------------------------------------------------------------------


def backed_up(stateful: Template, config: EnvironmentConfig) -> list[tuple[TablePlan, str, dict[str, str]]]:
    """Each table whose settings turn backups on, its logical id and its backup resources' logical ids
    (``<construct id>Vault…``, ``<construct id>Plan…``, ``<construct id>PlanTable…``)."""
    found = []
    for plan, table_id, _ in tables(stateful, config):
        if not plan.settings.backup_enabled:
            continue
        ids = {}
        for name, resource_type in zip(("Vault", "Plan", "PlanTable"), BACKUP_TYPES, strict=True):
            (ids[name],) = [
                i
                for i in stateful.find_resources(resource_type)
                if re.fullmatch(rf"{plan.construct_id}{name}[0-9A-F]{{8}}", i)
            ]
        found.append((plan, table_id, ids))
    return found


def test_backup_resources_exist_only_for_tables_whose_config_enables_them(
    stateful: Template, config: EnvironmentConfig
) -> None:
    count = sum(plan.settings.backup_enabled for plan in config.source_tables)
    for resource_type in BACKUP_TYPES:
        stateful.resource_count_is(resource_type, count)
    assert len(backed_up(stateful, config)) == count


def test_every_table_backs_up_into_its_own_retained_vault_encrypted_with_the_data_key(
    stateful: Template, config: EnvironmentConfig
) -> None:
    policy, _ = removal_policies(config)
    for plan, table_id, ids in backed_up(stateful, config):
        vault = stateful.find_resources("AWS::Backup::BackupVault")[ids["Vault"]]
        assert vault["Properties"]["EncryptionKeyArn"] == data_key_arn(stateful)
        assert vault["DeletionPolicy"] == policy
        (rule,) = stateful.find_resources("AWS::Backup::BackupPlan")[ids["Plan"]]["Properties"]["BackupPlan"][
            "BackupPlanRule"
        ]
        assert rule["Lifecycle"] == {"DeleteAfterDays": plan.settings.backup_retention_days}
        assert re.match(r"^cron\(", rule["ScheduleExpression"])
        assert rule["TargetBackupVault"] == {"Fn::GetAtt": [ids["Vault"], "BackupVaultName"]}
        selection = stateful.find_resources("AWS::Backup::BackupSelection")[ids["PlanTable"]]["Properties"]
        assert selection["BackupPlanId"] == {"Fn::GetAtt": [ids["Plan"], "BackupPlanId"]}
        assert selection["BackupSelection"]["Resources"] == [{"Fn::GetAtt": [table_id, "Arn"]}]


def test_an_additional_table_backs_up_on_its_own_settings_into_its_pinned_vault(
    with_inverted_index: dict[str, Template], env: str
) -> None:
    """With its additional tables' backups turned on, each such table gets a plan on its own settings, into a vault
    whose logical id tests/infra/test_shipped_config.py pins, with the same checks every backed-up table gets."""
    config = variant(environments()[env])
    found = {
        plan.construct_id: (plan, table_id, ids)
        for plan, table_id, ids in backed_up(with_inverted_index[env], config)
    }
    for table in config.additional_tables:
        plan, table_id, ids = found[table.construct_id]
        pinned_table, vault = PINNED_ADDITIONAL_TABLES[table.construct_id]
        assert plan.settings.backup_retention_days == 7
        assert {ids["Vault"]: "AWS::Backup::BackupVault"} == vault
        assert {table_id: "AWS::DynamoDB::Table"} == pinned_table
    test_every_table_backs_up_into_its_own_retained_vault_encrypted_with_the_data_key(
        with_inverted_index[env], config
    )


def _resolved(value: Any) -> str:
    """A CloudFormation string expression with each `Ref` written as `<logical id>`."""
    if isinstance(value, str):
        return value
    if "Ref" in value:
        return f"<{value['Ref']}>"
    separator, parts = value["Fn::Join"]
    return str(separator).join(_resolved(part) for part in parts)


def test_the_stack_outputs_which_table_holds_each_schema(
    stateful: Template, config: EnvironmentConfig
) -> None:
    """`SchemaTables`, what refdata-client's `Tables.parse` reads: every schema of every source table, by its table."""
    ids = table_ids(stateful, config)
    output = _resolved(stateful.to_json()["Outputs"]["SchemaTables"]["Value"])
    expected = {
        schema: f"<{ids[plan.construct_id]}>" for plan in config.source_tables for schema in plan.schemas
    }
    assert json.loads(output) == expected
