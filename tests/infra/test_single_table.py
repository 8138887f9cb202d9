"""The single table: keys, capacity, stream, recovery, encryption, TTL, retention, indexes and backups."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App
from aws_cdk.assertions import Capture, Match, Template

from infra.app_builder import build_environment, committed_context
from infra.config import INVERTED_INDEX, CapacityMode, EnvironmentConfig
from infra.environments import environments
from tests.infra.conftest import ENVIRONMENTS

TABLE = "AWS::DynamoDB::Table"
SCALABLE_TARGET = "AWS::ApplicationAutoScaling::ScalableTarget"
SCALING_POLICY = "AWS::ApplicationAutoScaling::ScalingPolicy"
BACKUP_TYPES = ("AWS::Backup::BackupVault", "AWS::Backup::BackupPlan", "AWS::Backup::BackupSelection")


def only(template: Template, resource_type: str) -> tuple[str, dict[str, Any]]:
    """The logical id and body of the one resource of ``resource_type``."""
    found = template.find_resources(resource_type)
    assert len(found) == 1, f"expected one {resource_type}, found {sorted(found)}"
    return next(iter(found.items()))


def key_arn(template: Template) -> dict[str, Any]:
    return {"Fn::GetAtt": [only(template, "AWS::KMS::Key")[0], "Arn"]}


def table_ref(template: Template) -> dict[str, Any]:
    return {"Ref": only(template, TABLE)[0]}


def index_names(config: EnvironmentConfig) -> list[str]:
    return ["globalId", *(gsi.name for gsi in config.table.extra_gsis)]


# --- keys and capacity --------------------------------------------------------------------------------------


def test_table_is_keyed_by_string_pk_and_sk(stateful: Template) -> None:
    stateful.has_resource_properties(
        TABLE,
        {
            "KeySchema": [
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            "AttributeDefinitions": Match.array_with(
                [{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"}]
            ),
        },
    )


def test_environment_has_exactly_one_table(stateful: Template) -> None:
    stateful.resource_count_is(TABLE, 1)


def test_billing_mode_follows_config(stateful: Template, config: EnvironmentConfig) -> None:
    if config.table.capacity_mode is CapacityMode.ON_DEMAND:
        expected = {"BillingMode": "PAY_PER_REQUEST", "ProvisionedThroughput": Match.absent()}
    else:
        assert config.table.provisioned is not None
        expected = {
            "BillingMode": Match.absent(),
            "ProvisionedThroughput": {
                "ReadCapacityUnits": config.table.provisioned.min_read,
                "WriteCapacityUnits": config.table.provisioned.min_write,
            },
        }
    stateful.has_resource_properties(TABLE, expected)


def test_dev_and_prod_are_on_demand_and_test_is_provisioned(config: EnvironmentConfig) -> None:
    expected = CapacityMode.PROVISIONED if config.name == "test" else CapacityMode.ON_DEMAND
    assert config.table.capacity_mode is expected


def test_provisioned_table_and_every_gsi_autoscale_reads_and_writes(
    stateful: Template, config: EnvironmentConfig
) -> None:
    capacity = config.table.provisioned
    if capacity is None:
        stateful.resource_count_is(SCALABLE_TARGET, 0)
        return
    stateful.resource_count_is(SCALABLE_TARGET, 2 * len(index_names(config)) + 2)
    table = table_ref(stateful)
    resources = [["table/", table], *(["table/", table, f"/index/{name}"] for name in index_names(config))]
    for resource_id in resources:
        for unit, low, high in (
            ("Read", capacity.min_read, capacity.max_read),
            ("Write", capacity.min_write, capacity.max_write),
        ):
            dimension = "index" if len(resource_id) == 3 else "table"
            stateful.has_resource_properties(
                SCALABLE_TARGET,
                {
                    "ServiceNamespace": "dynamodb",
                    "ScalableDimension": f"dynamodb:{dimension}:{unit}CapacityUnits",
                    "ResourceId": {"Fn::Join": ["", resource_id]},
                    "MinCapacity": low,
                    "MaxCapacity": high,
                },
            )


def test_every_scalable_target_has_a_target_tracking_policy(
    stateful: Template, config: EnvironmentConfig
) -> None:
    targets = stateful.find_resources(SCALABLE_TARGET)
    stateful.resource_count_is(SCALING_POLICY, len(targets))
    if config.table.provisioned is None:
        return
    for logical_id, target in targets.items():
        unit = "Read" if "Read" in target["Properties"]["ScalableDimension"] else "Write"
        stateful.has_resource_properties(
            SCALING_POLICY,
            {
                "PolicyType": "TargetTrackingScaling",
                "ScalingTargetId": {"Ref": logical_id},
                "TargetTrackingScalingPolicyConfiguration": {
                    "PredefinedMetricSpecification": {
                        "PredefinedMetricType": f"DynamoDB{unit}CapacityUtilization"
                    },
                    "TargetValue": config.table.provisioned.target_utilization_percent,
                },
            },
        )


# --- stream, recovery, encryption, TTL ----------------------------------------------------------------------


def test_stream_carries_new_and_old_images(stateful: Template) -> None:
    stateful.has_resource_properties(TABLE, {"StreamSpecification": {"StreamViewType": "NEW_AND_OLD_IMAGES"}})


def test_point_in_time_recovery_is_on(stateful: Template) -> None:
    stateful.has_resource_properties(
        TABLE, {"PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True}}
    )


def test_table_is_encrypted_with_the_customer_managed_data_key(stateful: Template) -> None:
    stateful.has_resource_properties(
        TABLE,
        {"SSESpecification": {"SSEEnabled": True, "SSEType": "KMS", "KMSMasterKeyId": key_arn(stateful)}},
    )


def test_data_key_rotates(stateful: Template) -> None:
    stateful.resource_count_is("AWS::KMS::Key", 1)
    stateful.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})


def test_data_key_admits_cloudwatch_logs_of_this_account_only(stateful: Template) -> None:
    # Log groups encrypted with the key fail to create unless the regional logs service may use it.
    stateful.has_resource_properties(
        "AWS::KMS::Key",
        {
            "KeyPolicy": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Effect": "Allow",
                                "Principal": {
                                    "Service": {
                                        "Fn::Join": ["", ["logs.", {"Ref": "AWS::Region"}, ".amazonaws.com"]]
                                    }
                                },
                                "Condition": {
                                    "ArnLike": {"kms:EncryptionContext:aws:logs:arn": Match.any_value()}
                                },
                            }
                        )
                    ]
                )
            }
        },
    )


def test_ttl_is_enabled_on_the_configured_attribute(stateful: Template, config: EnvironmentConfig) -> None:
    assert config.table.ttl_attribute == "expiresAt"
    stateful.has_resource_properties(
        TABLE, {"TimeToLiveSpecification": {"AttributeName": config.table.ttl_attribute, "Enabled": True}}
    )


def test_contributor_insights_follow_config(stateful: Template, config: EnvironmentConfig) -> None:
    stateful.has_resource_properties(
        TABLE, {"ContributorInsightsSpecification": {"Enabled": config.table.contributor_insights}}
    )


# --- retention ----------------------------------------------------------------------------------------------


def test_deletion_protection_follows_data_retention(stateful: Template, config: EnvironmentConfig) -> None:
    stateful.has_resource_properties(TABLE, {"DeletionProtectionEnabled": config.retains_data})


def test_table_is_retained_in_test_and_prod_and_deleted_in_dev(
    stateful: Template, config: EnvironmentConfig
) -> None:
    policy = "Retain" if config.name in ("test", "prod") else "Delete"
    stateful.has_resource(TABLE, {"DeletionPolicy": policy, "UpdateReplacePolicy": policy})


# --- indexes ------------------------------------------------------------------------------------------------


def test_sparse_global_id_index_projects_keys_only(stateful: Template) -> None:
    stateful.has_resource_properties(
        TABLE,
        {
            "GlobalSecondaryIndexes": Match.array_with(
                [
                    Match.object_like(
                        {
                            "IndexName": "globalId",
                            "KeySchema": [{"AttributeName": "globalId", "KeyType": "HASH"}],
                            "Projection": {"ProjectionType": "KEYS_ONLY", "NonKeyAttributes": Match.absent()},
                        }
                    )
                ]
            ),
            "AttributeDefinitions": Match.array_with([{"AttributeName": "globalId", "AttributeType": "S"}]),
        },
    )


def test_table_has_only_the_configured_indexes(stateful: Template, config: EnvironmentConfig) -> None:
    indexes = Capture()
    stateful.has_resource_properties(TABLE, {"GlobalSecondaryIndexes": indexes})
    assert [index["IndexName"] for index in indexes.as_array()] == index_names(config)


def test_shipped_configs_have_no_inverted_index(stateful: Template) -> None:
    indexes = Capture()
    stateful.has_resource_properties(TABLE, {"GlobalSecondaryIndexes": indexes})
    assert "inverted" not in {index["IndexName"] for index in indexes.as_array()}


def test_provisioned_gsis_start_at_minimum_capacity(stateful: Template, config: EnvironmentConfig) -> None:
    indexes = Capture()
    stateful.has_resource_properties(TABLE, {"GlobalSecondaryIndexes": indexes})
    capacity = config.table.provisioned
    expected = (
        {"ReadCapacityUnits": capacity.min_read, "WriteCapacityUnits": capacity.min_write}
        if capacity
        else None
    )
    assert [index.get("ProvisionedThroughput") for index in indexes.as_array()] == [expected] * len(
        indexes.as_array()
    )


@pytest.fixture(scope="module")
def inverted_index_app(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Template]:
    """Every environment with ``INVERTED_INDEX`` added to its config: one extra app, synthesized once;
    (environment, stack kind) -> template."""
    outdir: Path = tmp_path_factory.mktemp("cdk.out.inverted")
    app = App(context=committed_context(), outdir=str(outdir))
    stages = {
        name: build_environment(
            app, replace(config, table=replace(config.table, extra_gsis=(INVERTED_INDEX,)))
        )
        for name, config in environments().items()
    }
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
    with_inverted_index[env].has_resource_properties(
        TABLE,
        {
            "GlobalSecondaryIndexes": Match.array_with(
                [
                    Match.object_like(
                        {
                            "IndexName": "inverted",
                            "KeySchema": [
                                {"AttributeName": "sk", "KeyType": "HASH"},
                                {"AttributeName": "pk", "KeyType": "RANGE"},
                            ],
                            "Projection": {"ProjectionType": "KEYS_ONLY"},
                        }
                    )
                ]
            )
        },
    )


def test_inverted_index_keeps_the_global_id_index(with_inverted_index: dict[str, Template], env: str) -> None:
    indexes = Capture()
    with_inverted_index[env].has_resource_properties(TABLE, {"GlobalSecondaryIndexes": indexes})
    assert [index["IndexName"] for index in indexes.as_array()] == ["globalId", "inverted"]


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
    targets = template.find_resources(
        SCALABLE_TARGET,
        {
            "Properties": {
                "ResourceId": {"Fn::Join": ["", ["table/", table_ref(template), "/index/inverted"]]}
            }
        },
    )
    assert len(targets) == (2 if config.table.provisioned else 0)


# --- backups ------------------------------------------------------------------------------------------------


def test_backup_resources_exist_only_when_config_enables_them(
    stateful: Template, config: EnvironmentConfig
) -> None:
    for resource_type in BACKUP_TYPES:
        stateful.resource_count_is(resource_type, 1 if config.table.backup_enabled else 0)


def test_backup_vault_is_encrypted_with_the_data_key(stateful: Template, config: EnvironmentConfig) -> None:
    if not config.table.backup_enabled:
        pytest.skip(f"{config.name} has no table backups")
    stateful.has_resource_properties("AWS::Backup::BackupVault", {"EncryptionKeyArn": key_arn(stateful)})


def test_backup_vault_is_retained_with_the_data(stateful: Template, config: EnvironmentConfig) -> None:
    if not config.table.backup_enabled:
        pytest.skip(f"{config.name} has no table backups")
    policy = "Retain" if config.retains_data else "Delete"
    stateful.has_resource("AWS::Backup::BackupVault", {"DeletionPolicy": policy})


def test_backup_rule_keeps_backups_for_the_configured_days(
    stateful: Template, config: EnvironmentConfig
) -> None:
    if not config.table.backup_enabled:
        pytest.skip(f"{config.name} has no table backups")
    vault_id = only(stateful, "AWS::Backup::BackupVault")[0]
    stateful.has_resource_properties(
        "AWS::Backup::BackupPlan",
        {
            "BackupPlan": {
                "BackupPlanRule": [
                    Match.object_like(
                        {
                            "Lifecycle": {"DeleteAfterDays": config.table.backup_retention_days},
                            "ScheduleExpression": Match.string_like_regexp(r"^cron\("),
                            "TargetBackupVault": {"Fn::GetAtt": [vault_id, "BackupVaultName"]},
                        }
                    )
                ]
            }
        },
    )


def test_backup_selection_covers_the_table(stateful: Template, config: EnvironmentConfig) -> None:
    if not config.table.backup_enabled:
        pytest.skip(f"{config.name} has no table backups")
    plan_id = only(stateful, "AWS::Backup::BackupPlan")[0]
    table_id = only(stateful, TABLE)[0]
    stateful.has_resource_properties(
        "AWS::Backup::BackupSelection",
        {
            "BackupPlanId": {"Fn::GetAtt": [plan_id, "BackupPlanId"]},
            "BackupSelection": {"Resources": [{"Fn::GetAtt": [table_id, "Arn"]}]},
        },
    )
