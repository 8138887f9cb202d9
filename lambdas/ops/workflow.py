"""The shape every ops run has, deployed or local: prepare, then parts (each resumable), then finish.

- **prepare** decides what to do and records it (`run.json`): the source (a parallel scan of `segments` segments,
  or a DynamoDB export processed file by file), the parts to run, the totals progress is measured against. It
  also does the run's own first steps (reindex moves the write alias, reconcile opens a point in time).
- **parts** run independently, many at once (a Step Functions Map, or `--local` threads). A part is a sequence of
  pages; after each page it saves its cursor and counts, so a retried or resumed part goes on after its last saved
  page (a page redone after a crash rewrites what it wrote, which every operation makes harmless). A part stops
  when its time is up (`deadline`) and the workflow invokes it again.
- **finish** adds the parts up, does the run's last step (reindex swaps the read alias, reconcile closes its point
  in time), and writes the summary: counts by outcome, differences, errors, and a status: `done`,
  `work-left` (finished, but something needs a person: differences found, documents refused) or `failed`.

The workflow worker (`ops.worker`) and `python -m ops --local` call the same operations through this module.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from stream_sync.config import DEFAULT_BULK_MAX_BYTES, Settings
from stream_sync.sync import Ports
from stream_sync.tables import SchemaTables

from ops.index import IndexClient, OpsError, TransientFailure
from ops.runs import Merged, PartState, Run, merge, part_id

Status = Literal["done", "work-left", "failed"]
DONE: Status = "done"
WORK_LEFT: Status = "work-left"
FAILED: Status = "failed"


@dataclass
class Env:
    """What an operation runs against. The worker wires AWS clients and the admin role's signed transport;
    `--local` wires the caller's; tests wire moto and the loopback server."""

    client: IndexClient
    settings: Settings  # the stream sync's settings: every document write goes through its batch path
    ports: Callable[[], Ports]  # one set per thread (each has its own connection pool)
    dynamodb: Any
    tables: SchemaTables  # which table holds which schema: a run reads its schema's table
    segments: int = 1  # of a parallel scan; also the reconcile's point-in-time slices
    export_above_bytes: int | None = None  # None: always scan (a local run cannot start an export)
    read_units_per_second: float | None = None  # per scan segment, None: unpaced
    s3: Any = None  # export files
    bucket: str | None = None
    sqs: Any = None
    streams: Any = None
    dlq_url: str | None = None
    tombstone_min_age_seconds: int = 0
    now: Callable[[], float] = time.time
    scan_page_items: int | None = None

    def table_for(self, schema: str) -> str:
        """The table that holds `schema`'s items."""
        table = self.tables.table_of(schema)
        if table is None:
            raise OpsError(f"no table holds schema {schema!r} (SCHEMA_TABLES)")
        return table


def sync_settings(
    endpoint: str,
    region: str,
    geometry_bucket: str | None,
    request_timeout_seconds: float,
    tables: SchemaTables,
    bulk_max_bytes: int = DEFAULT_BULK_MAX_BYTES,
) -> Settings:
    """The stream sync's settings for an ops run's writes. The DLQ is never used: an ops write reports its
    permanent failures in the run's summary instead of dead-lettering them. A redriven record is checked against
    `tables` like a streamed one (`wrong-table`)."""
    return Settings(
        opensearch_endpoint=endpoint,
        region=region,
        dlq_url="",
        geometry_bucket=geometry_bucket,
        bulk_max_bytes=bulk_max_bytes,
        request_timeout_seconds=request_timeout_seconds,
        schema_tables=tables,
    )


class Operation(Protocol):
    name: str

    def prepare(self, env: Env, run: Run, request: Mapping[str, Any]) -> dict[str, Any]:
        """A new run's record: at least `parts` (run by the inline map) and `source` (`scan`, `export`, `none`).
        Called through `prepared`, so only for a run that has no saved record yet."""
        ...

    def pages(self, env: Env, run: dict[str, Any], state: PartState) -> Iterator[tuple[Any, Any]]:
        """(page, cursor after it) from `state.cursor` on. A cursor of None after a page says it was the part's
        last page (None before the first page means "not started")."""
        ...

    def process(self, env: Env, run: dict[str, Any], state: PartState, page: Any, ports: Ports) -> None:
        """Apply one page, counting into `state`; raise TransientFailure to have the page retried later. A workflow
        part may pause instead (`state.paused`, having set `state.cursor` to go on from)."""
        ...

    def finish(self, env: Env, run: dict[str, Any], merged: Merged, error: str | None) -> dict[str, Any]:
        """The summary, with `status`."""
        ...


