"""The sync's ports over real clients: signed `_bulk` (refdata.transport), S3 geometry, SQS DLQ.

boto3, botocore and urllib3 are imported on first use, not at module import, to keep cold starts short.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from stream_sync.config import Settings
from stream_sync.sync import (
    BulkUnavailable,
    DeadLetter,
    GeometryMissing,
    GeometryTooLarge,
    HttpReply,
    Ports,
    packed,
)

SQS_BATCH_ENTRIES = 10
SQS_BATCH_MAX_BYTES = 256 * 1024
_MISSING_OBJECT_CODES = frozenset({"NoSuchKey", "404", "NotFound"})
# Without s3:ListBucket, S3 answers a missing key with 403 rather than 404. Retrying either only delays the
# shard; the record goes to the DLQ, and the redrive applies it once the object (or the grant) is fixed.
_UNREADABLE_OBJECT_CODES = frozenset({"AccessDenied", "403"})
# Only what the sync reads from a `_bulk` answer: each item's status, result and error (and a whole-request
# error), plus took and errors. The domain then serialises, and the function reads and parses, a fifth of the
# full answer. Percent-encoded as SigV4's canonical query string wants it (`,` = %2C, `*` = %2A).
BULK_PATH = "_bulk?filter_path=" + ",".join(
    ["took", "errors", "items.*.status", "items.*.result", "items.*.error", "error", "status"]
).replace(",", "%2C").replace("*", "%2A")


def _client_config(settings: Settings) -> Any:
    from botocore.config import Config

    return Config(
        connect_timeout=min(settings.request_timeout_seconds, 10.0),
        read_timeout=settings.request_timeout_seconds,
        retries={"mode": "standard", "max_attempts": 3},
    )


class BulkClient:
    def __init__(self, settings: Settings, credentials: Any = None) -> None:
        self._settings = settings
        self._credentials = (
            credentials  # None: the function's own role (the sync); the ops worker's admin role
        )
        self._transport: Any = None

    def __call__(self, body: bytes) -> HttpReply:
        from refdata.transport import TransportError

        if self._transport is None:
            from refdata.transport import NDJSON_CONTENT_TYPE, OpenSearchTransport

            self._content_type = NDJSON_CONTENT_TYPE
            self._transport = OpenSearchTransport(
                self._settings.opensearch_endpoint,
                self._settings.region,
                timeout_seconds=self._settings.request_timeout_seconds,
                credentials=self._credentials,
            )
        try:
            response = self._transport.request("POST", BULK_PATH, body, {"Content-Type": self._content_type})
        except TransportError as error:
            raise BulkUnavailable(str(error)) from error
        return HttpReply(response.status, response.headers, response.body)


class GeometryFetcher:
    """`GetObject` of one geometry at a time: the object's size (`ContentLength`, sent before its body) is read
    first, and an object larger than the caller allows is closed unread (GeometryTooLarge)."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._client: Any = None

    def __call__(self, bucket: str, key: str, max_bytes: int) -> bytes:
        from botocore.exceptions import ClientError

        if self._client is None:
            import boto3

            self._client = boto3.client(
                "s3", region_name=self._settings.region, config=_client_config(self._settings)
            )
        try:
            response = self._client.get_object(Bucket=bucket, Key=key)
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code")
            if code in _MISSING_OBJECT_CODES:
                raise GeometryMissing(f"s3://{bucket}/{key} does not exist") from error
            if code in _UNREADABLE_OBJECT_CODES:
                raise GeometryMissing(
                    f"s3://{bucket}/{key} is missing or not readable by this function"
                ) from error
            raise
        stream = response["Body"]
        size = int(response.get("ContentLength", 0))
        if size > max_bytes:
            stream.close()  # the body stays unread: the connection is dropped rather than drained
            raise GeometryTooLarge(size)
        try:
            body: bytes = stream.read(max_bytes + 1)  # never more than allowed, whatever the header said
        finally:
            stream.close()
        if len(body) > max_bytes:
            raise GeometryTooLarge(max(size, len(body)))
        return body


def sqs_batches(letters: Sequence[DeadLetter]) -> list[list[DeadLetter]]:
    """At most 10 entries and 256 KiB of bodies per SendMessageBatch call."""
    # The entry's id and attributes count towards the request size too.
    return packed(
        letters, lambda letter: len(letter.body.encode()) + 128, SQS_BATCH_MAX_BYTES, SQS_BATCH_ENTRIES
    )


class DeadLetterQueue:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._client: Any = None

    def __call__(self, letters: Sequence[DeadLetter]) -> Iterable[int]:
        import boto3

        if self._client is None:
            self._client = boto3.client(
                "sqs", region_name=self._settings.region, config=_client_config(self._settings)
            )
        failed: list[int] = []
        for batch in sqs_batches(letters):
            entries = [
                {
                    "Id": str(letter.position),
                    "MessageBody": letter.body,
                    "MessageAttributes": {
                        "reasonKind": {"DataType": "String", "StringValue": letter.reason_kind}
                    },
                }
                for letter in batch
            ]
            try:
                response = self._client.send_message_batch(QueueUrl=self._settings.dlq_url, Entries=entries)
            except Exception:  # the whole call failed: every entry in it is retried by the caller
                failed.extend(letter.position for letter in batch)
                continue
            failed.extend(int(entry["Id"]) for entry in response.get("Failed", []))
        return failed


def build_ports(settings: Settings, credentials: Any = None) -> Ports:
    """The sync's I/O over real clients; `_bulk` signed with `credentials` (botocore's chain when None)."""
    return Ports(
        bulk=BulkClient(settings, credentials),
        fetch_geometry=GeometryFetcher(settings),
        dead_letter=DeadLetterQueue(settings),
    )
