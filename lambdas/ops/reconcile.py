"""Compare a schema's items in DynamoDB with the documents in its write index, and optionally repair them.

Differences, per document id `<pk>#<sk>`:
- missing: the item exists but the index has no document for it, or only a tombstone;
- stale: the index's live document differs from the document the sync would build from the item;
- deleted: the index has a live document for an item that no longer exists.

The platform's own items (the heartbeat and the smoke run's canaries, refdata.reserved) are left out: they
change every minute or are written and deleted within seconds, so in flight they would always look like drift.

The run has two kinds of parts, all independent: **table parts** (scan segments or export files) read items and
fetch their documents by id (`_mget`): missing and stale; **index slices** page the live documents of a point in
time (`slice` i of n) and look their items up (`BatchGetItem`, consistent): deleted. Memory stays one page per
part, whatever the table's size.

Each slice opens its own point in time when it reads its first page, not at prepare: in an export-sourced run the
slices start only after the export and every export file, hours later, and a point in time opened at prepare would
have expired by then. The point in time travels in the slice's cursor (with the `search_after` of its last page),
each page renews its keep-alive, and a slice that finds it gone (idle over its keep-alive, a node restart, a
blue/green deployment) opens another and goes on after the same (`pk`, `sk`): the pages are sorted on the
documents' own keys, so no page is skipped or repeated.

Reading order matters for the repair. The item is read first, then its document; before each repair the item is
read again (GetItem, ConsistentRead) *after* its document was read. A change still in flight through the
stream shows up as a difference; the re-read sees it, and either the document already agrees (nothing to do)
or the repair writes the item's current state with `repair_seq` of the sequence number the document had when
it was read. That current state is at least as new as the change that produced the stored document, and
every later change has a larger 40-digit sequence number, which sorts after `<stored>r`: the stream's newer
changes still win (see `ops.writes`).

Offloaded geometry is compared by URL: geometry objects are content-addressed
(`geometries/<sha256>.geojson`), so the same URL means the same geometry; the document must carry one.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from refdata.keys import document_id, parse_document_id
from refdata.reserved import is_reserved
from search.documents import (
    GEOMETRY_ATTRIBUTE,
    GEOMETRY_URL_ATTRIBUTE,
    RecordError,
    encode_json,
    engine_document,
    item_document,
)
from search.indices import read_alias_filter
from stream_sync.redrive import item_reader
from stream_sync.sync import Fate, Ports

from ops.index import Hit, OpsError, PointInTimeGone, TransientFailure
from ops.reindex import indexable
from ops.runs import Merged, PartState, Run
from ops.sources import choose_source, table_pages
from ops.table import Item, TablePage, keys_of
from ops.workflow import DONE, FAILED, WORK_LEFT, Env
from ops.writes import APPLIED, BACKFILL_SEQ, UNCHANGED, Write, apply_writes, repair_seq

Kind = Literal["missing", "stale", "deleted"]
KINDS: Final[tuple[Kind, ...]] = ("missing", "stale", "deleted")
# A point in time's keep-alive, renewed by every page read through it; a slice idle longer opens another.
POINT_IN_TIME_KEEP_ALIVE: Final = "1h"
BATCH_GET_KEYS: Final = 100  # BatchGetItem's limit per request
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
class Difference:
    kind: Kind
    doc_id: str
    keys: Item
    stored_seq: str | None  # the document's stream_seq as read; None when there is none (or no document)
    stored_digest: str | None  # the live document's digest; None for no document or a tombstone


def _stored_seq(source: Mapping[str, Any]) -> str | None:
    seq = source.get("stream_seq")
    return seq if isinstance(seq, str) else None


def table_differences(
    items: Sequence[Item], documents: Mapping[str, Mapping[str, Any] | None], schema: str
) -> list[Difference]:
    """Missing and stale documents of `items` (read first), given their documents by id (read afterwards)."""
    found: list[Difference] = []
    for item in items:
        if is_reserved(item["pk"]["S"]):
            continue  # the heartbeat and smoke canaries change all the time: never drift (refdata.reserved)
        doc_id = document_id(item["pk"]["S"], item["sk"]["S"])
        source = documents.get(doc_id)
        if source is None or source.get("tombstone") is True:
            seq = None if source is None else _stored_seq(source)
            found.append(Difference("missing", doc_id, keys_of(item), seq, None))
            continue
        digest = stored_digest(source)
        if digest != item_digest(item, schema):
            found.append(Difference("stale", doc_id, keys_of(item), _stored_seq(source), digest))
    return found


def index_differences(hits: Sequence[Hit], existing: set[str]) -> list[Difference]:
    """Live documents (`hits`, read first) whose item is not among `existing` (looked up afterwards)."""
    found: list[Difference] = []
    for hit in hits:
        if hit.doc_id in existing or hit.source.get("tombstone") is True:
            continue
        pk, sk = parse_document_id(hit.doc_id)
        if is_reserved(pk):
            continue
        keys = {"pk": {"S": pk}, "sk": {"S": sk}}
        found.append(
            Difference("deleted", hit.doc_id, keys, _stored_seq(hit.source), stored_digest(hit.source))
        )
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


def existing_items(dynamodb: Any, table: str, keys: Sequence[Item]) -> set[str]:
    """Document ids of the `keys` whose item exists now (BatchGetItem, strongly consistent, only the keys read;
    unprocessed keys are asked again, and still unprocessed after that are a transient failure)."""
    found: set[str] = set()
    for start in range(0, len(keys), BATCH_GET_KEYS):
        pending: list[Item] = list(keys[start : start + BATCH_GET_KEYS])
        for _attempt in range(5):
            answer = dynamodb.batch_get_item(
                RequestItems={
                    table: {"Keys": pending, "ConsistentRead": True, "ProjectionExpression": "pk, sk"}
                }
            )
            found.update(document_id(i["pk"]["S"], i["sk"]["S"]) for i in answer["Responses"].get(table, []))
            pending = answer.get("UnprocessedKeys", {}).get(table, {}).get("Keys", [])
            if not pending:
                break
        else:
            raise TransientFailure(f"{len(pending)} keys still unprocessed by BatchGetItem (throttled)")
    return found


class Reconcile:
    name = "reconcile"

    def prepare(self, env: Env, run: Run, request: Mapping[str, Any]) -> dict[str, Any]:
        schema = indexable(str(request.get("schema")))
        index = env.client.alias_state(schema).write_index
        if index is None:
            raise OpsError(f"the write alias of {schema!r} names no write index")
        # Every write acknowledged before the run is compared: a search (and so the point in time each slice opens)
        # sees a write only after a refresh, which the engine makes on its own only a second or more later. Without
        # it, a check run right after a `--fix` reports the repairs it has not yet seen as differences.
        env.client.refresh(index)
        table = choose_source(env, schema, str(request.get("source", "auto")))
        slices = [{"kind": "slice", "number": n, "of": env.segments} for n in range(env.segments)]
        record: dict[str, Any] = {
            "operation": self.name,
            "runId": run.run_id,
            "schema": schema,
            "index": index,
            "fix": bool(request.get("fix", False)) and not bool(request.get("dryRun", False)),
            "startedAt": env.now(),
        }
        record |= {key: value for key, value in table.items() if key != "tableParts"}
        record["parts"] = [*table["tableParts"], *slices]
        run.save_record(record)
        return record

    def pages(self, env: Env, run: dict[str, Any], state: PartState) -> Iterator[tuple[Any, Any]]:
        if state.part["kind"] != "slice":
            for page in table_pages(env, run, state.part, state.cursor):
                yield page, page.cursor
            return
        cursor = dict(state.cursor or {})
        pit, after = cursor.get("pit"), cursor.get("after")
        while True:
            fresh = pit is None
            if pit is None:
                pit = env.client.open_point_in_time(run["index"], POINT_IN_TIME_KEEP_ALIVE)
            try:
                hits = env.client.point_in_time_page(
                    pit,
                    keep_alive=POINT_IN_TIME_KEEP_ALIVE,
                    query=read_alias_filter(),
                    after=after,
                    part=int(state.part["number"]),
                    parts=int(state.part["of"]),
                )
            except PointInTimeGone:
                if fresh:
                    raise
                pit = None  # expired or lost with its node: a new one, read after the same keys
                continue
            if not hits:
                with contextlib.suppress(OpsError):  # it expires by itself after its keep-alive anyway
                    env.client.close_point_in_time(pit)
                return
            after = list(hits[-1].sort or [])
            yield hits, {"pit": pit, "after": after}

    def process(
        self, env: Env, run: dict[str, Any], state: PartState, page: TablePage | list[Hit], ports: Ports
    ) -> None:
        schema, index = run["schema"], run["index"]
        if isinstance(page, TablePage):
            documents = env.client.get_documents(
                index, [document_id(i["pk"]["S"], i["sk"]["S"]) for i in page.items]
            )
            found = table_differences(page.items, documents, schema)
            state.items += page.read
            state.matched += len(page.items)
        else:
            keys = [
                {"pk": {"S": pk}, "sk": {"S": sk}} for pk, sk in (parse_document_id(h.doc_id) for h in page)
            ]
            found = index_differences(page, existing_items(env.dynamodb, env.table_for(schema), keys))
            state.items += len(page)
        fixes = self._fix(env, schema, found, ports) if run["fix"] else []
        for difference in found:
            state.counts[f"differences:{difference.kind}"] += 1
            state.list(difference.kind, [difference.doc_id])
        for outcome, failure in fixes:
            state.counts[f"fix:{outcome}"] += 1
            if failure is not None:
                state.fail(failure)

    @staticmethod
    def _fix(
        env: Env, schema: str, found: Sequence[Difference], ports: Ports
    ) -> list[tuple[str, dict[str, Any] | None]]:
        """Each difference's fix outcome: repaired, consistent-on-reread, superseded (a newer change reached the
        document first and stands), rejected, unfixable; a write still failing transiently fails the page."""
        read = item_reader(env.dynamodb, env.tables)

        def get_item(keys: Item) -> Item | None:
            return read(keys, None)  # no stream: the table that holds the schema

        outcomes: list[tuple[str, dict[str, Any] | None]] = []
        writes: list[Write] = []
        for difference in found:
            try:
                write = plan_fix(difference, get_item(difference.keys), schema)
            except ValueError as error:
                failure: dict[str, Any] = {
                    "documentId": difference.doc_id,
                    "fate": "unfixable",
                    "reason": str(error),
                }
                outcomes.append(("unfixable", failure))
                continue
            if write is None:
                outcomes.append(("consistent-on-reread", None))
            else:
                writes.append(write)
        results = apply_writes(writes, settings=env.settings, ports=ports)
        retry = [result for result in results if result.fate is Fate.RETRY]
        if retry:
            raise TransientFailure(f"{len(retry)} repairs still failing after retries: {retry[0].reason}")
        for result in results:
            if result.fate in APPLIED:
                outcomes.append(("repaired", None))
            elif result.fate in UNCHANGED:
                outcomes.append(("superseded", None))
            else:
                refused: dict[str, Any] = {
                    "documentId": result.doc_id,
                    "fate": result.fate.value,
                    "reason": result.reason,
                }
                outcomes.append((result.fate.value, refused))
        return outcomes

    def finish(self, env: Env, run: dict[str, Any], merged: Merged, error: str | None) -> dict[str, Any]:
        differences = {kind: merged.counts.get(f"differences:{kind}", 0) for kind in KINDS}
        found = any(differences.values())
        clean = not found or (bool(run.get("fix")) and merged.failure_count == 0)
        summary: dict[str, Any] = {
            "command": self.name,
            "schema": run.get("schema"),
            "index": run.get("index"),
            "source": run.get("source"),
            "tableItems": merged.matched,
            "differences": differences,
            "documentIds": {kind: merged.listed.get(kind, []) for kind in KINDS},
            "fix": merged.section("fix") if run.get("fix") else None,
            "fixFailures": merged.failures,
            "clean": clean and merged.finished and not error,
            "errors": merged.errors,
            "truncated": [
                f"documentIds.{kind}: {len(merged.listed.get(kind, []))} of {count} listed (MAX_LISTED)"
                for kind, count in differences.items()
                if count > len(merged.listed.get(kind, []))
            ],
        }
        if error or "index" not in run:
            return summary | {"status": FAILED}
        return summary | {"status": DONE if summary["clean"] else WORK_LEFT}
