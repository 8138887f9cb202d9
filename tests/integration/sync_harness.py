"""Integration harness for the stream sync (the `pipeline` fixture lives in conftest.py): two moto tables with a
stream each (as dev has: bookings apart from the reference data), moto S3 and SQS, and the loopback OpenSearch
server (tests/support) bootstrapped with the real templates, aliases and stored script.

Records are real stream records: items are written with boto3, read back through moto's DynamoDB
Streams API and wrapped in a Lambda event exactly as the event source mapping delivers them.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import socket
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import boto3
import pytest
from botocore.credentials import Credentials
from index_bootstrap.bootstrap import IndexBootstrap
from refdata import indexnames
from refdata.registry import indexable_schemas, schema_of_pk
from refdata.transport import OpenSearchTransport
from search.documents import encode_json, engine_document, item_from_dynamodb
from search.readers import read_role_definitions
from stream_sync import aws, handler
from stream_sync.config import Settings
from stream_sync.redrive import MessageReport, redrive_queue

from tests.lambdas.stream_sync.stream_sync_fakes import redelivery
from tests.support.aws import Context, create_bucket, single_table
from tests.support.opensearch_server import FineGrainedAccessControl, LoopbackOpenSearch

REGION = "ca-central-1"
TABLE = "refdata"
BOOKINGS = "refdata-bookings"
# Which table holds which schema, as the stack hands it to the function (SCHEMA_TABLES).
SCHEMA_TABLES = {"geozone": TABLE, "productDate": TABLE, "thread": TABLE, "booking": BOOKINGS}
BUCKET = "geometry-bucket"
FINAL = {"indexed", "deleted", "stale-skipped", "coalesced", "ignored", "dead-lettered"}


def lambda_format(value: Any) -> Any:
    """boto3's stream record -> the JSON a Lambda event carries (base64 binaries, epoch-second times)."""
    if isinstance(value, dict):
        return {key: lambda_format(member) for key, member in value.items()}
    if isinstance(value, list):
        return [lambda_format(member) for member in value]
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, datetime):
        return value.timestamp()
    return value


# Fine-grained access control as the stack sets it up: the bootstrap signs as the FGAC master (admin) role and
# maps the sync's IAM role; the sync (the function's credentials in the environment) signs as that role.
ADMIN_ROLE_ARN = "arn:aws:iam::123456789012:role/refdata-search-admin"
SYNC_ROLE_ARN = "arn:aws:iam::123456789012:role/refdata-stream-sync"
READER_ROLE_ARN = "arn:aws:iam::123456789012:role/refdata-reader"
ADMIN_KEY, SYNC_KEY, READER_KEY = "AKIDADMIN", "AKIDSYNC", "AKIDREADER"
# A read role as environments configure one (infra/environments.py): zones and product dates, never bookings.
READ_ROLES = read_role_definitions([("public_search", ("geozone", "productDate"), (READER_ROLE_ARN,))])
FGAC = FineGrainedAccessControl(
    ADMIN_ROLE_ARN, {ADMIN_KEY: ADMIN_ROLE_ARN, SYNC_KEY: SYNC_ROLE_ARN, READER_KEY: READER_ROLE_ARN}
)


