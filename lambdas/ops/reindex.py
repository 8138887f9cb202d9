"""The mapping-change flow of docs/operations.md for one schema, resumable from any step.

1. The deployment created `<schema>-v<N>` (the newest version) without aliases.
2. prepare: move the write alias to it, atomically, so the stream sync writes every change there from now on.
3. parts: backfill every item of the schema from a consistent scan (or an export taken after step 2), with
   sequence number forty zeros: a stream change (always greater) wins whichever lands first, and documents
   already there are left alone.
4. finish: swap the read alias, with the tombstone filter, atomically to the new version.

Each run reads the alias state and does only what is left, so a rerun after a crash at any step finishes
the flow, and a rerun after it finished changes nothing. The old version is never deleted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from refdata.registry import REGISTRY
from stream_sync.sync import Fate, Ports

from ops.index import (
    AliasState,
    IndexClient,
    OpsError,
    TransientFailure,
    move_write_alias,
    read_alias_done,
    swap_read_alias,
    write_alias_done,
)
from ops.runs import Merged, PartState, Run
from ops.sources import choose_source, table_pages
from ops.table import TablePage, keys_of
from ops.workflow import DONE, FAILED, WORK_LEFT, Env
from ops.writes import APPLIED, UNCHANGED, Write, apply_writes


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


def indexable(name: str) -> str:
    schema = REGISTRY.get(name)
    if schema is None or not schema.indexable:
        raise OpsError(f"{name!r} is not an indexable schema (known: {', '.join(sorted(REGISTRY))})")
    return schema.name


class Reindex:
    name = "reindex"

    def prepare(self, env: Env, run: Run, request: Mapping[str, Any]) -> dict[str, Any]:
        schema = indexable(str(request.get("schema")))
        state = env.client.alias_state(schema)
        target = state.newest
        record: dict[str, Any] = {
            "operation": self.name,
            "runId": run.run_id,
            "schema": schema,
            "target": target,
            "dryRun": bool(request.get("dryRun", False)),
            "maxRejected": int(request.get("maxRejected", 0)),
            "startedAt": env.now(),
            "source": "none",
            "parts": [],
            "planned": [],
            "writeAliasActions": [],
            "readAliasActions": [],
        }
        if write_alias_done(state, target) and read_alias_done(state, target):
            record["alreadyComplete"] = True
            run.save_record(record)
            return record
        write_actions = move_write_alias(state, target)
        record["planned"] = [
            *(["move write alias"] if write_actions else []),
            "backfill from DynamoDB",
            "swap read alias",
        ]
        if record["dryRun"]:
            record["writeAliasActions"] = write_actions
            record["readAliasActions"] = swap_read_alias(state, target)
            run.save_record(record)
            return record
        if write_actions:
            _apply_alias_actions(env.client, schema, write_actions, lambda s: write_alias_done(s, target))
            record["writeAliasActions"] = write_actions
        # Read after the write alias moved: every change before this point is in what is read.
        table = choose_source(env, schema, str(request.get("source", "auto")))
        record |= {key: value for key, value in table.items() if key != "tableParts"}
        record["parts"] = table["tableParts"]
        run.save_record(record)
        return record

    def pages(self, env: Env, run: dict[str, Any], state: PartState) -> Iterator[tuple[Any, Any]]:
        for page in table_pages(env, run, state.part, state.cursor):
            yield page, page.cursor

    def process(self, env: Env, run: dict[str, Any], state: PartState, page: TablePage, ports: Ports) -> None:
        writes = [Write(keys_of(item), item) for item in page.items]
        results = apply_writes(writes, settings=env.settings, ports=ports)
        retry = [result for result in results if result.fate is Fate.RETRY]
        if retry:
            raise TransientFailure(
                f"{len(retry)} of {len(results)} writes still failing after retries, e.g. {retry[0].doc_id}: "
                f"{retry[0].reason}"
            )
        state.items += page.read
        state.matched += len(page.items)
        for result in results:
            state.counts[f"backfill:{result.fate.value}"] += 1
            if result.fate not in APPLIED | UNCHANGED:
                state.fail({"documentId": result.doc_id, "fate": result.fate.value, "reason": result.reason})

    def finish(self, env: Env, run: dict[str, Any], merged: Merged, error: str | None) -> dict[str, Any]:
        summary: dict[str, Any] = {
            "command": self.name,
            "schema": run.get("schema"),
            "target": run.get("target"),
            "dryRun": run.get("dryRun", False),
            "source": run.get("source"),
            "complete": False,
            "planned": run.get("planned", []),
            "writeAliasActions": run.get("writeAliasActions", []),
            "readAliasActions": [],
            "backfill": merged.section("backfill"),
            "failed": merged.failures,
            "failedCount": merged.failure_count,
            "tableItems": merged.matched,
            "indexLiveDocuments": None,
            "errors": merged.errors,
        }
        if run.get("alreadyComplete"):
            return summary | {"complete": True, "status": DONE}
        if error or "target" not in run:
            return summary | {"status": FAILED}
        if run["dryRun"]:
            return summary | {"readAliasActions": run.get("readAliasActions", []), "status": DONE}
        target = run["target"]
        env.client.refresh(target)  # the count covers every document the backfill wrote
        summary["indexLiveDocuments"] = env.client.live_count(target)
        if not merged.finished or merged.failure_count > int(run.get("maxRejected", 0)):
            return summary | {"status": WORK_LEFT}  # the read alias stays where it is; fix, then rerun
        # Recomputed: the state may have changed while the backfill ran (another operator, a manual rollback).
        state = env.client.alias_state(run["schema"])
        if not write_alias_done(state, target):
            raise OpsError(f"the write alias left {target} during the backfill; the read alias was not moved")
        read_actions = swap_read_alias(state, target)
        if read_actions:
            _apply_alias_actions(
                env.client, run["schema"], read_actions, lambda s: read_alias_done(s, target)
            )
        return summary | {"readAliasActions": read_actions, "complete": True, "status": DONE}
