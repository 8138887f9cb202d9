"""Lambda entry point: DynamoDB stream batch in, partial batch response out (all logic in `sync`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from stream_sync import heartbeat, telemetry
from stream_sync.config import ConfigError, Settings
from stream_sync.sync import Ports, process_batch

_cached: tuple[Settings, Ports] | None = None


def _ports(settings: Settings) -> Ports:
    """One set of clients per container (connection reuse across invocations), rebuilt if settings change."""
    global _cached
    if _cached is None or _cached[0] != settings:
        from stream_sync.aws import build_ports

        _cached = (settings, build_ports(settings))
    return _cached[1]


def reset() -> None:
    """Forget cached clients (tests switch between mocked AWS contexts and servers)."""
    global _cached
    _cached = None


def handler(event: Mapping[str, Any], context: Any) -> dict[str, list[dict[str, str]]]:
    settings = Settings.from_env(os.environ)
    if settings.environment is None:  # every metric is published per environment: without it none would count
        raise ConfigError("ENVIRONMENT_NAME is required")
    ports = _ports(settings)
    remaining_ms = getattr(context, "get_remaining_time_in_millis", None)

    def remaining_seconds() -> float:
        return remaining_ms() / 1000.0 if callable(remaining_ms) else 900.0

    result = process_batch(
        event.get("Records") or [], settings=settings, ports=ports, remaining_seconds=remaining_seconds
    )
    telemetry.emit(result, settings, now=ports.now())
    heartbeat.emit(result, settings, now=ports.now())
    return {"batchItemFailures": result.batch_item_failures()}
