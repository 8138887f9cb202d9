"""The heartbeat: an EventBridge Scheduler schedule per source table rewrites the table's heartbeat item, so that
the sync measures the whole pipeline's lag all day, with or without traffic (docs/sync.md, *Heartbeat*).

Each schedule calls DynamoDB's PutItem directly (a universal target: no function of its own) with the heartbeat
item of its table (``refdata.reserved.heartbeat_key`` in the first indexable schema the table holds, so the
table's event filter admits it and its schema's index takes it) and the scheduled time in ``heartbeatAt`` (every
write changes the item: DynamoDB writes no stream record for a write that changes nothing). The sync emits
``HeartbeatLagSeconds`` with the dimensions ``Environment`` and ``Table`` once the index has accepted the document
(``stream_sync.heartbeat``).

A second schedule per table, at the same rate, counts each heartbeat due: it calls CloudWatch's PutMetricData
directly with one ``HeartbeatsDue`` data point of the same namespace and dimensions. It does not pass through the
pipeline, so a stopped pipeline shows as real data points (heartbeats due, none indexed), not as missing data:
``HeartbeatMissing`` (infra/constructs/monitoring.py) compares the two and treats missing data as not breaching, so
the periods before a table's first heartbeat (a new environment, an added table) breach nothing. It is created after
the table's event source mapping and its heartbeat schedule, so its first count comes no earlier than both.

The heartbeat schedule's role may put exactly the heartbeat items (``dynamodb:LeadingKeys``) and nothing else; the
count's role may put metric data in the sync's namespace (``cloudwatch:namespace``) and nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import Aws, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_scheduler as scheduler
from constructs import Construct, IDependable
from refdata.reserved import HEARTBEAT_AT, heartbeat_key

from infra.config import HeartbeatSettings
from infra.iam import attach_policy
from infra.nag import acknowledge

PUT_ITEM_TARGET = "arn:aws:scheduler:::aws-sdk:dynamodb:putItem"
PUT_METRIC_DATA_TARGET = "arn:aws:scheduler:::aws-sdk:cloudwatch:putMetricData"
SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"
DUE_METRIC = "HeartbeatsDue"


@dataclass(frozen=True)
class HeartbeatTable:
    """A source table as the heartbeat sees it: its label in names ("" for the main table), the table, the schema
    its heartbeat item belongs to (the first indexable schema it holds) and the event source mapping that syncs it."""

    label: str
    table: dynamodb.ITable
    schema: str
    mapping: IDependable


def heartbeat_item(schema: str) -> dict[str, dict[str, str]]:
    """The heartbeat item as PutItem takes it (DynamoDB JSON), the scheduled time filled in by the scheduler."""
    pk, sk, attributes = heartbeat_key(schema)
    item = {"pk": {"S": pk}, "sk": {"S": sk}, HEARTBEAT_AT: {"S": SCHEDULED_TIME}}
    return item | {name: {"S": str(value)} for name, value in attributes.items()}


def dimensions(environment: str, table_name: str) -> dict[str, str]:
    """The dimensions of both heartbeat metrics (``stream_sync.heartbeat`` emits the lag with the same)."""
    return {"Environment": environment, "Table": table_name}


def due_metric_data(namespace: str, environment: str, table_name: str) -> dict[str, object]:
    """PutMetricData's parameters for one heartbeat due (timestamped by CloudWatch on receipt)."""
    return {
        "Namespace": namespace,
        "MetricData": [
            {
                "MetricName": DUE_METRIC,
                "Dimensions": [
                    {"Name": k, "Value": v} for k, v in dimensions(environment, table_name).items()
                ],
                "Value": 1,
                "Unit": "Count",
            }
        ],
    }


def rate(minutes: int) -> str:
    return f"rate({minutes} minute{'s' if minutes > 1 else ''})"


