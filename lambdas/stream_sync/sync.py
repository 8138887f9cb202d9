"""Apply one batch of DynamoDB stream records to OpenSearch and decide every record's fate.

Pipeline: parse keys and sequence numbers (refusing a schema another table holds) -> coalesce per document (last
change wins) -> in stream order, build each document, fetch its geometry by URL (one object at a time, its size
read before its body) and encode it -> one `_bulk` request (split only at the payload cap; a request refused for
its content is bisected down to the document that causes it) -> retry transient per-item failures with backoff
inside the time left -> dead-letter permanent failures (and records about to exceed the event source mapping's
maximum age) -> report the smallest unfinished sequence number.

Memory is bounded by design, not by what a batch holds: encoded lines are held up to `work_budget_bytes`; when
the next geometry would not fit, what is held is sent first (its lines then let go) and the batch goes on. Time
is bounded by the invocation's: no geometry is fetched, and after the first no request is sent, without room for
it; what is left is reported, and the next invocation resumes there. No input fails the batch: every failure of
one record (decoding, geometry, limits, encoding, even an unexpected error) becomes that record's outcome.

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


class GeometryTooLarge(Exception):
    """The geometry object is larger than the fetch allowed; its body was not read."""

    def __init__(self, size: int) -> None:
        super().__init__(f"{size} bytes")
        self.size = size


# The reason kind of a record left for the next invocation by design (the work budget or the deadline), not
# because something failed: reported like a retry, counted apart (RecordsDeferred).
DEFERRED = "deferred"


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
    # (bucket, key, max_bytes) -> the object's bytes; GeometryTooLarge, before its body is read, when it is larger
    fetch_geometry: Callable[[str, str, int], bytes]
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
    line: bytes | None = None  # the encoded bulk action while it waits to be sent (the document is dropped)
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
    def deferred(self) -> int:
        """Records left for the next invocation by the work budget or the deadline (reported, not failed)."""
        return sum(1 for o in self.outcomes if o.fate is Fate.RETRY and o.reason_kind == DEFERRED)

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
    winners = _coalesce(outcomes, settings, permanent)
    _Pipeline(settings, ports, remaining_seconds, result, permanent).run(winners)
    _dead_letter_aged(outcomes, settings, ports.now(), dead_letter)
    if dead_letter:
        _send_dead_letters(outcomes, settings, ports, result)
    for outcome in outcomes:
        if outcome.fate is None:  # defensive: anything undecided is retried, never dropped
            outcome.fail(Fate.RETRY, "undecided", "no fate decided")
    mark_lag(result, ports.now())
    return result


def _unexpected(error: BaseException) -> str:
    return f"{type(error).__name__}: {str(error)[:300]}"


def _coalesce(outcomes: list[Outcome], settings: Settings, permanent: Fate) -> list[Outcome]:
    """Parse every record; of several changes to one document keep the last. The winners, in stream order."""
    latest: dict[str, Outcome] = {}
    for outcome in outcomes:
        try:
            change = parse_change(outcome.record)
        except RecordError as error:
            outcome.fail(permanent, error.kind, error.detail)
            continue
        except Exception as error:  # a record no rule foresaw: its own failure, never the batch's
            outcome.fail(permanent, "malformed-record", _unexpected(error))
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
    return sorted(latest.values(), key=lambda o: o.position)


def _get(record: Any, key: str, default: Any) -> Any:
    return record.get(key, default) if type(record) is dict or isinstance(record, Mapping) else default


class _Pipeline:
    """The winners in stream order: built, fetched and encoded one at a time into a slice of lines held within
    the work budget, each slice sent (with its retries) before the next geometry that would not fit."""

    def __init__(
        self,
        settings: Settings,
        ports: Ports,
        remaining_seconds: Callable[[], float],
        result: BatchResult,
        permanent: Fate,
    ) -> None:
        self.settings = settings
        self.ports = ports
        self.remaining_seconds = remaining_seconds
        self.result = result
        self.permanent = permanent
        self.slice: list[Outcome] = []
        self.held = 0  # bytes of the slice's lines
        self.fetched = 0  # geometry objects read in this invocation
        self.stop: str | None = None  # why the rest of the batch waits for the next invocation

    def run(self, winners: list[Outcome]) -> None:
        for outcome in winners:
            change = outcome.change
            assert change is not None
            if not change.indexable:
                outcome.fate = Fate.IGNORED
            elif self.stop is not None:
                outcome.fail(Fate.RETRY, DEFERRED, self.stop)
            else:
                try:
                    self.prepare(outcome, change)
                except RecordError as error:
                    outcome.fail(self.permanent, error.kind, self._at_url(change, error.detail))
                except Exception as error:  # never the batch's failure: this record's, with its payload
                    outcome.fail(
                        self.permanent, "unprocessable-record", self._at_url(change, _unexpected(error))
                    )
                if outcome.fate is not None:
                    change.doc = None
        self.flush()

    @staticmethod
    def _at_url(change: Change, detail: str) -> str:
        return f"{change.geometry_url}: {detail}" if change.geometry_url else detail

    def prepare(self, outcome: Outcome, change: Change) -> None:
        """Build, fetch and encode one record, into the slice; a RecordError for a permanent failure."""
        build_document(change, self.settings.geometry_bucket)
        if change.geometry_url is not None and not self.attach(outcome, change):
            return
        line = encode_update(change).encode("ascii")  # ASCII JSON: its length is its size
        change.doc = None
        cap = self.settings.bulk_max_bytes
        if len(line) > cap:
            raise RecordError("document-too-large", f"{len(line)} bytes exceed BULK_MAX_BYTES={cap}")
        outcome.line = line
        self.slice.append(outcome)
        self.held += len(line)

    def attach(self, outcome: Outcome, change: Change) -> bool:
        """Fetch and attach the geometry (False when the record is deferred or failed transiently)."""
        assert change.geometry_url is not None
        settings = self.settings
        cap = settings.bulk_max_bytes
        reserve = 2 * settings.request_timeout_seconds + settings.deadline_margin_seconds
        if self.fetched and self.remaining_seconds() < reserve:
            self.defer(outcome, "the invocation's time left is kept for sending: the next one resumes here")
            return False
        bucket, _, key = change.geometry_url[5:].partition("/")
        limit = min(cap, settings.work_budget_bytes - self.held) if self.slice else cap
        while True:
            try:
                raw = self.ports.fetch_geometry(bucket, key, max(limit, 0))
                break
            except GeometryTooLarge as error:
                if error.size > cap:
                    raise RecordError(
                        "document-too-large",
                        f"the geometry object is {error.size} bytes, more than BULK_MAX_BYTES={cap} (not read)",
                    ) from None
                if not self.slice:  # cannot happen: an empty slice fetches up to the cap
                    raise
                self.flush()  # send what is held, then fetch again into an empty slice
                if self.stop is not None:
                    self.defer(outcome, self.stop)
                    return False
                limit = cap
            except GeometryMissing as error:
                raise RecordError("missing-geometry-object", str(error)) from None
            except Exception as error:  # throttling, network, access: the bucket's fault holds the batch
                outcome.fail(Fate.RETRY, "geometry-fetch-failed", f"{change.geometry_url}: {error!r:.300}")
                self.stop = (
                    f"geometry fetch failed before this record ({error!r:.200}): the bucket holds the batch"
                )
                return False
        self.fetched += 1
        attach_geometry(change, raw)
        return True

    def defer(self, outcome: Outcome, why: str) -> None:
        self.stop = why
        outcome.fail(Fate.RETRY, DEFERRED, why)

    def flush(self) -> None:
        """Send the slice (with its retries) and let its lines go; a slice that does not finish stops the batch."""
        if not self.slice:
            return
        sent, self.slice, self.held = self.slice, [], 0
        self.send(sent)
        for outcome in sent:
            outcome.line = None
        unfinished = [o for o in sent if o.fate is Fate.RETRY]
        if unfinished and self.stop is None:
            first = unfinished[0]
            self.stop = (
                f"a record before this one is still unfinished ({first.reason_kind}): the batch waits for it"
            )

    def send(self, outcomes: list[Outcome]) -> None:
        """`_bulk` of these lines (split at the cap, a refused request bisected), retrying transient failures with
        backoff while the invocation has time."""
        settings, ports, result, permanent = self.settings, self.ports, self.result, self.permanent
        remaining_seconds = self.remaining_seconds
        cap = settings.bulk_max_bytes
        room = settings.request_timeout_seconds + settings.deadline_margin_seconds
        pending = outcomes
        attempt = 0
        while pending:
            attempt += 1
            retry: list[Outcome] = []
            wait = 0.0
            queue = packed(pending, _line_length, cap)
            while queue:
                chunk = queue.pop(0)
                if result.bulk_requests and remaining_seconds() < room:
                    # Not the invocation's first request, and no room for a whole one: the rest waits, in order.
                    for outcome in (o for group in (chunk, *queue) for o in group):
                        outcome.fail(
                            Fate.RETRY, DEFERRED, "no time left in this invocation for another request"
                        )
                    return
                for outcome in chunk:
                    outcome.attempts += 1
                result.bulk_requests += 1
                try:
                    reply = ports.bulk(b"".join(o.line or b"" for o in chunk))
                except BulkUnavailable as error:
                    for outcome in chunk:
                        outcome.fail(Fate.RETRY, "bulk-unavailable", str(error)[:300])
                        retry.append(outcome)
                    continue
                if reply.status == 200:
                    _apply_items(chunk, reply, retry, permanent)
                    continue
                failure = classify_response(reply.status, reply.body)
                if reply.status in (400, 413) and not failure.transient:
                    # Refused for its content (a body over the domain's size limit, a document its parser refuses):
                    # bisect until the refusal names one document, which fails alone.
                    if len(chunk) > 1:
                        half = len(chunk) // 2
                        queue[:0] = [chunk[:half], chunk[half:]]
                    else:
                        _refused_alone(chunk[0], reply, permanent)
                    continue
                wait = max(wait, _retry_after(reply.headers))
                for outcome in chunk:  # systemic: never blamed on the request's documents
                    outcome.fail(Fate.RETRY, failure.kind, failure.reason)
                    retry.append(outcome)
            if not retry or attempt >= settings.max_attempts:
                return
            backoff = min(settings.retry_max_seconds, settings.retry_base_seconds * 2 ** (attempt - 1))
            delay = max(wait, backoff * (0.5 + 0.5 * ports.jitter()))
            if remaining_seconds() - delay < room:
                return
            ports.sleep(delay)
            result.retry_rounds += 1
            result.item_retries += len(retry)
            pending = retry


# --------------------------------------------------------------------------- bulk


def _line_length(outcome: Outcome) -> int:
    return len(outcome.line or b"")


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


def _apply_items(chunk: list[Outcome], reply: HttpReply, retry: list[Outcome], permanent: Fate) -> None:
    try:
        items = json.loads(reply.body)["items"]
        if len(items) != len(chunk):
            raise ValueError(f"{len(items)} items for {len(chunk)} actions")
    except (ValueError, KeyError, TypeError) as error:
        for outcome in chunk:
            outcome.fail(Fate.RETRY, "bulk-response-unreadable", f"{error!r:.200}")
            retry.append(outcome)
        return
    for outcome, item in zip(chunk, items, strict=True):
        try:
            ((_, info),) = item.items()
            status = int(info["status"])
        except (AttributeError, ValueError, KeyError, TypeError):
            outcome.fail(Fate.RETRY, "bulk-response-unreadable", f"bad item {item!r:.200}")
            retry.append(outcome)
            continue
        if status < 300:
            change = outcome.change
            assert change is not None
            if info.get("result") == "noop":
                outcome.fate = Fate.STALE_SKIPPED
            else:
                outcome.fate = Fate.DELETED if change.tombstone else Fate.INDEXED
            outcome.reason_kind = outcome.reason = None
            outcome.line = None
            continue
        failure = classify(status, info.get("error"))
        outcome.script_error = failure.kind in SCRIPT_KINDS
        if failure.transient:
            outcome.fail(Fate.RETRY, failure.kind, failure.reason)
            retry.append(outcome)
        else:
            outcome.fail(permanent, failure.kind, failure.reason)
            outcome.line = None


def _refused_alone(outcome: Outcome, reply: HttpReply, permanent: Fate) -> None:
    """One document whose request the domain refused as a whole, for its content: this document's failure."""
    if reply.status == 413:
        outcome.fail(permanent, "document-too-large", "HTTP 413 for a single document")
    else:
        failure = classify_response(reply.status, reply.body)
        kind = "document-refused" if failure.kind.startswith("http-") else failure.kind
        outcome.fail(
            permanent, kind, f"the domain refused the request holding only this document: {failure.reason}"
        )
    outcome.line = None


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
    try:
        return _dead_letter_body(outcome, failed_at, max_bytes)
    except (RecursionError, ValueError, TypeError) as error:  # a forged record no JSON encoder can write
        stream = _get(outcome.record, "dynamodb", {})
        message = {
            "reason": f"{outcome.reason_kind}: {outcome.reason}"[:1000],
            "reasonKind": outcome.reason_kind,
            "record": {
                "eventID": outcome.event_id,
                "eventSourceARN": str(_get(outcome.record, "eventSourceARN", "")),
                "dynamodb": {
                    "Keys": repr(_get(stream, "Keys", None))[:2000],
                    "SequenceNumber": outcome.sequence_number,
                },
            },
            "truncated": f"the record cannot be written as JSON ({type(error).__name__}); its keys as text",
            "sequenceNumber": outcome.sequence_number,
            "failedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(failed_at)),
        }
        return json.dumps(message, separators=(",", ":"))


def _dead_letter_body(outcome: Outcome, failed_at: float, max_bytes: int) -> str:
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
