"""The ops bucket: a stateful record of runs (retained where data is), encrypted with the data key, TLS-only,
access-logged, exports expiring first."""

from __future__ import annotations

from aws_cdk.assertions import Match
from ops.purge import minimum_age_seconds
from ops.sources import DAY_SECONDS

from infra.config import EnvironmentConfig
from infra.constructs.ops_bucket import NONCURRENT_VERSION_DAYS, RUN_RECORD_DAYS
from tests.infra.templates_helpers import data_key_arn, ops_bucket
from tests.support.retention import removal_policies
from tests.support.template import Template

BUCKET = "AWS::S3::Bucket"


def test_runs_are_encrypted_with_the_data_key_private_versioned_and_access_logged(stateful: Template) -> None:
    properties = stateful.find_resources(BUCKET)[ops_bucket(stateful)]["Properties"]
    (logs_id,) = stateful.find_resources(
        BUCKET,
        {"Properties": {"OwnershipControls": Match.any_value(), "LoggingConfiguration": Match.absent()}},
    )
    by_default = {"KMSMasterKeyID": data_key_arn(stateful), "SSEAlgorithm": "aws:kms"}
    assert properties["BucketEncryption"]["ServerSideEncryptionConfiguration"] == [
        {"BucketKeyEnabled": True, "ServerSideEncryptionByDefault": by_default}
    ]
    assert properties["PublicAccessBlockConfiguration"] == dict.fromkeys(
        ("BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets"), True
    )
    assert properties["VersioningConfiguration"] == {"Status": "Enabled"}
    assert properties["LoggingConfiguration"] == {
        "DestinationBucketName": {"Ref": logs_id},
        "LogFilePrefix": "ops/",
    }


def test_exports_outlive_the_oldest_snapshot_a_run_may_write_from_and_run_records_a_year(
    stateful: Template, config: EnvironmentConfig
) -> None:
    bucket = stateful.find_resources(BUCKET)[ops_bucket(stateful)]
    found = {rule["Id"]: rule for rule in bucket["Properties"]["LifecycleConfiguration"]["Rules"]}
    days = found["Exports"]["ExpirationInDays"]
    # A run may write from a snapshot up to the purge's bound less a day old (ops.sources.snapshot_age_check):
    # a resumed export run must still find its files then.
    writable = minimum_age_seconds(config.sync.max_record_age_seconds) - DAY_SECONDS
    assert days * DAY_SECONDS >= writable + DAY_SECONDS, f"exports kept {days} days"
    enabled = {"Status": "Enabled"}
    assert found == {
        "Exports": {"Id": "Exports", "Prefix": "exports/", "ExpirationInDays": days} | enabled,
        "RunRecords": {"Id": "RunRecords", "Prefix": "runs/", "ExpirationInDays": RUN_RECORD_DAYS} | enabled,
        "Versions": {
            "Id": "Versions",
            "NoncurrentVersionExpiration": {"NoncurrentDays": NONCURRENT_VERSION_DAYS},
            "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
            "Status": "Enabled",
        },
    }


def test_only_tls_requests_reach_the_bucket(stateful: Template) -> None:
    bucket = ops_bucket(stateful)
    (policy,) = [
        p["Properties"]["PolicyDocument"]["Statement"]
        for p in stateful.find_resources("AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == {"Ref": bucket}
    ]
    deny = next(s for s in policy if s["Effect"] == "Deny")
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} and deny["Action"] == "s3:*"


def test_the_bucket_is_retained_where_data_is(stateful: Template, config: EnvironmentConfig) -> None:
    resource = stateful.find_resources(BUCKET)[ops_bucket(stateful)]
    assert (resource["DeletionPolicy"], resource["UpdateReplacePolicy"]) == removal_policies(config)
