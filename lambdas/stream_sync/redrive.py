"""Redrive the sync's dead-letter queue by re-reading DynamoDB, never by replaying old images.

For every dead-lettered record, the item's current state is read (consistent GetItem by its keys) and
written through the same bulk path as the stream, versioned with the dead-lettered record's own
sequence number. The index's ordering rule then lets it win only over older changes, and any newer stream
record still supersedes it, so a redrive can run at any time, any number of times.

Two message shapes are understood:
- the sync's own: `{"reason", "record": <full stream record>, "documentId", ...}`;
- the event source mapping's on-failure record: `{"requestContext", "DDBStreamBatchInfo": {"shardId",
  "startSequenceNumber", "endSequenceNumber", "streamArn"}}` (metadata only): the range is re-read from
  the stream (within its 24-hour retention) to learn the keys and sequence numbers.

Each item is read from the table whose stream the record came from (its `eventSourceARN`, or the on-failure
record's `streamArn`), and the synthetic record keeps that ARN, so a record the sync refused as `wrong-table` is
refused again while its item is still in the wrong table; once the item has left that table (moved to the table
that holds its schema, whose stream indexes it), the message is done and deleted, with nothing written. A message
that names no stream is read from the table holding its schema (`SCHEMA_TABLES`).

A message is deleted only when every record it names reached a final fate.

CLI: `python -m stream_sync.redrive (--table <name> | SCHEMA_TABLES=...) [--queue-url URL] [--max-messages N]
[--dry-run]`, configured like the handler (OPENSEARCH_ENDPOINT, GEOMETRY_BUCKET, BULK_MAX_BYTES, SCHEMA_TABLES, ...
from the environment); `--table` says the environment has one table, which holds every schema.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from refdata.registry import SEPARATOR

from stream_sync.config import Settings
from stream_sync.sync import FINAL_FATES, Fate, Ports, process_batch
from stream_sync.tables import SchemaTables, table_of_arn

Keys = dict[str, Any]
ReadRange = Callable[[str, str, str, str], list[Mapping[str, Any]]]
IGNORED = Fate.IGNORED.value
# The item's current state by its keys and the ARN of the stream its record came from (None: unknown).
GetItem = Callable[[Keys, str | None], dict[str, Any] | None]


class UnreadableMessageError(ValueError):
    """A DLQ message that names no record this tool can redrive; it stays in the queue."""


@dataclass
class Message:
    message_id: str
    receipt_handle: str
    body: str


@dataclass
class MessageReport:
    message_id: str
    records: int = 0
    fates: dict[str, int] = field(default_factory=dict)
    deleted: bool = False
    error: str | None = None


@dataclass(frozen=True)
class Target:
    """A record a DLQ message names: its keys, sequence number and the ARN of the stream it came from."""

    keys: Keys
    sequence_number: str
    source_arn: str | None


def targets_of(body: Mapping[str, Any], read_range: ReadRange) -> list[Target]:
    """Every record a DLQ message names."""
    record = body.get("record")
    if isinstance(record, Mapping):
        stream = record.get("dynamodb")
        if not isinstance(stream, Mapping) or not isinstance(stream.get("Keys"), Mapping):
            raise UnreadableMessageError("dead-lettered record has no dynamodb.Keys")
        seq = stream.get("SequenceNumber")
        if not isinstance(seq, str) or not seq.isdigit():
            raise UnreadableMessageError("dead-lettered record has no SequenceNumber")
        arn = record.get("eventSourceARN")
        return [Target(dict(stream["Keys"]), seq, arn if isinstance(arn, str) else None)]
    info = body.get("DDBStreamBatchInfo")
    if isinstance(info, Mapping):
        try:
            arn, shard = info["streamArn"], info["shardId"]
            start, end = info["startSequenceNumber"], info["endSequenceNumber"]
        except KeyError as error:
            raise UnreadableMessageError(f"DDBStreamBatchInfo lacks {error}") from None
        records = read_range(arn, shard, start, end)
        if not records:
            raise UnreadableMessageError(
                f"stream range {start}..{end} of {shard} is no longer readable (24 h retention): reconcile instead"
            )
        return [Target(dict(r["dynamodb"]["Keys"]), r["dynamodb"]["SequenceNumber"], arn) for r in records]
    raise UnreadableMessageError("neither a dead-lettered record nor DDBStreamBatchInfo")


def current_state_record(
    keys: Keys,
    sequence_number: str,
    item: dict[str, Any] | None,
    read_at: float,
    source_arn: str | None = None,
) -> dict[str, Any]:
    """A synthetic stream record carrying the item's current state (`item`, None when it is gone) under the
    dead-lettered sequence number, from the stream `source_arn` (checked against the schema's table like any).

    Its ApproximateCreationDateTime is `read_at`, when that state was read: a tombstone's `deletedAt` then
    never predates the deletion it records (the dead-lettered record itself may be older than the delete).
    """
    stream: dict[str, Any] = {
        "ApproximateCreationDateTime": read_at,
        "Keys": keys,
        "SequenceNumber": sequence_number,
    }
    if item is not None:
        stream["NewImage"] = item
    record = {
        "eventID": f"redrive-{sequence_number}",
        "eventName": "MODIFY" if item is not None else "REMOVE",
        "eventSource": "redrive",
        "dynamodb": stream,
    }
    if source_arn is not None:
        record["eventSourceARN"] = source_arn
    return record


def redrive_messages(
    messages: Sequence[Message],
    *,
    settings: Settings,
    ports: Ports,
    read_range: ReadRange,
    get_item: GetItem,
    remaining_seconds: Callable[[], float] = lambda: 300.0,
) -> list[MessageReport]:
    """Apply the current DynamoDB state of every record the messages name; report which are done."""
    reports = [MessageReport(m.message_id) for m in messages]
    records: list[dict[str, Any]] = []
    owner: list[int] = []
    for position, message in enumerate(messages):
        try:
            body = json.loads(message.body)
            if not isinstance(body, Mapping):
                raise UnreadableMessageError("message body is not a JSON object")
            targets = targets_of(body, read_range)
        except (ValueError, KeyError, TypeError) as error:  # UnreadableMessageError and bad JSON included
            reports[position].error = str(error)
            continue
        try:
            states = [(t, get_item(t.keys, t.source_arn)) for t in targets]
        except Exception as error:  # throttled or failed reads: this message stays, the others go on
            reports[position].error = f"reading the current item failed: {error!r:.300}"
            continue
        report = reports[position]
        report.records = len(states)
        for target, item in states:
            if item is None and _held_by_another_table(settings.schema_tables, target):
                # A wrong-table record whose item has left the table it was written to (moved to its own table,
                # whose stream indexes it, or deleted): nothing is left to refuse or to apply.
                report.fates[IGNORED] = report.fates.get(IGNORED, 0) + 1
                continue
            records.append(
                current_state_record(
                    target.keys, target.sequence_number, item, ports.now(), target.source_arn
                )
            )
            owner.append(position)
    finished = [True] * len(messages)
    if records:
        result = process_batch(
            records, settings=settings, ports=ports, remaining_seconds=remaining_seconds, dead_letter=False
        )
        for outcome, position in zip(result.outcomes, owner, strict=True):
            fate = outcome.fate.value if outcome.fate else "none"
            fates = reports[position].fates
            fates[fate] = fates.get(fate, 0) + 1
            if outcome.fate not in FINAL_FATES:
                finished[position] = False
                reports[position].error = f"{outcome.reason_kind}: {outcome.reason}"
    for position, report in enumerate(reports):
        report.deleted = report.error is None and report.records > 0 and finished[position]
    return reports


def _held_by_another_table(tables: SchemaTables, target: Target) -> bool:
    """The target's schema belongs to a table other than the one whose stream the record came from."""
    source = table_of_arn(target.source_arn)
    holder = tables.table_of(str(target.keys.get("pk", {}).get("S", "")).split(SEPARATOR, 1)[0])
    return source is not None and holder is not None and holder != source


# --------------------------------------------------------------------------- AWS wiring and CLI


def stream_range_reader(streams: Any) -> ReadRange:
    def read_range(arn: str, shard: str, start: str, end: str) -> list[Mapping[str, Any]]:
        from botocore.exceptions import ClientError

        try:
            iterator = streams.get_shard_iterator(
                StreamArn=arn, ShardId=shard, ShardIteratorType="AT_SEQUENCE_NUMBER", SequenceNumber=start
            ).get("ShardIterator")
        except ClientError:
            return []  # trimmed or expired: the caller reports the range as unreadable
        found: list[Mapping[str, Any]] = []
        empty_pages = 0
        while iterator and empty_pages < 3:
            page = streams.get_records(ShardIterator=iterator, Limit=1000)
            batch = page.get("Records", [])
            empty_pages = 0 if batch else empty_pages + 1
            for record in batch:
                if int(record["dynamodb"]["SequenceNumber"]) > int(end):
                    return found
                found.append(record)
            if found and int(found[-1]["dynamodb"]["SequenceNumber"]) >= int(end):
                return found
            iterator = page.get("NextShardIterator")
        return found

    return read_range


def streams_client(region: str) -> Any:
    """A DynamoDB Streams client; inside the VPC through its interface endpoint, whose endpoint-specific DNS name
    `DYNAMODB_STREAMS_ENDPOINT` gives (DynamoDB Streams endpoints have no private DNS name)."""
    import boto3

    endpoint = os.environ.get("DYNAMODB_STREAMS_ENDPOINT", "").strip() or None
    return boto3.client("dynamodbstreams", region_name=region, endpoint_url=endpoint)


def item_reader(dynamodb: Any, tables: SchemaTables) -> GetItem:
    """Consistent reads from the table the record came from, else from the table holding its schema."""

    def get_item(keys: Keys, source_arn: str | None) -> dict[str, Any] | None:
        table = table_of_arn(source_arn)
        if table is None:
            pk = keys.get("pk", {}).get("S", "")
            table = tables.table_of(pk.split(SEPARATOR, 1)[0])
            if table is None:
                raise LookupError(f"no stream named and no table holds the schema of pk {pk!r:.200}")
        item: dict[str, Any] | None = dynamodb.get_item(TableName=table, Key=keys, ConsistentRead=True).get(
            "Item"
        )
        return item

    return get_item


def _describe(message: Message, read_range: ReadRange) -> MessageReport:
    report = MessageReport(message.message_id)
    try:
        report.records = len(targets_of(json.loads(message.body), read_range))
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        report.error = str(error)
    return report


def receive(
    sqs: Any, queue_url: str, count: int, *, visibility_timeout: int, wait_seconds: int
) -> list[Message]:
    """Up to `count` (at most 10) messages, hidden from other consumers for `visibility_timeout` seconds."""
    received = sqs.receive_message(
        QueueUrl=queue_url,
        MaxNumberOfMessages=min(10, count),
        VisibilityTimeout=visibility_timeout,
        WaitTimeSeconds=wait_seconds,
    ).get("Messages", [])
    return [Message(m["MessageId"], m["ReceiptHandle"], m["Body"]) for m in received]


def release(sqs: Any, queue_url: str, messages: Sequence[Message]) -> None:
    """Make received messages visible again at once."""
    if messages:
        sqs.change_message_visibility_batch(
            QueueUrl=queue_url,
            Entries=[
                {"Id": str(i), "ReceiptHandle": m.receipt_handle, "VisibilityTimeout": 0}
                for i, m in enumerate(messages)
            ],
        )


def handle_batch(
    messages: Sequence[Message],
    *,
    queue_url: str,
    sqs: Any,
    settings: Settings,
    ports: Ports,
    read_range: ReadRange,
    get_item: GetItem,
    dry_run: bool = False,
) -> list[MessageReport]:
    """Redrive one received batch and delete the messages that are done; a dry run only describes them and
    makes them visible again at once, leaving the queue as it found it."""
    if dry_run:
        reports = [_describe(m, read_range) for m in messages]
        release(sqs, queue_url, messages)
        return reports
    reports = redrive_messages(
        messages, settings=settings, ports=ports, read_range=read_range, get_item=get_item
    )
    done = [
        {"Id": str(i), "ReceiptHandle": m.receipt_handle}
        for i, (m, r) in enumerate(zip(messages, reports, strict=True))
        if r.deleted
    ]
    if done:
        sqs.delete_message_batch(QueueUrl=queue_url, Entries=done)
    return reports


def redrive_queue(
    *,
    queue_url: str,
    settings: Settings,
    ports: Ports,
    sqs: Any,
    dynamodb: Any,
    streams: Any,
    max_messages: int = 1000,
    visibility_timeout: int = 300,
    wait_seconds: int = 1,
    dry_run: bool = False,
) -> list[MessageReport]:
    """Receive up to `max_messages`, redrive them ten at a time, delete the ones that are done."""
    reports: list[MessageReport] = []
    seen: set[str] = set()
    read_range, get_item = stream_range_reader(streams), item_reader(dynamodb, settings.schema_tables)
    while len(reports) < max_messages:
        messages = receive(
            sqs,
            queue_url,
            max_messages - len(reports),
            visibility_timeout=visibility_timeout,
            wait_seconds=wait_seconds,
        )
        if not messages:
            break
        handled = handle_batch(
            messages,
            queue_url=queue_url,
            sqs=sqs,
            settings=settings,
            ports=ports,
            read_range=read_range,
            get_item=get_item,
            dry_run=dry_run,
        )
        if not dry_run:
            reports.extend(handled)
            continue
        # a dry run sees the same messages again: stop when a batch has nothing new
        fresh = [r for m, r in zip(messages, handled, strict=True) if m.message_id not in seen]
        seen.update(m.message_id for m in messages)
        if not fresh:
            break
        reports.extend(fresh)
    return reports


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m stream_sync.redrive", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--table", help="the environment's only table (TABLE_NAME); with several, set SCHEMA_TABLES instead"
    )
    parser.add_argument("--queue-url", default=os.environ.get("DLQ_URL"))
    parser.add_argument("--max-messages", type=int, default=1000)
    parser.add_argument("--visibility-timeout", type=int, default=300)
    parser.add_argument("--wait-seconds", type=int, default=1, help="SQS long-poll wait per receive")
    parser.add_argument("--dry-run", action="store_true", help="receive and report, change nothing")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    settings = Settings.from_env(os.environ)
    table = args.table or (None if settings.schema_tables else os.environ.get("TABLE_NAME"))
    if table:
        settings = replace(settings, schema_tables=SchemaTables.single(table))
    if not settings.schema_tables:
        parser.error("--table (TABLE_NAME) or SCHEMA_TABLES is required: which table holds which schema")

    import boto3

    from stream_sync.aws import build_ports

    reports = redrive_queue(
        queue_url=args.queue_url or settings.dlq_url,
        settings=settings,
        ports=build_ports(settings),
        sqs=boto3.client("sqs", region_name=settings.region),
        dynamodb=boto3.client("dynamodb", region_name=settings.region),
        streams=streams_client(settings.region),
        max_messages=args.max_messages,
        visibility_timeout=args.visibility_timeout,
        wait_seconds=args.wait_seconds,
        dry_run=args.dry_run,
    )
    for report in reports:
        print(
            json.dumps(
                {
                    "messageId": report.message_id,
                    "records": report.records,
                    "fates": report.fates,
                    "deleted": report.deleted,
                    "error": report.error,
                }
            )
        )
    remaining = sum(1 for r in reports if not r.deleted)
    print(json.dumps({"redriven": len(reports) - remaining, "leftInQueue": remaining, "at": time.time()}))
    return 0 if remaining == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
