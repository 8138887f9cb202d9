"""Apply one batch of DynamoDB stream records to OpenSearch and decide every record's fate.

Pipeline: parse keys and sequence numbers (refusing a schema another table holds) -> coalesce per document (last change wins) -> build documents
(and fetch geometry by URL) -> one `_bulk` request (split only at the payload cap) -> retry transient
per-item failures with backoff inside the time left -> dead-letter permanent failures (and records about
to exceed the event source mapping's maximum age) -> report the smallest unfinished sequence number.

All I/O goes through `Ports`, so the same logic runs in the Lambda, in the redrive tool and in tests.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

from search.documents import (
    Change,
    RecordError,
    attach_geometry,
    build_document,
    encode_update,
    parse_change,
)

from stream_sync.config import Settings
from stream_sync.failures import SCRIPT_KINDS, classify, classify_response


class Fate(StrEnum):
    INDEXED = "indexed"  # applied: document written
    DELETED = "deleted"  # applied: tombstone written (REMOVE, including TTL expiry)
    STALE_SKIPPED = "stale-skipped"  # applied: the index already held this or a newer change (script noop)
    COALESCED = "coalesced"  # superseded by a later record for the same key in the same batch
    IGNORED = "ignored"  # schema is not indexable (the event filter should have dropped it)
    DEAD_LETTERED = "dead-lettered"  # permanent failure (or too old to retry): in the DLQ with its payload
    REJECTED = "rejected"  # permanent failure while redriving: the DLQ message stays where it is
    RETRY = "retry"  # not finished: reported as a batch item failure, Lambda delivers it again


FATE_VALUES = {fate: fate.value for fate in Fate}  # `.value` goes through a slow enum descriptor
FINAL_FATES = frozenset(
    {Fate.INDEXED, Fate.DELETED, Fate.STALE_SKIPPED, Fate.COALESCED, Fate.IGNORED, Fate.DEAD_LETTERED}
)
APPLIED_FATES = frozenset({Fate.INDEXED, Fate.DELETED, Fate.STALE_SKIPPED})
_T = TypeVar("_T")


class BulkUnavailable(Exception):
    """The `_bulk` request got no HTTP response (timeout, refused or dropped connection)."""


class GeometryMissing(Exception):
    """The geometry object named by `geometryUrl` does not exist (permanent)."""


@dataclass(frozen=True)
class HttpReply:
    status: int
    headers: Mapping[str, str]
    body: bytes


@dataclass(frozen=True)
class DeadLetter:
    position: int
    body: str
    reason_kind: str


@dataclass
class Ports:
    """The I/O the sync needs; the handler wires AWS clients, tests wire fakes or moto."""

    bulk: Callable[[bytes], HttpReply]
    fetch_geometry: Callable[[str, str], bytes]
    dead_letter: Callable[[Sequence[DeadLetter]], Iterable[int]]  # returns the positions that failed
    now: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    jitter: Callable[[], float] = random.random


@dataclass(slots=True)
class Outcome:
    position: int
    record: Mapping[str, Any]
    sequence_number: str | None
    event_id: str
    fate: Fate | None = None
    reason_kind: str | None = None
    reason: str | None = None
    change: Change | None = None
    superseded_by: int | None = None
    attempts: int = 0
    line: str | None = None  # the encoded bulk action, once built (the document itself is then dropped)
    script_error: bool = False  # its last item failure was script-unavailable or script-failed

    @property
    def final(self) -> bool:
        return self.fate in FINAL_FATES

    @property
    def applied(self) -> bool:
        return self.fate in APPLIED_FATES

    def fail(self, fate: Fate, kind: str, reason: str) -> None:
        self.fate, self.reason_kind, self.reason = fate, kind, reason


@dataclass
class BatchResult:
    outcomes: list[Outcome]
    bulk_requests: int = 0
    retry_rounds: int = 0
    item_retries: int = 0
    lag_seconds: float | None = None
    dead_letter_failures: int = 0

    def counts(self) -> dict[str, int]:
        counts = {fate.value: 0 for fate in Fate}
        for outcome in self.outcomes:
            if outcome.fate is not None:
                counts[FATE_VALUES[outcome.fate]] += 1
        return counts

    @property
    def script_errors(self) -> int:
        """Records left unapplied whose last failure was the stored script's (missing, uncompilable, failing)."""
        return sum(1 for o in self.outcomes if o.script_error and not o.applied)

    def batch_item_failures(self) -> list[dict[str, str]]:
        """The smallest unfinished SequenceNumber: Lambda redelivers the shard from there, in order."""
        unfinished = [o for o in self.outcomes if not o.final]
        if not unfinished:
            return []
        first = min(unfinished, key=lambda o: int(o.sequence_number or 0))
        return [{"itemIdentifier": first.sequence_number or ""}]


