"""The platform's hardened private bucket: what every bucket that holds the platform's data shares."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import CfnResource, RemovalPolicy, Stack
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.checkov import skip


def private_bucket(
    scope: Construct,
    construct_id: str,
    *,
    key: kms.IKey,
    access_logs: s3.IBucket,
    access_log_prefix: str,
    lifecycle_rules: Sequence[s3.LifecycleRule],
    removal_policy: RemovalPolicy,
) -> s3.Bucket:
    """Versioned, encrypted with the data key (bucket keys on), public access blocked, owner-enforced, TLS-only,
    server access logged under `access_log_prefix`; emptied on delete only where it is disposable."""
    bucket = s3.Bucket(
        scope,
        construct_id,
        encryption=s3.BucketEncryption.KMS,
        encryption_key=key,
        bucket_key_enabled=True,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        enforce_ssl=True,
        versioned=True,
        server_access_logs_bucket=access_logs,
        server_access_logs_prefix=access_log_prefix,
        lifecycle_rules=list(lifecycle_rules),
        removal_policy=removal_policy,
        auto_delete_objects=removal_policy is RemovalPolicy.DESTROY,
    )
    skip_auto_delete_provider(scope)
    return bucket


AUTO_DELETE_PROVIDER = "Custom::S3AutoDeleteObjectsCustomResourceProvider"
AUTO_DELETE_REASON = (
    "CDK's own provider that empties a disposable bucket when its stack is deleted (only where removal_policy "
    "is destroy): CloudFormation invokes it synchronously, it runs once per delete, and it calls only S3's public "
    "API, so it has no VPC, reserved concurrency or DLQ to give."
)


def skip_auto_delete_provider(scope: Construct) -> None:
    """checkov skips on CDK's auto-delete provider function, where a disposable bucket made one."""
    provider = Stack.of(scope).node.try_find_child(AUTO_DELETE_PROVIDER)
    handler = provider.node.try_find_child("Handler") if provider is not None else None
    if isinstance(handler, CfnResource) and not (handler.get_metadata("checkov") or {}).get("skip"):
        skip(handler, AUTO_DELETE_REASON, "CKV_AWS_115", "CKV_AWS_116", "CKV_AWS_117")
