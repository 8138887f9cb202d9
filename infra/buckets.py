"""The platform's hardened private bucket: what every bucket that holds the platform's data shares."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import RemovalPolicy
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct


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
    return s3.Bucket(
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
