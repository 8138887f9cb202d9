"""The encrypted SNS topic every alarm notifies; on-call subscriptions hang off it."""

from __future__ import annotations

from aws_cdk import Aws, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import Construct


class AlarmTopic(Construct):
    """Lives in the stateful stack: the subscriptions people add to it are state, and a topic recreated with the
    stateless stack would silently drop them. Retained where the environment retains data."""

    def __init__(
        self, scope: Construct, construct_id: str, *, key: kms.IKey, removal_policy: RemovalPolicy
    ) -> None:
        super().__init__(scope, construct_id)
        self.topic = sns.Topic(self, "Resource", master_key=key, enforce_ssl=True)
        self.topic.apply_removal_policy(removal_policy)
        # A topic policy replaces SNS's default policy: without this statement CloudWatch may not publish, and
        # no alarm would ever notify anyone.
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowThisAccountsAlarmsToPublish",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[self.topic.topic_arn],
                conditions={
                    "StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
                    "ArnLike": {
                        "aws:SourceArn": f"arn:{Aws.PARTITION}:cloudwatch:{Aws.REGION}:{Aws.ACCOUNT_ID}:alarm:*"
                    },
                },
            )
        )
