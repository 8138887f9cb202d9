"""Fake AWS credentials for moto, and the single table's shape as the stack deploys it."""

from __future__ import annotations

from typing import Any

import pytest


def use_fake_aws(monkeypatch: pytest.MonkeyPatch, region: str) -> None:
    """Credentials moto accepts, the region, and the streams endpoint mode moto serves (TOOLCHAIN.md)."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": region,
        "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


def moto_role_of_access_key(access_key: str) -> str | None:
    """The IAM role ARN moto's STS handed `access_key` out for (AssumeRole), as the service resolves it."""
    from moto.sts.models import sts_backends

    for account_id in list(sts_backends.keys()):
        assumed = sts_backends[account_id]["aws"].get_assumed_role_from_access_key(access_key)
        if assumed is not None:
            return str(assumed.role_arn)
    return None


def single_table(name: str) -> dict[str, Any]:
    """``create_table`` arguments matching infra/constructs/single_table.py: pk/sk, the sparse KEYS_ONLY
    ``globalId`` index, and a NEW_AND_OLD_IMAGES stream."""
    return {
        "TableName": name,
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
            {"AttributeName": "globalId", "AttributeType": "S"},
        ],
        "KeySchema": [
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        "GlobalSecondaryIndexes": [
            {
                "IndexName": "globalId",
                "KeySchema": [{"AttributeName": "globalId", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            }
        ],
        "StreamSpecification": {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    }
