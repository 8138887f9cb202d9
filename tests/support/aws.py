"""Fake AWS credentials for moto, and the single table's shape as the stack deploys it."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

import pytest

EMPTY_ZIP = b"PK\x05\x06" + b"\x00" * 18  # a zip archive with no entries: a function's code moto accepts
_ITEM_WRITES = ("put_item", "update_item", "delete_item", "transact_write_items")
_ITEM_WRITE_LOCK = threading.RLock()


def use_fake_aws(monkeypatch: pytest.MonkeyPatch, region: str) -> None:
    """Credentials moto accepts, the region, and the streams endpoint mode moto serves (TOOLCHAIN.md); and
    botocore's service models, endpoint rule sets and client methods made once per test run instead of once per
    test or client (`shared_service_models`)."""
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
    caches hold the parsed models, which botocore never modifies. And every client builds its endpoint rule set
    into objects and a method for each of its service's operations again (a sixth and a fourth of a client's
    creation, and the suite creates thousands): clients of one rule set share one provider, whose rules botocore
    only reads, and clients of one service model share its methods (each client class is still made, and the
    service's class hooks run on it, as botocore does)."""
    import botocore.client
    import botocore.regions
    import botocore.session

    monkeypatch.setattr(botocore.session, "create_loader", _loader)
    monkeypatch.setattr(botocore.regions, "EndpointProvider", _endpoint_provider)
    _original(botocore.client.ClientCreator, "_create_methods")  # before the first replacement
    monkeypatch.setattr(botocore.client.ClientCreator, "_create_methods", _shared_methods)


_MADE: dict[tuple[Any, ...], tuple[tuple[object, ...], Any]] = {}


def _made_once(documents: tuple[object, ...], key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
    """What ``make`` makes of the shared loader's ``documents``, made once per those documents and ``key`` (the
    documents are kept with it, so their ids stay theirs)."""
    index = (*key, *map(id, documents))
    kept = _MADE.get(index)
    if kept is None or any(was is not now for was, now in zip(kept[0], documents, strict=True)):
        kept = _MADE[index] = (documents, make())
    return kept[1]


def _endpoint_provider(ruleset_data: Any, partition_data: Any, excluded_params: Any = None) -> Any:
    """botocore's EndpointProvider for the rule set and partitions, one per pair of documents."""
    from botocore.endpoint_provider import EndpointProvider

    return _made_once(
        (ruleset_data, partition_data),
        ("endpoints", frozenset(excluded_params or ())),
        lambda: EndpointProvider(ruleset_data, partition_data, excluded_params),
    )


def _shared_methods(creator: Any, service_model: Any) -> dict[str, Any]:
    """botocore's methods of a client class for the service model, made once per model document."""
    from botocore.client import ClientCreator

    original = _original(ClientCreator, "_create_methods")
    made = _made_once(
        (service_model._service_description,),
        ("methods", service_model.service_name),
        lambda: original(creator, service_model),
    )
    return dict(made)


@functools.cache
def _original(owner: type, name: str) -> Any:
    """``owner.name`` as the library defines it, looked up before this module first replaces it (a staticmethod
    as its function)."""
    found = owner.__dict__[name]
    return found.__func__ if isinstance(found, staticmethod) else found


def parsed_definitions(monkeypatch: pytest.MonkeyPatch) -> None:
    """For the harnesses that execute state machines (tests/lambdas/ops/workflows_harness.py `MotoGaps`): moto's
    Step Functions parse a definition with ANTLR at CreateStateMachine and again at every execution start (a tenth
    of an executed smoke run's CPU went there). The syntax tree of each definition is kept; each parse still
    builds fresh evaluation components from it, so no execution shares state with another."""
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser

    _original(AmazonStateLanguageParser, "parse")  # before the first replacement
    monkeypatch.setattr(AmazonStateLanguageParser, "parse", staticmethod(_parse))


def _parse(definition: str) -> tuple[Any, Any]:
    from moto.stepfunctions.parser.asl.parse.preprocessor import Preprocessor

    tree = _syntax_tree(definition)
    return Preprocessor().visit(tree), tree


@functools.lru_cache(maxsize=256)
def _syntax_tree(definition: str) -> Any:
    """The tree moto's own parse makes of a definition (a definition it refuses raises, and is not kept)."""
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser

    return _original(AmazonStateLanguageParser, "parse")(definition)[1]


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


class Context:
    """A Lambda context: the time left of the invocation, as the handlers read it."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def get_remaining_time_in_millis(self) -> int:
        return int(self.seconds * 1000)


def create_bucket(region: str, *names: str) -> None:
    """Empty buckets in ``region`` (outside us-east-1 S3 wants the region as the location constraint)."""
    import boto3

    s3 = boto3.client("s3", region_name=region)
    for name in names:
        s3.create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": region})


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
