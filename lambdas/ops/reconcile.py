"""Compare a schema's items in DynamoDB with the documents in its write index, and optionally repair them.

Differences, per document id `<pk>#<sk>`:
- missing: the item exists but the index has no document for it, or only a tombstone;
- stale: the index's live document differs from the document the sync would build from the item;
- deleted: the index has a live document for an item that no longer exists.

Reading order matters for the repair. DynamoDB is scanned first, then the index is paged; before each
repair the item is read again (GetItem, ConsistentRead) *after* its document was read. A change still
in flight through the stream shows up as a difference; the re-read sees it, and either the document
already agrees (nothing to do) or the repair writes the item's current state with `repair_seq` of the
sequence number the document had when it was read. That current state is at least as new as the change
that produced the stored document, and every later change has a larger 40-digit sequence number, which
sorts after `<stored>r`: the stream's newer changes still win (see `ops.writes`).

Offloaded geometry is compared by URL: geometry objects are content-addressed
(`geometries/<sha256>.geojson`), so the same URL means the same geometry; the document must carry one.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from datamodel.keys import document_id, parse_document_id
from search.documents import (
    GEOMETRY_ATTRIBUTE,
    GEOMETRY_URL_ATTRIBUTE,
    RecordError,
    encode_json,
    engine_document,
    item_document,
)
from stream_sync.config import Settings
from stream_sync.sync import Ports

from ops.index import Hit, IndexClient, OpsError
from ops.table import Item, keys_of
from ops.writes import APPLIED, BACKFILL_SEQ, UNCHANGED, Write, apply_writes, repair_seq

Kind = Literal["missing", "stale", "deleted"]
KINDS: Final[tuple[Kind, ...]] = ("missing", "stale", "deleted")
MAX_LISTED = 100
FIX_BATCH = 500
_ORDERING_FIELDS: Final = frozenset({"stream_seq", "tombstone"})
_DEREFERENCED: Final = "<geometry dereferenced from geometryUrl>"


def _by_value(value: Any) -> Any:
    """Numbers by value (`3` and `3.0` are one number, `1.0E-5` and `1e-05` one double), marked apart from strings."""
    if value is None or value is True or value is False or isinstance(value, str):
        return value
    if isinstance(value, int):
        return {"$number": str(value)}
    if isinstance(value, float):
        return {"$number": str(int(value)) if value.is_integer() else repr(value)}
    if isinstance(value, dict):
        return {key: _by_value(member) for key, member in value.items()}
    return [_by_value(member) for member in value]


def document_digest(doc: Mapping[str, Any]) -> str:
    """SHA-256 of a document's content as the engine holds it (integers exact, fractions as doubles, exact
    decimals in `exactNumbers`), independent of key order and of how a number was written."""
    plain = _by_value(json.loads(encode_json(doc)))
    canonical = json.dumps(plain, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def item_digest(item: Item, schema: str) -> str:
    """Digest of the document the stream sync builds from `item` (DynamoDB JSON), as the engine holds it."""
    try:
        doc = engine_document(item_document(item, schema))
    except RecordError as error:
        return f"unindexable: {error}"
    if doc.get(GEOMETRY_URL_ATTRIBUTE) is not None:
        doc[GEOMETRY_ATTRIBUTE] = _DEREFERENCED
    return document_digest(doc)


def stored_digest(source: Mapping[str, Any]) -> str:
    """Digest of an indexed live document's content (its ordering fields left out)."""
    doc = {name: value for name, value in source.items() if name not in _ORDERING_FIELDS}
    if doc.get(GEOMETRY_URL_ATTRIBUTE) is not None and GEOMETRY_ATTRIBUTE in doc:
        doc[GEOMETRY_ATTRIBUTE] = _DEREFERENCED
    return document_digest(doc)


@dataclass(frozen=True)
class Expected:
    keys: Item
    digest: str


@dataclass(frozen=True)
class Difference:
    kind: Kind
    doc_id: str
    keys: Item
    stored_seq: str | None  # the document's stream_seq as read; None when there is none (or no document)
    stored_digest: str | None  # the live document's digest; None for no document or a tombstone


def expected_documents(pages: Iterable[list[Item]], schema: str) -> dict[str, Expected]:
    return {
        document_id(item["pk"]["S"], item["sk"]["S"]): Expected(keys_of(item), item_digest(item, schema))
        for page in pages
        for item in page
    }


