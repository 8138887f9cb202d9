"""The encrypted, TLS-only SQS queue a function's failures land in (one shape for every DLQ)."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.nag import acknowledge

RETENTION = Duration.days(14)


def dead_letter_queue(
    scope: Construct, construct_id: str, *, key: kms.IKey, removal_policy: RemovalPolicy, owner: str
) -> sqs.Queue:
    """A KMS-encrypted queue keeping messages 14 days (SQS's maximum); ``owner`` names whose DLQ it is."""
    queue = sqs.Queue(
        scope,
        construct_id,
        encryption=sqs.QueueEncryption.KMS,
        encryption_master_key=key,
        enforce_ssl=True,
        retention_period=RETENTION,
        removal_policy=removal_policy,
    )
    acknowledge(
        queue,
        f"This queue is itself the dead-letter queue of {owner}; a DLQ of the DLQ would only move the problem. "
        "Its depth alarms (infra/constructs/monitoring.py).",
        "AwsSolutions-SQS3",
        "Serverless-SQSRedrivePolicy",
    )
    return queue
