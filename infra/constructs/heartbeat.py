"""The heartbeat: an EventBridge Scheduler schedule per source table rewrites the table's heartbeat item, so that
the sync measures the whole pipeline's lag all day, with or without traffic (docs/sync.md, *Heartbeat*).

Each schedule calls DynamoDB's PutItem directly (a universal target: no function of its own) with the heartbeat
item of its table (``refdata.reserved.heartbeat_key`` in the first indexable schema the table holds, so the
table's event filter admits it and its schema's index takes it) and the scheduled time in ``heartbeatAt`` (every
write changes the item: DynamoDB writes no stream record for a write that changes nothing). The sync emits
``HeartbeatLagSeconds`` with the dimensions ``Environment`` and ``Table`` once the index has accepted the document
(``stream_sync.heartbeat``); of the two alarms on it (infra/constructs/monitoring.py), ``HeartbeatMissing`` treats
a missing metric as breaching once a new mapping's start-up is over, ``HeartbeatLag`` watches the lag of those that
arrive.

The schedule's role may put exactly the heartbeat items (``dynamodb:LeadingKeys``) and nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import Aws, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_scheduler as scheduler
from constructs import Construct
from refdata.reserved import HEARTBEAT_AT, heartbeat_key

from infra.config import HeartbeatSettings
from infra.iam import attach_policy

PUT_ITEM_TARGET = "arn:aws:scheduler:::aws-sdk:dynamodb:putItem"
SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"


@dataclass(frozen=True)
class HeartbeatTable:
    """A source table as the heartbeat sees it: its label in names ("" for the main table), the table, and the
    schema its heartbeat item belongs to (the first indexable schema it holds)."""

    label: str
    table: dynamodb.ITable
    schema: str


def heartbeat_item(schema: str) -> dict[str, dict[str, str]]:
    """The heartbeat item as PutItem takes it (DynamoDB JSON), the scheduled time filled in by the scheduler."""
    pk, sk, attributes = heartbeat_key(schema)
    item = {"pk": {"S": pk}, "sk": {"S": sk}, HEARTBEAT_AT: {"S": SCHEDULED_TIME}}
    return item | {name: {"S": str(value)} for name, value in attributes.items()}


def rate(minutes: int) -> str:
    return f"rate({minutes} minute{'s' if minutes > 1 else ''})"


class Heartbeat(Construct):
    """One schedule per source table (``schedules``, by label) and their role."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: HeartbeatSettings,
        tables: Sequence[HeartbeatTable],
        key: kms.IKey,
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
