"""The mapping-change flow of docs/operations.md for one schema, resumable from any step.

1. The deployment created `<schema>-v<N>` (the newest version) without aliases.
2. Move the write alias to it, atomically, so the stream sync writes every change there from now on.
3. Backfill every item of the schema from a consistent scan, with sequence number forty zeros: a stream
   change (always greater) wins whichever lands first, and documents already there are left alone.
4. Swap the read alias, with the tombstone filter, atomically to the new version.

Each run reads the alias state and does only what is left, so a rerun after a crash at any step finishes
the flow, and a rerun after it finished changes nothing. The old version is never deleted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from stream_sync.config import Settings
from stream_sync.sync import Fate, Ports

from ops.index import (
    AliasState,
    IndexClient,
    OpsError,
    move_write_alias,
    read_alias_done,
    swap_read_alias,
    write_alias_done,
)
from ops.table import Item, keys_of
from ops.writes import APPLIED, UNCHANGED, Write, apply_writes

MAX_LISTED = 100


@dataclass
class ReindexReport:
    schema: str
    target: str
    dry_run: bool = False
    write_alias_moved: list[dict[str, Any]] = field(default_factory=list)
    read_alias_swapped: list[dict[str, Any]] = field(default_factory=list)
    planned: list[str] = field(default_factory=list)
    backfill: Counter[str] = field(default_factory=Counter)
    failed: list[dict[str, str | None]] = field(default_factory=list)
    table_items: int | None = None
    index_live_documents: int | None = None
    complete: bool = False

    def summary(self) -> dict[str, Any]:
        return {
            "command": "reindex",
            "schema": self.schema,
            "target": self.target,
            "dryRun": self.dry_run,
            "complete": self.complete,
            "planned": self.planned,
            "writeAliasActions": self.write_alias_moved,
            "readAliasActions": self.read_alias_swapped,
            "backfill": dict(self.backfill),
            "failed": self.failed[:MAX_LISTED],
            "failedCount": len(self.failed),
            "tableItems": self.table_items,
            "indexLiveDocuments": self.index_live_documents,
        }


def _apply_alias_actions(
    client: IndexClient, schema: str, actions: list[dict[str, Any]], done: Callable[[AliasState], bool]
) -> None:
    """Post one atomic alias change; if it fails, accept it only when the state shows it happened anyway
    (a retried request whose first attempt applied answers 404 for its `remove`)."""
    try:
        client.update_aliases(actions)
    except OpsError:
        if not done(client.alias_state(schema)):
            raise


def reindex(
    schema: str,
    *,
    client: IndexClient,
    scan: Callable[[], Iterable[list[Item]]],
    settings: Settings,
    ports: Ports,
    dry_run: bool = False,
    max_rejected: int = 0,
) -> ReindexReport:
    state = client.alias_state(schema)
    target = state.newest
    report = ReindexReport(schema, target, dry_run=dry_run)
    if write_alias_done(state, target) and read_alias_done(state, target):
        report.complete = True
        return report

    write_actions = move_write_alias(state, target)
    read_actions = swap_read_alias(state, target)
    report.planned = [
        *(["move write alias"] if write_actions else []),
        "backfill from DynamoDB",
        "swap read alias",
    ]
    if dry_run:
        report.write_alias_moved, report.read_alias_swapped = write_actions, read_actions
        return report

    if write_actions:
        _apply_alias_actions(client, schema, write_actions, lambda s: write_alias_done(s, target))
        report.write_alias_moved = write_actions

    items = 0
    for page in scan():
        items += len(page)
        results = apply_writes([Write(keys_of(item), item) for item in page], settings=settings, ports=ports)
        for result in results:
            report.backfill[result.fate.value] += 1
            if result.fate not in APPLIED | UNCHANGED:
                report.failed.append(
                    {"documentId": result.doc_id, "fate": result.fate.value, "reason": result.reason}
                )
    report.table_items = items
    report.index_live_documents = client.live_count(target)

    transient = [f for f in report.failed if f["fate"] != Fate.REJECTED.value]
    if transient or len(report.failed) > max_rejected:
        return report  # the read alias stays where it is; a rerun retries the backfill

    # Recomputed: the state may have changed while the backfill ran (another operator, a manual rollback).
    state = client.alias_state(schema)
    if not write_alias_done(state, target):
        raise OpsError(f"the write alias left {target} during the backfill; the read alias was not moved")
    read_actions = swap_read_alias(state, target)
    if read_actions:
        _apply_alias_actions(client, schema, read_actions, lambda s: read_alias_done(s, target))
    report.read_alias_swapped = read_actions
    report.complete = True
    return report
