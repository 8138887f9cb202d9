"""Where a run keeps its state: the run record, one state per part (its cursor and counts), and the summary.

A deployed run keeps them in the ops bucket (`S3RunStore`), so a step retried by the workflow, a resumed run
and the laptop CLI showing progress all read the same place:

    runs/<operation>/<run id>/run.json          what prepare decided (source, parts, totals, ...)
    runs/<operation>/<run id>/parts/<part>.json  each part's cursor, counts, listed ids, failures, done
    runs/<operation>/<run id>/summary.json       what finish concluded
    exports/<operation>/<run id>/...             the DynamoDB export of an export-sourced run
    runs/<operation>/_maps/<map>/<map run id>/   a workflow's distributed map results (Step Functions writes them)

`--local` runs keep the same records in memory (`MemoryRunStore`).
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from botocore.exceptions import ClientError

from ops.index import OpsError

MAX_LISTED = 100  # document ids listed per kind, failures listed per run: counts are always complete
RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,79}$")


def run_prefix(operation: str, run_id: str) -> str:
    return f"runs/{operation}/{run_id}/"


def export_prefix(operation: str, run_id: str) -> str:
    return f"exports/{operation}/{run_id}"


def check_run_id(run_id: str) -> str:
    """Run ids name S3 prefixes, executions and export client tokens: 1-80 of A-Z a-z 0-9 _ -."""
    if not RUN_ID.fullmatch(run_id):
        raise ValueError(
            f"run id {run_id!r:.90} must be 1-80 of A-Z a-z 0-9 _ - (starting with a letter or digit)"
        )
    return run_id


class RunStore(Protocol):
    def read(self, key: str) -> dict[str, Any] | None: ...

    def write(self, key: str, value: Mapping[str, Any]) -> None: ...

    def keys(self, prefix: str) -> list[str]: ...


class MemoryRunStore:
    """The records of a `--local` run (and of tests)."""

    def __init__(self) -> None:
        self._objects: dict[str, str] = {}
        self._lock = threading.Lock()

    def read(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            text = self._objects.get(key)
        return None if text is None else dict(json.loads(text))

    def write(self, key: str, value: Mapping[str, Any]) -> None:
        text = json.dumps(value, default=str)
        with self._lock:
            self._objects[key] = text

    def keys(self, prefix: str) -> list[str]:
        with self._lock:
            return sorted(key for key in self._objects if key.startswith(prefix))


class S3RunStore:
    """The records of a deployed run, in the ops bucket (KMS-encrypted with the bucket's default key)."""

    def __init__(self, s3: Any, bucket: str) -> None:
        self._s3 = s3
        self.bucket = bucket

    def read(self, key: str) -> dict[str, Any] | None:
        """The record at `key`, None when there is none. S3 answers a missing key with 404 `NoSuchKey` only to a
        caller that may list the bucket (`s3:ListBucket`, unconditioned: a GetObject carries no `s3:prefix`);
        to any other it answers 403, which is an error here, never "missing": a run must not prepare again
        because it may not read its record."""
        try:
            body = self._s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except self._s3.exceptions.NoSuchKey:
            return None
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in ("AccessDenied", "403"):
                raise OpsError(
                    f"s3://{self.bucket}/{key}: access denied. The role needs s3:GetObject on the key and "
                    "s3:ListBucket on the bucket without an s3:prefix condition (without it S3 answers 403 for a "
                    "key that does not exist yet)"
                ) from error
            raise
        return dict(json.loads(body))

    def write(self, key: str, value: Mapping[str, Any]) -> None:
        body = json.dumps(value, default=str, separators=(",", ":")).encode()
        self._s3.put_object(Bucket=self.bucket, Key=key, Body=body, ContentType="application/json")

    def keys(self, prefix: str) -> list[str]:
        found: list[str] = []
        for page in self._s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            found.extend(entry["Key"] for entry in page.get("Contents", []))
        return sorted(found)


@dataclass
class PartState:
    """One part's progress: where to resume (`cursor`), what happened so far, whether it is finished."""

    part: dict[str, Any]
    cursor: Any = None
    done: bool = False
    items: int = 0  # items (documents, messages) looked at: what progress counts
    matched: int = 0  # of those, the ones the run is about (the schema's items, the tombstones found, ...)
    counts: Counter[str] = field(default_factory=Counter)
    listed: dict[str, list[str]] = field(default_factory=dict)
    failures: list[dict[str, Any]] = field(default_factory=list)
    failure_count: int = 0
    error: str | None = None  # why the part stopped unfinished (a --local run; a workflow retries instead)
    # The operation waits for something outside (the smoke run, for a new event source mapping): this invocation
    # ends, the workflow waits, then invokes the part again from the cursor the operation set. Not saved.
    paused: bool = False

    def list(self, kind: str, ids: Iterable[str]) -> None:
        listed = self.listed.setdefault(kind, [])
        listed.extend(list(ids)[: max(MAX_LISTED - len(listed), 0)])

    def fail(self, failure: dict[str, Any]) -> None:
        self.failure_count += 1
        if len(self.failures) < MAX_LISTED:
            self.failures.append(failure)

    def to_json(self) -> dict[str, Any]:
        return {
            "part": self.part,
            "cursor": self.cursor,
            "done": self.done,
            "items": self.items,
            "matched": self.matched,
            "counts": dict(self.counts),
            "listed": self.listed,
            "failures": self.failures,
            "failureCount": self.failure_count,
            "error": self.error,
        }

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> PartState:
        return cls(
            part=dict(value["part"]),
            cursor=value.get("cursor"),
            done=bool(value.get("done")),
            items=int(value.get("items", 0)),
            matched=int(value.get("matched", 0)),
            counts=Counter(value.get("counts") or {}),
            listed={kind: list(ids) for kind, ids in (value.get("listed") or {}).items()},
            failures=list(value.get("failures") or []),
            failure_count=int(value.get("failureCount", 0)),
            error=value.get("error"),
        )


@dataclass
class Merged:
    """Every part of a run added up, for finish and for progress."""

    parts: int = 0
    done: int = 0
    items: int = 0
    matched: int = 0
    counts: Counter[str] = field(default_factory=Counter)
    listed: dict[str, list[str]] = field(default_factory=dict)
    failures: list[dict[str, Any]] = field(default_factory=list)
    failure_count: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.done == self.parts and not self.errors

    def section(self, name: str) -> dict[str, int]:
        """The counts filed under `<name>:` (an operation keeps several tallies in one counter)."""
        return {
            key.split(":", 1)[1]: value for key, value in self.counts.items() if key.startswith(f"{name}:")
        }


def merge(states: Iterable[PartState]) -> Merged:
    merged = Merged()
    for state in states:
        merged.parts += 1
        merged.done += state.done
        merged.items += state.items
        merged.matched += state.matched
        merged.counts.update(state.counts)
        for kind, ids in state.listed.items():
            merged.listed.setdefault(kind, []).extend(ids)
        merged.failures.extend(state.failures)
        merged.failure_count += state.failure_count
        if state.error:
            merged.errors.append(f"{part_id(state.part)}: {state.error}")
    merged.listed = {kind: sorted(ids)[:MAX_LISTED] for kind, ids in merged.listed.items()}
    merged.failures = sorted(merged.failures, key=lambda failure: str(failure.get("documentId", "")))
    merged.failures = merged.failures[:MAX_LISTED]
    return merged


def part_id(part: Mapping[str, Any]) -> str:
    """A part's stable name: `segment-0003`, `slice-2`, `file-<data file name>`, `index-geozone-v2`, ..."""
    kind = part["kind"]
    if kind == "file":
        return f"file-{str(part['key']).rsplit('/', 1)[-1].split('.', 1)[0]}"
    if kind in ("segment", "slice", "consumer"):
        return f"{kind}-{int(part['number']):04d}"
    return f"{kind}-{part['name']}"


class Run:
    """One run's records in a store."""

    def __init__(self, store: RunStore, operation: str, run_id: str) -> None:
        self.store = store
        self.operation = operation
        self.run_id = check_run_id(run_id)
        self.prefix = run_prefix(operation, run_id)

    def record(self) -> dict[str, Any] | None:
        return self.store.read(f"{self.prefix}run.json")

    def save_record(self, record: Mapping[str, Any]) -> None:
        self.store.write(f"{self.prefix}run.json", record)

    def part(self, part: Mapping[str, Any]) -> PartState:
        found = self.store.read(self._part_key(part))
        return PartState.from_json(found) if found is not None else PartState(dict(part))

    def save_part(self, state: PartState) -> None:
        self.store.write(self._part_key(state.part), state.to_json())

    def parts(self) -> list[PartState]:
        return [
            PartState.from_json(value)
            for key in self.store.keys(f"{self.prefix}parts/")
            if (value := self.store.read(key)) is not None
        ]

    def summary(self) -> dict[str, Any] | None:
        return self.store.read(f"{self.prefix}summary.json")

    def save_summary(self, summary: Mapping[str, Any]) -> None:
        self.store.write(f"{self.prefix}summary.json", summary)

    def _part_key(self, part: Mapping[str, Any]) -> str:
        return f"{self.prefix}parts/{part_id(part)}.json"
