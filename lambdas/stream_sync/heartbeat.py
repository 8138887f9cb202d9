"""The heartbeat's end-to-end lag: a heartbeat item's write time to the moment the index accepted its document.

An EventBridge Scheduler schedule rewrites one heartbeat item per source table (refdata.reserved, infra/constructs/
heartbeat.py). Its stream record goes the way of every record: stream filter, event source mapping, this function,
the bulk request. Once the index has accepted it (fate `indexed`), this module emits `HeartbeatLagSeconds`, the time
since the write, as one CloudWatch Embedded Metric Format line with the dimensions `Environment` and `Table` (the
environment from ``ENVIRONMENT_NAME``, the table from the record's stream ARN), written by
``telemetry.metric_line`` like every other metric of the sync.

So the metric exists only while the whole pipeline works: a disabled or stuck mapping, a sync that is never invoked
or fails, an expired iterator and an index that refuses writes all leave it missing, which its alarm treats as
breaching. A heartbeat that is held for retry, dead-lettered or replayed (`stale-skipped`) emits nothing.

The write time is the record's `ApproximateCreationDateTime` (DynamoDB's own clock, whole seconds); a record
without one (the ops tools' synthetic records) falls back to the item's `heartbeatAt`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from refdata.reserved import HEARTBEAT_AT, is_heartbeat

from stream_sync.config import Settings
from stream_sync.sync import BatchResult, Fate
from stream_sync.tables import table_of_arn
from stream_sync.telemetry import metric_line

METRIC: Final = "HeartbeatLagSeconds"


@dataclass(frozen=True)
class HeartbeatLag:
    table: str
    seconds: float


def _written_at(record: Mapping[str, Any], created_at: float | None) -> float | None:
    if created_at is not None:
        return created_at
    image = (record.get("dynamodb") or {}).get("NewImage") or {}
    text = (image.get(HEARTBEAT_AT) or {}).get("S")
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def lags(result: BatchResult, now: float) -> list[HeartbeatLag]:
    """The lag of each heartbeat the batch indexed (one table per batch, so at most one after coalescing)."""
    found = []
    for outcome in result.outcomes:
        change = outcome.change
        if outcome.fate is not Fate.INDEXED or change is None or not is_heartbeat(change.pk):
            continue
        table = table_of_arn(outcome.record.get("eventSourceARN"))
        written = _written_at(outcome.record, change.created_at)
        if table is not None and written is not None:
            found.append(HeartbeatLag(table, max(now - written, 0.0)))
    return found


def emit(
    result: BatchResult, settings: Settings, *, now: float, write: Callable[[str], None] = print
) -> None:
    """One EMF line per indexed heartbeat, under the dimensions every sync metric carries (telemetry.metric_line)."""
    for lag in lags(result, now):
        write(
            metric_line(
                settings.metrics_namespace,
                {METRIC: ("Seconds", round(lag.seconds, 3))},
                environment=settings.environment or "",
                table=lag.table,
                now=now,
            )
        )
