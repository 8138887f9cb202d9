"""The bucket the ops workflows keep their runs in: run records and summaries, and DynamoDB exports.

It lives in the stateful stack. A run's summary is the record of what was done to the index (which differences
were repaired, which tombstones purged), kept like the other records of the environment (retained in test and
prod); and a run in progress keeps its cursors and its export here, which must survive a redeploy, rollback or
destroy of the stateless stack that runs it. Exports are large and can be made again, so they expire first.
"""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.buckets import private_bucket
from infra.nag import acknowledge

RUN_RECORD_DAYS = 400  # a year of run summaries, and a month to look back at the oldest
NONCURRENT_VERSION_DAYS = 7


class OpsBucket(Construct):
    """Versioned, KMS-encrypted (the data key: exports hold the table's items), private, TLS-only; access logged
    into the platform's access-log bucket under ``ops/``."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        key: kms.IKey,
        access_logs: s3.IBucket,
        removal_policy: RemovalPolicy,
        export_days: int,
    ) -> None:
        """``export_days``: how long an export is kept, at least as long as a run may still write from it (a
        snapshot up to the tombstone purge's bound less a day old, docs/operations.md "Scan or export"), so a
        resumed export run finds its files."""
        super().__init__(scope, construct_id)
        self.bucket = private_bucket(
            self,
            "Resource",
            key=key,
            access_logs=access_logs,
            access_log_prefix="ops/",
            lifecycle_rules=[
                s3.LifecycleRule(id="Exports", prefix="exports/", expiration=Duration.days(export_days)),
                s3.LifecycleRule(id="RunRecords", prefix="runs/", expiration=Duration.days(RUN_RECORD_DAYS)),
                s3.LifecycleRule(
                    id="Versions",
                    noncurrent_version_expiration=Duration.days(NONCURRENT_VERSION_DAYS),
                    abort_incomplete_multipart_upload_after=Duration.days(1),
                ),
            ],
            removal_policy=removal_policy,
        )
        acknowledge(
            self.bucket,
            "Cross-region replication needs a second region, which this single-region platform does not have; "
            "run records are kept versioned, and exports can be made again from the table.",
            "NIST.800.53.R5-S3BucketReplicationEnabled",
            "HIPAA.Security-S3BucketReplicationEnabled",
            "PCI.DSS.321-S3BucketReplicationEnabled",
        )