def differences(expected: Mapping[str, Expected], hits: Iterable[Hit]) -> list[Difference]:
    """Every difference between the items (`expected`) and the documents (`hits`, read afterwards)."""
    unseen = dict(expected)
    found: list[Difference] = []
    for hit in hits:
        seq = hit.source.get("stream_seq")
        seq = seq if isinstance(seq, str) else None
        live = hit.source.get("tombstone") is not True
        entry = unseen.pop(hit.doc_id, None)
        if entry is None:
            if live:
                pk, sk = parse_document_id(hit.doc_id)
                keys = {"pk": {"S": pk}, "sk": {"S": sk}}
                found.append(Difference("deleted", hit.doc_id, keys, seq, stored_digest(hit.source)))
        elif not live:
            found.append(Difference("missing", hit.doc_id, entry.keys, seq, None))
        else:
            digest = stored_digest(hit.source)
            if digest != entry.digest:
                found.append(Difference("stale", hit.doc_id, entry.keys, seq, digest))
    found.extend(Difference("missing", doc_id, entry.keys, None, None) for doc_id, entry in unseen.items())
    return found


def plan_fix(difference: Difference, fresh: Item | None, schema: str) -> Write | None:
    """The write that repairs `difference` given the item as re-read now (None: nothing to repair).

    Raises ValueError when the stored `stream_seq` is not one this platform writes (no safe sequence number).
    """
    if fresh is None:
        if difference.stored_digest is None:
            return None  # no item and no live document: consistent (the item went away meanwhile)
        seq = BACKFILL_SEQ if difference.stored_seq is None else repair_seq(difference.stored_seq)
        return Write(difference.keys, None, seq)
    if difference.stored_digest is not None and item_digest(fresh, schema) == difference.stored_digest:
        return None  # the change that was in flight has landed: the document agrees with the item now
    if difference.stored_seq is None:
        return Write(difference.keys, fresh, BACKFILL_SEQ)  # no document (or no ordering field): any seq wins
    return Write(difference.keys, fresh, repair_seq(difference.stored_seq))


@dataclass
class ReconcileReport:
    schema: str
    index: str
    table_items: int = 0
    found: list[Difference] = field(default_factory=list)
    fixed: Counter[str] = field(default_factory=Counter)
    failures: list[dict[str, str | None]] = field(default_factory=list)
    fix_requested: bool = False

    @property
    def clean(self) -> bool:
        if not self.found:
            return True
        return self.fix_requested and not self.failures

    def summary(self) -> dict[str, Any]:
        by_kind = {kind: [d.doc_id for d in self.found if d.kind == kind] for kind in KINDS}
        return {
            "command": "reconcile",
            "schema": self.schema,
            "index": self.index,
            "tableItems": self.table_items,
            "differences": {kind: len(ids) for kind, ids in by_kind.items()},
            "documentIds": {kind: ids[:MAX_LISTED] for kind, ids in by_kind.items()},
            "fix": dict(self.fixed) if self.fix_requested else None,
            "fixFailures": self.failures[:MAX_LISTED],
            "clean": self.clean,
        }


def reconcile(
    schema: str,
    *,
    client: IndexClient,
    scan: Callable[[], Iterable[list[Item]]],
    get_item: Callable[[Item], Item | None],
    settings: Settings,
    ports: Ports,
    fix: bool = False,
) -> ReconcileReport:
    index = client.alias_state(schema).write_index
    if index is None:
        raise OpsError(f"the write alias of {schema!r} names no write index")
    expected = expected_documents(scan(), schema)  # DynamoDB first, then the index: see the module doc
    report = ReconcileReport(schema, index, table_items=len(expected), fix_requested=fix)
    report.found = differences(expected, client.documents(index))
    if fix:
        for start in range(0, len(report.found), FIX_BATCH):
            _fix(report, report.found[start : start + FIX_BATCH], get_item, settings, ports)
    return report


def _fix(
    report: ReconcileReport,
    batch: list[Difference],
    get_item: Callable[[Item], Item | None],
    settings: Settings,
    ports: Ports,
) -> None:
    writes: list[Write] = []
    for difference in batch:
        try:
            write = plan_fix(difference, get_item(difference.keys), report.schema)
        except ValueError as error:
            report.fixed["unfixable"] += 1
            report.failures.append(
                {"documentId": difference.doc_id, "fate": "unfixable", "reason": str(error)}
            )
            continue
        if write is None:
            report.fixed["consistent-on-reread"] += 1
        else:
            writes.append(write)
    for result in apply_writes(writes, settings=settings, ports=ports):
        if result.fate in APPLIED:
            report.fixed["repaired"] += 1
        elif result.fate in UNCHANGED:
            report.fixed["superseded"] += 1  # a newer change reached the document first: it stands
        else:
            report.fixed[result.fate.value] += 1
            report.failures.append(
                {"documentId": result.doc_id, "fate": result.fate.value, "reason": result.reason}
            )
