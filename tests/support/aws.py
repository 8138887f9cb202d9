"""Fake AWS credentials for moto, and the single table's shape as the stack deploys it."""

from __future__ import annotations

import functools
import threading
from typing import Any

import pytest

_ITEM_WRITES = ("put_item", "update_item", "delete_item", "transact_write_items")
_ITEM_WRITE_LOCK = threading.RLock()


def use_fake_aws(monkeypatch: pytest.MonkeyPatch, region: str) -> None:
    """Credentials moto accepts, the region, and the streams endpoint mode moto serves (TOOLCHAIN.md); and
    botocore's service models parsed once per test run instead of once per test (`shared_service_models`)."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": region,
        "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    atomic_item_writes(monkeypatch)
    shared_service_models(monkeypatch)
    virtual_long_polls(monkeypatch)


@functools.cache
def _loader(search_path: str | None) -> Any:
    from botocore.loaders import create_loader

    return create_loader(search_path)


def shared_service_models(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto replaces boto3's default session on every start, so the first client of each service in each test
    would parse its JSON model again (40-80 ms a service). Every session gets the same loader instead: its
    caches hold the parsed models, which botocore never modifies."""
    import botocore.session

    monkeypatch.setattr(botocore.session, "create_loader", _loader)


def virtual_long_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    """An SQS long poll of an empty queue ends empty after its wait, as on AWS, but on a virtual clock: moto waits on
    the real one (a condition wait of a second per round until `WaitTimeSeconds` has passed). Here each wait moves
    the receive loop's clock on by the time it would have waited, at once; message visibility keeps real time."""
    from moto.sqs import models

    waited = [0.0]
    real = models.unix_time

    def wait_for_messages(queue: Any, timeout: int) -> None:
        if not queue.messages:
            waited[0] += timeout

    monkeypatch.setattr(models, "unix_time", lambda *args: real(*args) + waited[0])
    monkeypatch.setattr(models.Queue, "wait_for_messages", wait_for_messages)


def atomic_item_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    """DynamoDB applies each item write atomically (an UpdateItem ADD never loses an increment); moto's
    backend reads, modifies and stores without a lock, so test threads could interleave two writes into one.
    Serialise moto's item writes so concurrent tests see the service's guarantee."""
    from moto.dynamodb.models import DynamoDBBackend

    for name in _ITEM_WRITES:
        original = getattr(DynamoDBBackend, name)

        @functools.wraps(original)
        def locked(*args: Any, __original: Any = original, **kwargs: Any) -> Any:
            with _ITEM_WRITE_LOCK:
                return __original(*args, **kwargs)

        monkeypatch.setattr(DynamoDBBackend, name, locked)


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