class Heartbeat(Construct):
    """Per source table, by label: the schedule that writes its heartbeat (``schedules``) and the one that counts it
    due (``due``); their two roles."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: HeartbeatSettings,
        tables: Sequence[HeartbeatTable],
        key: kms.IKey,
        environment: str,
        metrics_namespace: str,
    ) -> None:
        super().__init__(scope, construct_id)
        role = iam.Role(
            self,
            "ScheduleRole",
            assumed_by=iam.ServicePrincipal(
                "scheduler.amazonaws.com", conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}}
            ),
            description="Writes the source tables' heartbeat items (EventBridge Scheduler)",
        )
        statements = [
            iam.PolicyStatement(
                actions=["dynamodb:PutItem"],
                resources=[watched.table.table_arn],
                conditions={
                    "ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [heartbeat_key(watched.schema)[0]]}
                },
            )
            for watched in tables
        ]
        # The tables are encrypted with the data key; DynamoDB uses it on the writer's behalf.
        statements.append(
            iam.PolicyStatement(
                actions=["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey"],
                resources=[key.key_arn],
                conditions={"StringEquals": {"kms:ViaService": f"dynamodb.{Aws.REGION}.amazonaws.com"}},
            )
        )
        policy = attach_policy(self, "SchedulePolicy", role, statements)
        self.schedules: dict[str, scheduler.CfnSchedule] = {}
        for watched in tables:
            schedule = scheduler.CfnSchedule(
                self,
                f"Schedule{watched.label}",
                description=f"Heartbeat of the {watched.label or 'main'} table: rewrites its heartbeat item "
                "(docs/sync.md, Heartbeat)",
                schedule_expression=rate(settings.interval_minutes),
                flexible_time_window=scheduler.CfnSchedule.FlexibleTimeWindowProperty(mode="OFF"),
                state="ENABLED",
                target=scheduler.CfnSchedule.TargetProperty(
                    arn=PUT_ITEM_TARGET,
                    role_arn=role.role_arn,
                    input=Stack.of(self).to_json_string(
                        {"TableName": watched.table.table_name, "Item": heartbeat_item(watched.schema)}
                    ),
                    # A late heartbeat is worth nothing once the next one is due: retry within one interval only.
                    retry_policy=scheduler.CfnSchedule.RetryPolicyProperty(
                        maximum_retry_attempts=2, maximum_event_age_in_seconds=60 * settings.interval_minutes
                    ),
                ),
            )
            schedule.node.add_dependency(policy)
            self.schedules[watched.label] = schedule
        self.due = self._count_due(settings, tables, environment, metrics_namespace)

    def _count_due(
        self,
        settings: HeartbeatSettings,
        tables: Sequence[HeartbeatTable],
        environment: str,
        namespace: str,
    ) -> dict[str, scheduler.CfnSchedule]:
        role = iam.Role(
            self,
            "DueRole",
            assumed_by=iam.ServicePrincipal(
                "scheduler.amazonaws.com", conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}}
            ),
            description="Counts the source tables' heartbeats due (EventBridge Scheduler)",
        )
        policy = attach_policy(
            self,
            "DuePolicy",
            role,
            [
                iam.PolicyStatement(
                    actions=["cloudwatch:PutMetricData"],
                    resources=["*"],
                    conditions={"StringEquals": {"cloudwatch:namespace": namespace}},
                )
            ],
        )
        acknowledge(
            policy,
            "cloudwatch:PutMetricData names no metric as a resource (Service Authorization Reference: its one "
            "resource type, an optional dataset, is not a namespace): the grant is to the sync's metric namespace "
            "only, by the cloudwatch:namespace condition key.",
            "AwsSolutions-IAM5[Resource::*]",
        )
        due: dict[str, scheduler.CfnSchedule] = {}
        for watched in tables:
            schedule = scheduler.CfnSchedule(
                self,
                f"Due{watched.label}",
                description=f"Counts each heartbeat of the {watched.label or 'main'} table due, beside the pipeline "
                "(HeartbeatMissing compares it with the heartbeats indexed; docs/sync.md, Heartbeat)",
                schedule_expression=rate(settings.interval_minutes),
                flexible_time_window=scheduler.CfnSchedule.FlexibleTimeWindowProperty(mode="OFF"),
                state="ENABLED",
                target=scheduler.CfnSchedule.TargetProperty(
                    arn=PUT_METRIC_DATA_TARGET,
                    role_arn=role.role_arn,
                    input=Stack.of(self).to_json_string(
                        due_metric_data(namespace, environment, watched.table.table_name)
                    ),
                    retry_policy=scheduler.CfnSchedule.RetryPolicyProperty(
                        maximum_retry_attempts=2, maximum_event_age_in_seconds=60 * settings.interval_minutes
                    ),
                ),
            )
            # Heartbeats are counted due only once they can be written and indexed: after the table's mapping and
            # its heartbeat schedule exist (HeartbeatMissing's window counts from the first heartbeat due).
            schedule.node.add_dependency(policy, watched.mapping, self.schedules[watched.label])
            due[watched.label] = schedule
        return due
