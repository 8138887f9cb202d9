"""The customer-managed KMS key that encrypts the environment's data at rest."""

from __future__ import annotations

from aws_cdk import Aws, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct


class DataKey(Construct):
    """A rotating CMK for the table, buckets, queues, log groups and the search domain.

    CloudWatch Logs encrypts log groups only with keys whose policy admits the regional logs service, scoped
    by encryption context to this account's log groups.
    """

    def __init__(self, scope: Construct, construct_id: str, *, removal_policy: RemovalPolicy) -> None:
        super().__init__(scope, construct_id)
        self.key = kms.Key(
            self,
            "Resource",
            description="Reference-data platform: data at rest",
            enable_key_rotation=True,
            removal_policy=removal_policy,
            pending_window=None,
        )
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowCloudWatchLogsForThisAccount",
                principals=[iam.ServicePrincipal(f"logs.{Aws.REGION}.amazonaws.com")],
                actions=[
                    "kms:Encrypt*",
                    "kms:Decrypt*",
                    "kms:ReEncrypt*",
                    "kms:GenerateDataKey*",
                    "kms:Describe*",
                ],
                resources=["*"],
                conditions={
                    "ArnLike": {
                        "kms:EncryptionContext:aws:logs:arn": f"arn:{Aws.PARTITION}:logs:{Aws.REGION}:{Aws.ACCOUNT_ID}:*"
                    }
                },
            )
        )
        # CloudWatch alarms publish to the KMS-encrypted alarm topic as the cloudwatch service (the actions AWS
        # documents for event sources of encrypted topics).
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowCloudWatchAlarmsToPublishToEncryptedTopics",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],
                conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}},
            )
        )
