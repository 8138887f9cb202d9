"""What the loopback domain front (tests/support/opensearch_server.py) does with a request it lets through when a
real engine stands behind it: forward it to the node as it came, and make the per-item bulk faults the engine cannot
be asked for (a test's `fail_item`): the faulted items are taken out of the forwarded `_bulk` body, so the engine
never applies them, and their errors are put back at their positions in the engine's answer, as a domain that
refused those items would answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.support.engine_node import EngineNode

# Request headers the front passes on; the signature and AWS's own headers stop at the front, as on a domain.
_FORWARDED_HEADERS = ("content-type", "accept")
_ACTIONS = ("index", "create", "update", "delete")


@dataclass(frozen=True)
class Forwarded:
    status: int
    body: bytes
    content_type: str


@dataclass(frozen=True)
class ItemError:
    """A bulk item's refusal: the engine's item `status` and error `type` and `reason`."""

    status: int
    error_type: str
    reason: str


def forward(
    node: EngineNode,
    method: str,
    raw_path: str,
    headers: dict[str, str],
    body: bytes,
    principal: str | None = None,
) -> Forwarded:
    """The request as it came, acting for `principal` (the verified IAM role ARN) where the node asks who."""
    connection = node.connect(timeout=120)
    try:
        sent = {name: headers[name] for name in _FORWARDED_HEADERS if name in headers}
        sent.update(node.proxy_headers(principal))
        connection.request(method, raw_path, body if body or method in ("POST", "PUT") else None, sent)
        response = connection.getresponse()
        data = response.read()
        return Forwarded(response.status, data, response.getheader("Content-Type") or "application/json")
    finally:
        connection.close()


def _bulk_items(body: bytes) -> list[tuple[dict[str, Any], list[bytes]]]:
    """Each item of an NDJSON `_bulk` body: its action line parsed, and its raw lines (action, and source)."""
    lines = body.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    items: list[tuple[dict[str, Any], list[bytes]]] = []
    position = 0
    while position < len(lines):
        action = json.loads(lines[position])
        verb = next(iter(action))
        width = 1 if verb == "delete" else 2
        items.append((action, lines[position : position + width]))
        position += width
    return items


def forward_bulk(
    node: EngineNode,
    raw_path: str,
    headers: dict[str, str],
    body: bytes,
    path_index: str | None,
    fault_for: Callable[[str], ItemError | None],
    principal: str | None = None,
) -> Forwarded:
    """`_bulk` with per-item faults: `fault_for(doc_id)` says whether (and how) an item is refused."""
    try:
        items = _bulk_items(body)
    except (ValueError, StopIteration):  # the engine says what is wrong with the body
        return forward(node, "POST", raw_path, headers, body, principal)
    refused: dict[int, dict[str, Any]] = {}
    kept: list[bytes] = []
    for position, (action, lines) in enumerate(items):
        verb = next(iter(action))
        meta = action[verb] if isinstance(action[verb], dict) else {}
        error = fault_for(str(meta.get("_id"))) if verb in _ACTIONS else None
        if error is None:
            kept.extend(lines)
            continue
        index = meta.get("_index", path_index)
        refused[position] = {
            verb: {
                "_index": index,
                "_id": meta.get("_id"),
                "status": error.status,
                "error": {"type": error.error_type, "reason": error.reason, "index": index},
            }
        }
    if not refused:
        return forward(node, "POST", raw_path, headers, body, principal)
    if kept:
        answer = forward(node, "POST", raw_path, headers, b"\n".join(kept) + b"\n", principal)
        if answer.status != 200:
            return answer
        engine_answer = json.loads(answer.body)
    else:
        engine_answer = {"took": 0, "errors": False, "items": []}
    applied = iter(engine_answer["items"])
    merged = [refused[position] if position in refused else next(applied) for position in range(len(items))]
    engine_answer.update(errors=True, items=merged)
    return Forwarded(200, json.dumps(engine_answer).encode(), "application/json; charset=UTF-8")
