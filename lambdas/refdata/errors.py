"""OpenSearch error answers as one line of text (no I/O, no heavy imports: the sync's hot path uses it)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

MAX_CAUSES = 16


def cause_chain(error: Any) -> list[tuple[str, str]]:
    """(type, reason) of an error object and of each `caused_by` below it, outermost first."""
    levels: list[tuple[str, str]] = []
    while isinstance(error, Mapping) and len(levels) < MAX_CAUSES:
        levels.append((str(error.get("type", "error")), str(error.get("reason", ""))))
        error = error.get("caused_by")
    return levels


def describe(error: Any) -> str:
    """`type: reason; caused by type: reason; ...` for an error object (its text when it is not one)."""
    levels = cause_chain(error)
    if not levels:
        return str(error)
    return "; caused by ".join(f"{kind}: {reason}" for kind, reason in levels)


def error_reason(status: int, body: bytes) -> str:
    """One line for an HTTP answer that is an error: `HTTP <status> <type>: <reason>; caused by ...` for an
    OpenSearch error object, else its status and the start of its body."""
    try:
        payload = json.loads(body)
    except ValueError:  # not JSON (UnicodeDecodeError is one)
        payload = None
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(error, dict):
        return f"HTTP {status} {describe(error)}"
    if isinstance(error, str):
        return f"HTTP {status}: {error}"
    return f"HTTP {status}: {body[:500].decode('utf-8', 'replace')}"