def stream_records(streams: Any, arn: str, iterators: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The records of the stream `arn` after `iterators` (shard -> its next iterator, updated), else from the trim
    horizon, in Lambda event format: what the stream's event source mapping delivers."""
    iterators = {} if iterators is None else iterators
    records: list[dict[str, Any]] = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        shard_id = shard["ShardId"]
        iterator = (
            iterators.get(shard_id)
            or streams.get_shard_iterator(StreamArn=arn, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON")[
                "ShardIterator"
            ]
        )
        page = streams.get_records(ShardIterator=iterator)
        iterators[shard_id] = page["NextShardIterator"]
        records += [lambda_format(record) | {"eventSourceARN": arn} for record in page["Records"]]
    return records


def signed_as(server: LoopbackOpenSearch, access_key: str) -> OpenSearchTransport:
    return OpenSearchTransport(
        server.endpoint, REGION, timeout_seconds=5, credentials=Credentials(access_key, "secret")
    )


def bootstrap(server: LoopbackOpenSearch) -> None:
    """The index-bootstrap custom resource, as the admin role: templates, script, `<schema>-v1` behind both aliases,
    and on a domain with fine-grained access control (the secured node) the sync role's mapping and the read role."""
    transport = signed_as(server, ADMIN_KEY)
    secured = server.fgac is not None  # the plain engine has no security plugin, so no security API
    IndexBootstrap(transport, sleep=lambda seconds: None).run(
        [schema.name for schema in indexable_schemas()],
        replicas=0,
        sync_role_arn=SYNC_ROLE_ARN if secured else None,
        read_roles=READ_ROLES if secured else None,
    )
    transport.close()


@dataclass
class Invocation:
    response: dict[str, Any]
    fates: dict[str, str]
    summary: dict[str, Any]
    lines: list[dict[str, Any]]


@dataclass
class Pipeline:
    """Table -> stream -> Lambda handler -> loopback OpenSearch, with moto S3 and SQS around it."""

    server: LoopbackOpenSearch
    monkeypatch: pytest.MonkeyPatch
    dynamodb: Any = field(default_factory=lambda: boto3.client("dynamodb", region_name=REGION))
    streams: Any = field(default_factory=lambda: boto3.client("dynamodbstreams", region_name=REGION))
    s3: Any = field(default_factory=lambda: boto3.client("s3", region_name=REGION))
    sqs: Any = field(default_factory=lambda: boto3.client("sqs", region_name=REGION))
    sleeps: list[float] = field(default_factory=list)
    iterators: dict[str, dict[str, str]] = field(default_factory=dict)  # table -> shard -> next iterator
    stream_arns: dict[str, str] = field(default_factory=dict)
    dlq_url: str = ""

    def create(self) -> Pipeline:
        for name in (TABLE, BOOKINGS):
            table = self.dynamodb.create_table(**single_table(name))
            self.stream_arns[name] = table["TableDescription"]["LatestStreamArn"]
        create_bucket(REGION, BUCKET)
        self.dlq_url = self.sqs.create_queue(QueueName="stream-sync-dlq")["QueueUrl"]
        self.configure()
        real_build_ports = aws.build_ports

        def build_ports(settings: Settings) -> Any:
            ports = real_build_ports(settings)
            ports.sleep = self.sleeps.append  # backoff is recorded, never slept on the real clock
            return ports

        self.monkeypatch.setattr(aws, "build_ports", build_ports)
        handler.reset()
        return self

    def configure(self, **overrides: str) -> None:
        env = {
            "AWS_ACCESS_KEY_ID": SYNC_KEY,  # the function's role: moto ignores it, the domain maps it
            "AWS_REGION": REGION,
            "OPENSEARCH_ENDPOINT": self.server.endpoint,
            "DLQ_URL": self.dlq_url,
            "GEOMETRY_BUCKET": BUCKET,
            "REQUEST_TIMEOUT_SECONDS": "10",  # a loaded machine must never time a loopback request out
            "BULK_MAX_ATTEMPTS": "4",
            "RETRY_BASE_SECONDS": "0.001",
            "RETRY_MAX_SECONDS": "0.004",
            "DEADLINE_MARGIN_SECONDS": "0",
            "LOG_LEVEL": "INFO",
            "SCHEMA_TABLES": json.dumps(SCHEMA_TABLES),
            "ENVIRONMENT_NAME": "dev",
            **overrides,
        }
        for name, value in env.items():
            self.monkeypatch.setenv(name, value)

    # --- DynamoDB side -------------------------------------------------------------------------
    def put(self, pk: str, sk: str, *, table: str | None = None, **attributes: Any) -> None:
        """Write an item to `table`, by default the one that holds its schema."""
        item = {"pk": {"S": pk}, "sk": {"S": sk}, **attributes}
        self.dynamodb.put_item(TableName=table or self.table_of(pk), Item=item)

    def delete(self, pk: str, sk: str) -> None:
        self.dynamodb.delete_item(TableName=self.table_of(pk), Key={"pk": {"S": pk}, "sk": {"S": sk}})

    @staticmethod
    def table_of(pk: str) -> str:
        return SCHEMA_TABLES.get(schema_of_pk(pk).name, TABLE)

    def read_stream(self, table: str = TABLE) -> list[dict[str, Any]]:
        """Every record of `table`'s stream written since the last call, as its event source mapping delivers it."""
        return stream_records(self.streams, self.stream_arns[table], self.iterators.setdefault(table, {}))

    # --- Lambda side ---------------------------------------------------------------------------
    def invoke(self, records: list[dict[str, Any]]) -> Invocation:
        out = io.StringIO()
        context = Context(60)
        with contextlib.redirect_stdout(out):
            response = handler.handler({"Records": records}, context)
        lines = [json.loads(line) for line in out.getvalue().splitlines()]
        summary = next(line for line in lines if line.get("message") == "batch synced")
        fates = {event_id: fate for fate, ids in summary["recordIds"].items() for event_id in ids}
        assert len(fates) == len(records), "every record has exactly one outcome"
        return Invocation(response, fates, summary, lines)

    def deliver(
        self, records: list[dict[str, Any]], *, max_rounds: int = 6
    ) -> tuple[dict[str, str], list[Invocation]]:
        """What Lambda does with a partial batch response: redeliver from the reported record onward."""
        final: dict[str, str] = {}
        invocations: list[Invocation] = []
        pending = records
        for _ in range(max_rounds):
            invocations.append(invocation := self.invoke(pending))
            final.update(invocation.fates)
            if not (failures := invocation.response["batchItemFailures"]):
                break
            pending = redelivery(pending, failures)
        return final, invocations

    def converge(self, records: list[dict[str, Any]]) -> tuple[Counter[str], list[Invocation]]:
        """`deliver`, then every record accounted for (`account`) and none left reported for retry."""
        final, invocations = self.deliver(records)
        fates = account(final, records, self.dlq_messages())
        assert "retry" not in fates, fates
        return fates, invocations

    # --- DLQ and redrive -------------------------------------------------------------------------
    def dlq_messages(self) -> list[dict[str, Any]]:
        """Every DLQ message (left in the queue, visible again)."""
        seen: dict[str, dict[str, Any]] = {}
        handles: list[str] = []
        while True:
            batch = self.sqs.receive_message(
                QueueUrl=self.dlq_url,
                MaxNumberOfMessages=10,
                VisibilityTimeout=30,
                MessageAttributeNames=["All"],
            ).get("Messages", [])
            if not batch:
                break
            for message in batch:
                body = json.loads(message["Body"])
                body["_attributes"] = message.get("MessageAttributes", {})
                seen[message["MessageId"]] = body
                handles.append(message["ReceiptHandle"])
        for receipt in handles:
            self.sqs.change_message_visibility(
                QueueUrl=self.dlq_url, ReceiptHandle=receipt, VisibilityTimeout=0
            )
        return list(seen.values())

    def redrive(self) -> list[MessageReport]:
        settings = Settings.from_env(__import__("os").environ)
        ports = aws.build_ports(settings)
        return redrive_queue(
            queue_url=self.dlq_url,
            settings=settings,
            ports=ports,
            sqs=self.sqs,
            dynamodb=self.dynamodb,
            streams=self.streams,
            visibility_timeout=30,
            wait_seconds=0,
        )

    # --- the invariant ---------------------------------------------------------------------------
    def expected_index(self) -> dict[str, dict[str, Any]]:
        """What readers must see: every indexable item in the table that holds its schema (an item written to
        another table is never indexed) as a plain-JSON document."""
        expected: dict[str, dict[str, Any]] = {}
        items = [
            item
            for table in (TABLE, BOOKINGS)
            for item in self.dynamodb.scan(TableName=table, ConsistentRead=True)["Items"]
            if self.table_of(item["pk"]["S"]) == table
        ]
        for item in items:
            schema = schema_of_pk(item["pk"]["S"])
            if not schema.indexable:
                continue
            doc = item_from_dynamodb(item)
            doc["schema"] = schema.name
            url = doc.get("geometryUrl")
            if url:
                bucket, _, key = url[5:].partition("/")
                doc["geometry"] = json.loads(self.s3.get_object(Bucket=bucket, Key=key)["Body"].read())
            doc["tombstone"] = False
            expected[f"{doc['pk']}#{doc['sk']}"] = json.loads(encode_json(engine_document(doc)))
        return expected

    def visible_index(self) -> dict[str, dict[str, Any]]:
        """Documents the read aliases show (tombstones hidden), without the ordering field."""
        visible: dict[str, dict[str, Any]] = {}
        for schema in indexable_schemas():
            for doc_id, source in self.server.documents(indexnames.index_name(schema.name, 1)).items():
                assert len(source["stream_seq"]) == 40
                if not source["tombstone"]:
                    visible[doc_id] = {k: v for k, v in source.items() if k != "stream_seq"}
        return visible

    def assert_index_equals_dynamodb(self) -> None:
        assert self.visible_index() == self.expected_index()


def account(
    final: Mapping[str, str], records: list[dict[str, Any]], dlq: list[dict[str, Any]]
) -> Counter[str]:
    """Every input record has exactly one final fate; every dead-lettered one is in the DLQ with its payload."""
    assert set(final) == {r["eventID"] for r in records}, "unaccounted records"
    fates = Counter(final.values())
    assert set(fates) <= FINAL | {"retry"}
    by_id = {r["eventID"]: r for r in records}
    in_dlq = {m["record"].get("eventID") for m in dlq}
    for event_id, fate in final.items():
        if fate == "dead-lettered":
            assert event_id in in_dlq, f"{event_id} dead-lettered but not in the DLQ"
    for message in dlq:
        event_id = message["record"].get("eventID")
        if event_id in by_id and "truncated" not in message:
            assert message["record"] == by_id[event_id], "DLQ message carries the full record"
        assert (
            message["reason"] and message["failedAt"] and message["_attributes"]["reasonKind"]["StringValue"]
        )
    return fates


def unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port
