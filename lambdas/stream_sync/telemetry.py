"""Structured JSON log lines and CloudWatch Embedded Metric Format (EMF) lines, written to stdout.

Every metric of the sync (namespace `RefData/StreamSync`) carries two dimensions, `Environment` (the platform
environment, `ENVIRONMENT_NAME`) and `Table` (the source table, from the stream ARN of the batch: one event source
mapping per table, so one table per batch): two environments or tables in one account never mix, and each alarm
reads exactly one of them. `metric_line` is the one place that writes them, for the batch's metrics and for any
other metric of the sync (the heartbeat's).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from stream_sync.config import Settings
from stream_sync.sync import FATE_VALUES, BatchResult, Fate
from stream_sync.tables import table_of_arn

_LEVELS = {"DEBUG": 10, "INFO": 20, "WARNING": 30, "ERROR": 40}

DIMENSIONS = ("Environment", "Table")
# The Table dimension of a batch whose records name no stream (only the ops tools' synthetic records do not).
UNKNOWN_TABLE = "unknown"

# The metric counting each fate a record can reach in the function (``rejected`` exists only in the redrive).
# RecordsReportedForRetry counts the records whose transient retries ran out within the invocation; records the
# work budget or the deadline left for the next invocation are reported too, but counted as RecordsDeferred.
FATE_METRICS: dict[Fate, str] = {
    Fate.INDEXED: "DocumentsIndexed",
    Fate.DELETED: "DocumentsDeleted",
    Fate.STALE_SKIPPED: "DocumentsStaleSkipped",
    Fate.COALESCED: "RecordsCoalesced",
    Fate.IGNORED: "RecordsIgnored",
    Fate.RETRY: "RecordsReportedForRetry",
    Fate.DEAD_LETTERED: "DocumentsDeadLettered",
}


def _fate_count(fate: Fate) -> Callable[[BatchResult, dict[str, int]], float | None]:
    if fate is Fate.RETRY:
        return lambda r, c: c[fate] - r.deferred
    return lambda r, c: c[fate]


# metric name -> (unit, value getter)
_METRICS: dict[str, tuple[str, Callable[[BatchResult, dict[str, int]], float | None]]] = {
    "BatchSize": ("Count", lambda r, c: len(r.outcomes)),
    **{name: ("Count", _fate_count(fate)) for fate, name in FATE_METRICS.items()},
    "DocumentsExpired": (
        "Count",
        lambda r, c: sum(1 for o in r.outcomes if o.fate is Fate.DELETED and o.change and o.change.expired),
    ),
    "RecordsDeferred": ("Count", lambda r, c: r.deferred),
    "DocumentsRetried": ("Count", lambda r, c: r.item_retries),
    "DeadLetterSendFailures": ("Count", lambda r, c: r.dead_letter_failures),
    "BulkRequests": ("Count", lambda r, c: r.bulk_requests),
    # Records left unapplied because of the stored script (script-unavailable or script-failed); alarm on >= 1.
    "ScriptErrors": ("Count", lambda r, c: r.script_errors),
    "ReplicationLagSeconds": ("Seconds", lambda r, c: r.lag_seconds),
}
METRIC_NAMES = frozenset(_METRICS)


def _line(level: str, message: str, **fields: Any) -> str:
    return json.dumps({"level": level, "message": message, **fields}, default=str, separators=(",", ":"))


def metric_line(
    namespace: str, metrics: Mapping[str, tuple[str, float]], *, environment: str, table: str, now: float
) -> str:
    """One EMF document: each metric (name -> (unit, value)) in `namespace` under the dimensions Environment and
    Table."""
    document: dict[str, Any] = {
        "_aws": {
            "Timestamp": int(now * 1000),
            "CloudWatchMetrics": [
                {
                    "Namespace": namespace,
                    "Dimensions": [list(DIMENSIONS)],
                    "Metrics": [{"Name": name, "Unit": unit} for name, (unit, _) in metrics.items()],
                }
            ],
        },
        "Environment": environment,
        "Table": table,
        **{name: value for name, (_, value) in metrics.items()},
    }
    return json.dumps(document, separators=(",", ":"))


def emf_line(
    result: BatchResult, settings: Settings, now: float, counts: dict[str, int] | None = None
) -> str:
    """The batch's metrics (those with a value), for its environment and table."""
    if counts is None:
        counts = result.counts()
    present: dict[str, tuple[str, float]] = {}
    for name, (unit, getter) in _METRICS.items():
        value = getter(result, counts)
        if value is not None:
            present[name] = (unit, value)
    return metric_line(
        settings.metrics_namespace,
        present,
        environment=settings.environment or "",
        table=source_table(result) or UNKNOWN_TABLE,
        now=now,
    )


def source_table(result: BatchResult) -> str | None:
    """The table whose stream the batch came from (one event source mapping per table: one table per batch)."""
    first = result.outcomes[0].record if result.outcomes else None
    return table_of_arn(first.get("eventSourceARN")) if isinstance(first, Mapping) else None


def emit(
    result: BatchResult, settings: Settings, *, now: float, write: Callable[[str], None] = print
) -> None:
    """One summary line (record ids grouped by outcome), one line per unfinished or dead-lettered record,
    per-record lines at DEBUG, and the EMF metrics line."""
    threshold = _LEVELS[settings.log_level]
    counts = result.counts()
    by_fate: dict[str, list[str]] = {}
    for outcome in result.outcomes:
        key = FATE_VALUES[outcome.fate] if outcome.fate else "none"
        by_fate.setdefault(key, []).append(outcome.event_id or str(outcome.sequence_number))
        if outcome.fate in (Fate.DEAD_LETTERED, Fate.RETRY, Fate.REJECTED) or threshold <= 10:
            level = "INFO" if outcome.final else "WARNING"
            if _LEVELS[level] >= threshold:
                write(
                    _line(
                        level,
                        "record outcome",
                        eventID=outcome.event_id,
                        sequenceNumber=outcome.sequence_number,
                        documentId=outcome.change.doc_id if outcome.change else None,
                        outcome=outcome.fate.value if outcome.fate else None,
                        reasonKind=outcome.reason_kind,
                        reason=outcome.reason,
                        attempts=outcome.attempts,
                    )
                )
    if threshold <= 20:
        write(
            _line(
                "INFO",
                "batch synced",
                table=source_table(result),
                records=len(result.outcomes),
                outcomes={fate: n for fate, n in counts.items() if n},
                recordIds=by_fate,
                bulkRequests=result.bulk_requests,
                retryRounds=result.retry_rounds,
                batchItemFailures=result.batch_item_failures(),
                replicationLagSeconds=result.lag_seconds,
            )
        )
    write(emf_line(result, settings, now, counts))