def run_part(
    operation: Operation,
    env: Env,
    run: Run,
    part: Mapping[str, Any],
    *,
    ports: Ports,
    deadline: Callable[[], bool] = lambda: False,
    on_page: Callable[[PartState], None] | None = None,
) -> PartState:
    """Go on with `part` from its saved cursor until it is done or `deadline()` says stop. The page that ends the
    part (its cursor after is None) marks it done in the same save: a part stopped by its deadline right after its
    last page must not be read again from the start, which is what a saved cursor of None means."""
    record = run.record()
    if record is None:
        raise OpsError(f"run {run.run_id} has no run record: prepare first")
    state = run.part(part)
    if state.done:
        return state
    for page, cursor in operation.pages(env, record, state):
        operation.process(env, record, state, page, ports)
        if state.paused:  # the workflow waits, then invokes the part again: from the cursor the operation set
            run.save_part(state)
            return state
        state.cursor = cursor
        state.done = cursor is None
        run.save_part(state)
        if on_page is not None:
            on_page(state)
        if state.done:
            return state
        if deadline():
            return state
    state.done = True
    run.save_part(state)
    if on_page is not None:
        on_page(state)
    return state


def finish_run(operation: Operation, env: Env, run: Run, error: str | None = None) -> dict[str, Any]:
    """Add the parts up, let the operation conclude, save and return the summary."""
    record = run.record() or {}
    states = run.parts()
    merged = merge(states)
    expected = int(record.get("partCount", len(record.get("parts", []))))
    if merged.parts < expected:
        merged.errors.append(f"{expected - merged.parts} of {expected} parts never ran")
    if (
        error and merged.errors
    ):  # a failed map says only that a part failed: each failed part's error says why
        error = f"{error} ({'; '.join(merged.errors)})"
    summary: dict[str, Any] = {"runId": run.run_id, "operation": operation.name}
    summary |= operation.finish(env, record, merged, error)
    summary |= {"parts": {"total": expected, "done": merged.done}}
    if merged.failure_count > len(merged.failures):
        summary.setdefault("truncated", []).append(
            f"failures: {len(merged.failures)} of {merged.failure_count} listed (MAX_LISTED)"
        )
    summary.setdefault("truncated", [])
    if error:
        summary |= {"status": FAILED, "error": error}
    run.save_summary(summary)
    return summary


def prepared(operation: Operation, env: Env, run: Run, request: Mapping[str, Any]) -> dict[str, Any]:
    """The run's record: a resumed run goes on with the plan it saved (a reindex keeps its target index, a purge
    its bound, which must never move later than when the run started); a new run prepares one."""
    existing = run.record()
    return existing if existing is not None else operation.prepare(env, run, request)


def run_local(
    operation: Operation,
    env: Env,
    run: Run,
    request: Mapping[str, Any],
    *,
    concurrency: int = 1,
    progress: Callable[[dict[str, Any], PartState], None] | None = None,
) -> dict[str, Any]:
    """A whole run in this process: prepare, every part on `concurrency` threads, finish (which always runs,
    and reports what stopped the run). `progress(record, state)` is told of every page a part commits."""
    try:
        record = prepared(operation, env, run, request)
    except OpsError as error:
        return finish_run(operation, env, run, f"prepare: {error}")
    if record.get("source") == "export":
        raise OpsError("a local run reads the table with a parallel scan; exports are for deployed runs")
    on_page = None if progress is None else (lambda state: progress(record, state))
    failures = run_parts(
        operation, env, run, record.get("parts", []), concurrency=concurrency, on_page=on_page
    )
    return finish_run(operation, env, run, "; ".join(failures) or None)


def run_parts(
    operation: Operation,
    env: Env,
    run: Run,
    parts: Sequence[Mapping[str, Any]],
    *,
    concurrency: int,
    on_page: Callable[[PartState], None] | None = None,
) -> list[str]:
    """Every part to its end on `concurrency` threads (each with its own ports). A transient failure stops its
    part with the error saved on it (a rerun goes on from there); the others are returned, one per part."""

    def work(part: Mapping[str, Any]) -> str | None:
        try:
            run_part(operation, env, run, part, ports=env.ports(), on_page=on_page)
        except TransientFailure as failure:
            state = run.part(part)
            state.error = f"{type(failure).__name__}: {failure}"
            run.save_part(state)
        except OpsError as failure:
            return f"{part_id(part)}: {failure}"
        return None

    if concurrency <= 1 or len(parts) <= 1:
        outcomes = [work(part) for part in parts]
    else:
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            outcomes = list(pool.map(work, parts))
    return [outcome for outcome in outcomes if outcome]
