"""Errors in OpenSearch's wire shape, for the loopback server (tests only).

An engine error is an exception with a `type` (the exception class in snake case), a `reason` (its message),
metadata fields (`index`, `index_uuid`, `script_stack`, ...) and an optional `caused_by` chain. A REST error
answers `{"error": {"root_cause": [...], <the error>}, "status": N}`; a `_bulk` item carries the error object
alone (no `root_cause`). `root_cause` follows `OpenSearchException.guessRootCauses`: it descends the chain
while the cause is itself an OpenSearch exception, so a plain Java exception (illegal_argument_exception,
number_format_exception, ...) ends the descent at its wrapper.
"""

from __future__ import annotations

from typing import Any

# Java and Jackson exceptions that are not OpenSearchException subclasses (guessRootCauses stops above them).
JAVA_EXCEPTIONS = frozenset(
    {
        "illegal_argument_exception",
        "illegal_state_exception",
        "number_format_exception",
        "null_pointer_exception",
        "class_cast_exception",
        "arithmetic_exception",
        "input_coercion_exception",
        "json_parse_exception",
        "stream_constraints_exception",
        "x_content_parse_exception",
        "date_time_parse_exception",
        "array_index_out_of_bounds_exception",
        "unsupported_operation_exception",
    }
)


class OpenSearchError(Exception):
    """An error answered in OpenSearch's format; `cause` is the `caused_by` chain."""

    def __init__(
        self, status: int, error_type: str, reason: str, *, cause: OpenSearchError | None = None, **extra: Any
    ) -> None:
        super().__init__(reason)
        self.status = status
        self.error_type = error_type
        self.reason = reason
        self.cause = cause
        self.extra = extra

    def error_object(self) -> dict[str, Any]:
        error: dict[str, Any] = {"type": self.error_type, "reason": self.reason, **self.extra}
        if self.cause is not None:
            error["caused_by"] = self.cause.error_object()
        return error

    def root_cause(self) -> dict[str, Any]:
        node: OpenSearchError = self
        while node.cause is not None and node.cause.error_type not in JAVA_EXCEPTIONS:
            node = node.cause
        return {"type": node.error_type, "reason": node.reason, **node.extra}

    def body(self) -> dict[str, Any]:
        return {"error": {"root_cause": [self.root_cause()], **self.error_object()}, "status": self.status}


def cause(
    error_type: str, reason: str, *, inner: OpenSearchError | None = None, **extra: Any
) -> OpenSearchError:
    """A `caused_by` entry (its status is never sent)."""
    return OpenSearchError(500, error_type, reason, cause=inner, **extra)


def index_not_found(name: str, message: str | None = None, **resource: str) -> OpenSearchError:
    """IndexNotFoundException: `no such index [x]`, or `no such index [x] and <message>`."""
    reason = f"no such index [{name}]" if message is None else f"no such index [{name}] and {message}"
    metadata: dict[str, Any] = {**resource, "index_uuid": "_na_", "index": name}
    return OpenSearchError(404, "index_not_found_exception", reason, **metadata)
