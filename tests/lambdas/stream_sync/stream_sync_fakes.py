"""In-process stand-ins for the sync's ports: an OpenSearch `_bulk` that applies a model of the stored ordering
script, an S3 geometry store and a DLQ. Unit tests use these; integration tests use moto and the real engine behind
the loopback domain front."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from refdata.mappings import DELETED_AT_FIELD
from stream_sync.config import Settings
from stream_sync.sync import (
    BatchResult,
    BulkUnavailable,
    DeadLetter,
    GeometryMissing,
    GeometryTooLarge,
    HttpReply,
    Ports,
    process_batch,
)

PK = "geozone::bcparks_1"
SK = "0000000007"
SEQ = "4421584500000000017450439091"
# The function's minimal environment.
ENV = {
    "AWS_REGION": "ca-central-1",
    "OPENSEARCH_ENDPOINT": "https://vpc-refdata.ca-central-1.es.amazonaws.com",
    "DLQ_URL": "https://sqs.ca-central-1.amazonaws.com/123456789012/sync-dlq",
    "ENVIRONMENT_NAME": "dev",
}


def settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "opensearch_endpoint": "http://127.0.0.1:9",
        "region": "ca-central-1",
        "dlq_url": "https://sqs.ca-central-1.amazonaws.com/123456789012/dlq",
        "geometry_bucket": "geometry-bucket",
        "retry_base_seconds": 0.01,
        "retry_max_seconds": 0.05,
        "request_timeout_seconds": 1.0,
        "deadline_margin_seconds": 0.0,
    }
    values.update(overrides)
    return Settings(**values)


def record(
    event_name: str,
    sk: str = SK,
    seq: int | str = SEQ,
    new: dict[str, Any] | None = None,
    *,
    old: dict[str, Any] | None = None,
    pk: str = PK,
    created_at: float = 1_764_531_000.0,
    arn: str | None = None,
) -> dict[str, Any]:
    """A record exactly as the Lambda event for a DynamoDB stream carries it: every event but a REMOVE with a
    NewImage (the keys and `new`), an OldImage (the keys and `old`) when `old` is given, from the stream `arn`."""
    keys = {"pk": {"S": pk}, "sk": {"S": sk}}
    new = {} if new is None and event_name != "REMOVE" else new
    images = {
        name: {**keys, **image} for name, image in (("NewImage", new), ("OldImage", old)) if image is not None
    }
    body = {
        "ApproximateCreationDateTime": created_at,
        "Keys": keys,
        "SequenceNumber": str(seq),
        "SizeBytes": 120,
        "StreamViewType": "NEW_AND_OLD_IMAGES",
        **images,
    }
    raw = {
        "eventID": f"event-{seq}",
        "eventName": event_name,
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "ca-central-1",
        "dynamodb": body,
    }
    return raw if arn is None else raw | {"eventSourceARN": arn}


def apply_sync_script(stored: Mapping[str, Any] | None, params: Mapping[str, Any]) -> dict[str, Any] | None:
    """A model of the stored painless script (`search.indices.APPLY_SCRIPT_SOURCE`) for the fast in-process `_bulk`:
    the new `_source`, or None where the script sets `ctx.op = 'none'`.

    `stored` is the current `_source` (None when the document does not exist yet), `params` the script's params as
    the sync sends them. The model is checked against painless on the real engine by
    tests/lambdas/search/test_indices.py::test_the_fakes_model_of_the_script_agrees_with_painless_on_any_history.
    """
    incoming = params["seq"]
    current = (stored or {}).get("stream_seq")
    if current is not None and current >= incoming:
        return None
    doc: Mapping[str, Any] = params["doc"]
    replacement: dict[str, Any]
    if params.get("tombstone") is True:
        replacement = {
            "pk": doc.get("pk"),
            "sk": doc.get("sk"),
            "schema": doc.get("schema"),
            DELETED_AT_FIELD: doc.get(DELETED_AT_FIELD),
            "tombstone": True,
        }
    else:
        replacement = dict(doc)
        replacement["tombstone"] = False
    replacement["stream_seq"] = incoming
    return replacement


# Two script failures as the engine reports a `_bulk` item's (UpdateHelper.executeScript wraps each in `failed to
# execute script`): the stored script missing from the cluster state, and a painless runtime error.
MISSING_SCRIPT = {
    "type": "illegal_argument_exception",
    "reason": "failed to execute script",
    "caused_by": {
        "type": "resource_not_found_exception",
        "reason": "unable to find script [refdata-sync-apply] in cluster state",
    },
}
RUNTIME_ERROR = {
    "type": "illegal_argument_exception",
    "reason": "failed to execute script",
    "caused_by": {
        "type": "script_exception",
        "reason": "runtime error",
        "script_stack": ["stored.compareTo(incoming)", "      ^---- HERE"],
        "script": "refdata-sync-apply",
        "lang": "painless",
        "caused_by": {
            "type": "class_cast_exception",
            "reason": "class java.lang.Long cannot be cast to java.lang.String",
        },
    },
}

Reply = HttpReply | BulkUnavailable


@dataclass
class FakeOpenSearch:
    """`_bulk` over a dict, applying `apply_sync_script` (the model of the stored script) to each update."""

    docs: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    replies: list[Reply] = field(default_factory=list)  # canned whole-request outcomes, used first
    # doc id -> (status, error type or the whole error object)
    item_errors: dict[str, list[tuple[int, str | dict[str, Any]]]] = field(default_factory=dict)
    bodies: list[bytes] = field(default_factory=list)
    # Text the domain's request parser refuses: a body holding any of it is refused whole (400), as the engine
    # refuses a request whose update body it cannot parse.
    unparseable: list[bytes] = field(default_factory=list)

    def __call__(self, body: bytes) -> HttpReply:
        self.bodies.append(body)
        if self.replies:
            reply = self.replies.pop(0)
            if isinstance(reply, BulkUnavailable):
                raise reply
            return reply
        if any(text in body for text in self.unparseable):
            error = {
                "type": "x_content_parse_exception",
                "reason": "[1:1] [script] failed to parse field [params]",
                "caused_by": {"type": "json_parse_exception", "reason": "Non-standard token 'Infinity'"},
            }
            return HttpReply(400, {}, json.dumps({"error": error, "status": 400}).encode())
        lines = body.decode("ascii").splitlines()
        items = []
        for action_line, update_line in zip(lines[::2], lines[1::2], strict=True):
            meta = json.loads(action_line)["update"]
            update = json.loads(update_line)
            errors = self.item_errors.get(meta["_id"])
            if errors:
                status, kind = errors.pop(0)
                error = kind if isinstance(kind, dict) else {"type": kind, "reason": "x"}
                items.append({"update": {"_id": meta["_id"], "status": status, "error": error}})
                continue
            key = (meta["_index"], meta["_id"])
            new = apply_sync_script(self.docs.get(key), update["script"]["params"])
            if new is None:
                items.append({"update": {"_id": meta["_id"], "status": 200, "result": "noop"}})
            else:
                result = "updated" if key in self.docs else "created"
                self.docs[key] = new
                items.append({"update": {"_id": meta["_id"], "status": 200, "result": result}})
        return HttpReply(200, {}, json.dumps({"errors": False, "items": items}).encode())

    def doc(self, sk: str, pk: str = PK) -> dict[str, Any] | None:
        return self.docs.get(("geozone-write", f"{pk}#{sk}"))


@dataclass
class FakeDeadLetterQueue:
    sent: list[DeadLetter] = field(default_factory=list)
    fail_positions: set[int] = field(default_factory=set)
    down: bool = False

    def __call__(self, letters: Sequence[DeadLetter]) -> list[int]:
        if self.down:
            raise ConnectionError("sqs unreachable")
        self.sent.extend(letter for letter in letters if letter.position not in self.fail_positions)
        return [letter.position for letter in letters if letter.position in self.fail_positions]

    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(letter.body) for letter in self.sent]


@dataclass
class FakeGeometryStore:
    """S3 as the sync reads it: the object's size first, its body only when it is within the caller's limit."""

    objects: dict[tuple[str, str], bytes] = field(default_factory=dict)
    broken: bool = False
    bodies_read: list[str] = field(default_factory=list)  # keys whose body was read, in order

    def __call__(self, bucket: str, key: str, max_bytes: int) -> bytes:
        if self.broken:
            raise TimeoutError("s3 timed out")
        try:
            body = self.objects[(bucket, key)]
        except KeyError:
            raise GeometryMissing(f"s3://{bucket}/{key}") from None
        if len(body) > max_bytes:
            raise GeometryTooLarge(len(body))
        self.bodies_read.append(key)
        return body


@dataclass
class Harness:
    opensearch: FakeOpenSearch = field(default_factory=FakeOpenSearch)
    dlq: FakeDeadLetterQueue = field(default_factory=FakeDeadLetterQueue)
    geometry: FakeGeometryStore = field(default_factory=FakeGeometryStore)
    clock: float = 1_764_531_060.0
    sleeps: list[float] = field(default_factory=list)

    def ports(self) -> Ports:
        return Ports(
            bulk=self.opensearch,
            fetch_geometry=self.geometry,
            dead_letter=self.dlq,
            now=lambda: self.clock,
            sleep=self.sleeps.append,
            jitter=lambda: 0.5,
        )


def deployed(monkeypatch: Any, harness: Harness, **overrides: str) -> None:
    """The handler as deployed: ENV (with `overrides`) in the environment, the harness's ports."""
    from stream_sync import aws, handler

    for key, value in {**ENV, **overrides}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(aws, "build_ports", lambda _settings: harness.ports())
    handler.reset()


def always(seconds: float) -> Callable[[], float]:
    return lambda: seconds


def run(
    harness: Harness, records: list[dict[str, Any]], remaining: Any = 60.0, **overrides: Any
) -> BatchResult:
    """One invocation's batch: `remaining` is the seconds left, or a clock answering them."""
    clock = remaining if callable(remaining) else always(remaining)
    return process_batch(
        records, settings=settings(**overrides), ports=harness.ports(), remaining_seconds=clock
    )


def fates(result: BatchResult) -> list[str]:
    return [o.fate.value for o in result.outcomes]  # type: ignore[union-attr]


def name(value: str) -> dict[str, Any]:
    return {"name": {"S": value}}


def redelivery(pending: list[dict[str, Any]], failures: list[dict[str, str]]) -> list[dict[str, Any]]:
    """What Lambda redelivers after a partial batch response: the batch from the reported record onward."""
    (failure,) = failures
    seqs = [r["dynamodb"]["SequenceNumber"] for r in pending]
    return pending[seqs.index(failure["itemIdentifier"]) :]