class BatchIncompleteError(RuntimeError):
    """A record's fate cannot be reported without its SequenceNumber: fail the invocation instead."""


# --------------------------------------------------------------------------- batch


def _raw_sequence(record: Any) -> str | None:
    try:
        value = record["dynamodb"]["SequenceNumber"]
    except (KeyError, TypeError):
        return None
    return value if isinstance(value, str) and value.isdigit() else None


def process_batch(
    records: Sequence[Mapping[str, Any]],
    *,
    settings: Settings,
    ports: Ports,
    remaining_seconds: Callable[[], float],
    dead_letter: bool = True,
) -> BatchResult:
    outcomes = [
        Outcome(position, record, _raw_sequence(record), str(_get(record, "eventID", "")))
        for position, record in enumerate(records)
    ]
    result = BatchResult(outcomes)
    permanent = Fate.DEAD_LETTERED if dead_letter else Fate.REJECTED

    latest: dict[str, Outcome] = {}
    for outcome in outcomes:
        try:
            change = parse_change(outcome.record)
        except RecordError as error:
            outcome.fail(permanent, error.kind, error.detail)
            continue
        outcome.change = change
        if change.indexable:
            misplaced = settings.schema_tables.misplaced(
                change.schema, _get(outcome.record, "eventSourceARN", None)
            )
            if misplaced is not None:
                outcome.fail(permanent, "wrong-table", misplaced)
                continue
        previous = latest.get(change.doc_id)
        if previous is not None and previous.change is not None and previous.change.seq > change.seq:
            outcome.fate, outcome.superseded_by = Fate.COALESCED, previous.position
            continue
        if previous is not None:
            previous.fate, previous.superseded_by = Fate.COALESCED, outcome.position
        latest[change.doc_id] = outcome
    for outcome in outcomes:
        if outcome.fate is Fate.COALESCED and outcome.change is not None:
            outcome.superseded_by = latest[outcome.change.doc_id].position

    to_send: list[Outcome] = []
    for outcome in latest.values():
        winner = outcome.change
        assert winner is not None
        if not winner.indexable:
            outcome.fate = Fate.IGNORED
            continue
        try:
            build_document(winner, settings.geometry_bucket)
        except RecordError as error:
            outcome.fail(permanent, error.kind, error.detail)
            continue
        if winner.geometry_url is None:  # complete: encode it while it is fresh, then let it go
            outcome.line = encode_update(winner)
            winner.doc = None
        to_send.append(outcome)

    to_send = _dereference_geometry(to_send, ports, permanent)
    _send(to_send, settings, ports, remaining_seconds, result, permanent)
    _dead_letter_aged(outcomes, settings, ports.now(), dead_letter)
    if dead_letter:
        _send_dead_letters(outcomes, settings, ports, result)
    for outcome in outcomes:
        if outcome.fate is None:  # defensive: anything undecided is retried, never dropped
            outcome.fail(Fate.RETRY, "undecided", "no fate decided")
    mark_lag(result, ports.now())
    return result


def _get(record: Any, key: str, default: Any) -> Any:
    return record.get(key, default) if type(record) is dict or isinstance(record, Mapping) else default


def _dereference_geometry(to_send: list[Outcome], ports: Ports, permanent: Fate) -> list[Outcome]:
    pending = [o for o in to_send if o.change is not None and o.change.geometry_url is not None]
    if not pending:
        return to_send

    def fetch(outcome: Outcome) -> None:
        change = outcome.change
        assert change is not None and change.geometry_url is not None
        bucket, _, key = change.geometry_url[5:].partition("/")
        try:
            raw = ports.fetch_geometry(bucket, key)
        except GeometryMissing as error:
            outcome.fail(permanent, "missing-geometry-object", f"{change.geometry_url}: {error}")
            return
        except Exception as error:  # throttling, network, access: retry later, never dead-letter
            outcome.fail(Fate.RETRY, "geometry-fetch-failed", f"{change.geometry_url}: {error!r:.300}")
            return
        try:
            attach_geometry(change, raw)
        except RecordError as error:
            outcome.fail(permanent, error.kind, f"{change.geometry_url}: {error.detail}")

    if len(pending) == 1:
        fetch(pending[0])
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=min(8, len(pending))) as pool:
            list(pool.map(fetch, pending))
    return [o for o in to_send if o.fate is None]


