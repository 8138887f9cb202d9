"""The S3 bucket for geometries too large for a DynamoDB item, and the bucket that receives its access logs."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.buckets import private_bucket, skip_auto_delete_provider
from infra.checkov import skip
from infra.nag import acknowledge

NONCURRENT_VERSION_DAYS = 90
ACCESS_LOG_DAYS = 365


class GeometryBucket(Construct):
    """Versioned, KMS-encrypted, private, TLS-only storage for offloaded GeoJSON.

    Objects are content-addressed (``geometries/<sha256>.geojson``), so overwrites never happen in normal use;
    versioning still protects against mistakes, and old versions expire after ``NONCURRENT_VERSION_DAYS``.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        key: kms.IKey,
        removal_policy: RemovalPolicy,
    ) -> None:
        super().__init__(scope, construct_id)
        disposable = removal_policy is RemovalPolicy.DESTROY
        self.access_logs = s3.Bucket(
            self,
            "AccessLogs",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            enforce_ssl=True,
            versioned=True,
            lifecycle_rules=[
                s3.LifecycleRule(
                    expiration=Duration.days(ACCESS_LOG_DAYS),
                    noncurrent_version_expiration=Duration.days(1),
                    abort_incomplete_multipart_upload_after=Duration.days(1),
                )
            ],
            removal_policy=removal_policy,
            auto_delete_objects=disposable,
        )
        skip_auto_delete_provider(self)
        skip(
            self.access_logs,
            "This bucket is the server-access-log target: logging a log bucket into itself would loop.",
            "CKV_AWS_18",
        )
        acknowledge(
            self.access_logs,
            "This bucket is the server-access-log target; S3 delivers access logs only to SSE-S3 buckets, and "
            "logging a log bucket into itself would loop.",
            "AwsSolutions-S1",
            "NIST.800.53.R5-S3BucketLoggingEnabled",
            "HIPAA.Security-S3BucketLoggingEnabled",
            "PCI.DSS.321-S3BucketLoggingEnabled",
            "NIST.800.53.R5-S3DefaultEncryptionKMS",
            "HIPAA.Security-S3DefaultEncryptionKMS",
            "PCI.DSS.321-S3DefaultEncryptionKMS",
        )
        self.bucket = private_bucket(
            self,
            "Resource",
            key=key,
            access_logs=self.access_logs,
            access_log_prefix="geometry/",
            lifecycle_rules=[
                s3.LifecycleRule(
                    noncurrent_version_expiration=Duration.days(NONCURRENT_VERSION_DAYS),
                    abort_incomplete_multipart_upload_after=Duration.days(1),
                )
            ],
            removal_policy=removal_policy,
        )
        for bucket in (self.bucket, self.access_logs):
            acknowledge(
                bucket,
                "Cross-region replication needs a second region, which this single-region platform does not "
                "have; versioning plus DynamoDB as the source of truth cover recovery.",
                "NIST.800.53.R5-S3BucketReplicationEnabled",
                "HIPAA.Security-S3BucketReplicationEnabled",
                "PCI.DSS.321-S3BucketReplicationEnabled",
            )
