"""A DynamoDB source table (pk/sk), its sparse globalId index, extra GSIs from config, and its backups."""

from __future__ import annotations

from aws_cdk import (
    Duration,
    RemovalPolicy,
)
from aws_cdk import (
    aws_backup as backup,
)
from aws_cdk import (
    aws_dynamodb as dynamodb,
)
from aws_cdk import (
    aws_events as events,
)
from aws_cdk import aws_kms as kms
from constructs import Construct

from infra.config import CapacityMode, GsiSettings, Projection, ProvisionedCapacity, TableSettings
from infra.nag import acknowledge

GLOBAL_ID_INDEX = "globalId"
GLOBAL_ID_INDEX_SETTINGS = GsiSettings(name=GLOBAL_ID_INDEX, partition_key="globalId")

_PROJECTIONS = {
    Projection.KEYS_ONLY: dynamodb.ProjectionType.KEYS_ONLY,
    Projection.INCLUDE: dynamodb.ProjectionType.INCLUDE,
    Projection.ALL: dynamodb.ProjectionType.ALL,
}


def index_names(settings: TableSettings) -> list[str]:
    """Every global secondary index of the table: the built-in ``globalId`` and the extra ones from config."""
    return [GLOBAL_ID_INDEX, *(gsi.name for gsi in settings.extra_gsis)]


class SingleTable(Construct):
    """The items of the schemas config assigns this table, keyed ``pk``/``sk`` (see docs/data-model.md); an
    environment has one such table per source table, each hardened the same way from its own settings.

    The ``globalId`` index is sparse (only items that carry a ``globalId`` appear) and projects keys only:
    a lookup is one index query plus one GetItem, and the index replica stays a few dozen bytes per item
    instead of a second copy of every attribute.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: TableSettings,
        key: kms.IKey,
        removal_policy: RemovalPolicy,
    ) -> None:
        super().__init__(scope, construct_id)
        retain = removal_policy is not RemovalPolicy.DESTROY
        provisioned = settings.capacity_mode is CapacityMode.PROVISIONED
        capacity = settings.provisioned
        self.table = dynamodb.Table(
            self,
            "Resource",
            partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name="sk", type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PROVISIONED
            if provisioned
            else dynamodb.BillingMode.PAY_PER_REQUEST,
            read_capacity=capacity.min_read if capacity else None,
            write_capacity=capacity.min_write if capacity else None,
            stream=dynamodb.StreamViewType.NEW_AND_OLD_IMAGES,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=dynamodb.TableEncryption.CUSTOMER_MANAGED,
            encryption_key=key,
            time_to_live_attribute=settings.ttl_attribute,
            deletion_protection=retain,
            contributor_insights_specification=dynamodb.ContributorInsightsSpecification(
                enabled=settings.contributor_insights
            ),
            removal_policy=removal_policy,
        )
        indexes = (GLOBAL_ID_INDEX_SETTINGS, *settings.extra_gsis)
        for gsi in indexes:
            self._add_index(gsi, capacity)
        if capacity:
            self._autoscale(capacity, [None, *(gsi.name for gsi in indexes)])
        if settings.backup_enabled:
            self._back_up(key, settings.backup_retention_days, removal_policy)
        else:
            acknowledge(
                self.table,
                "Backups are switched off for this environment in config (table.backup_enabled); its data is "
                "disposable and point-in-time recovery still covers 35 days.",
                "NIST.800.53.R5-DynamoDBInBackupPlan",
                "HIPAA.Security-DynamoDBInBackupPlan",
            )

    def _add_index(self, gsi: GsiSettings, capacity: ProvisionedCapacity | None) -> None:
        self.table.add_global_secondary_index(
            index_name=gsi.name,
            partition_key=dynamodb.Attribute(name=gsi.partition_key, type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name=gsi.sort_key, type=dynamodb.AttributeType.STRING)
            if gsi.sort_key
            else None,
            projection_type=_PROJECTIONS[gsi.projection],
            non_key_attributes=list(gsi.non_key_attributes) or None,
            read_capacity=capacity.min_read if capacity else None,
            write_capacity=capacity.min_write if capacity else None,
        )

    def _autoscale(self, capacity: ProvisionedCapacity, index_names: list[str | None]) -> None:
        """Target-tracking auto scaling for the table (``None``) and each named index."""
        for index_name in index_names:
            if index_name is None:
                reads = self.table.auto_scale_read_capacity(
                    min_capacity=capacity.min_read, max_capacity=capacity.max_read
                )
                writes = self.table.auto_scale_write_capacity(
                    min_capacity=capacity.min_write, max_capacity=capacity.max_write
                )
            else:
                reads = self.table.auto_scale_global_secondary_index_read_capacity(
                    index_name, min_capacity=capacity.min_read, max_capacity=capacity.max_read
                )
                writes = self.table.auto_scale_global_secondary_index_write_capacity(
                    index_name, min_capacity=capacity.min_write, max_capacity=capacity.max_write
                )
            reads.scale_on_utilization(target_utilization_percent=capacity.target_utilization_percent)
            writes.scale_on_utilization(target_utilization_percent=capacity.target_utilization_percent)

    def _back_up(self, key: kms.IKey, retention_days: int, removal_policy: RemovalPolicy) -> None:
        vault = backup.BackupVault(self, "Vault", encryption_key=key, removal_policy=removal_policy)
        plan = backup.BackupPlan(self, "Plan", backup_vault=vault)
        plan.add_rule(
            backup.BackupPlanRule(
                rule_name="Daily",
                schedule_expression=events.Schedule.cron(minute="0", hour="5"),
                delete_after=Duration.days(retention_days),
            )
        )
        selection = plan.add_selection(
            "Table", resources=[backup.BackupResource.from_dynamo_db_table(self.table)]
        )
        acknowledge(
            selection,
            "AWS Backup's service-role policy is maintained by AWS to follow the actions Backup needs per "
            "service; a hand-written copy would silently break backups when those change.",
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
            "AWSBackupServiceRolePolicyForBackup]",
        )