# --------------------------------------------------------------------------- bulk


def _line_length(item: tuple[Outcome, str]) -> int:
    return len(item[1])


def packed(
    items: Sequence[_T], size_of: Callable[[_T], int], max_bytes: int, max_count: int = 0
) -> list[list[_T]]:
    """Consecutive groups of ``items``, each within ``max_bytes`` (by ``size_of``) and ``max_count`` (0: no limit).

    An item larger than ``max_bytes`` on its own still gets a group of its own.
    """
    groups: list[list[_T]] = []
    current: list[_T] = []
    size = 0
    for item in items:
        length = size_of(item)
        if current and (size + length > max_bytes or len(current) == max_count):
            groups.append(current)
            current, size = [], 0
        current.append(item)
        size += length
    if current:
        groups.append(current)
    return groups


def _retry_after(headers: Mapping[str, str]) -> float:
    raw = headers.get("retry-after") or headers.get("Retry-After")
    try:
        return max(float(raw), 0.0) if raw else 0.0
    except ValueError:
        return 0.0  # an HTTP-date: fall back to our own backoff


def _apply_items(
    chunk: list[tuple[Outcome, str]], reply: HttpReply, retry: list[tuple[Outcome, str]], permanent: Fate
) -> None:
    try:
        items = json.loads(reply.body)["items"]
        if len(items) != len(chunk):
            raise ValueError(f"{len(items)} items for {len(chunk)} actions")
    except (ValueError, KeyError, TypeError) as error:
        for outcome, line in chunk:
            outcome.fail(Fate.RETRY, "bulk-response-unreadable", f"{error!r:.200}")
            retry.append((outcome, line))
        return
    for (outcome, line), item in zip(chunk, items, strict=True):
        try:
            ((_, info),) = item.items()
            status = int(info["status"])
        except (AttributeError, ValueError, KeyError, TypeError):
            outcome.fail(Fate.RETRY, "bulk-response-unreadable", f"bad item {item!r:.200}")
            retry.append((outcome, line))
            continue
        if status < 300:
            change = outcome.change
            assert change is not None
            if info.get("result") == "noop":
                outcome.fate = Fate.STALE_SKIPPED
            else:
                outcome.fate = Fate.DELETED if change.tombstone else Fate.INDEXED
            outcome.reason_kind = outcome.reason = None
            continue
        failure = classify(status, info.get("error"))
        outcome.script_error = failure.kind in SCRIPT_KINDS
        if failure.transient:
            outcome.fail(Fate.RETRY, failure.kind, failure.reason)
            retry.append((outcome, line))
        else:
            outcome.fail(permanent, failure.kind, failure.reason)


def _send(
    outcomes: list[Outcome],
    settings: Settings,
    ports: Ports,
    remaining_seconds: Callable[[], float],
    result: BatchResult,
    permanent: Fate,
) -> None:
    cap = settings.bulk_max_bytes
    pending: list[tuple[Outcome, str]] = []
    for outcome in outcomes:
        assert outcome.change is not None
        line = outcome.line
        if line is None:  # a document that waited for its geometry
            line = outcome.line = encode_update(outcome.change)
            outcome.change.doc = None
        if len(line) > cap:
            outcome.fail(permanent, "document-too-large", f"{len(line)} bytes exceed BULK_MAX_BYTES={cap}")
        else:
            pending.append((outcome, line))

    attempt = 0
    while pending:
        attempt += 1
        retry: list[tuple[Outcome, str]] = []
        wait = 0.0
        queue = packed(pending, _line_length, cap)
        while queue:
            chunk = queue.pop(0)
            for outcome, _ in chunk:
                outcome.attempts += 1
            result.bulk_requests += 1
            try:
                reply = ports.bulk("".join(line for _, line in chunk).encode("ascii"))
            except BulkUnavailable as error:
                for outcome, line in chunk:
                    outcome.fail(Fate.RETRY, "bulk-unavailable", str(error)[:300])
                    retry.append((outcome, line))
                continue
            if reply.status == 413 and len(chunk) > 1:
                half = len(chunk) // 2  # the domain's limit is lower than BULK_MAX_BYTES: bisect
                queue[:0] = [chunk[:half], chunk[half:]]
                continue
            if reply.status == 200:
                _apply_items(chunk, reply, retry, permanent)
                continue
            if reply.status == 413:
                outcome, _ = chunk[0]
                outcome.fail(permanent, "document-too-large", "HTTP 413 for a single document")
                continue
            wait = max(wait, _retry_after(reply.headers))
            failure = classify_response(reply.status, reply.body)  # never blamed on the request's documents
            for outcome, line in chunk:
                outcome.fail(Fate.RETRY, failure.kind, failure.reason)
                retry.append((outcome, line))
        if not retry or attempt >= settings.max_attempts:
            return
        backoff = min(settings.retry_max_seconds, settings.retry_base_seconds * 2 ** (attempt - 1))
        delay = max(wait, backoff * (0.5 + 0.5 * ports.jitter()))
        if remaining_seconds() - delay < settings.request_timeout_seconds + settings.deadline_margin_seconds:
            return
        ports.sleep(delay)
        result.retry_rounds += 1
        result.item_retries += len(retry)
        pending = retry


