"""The geometry bucket and its access-log bucket: versioning, encryption, privacy, TLS, logging, lifecycle."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Match

from infra.config import EnvironmentConfig
from infra.constructs.geometry_bucket import NONCURRENT_VERSION_DAYS
from tests.infra.templates_helpers import TLS_ONLY, data_key_arn
from tests.support.retention import removal_policies
from tests.support.template import Template

BUCKET = "AWS::S3::Bucket"
BUCKET_POLICY = "AWS::S3::BucketPolicy"
AUTO_DELETE = "Custom::S3AutoDeleteObjects"
BLOCK_ALL = dict.fromkeys(
    ("BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets"), True
)


def geometry_bucket_id(template: Template) -> str:
    """The geometry bucket is the one whose access is logged under `geometry/` (the log bucket is its destination)."""
    logged = template.find_resources(
        BUCKET, {"Properties": {"LoggingConfiguration": {"LogFilePrefix": "geometry/"}}}
    )
    assert len(logged) == 1, sorted(logged)
    return next(iter(logged))


def access_log_bucket_id(template: Template) -> str:
    bucket = template.find_resources(BUCKET)[geometry_bucket_id(template)]
    return bucket["Properties"]["LoggingConfiguration"]["DestinationBucketName"]["Ref"]


def bucket(template: Template, logical_id: str) -> dict[str, Any]:
    return template.find_resources(BUCKET)[logical_id]


def properties(template: Template, logical_id: str) -> dict[str, Any]:
    return dict(bucket(template, logical_id)["Properties"])


def bucket_ids(template: Template) -> list[str]:
    return [geometry_bucket_id(template), access_log_bucket_id(template)]


def test_stateful_stack_has_the_geometry_access_log_and_ops_buckets_only(stateful: Template) -> None:
    # The geometry bucket logs its access under `geometry/` into the other (geometry_bucket_id, access_log_bucket_id).
    stateful.resource_count_is(BUCKET, 3)  # the ops bucket: tests/infra/test_ops_bucket.py
    assert access_log_bucket_id(stateful) != geometry_bucket_id(stateful)


def test_geometry_bucket_is_versioned(stateful: Template) -> None:
    assert properties(stateful, geometry_bucket_id(stateful))["VersioningConfiguration"] == {
        "Status": "Enabled"
    }


def test_geometry_bucket_is_encrypted_with_the_data_key_and_a_bucket_key(stateful: Template) -> None:
    encryption = properties(stateful, geometry_bucket_id(stateful))["BucketEncryption"]
    by_default = {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": data_key_arn(stateful)}
    assert encryption["ServerSideEncryptionConfiguration"] == [
        {"BucketKeyEnabled": True, "ServerSideEncryptionByDefault": by_default}
    ]


def test_access_log_bucket_uses_s3_managed_encryption(stateful: Template) -> None:
    # S3 server access logging delivers only to SSE-S3 buckets.
    encryption = properties(stateful, access_log_bucket_id(stateful))["BucketEncryption"]
    assert encryption["ServerSideEncryptionConfiguration"] == [
        {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
    ]


def test_both_buckets_block_all_public_access(stateful: Template) -> None:
    for logical_id in bucket_ids(stateful):
        assert properties(stateful, logical_id)["PublicAccessBlockConfiguration"] == BLOCK_ALL


def test_both_buckets_disable_acls(stateful: Template) -> None:
    for logical_id in bucket_ids(stateful):
        owner_enforced = {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}
        assert properties(stateful, logical_id)["OwnershipControls"] == owner_enforced


@pytest.mark.parametrize("which", ["geometry", "access-log"])
def test_bucket_policy_denies_requests_without_tls(stateful: Template, which: str) -> None:
    logical_id = (geometry_bucket_id if which == "geometry" else access_log_bucket_id)(stateful)
    arn = {"Fn::GetAtt": [logical_id, "Arn"]}
    resources = [arn, {"Fn::Join": ["", [arn, "/*"]]}]
    deny = {
        "Effect": "Deny",
        "Principal": {"AWS": "*"},
        "Action": "s3:*",
        "Condition": TLS_ONLY,
        "Resource": resources,
    }
    stateful.has_resource_properties(
        BUCKET_POLICY,
        {"Bucket": {"Ref": logical_id}, "PolicyDocument": {"Statement": Match.array_with([deny])}},
    )


def test_no_bucket_policy_allows_an_anonymous_principal(stateful: Template) -> None:
    for policy in stateful.find_resources(BUCKET_POLICY).values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if statement["Effect"] == "Allow":
                assert statement["Principal"] not in ("*", {"AWS": "*"}), statement


def test_geometry_bucket_expires_noncurrent_versions(stateful: Template) -> None:
    rules = properties(stateful, geometry_bucket_id(stateful))["LifecycleConfiguration"]["Rules"]
    assert {"Status": "Enabled", "NoncurrentDays": NONCURRENT_VERSION_DAYS} in [
        {
            "Status": rule["Status"],
            "NoncurrentDays": rule.get("NoncurrentVersionExpiration", {}).get("NoncurrentDays"),
        }
        for rule in rules
    ]


def test_geometry_bucket_keeps_current_objects(stateful: Template) -> None:
    rules = properties(stateful, geometry_bucket_id(stateful))["LifecycleConfiguration"]["Rules"]
    assert all("ExpirationInDays" not in rule and "ExpirationDate" not in rule for rule in rules)


def test_buckets_are_retained_where_data_is_retained_and_deleted_elsewhere(
    stateful: Template, config: EnvironmentConfig
) -> None:
    policies = removal_policies(config)
    for logical_id in bucket_ids(stateful):
        resource = bucket(stateful, logical_id)
        assert (resource.get("DeletionPolicy"), resource.get("UpdateReplacePolicy")) == policies


def test_objects_are_auto_deleted_only_where_data_is_disposable(
    stateful: Template, config: EnvironmentConfig
) -> None:
    if config.retains_data:
        stateful.resource_count_is(AUTO_DELETE, 0)
        return
    for logical_id in bucket_ids(stateful):
        stateful.has_resource_properties(AUTO_DELETE, {"BucketName": {"Ref": logical_id}})
    stateful.resource_count_is(AUTO_DELETE, 3)  # and the ops bucket's


@pytest.mark.parametrize("source", ["geometry", "ops"])
def test_access_log_bucket_admits_s3_log_delivery_from_the_platform_buckets(
    stateful: Template, config: EnvironmentConfig, source: str
) -> None:
    # With ACLs disabled, S3 delivers server access logs only where the bucket policy admits the logging service.
    logged = {
        bucket["Properties"]["LoggingConfiguration"]["LogFilePrefix"].strip("/"): logical_id
        for logical_id, bucket in stateful.find_resources(
            BUCKET, {"Properties": {"LoggingConfiguration": Match.any_value()}}
        ).items()
    }
    log_bucket = access_log_bucket_id(stateful)
    log_arn = {"Fn::GetAtt": [log_bucket, "Arn"]}
    delivery = {
        "Effect": "Allow",
        "Principal": {"Service": "logging.s3.amazonaws.com"},
        "Action": "s3:PutObject",
        "Resource": {"Fn::Join": ["", [log_arn, Match.string_like_regexp(r"^/.+/\*$")]]},
        "Condition": {
            "ArnLike": {"aws:SourceArn": {"Fn::GetAtt": [logged[source], "Arn"]}},
            "StringEquals": {"aws:SourceAccount": config.account},
        },
    }
    stateful.has_resource_properties(
        BUCKET_POLICY,
        {"Bucket": {"Ref": log_bucket}, "PolicyDocument": {"Statement": Match.array_with([delivery])}},
    )