def mark_lag(result: BatchResult, now: float) -> None:
    lags = [
        now - o.change.created_at
        for o in result.outcomes
        if o.fate in APPLIED_FATES and o.change is not None and o.change.created_at is not None
    ]
    result.lag_seconds = max(lags) if lags else None


# --------------------------------------------------------------------------- dead letters


def _dead_letter_aged(outcomes: list[Outcome], settings: Settings, now: float, dead_letter: bool) -> None:
    limit = settings.dead_letter_age_seconds
    if limit is None or not dead_letter:
        return
    for outcome in outcomes:
        if outcome.fate is not Fate.RETRY:
            continue
        created = outcome.change.created_at if outcome.change is not None else None
        if created is not None and now - created >= limit:
            outcome.fail(
                Fate.DEAD_LETTERED,
                "transient-exhausted",
                f"record {now - created:.0f} s old, near MAX_RECORD_AGE_SECONDS; last error "
                f"{outcome.reason_kind}: {outcome.reason}",
            )


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        import base64

        return base64.b64encode(value).decode("ascii")
    isoformat = getattr(value, "isoformat", None)
    if callable(isoformat):
        return isoformat()
    return str(value)


def dead_letter_body(outcome: Outcome, failed_at: float, max_bytes: int) -> str:
    """The DLQ message: the full record and why. Over the SQS size limit, images are dropped (the
    redrive re-reads DynamoDB by key anyway) and `truncated` says so."""
    change = outcome.change
    message: dict[str, Any] = {
        "reason": f"{outcome.reason_kind}: {outcome.reason}",
        "reasonKind": outcome.reason_kind,
        "record": outcome.record,
        "documentId": change.doc_id if change else None,
        "schema": change.schema if change else None,
        "sequenceNumber": outcome.sequence_number,
        "failedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(failed_at)),
    }
    body = json.dumps(message, default=_json_default, separators=(",", ":"))
    if len(body.encode()) <= max_bytes:
        return body
    record = dict(outcome.record) if isinstance(outcome.record, Mapping) else {}
    stream = dict(record.get("dynamodb") or {})
    for image in ("OldImage", "NewImage"):
        stream.pop(image, None)
        record["dynamodb"] = stream
        message["record"], message["truncated"] = record, f"images dropped to fit {max_bytes} bytes"
        body = json.dumps(message, default=_json_default, separators=(",", ":"))
        if len(body.encode()) <= max_bytes:
            return body
    message["record"] = {"eventID": outcome.event_id, "dynamodb": {"Keys": stream.get("Keys")}}
    message["reason"] = message["reason"][:1000]
    return json.dumps(message, default=_json_default, separators=(",", ":"))


def _send_dead_letters(
    outcomes: list[Outcome], settings: Settings, ports: Ports, result: BatchResult
) -> None:
    body_limit = settings.dlq_max_message_bytes - 512  # message attributes count toward the SQS limit
    letters = [
        DeadLetter(o.position, dead_letter_body(o, ports.now(), body_limit), o.reason_kind or "")
        for o in outcomes
        if o.fate is Fate.DEAD_LETTERED
    ]
    if not letters:
        return
    try:
        failed = set(ports.dead_letter(letters))
    except Exception as error:  # the DLQ itself is down: keep every record by retrying it
        failed = {letter.position for letter in letters}
        reason = f"DLQ send failed: {error!r:.300}"
    else:
        reason = "DLQ send failed for this entry"
    for position in failed:
        outcome = outcomes[position]
        if outcome.sequence_number is None:
            raise BatchIncompleteError(
                f"record {position} ({outcome.event_id}) could not be dead-lettered and has no SequenceNumber"
            )
        outcome.fail(
            Fate.RETRY, "dead-letter-failed", f"{reason}; was {outcome.reason_kind}: {outcome.reason}"
        )
    result.dead_letter_failures = len(failed)
