"""Stored scripts for the loopback server (tests only): painless is never run, Python twins stand in for it.

A painless source "compiles" only if a twin is registered for its exact text (by SHA-256) and the context it is
compiled for. So a stored script whose source changed while its twin did not fails to compile, in the
engine's shape, and the double never accepts a script it cannot run. Edit a painless source and its twin
together, then put the new digest in `TWINS`.

As in OpenSearch (ScriptService.putStoredScript / compile, UpdateHelper.executeScript):
- `PUT _scripts/<id>` stores the source without compiling it; `PUT _scripts/<id>/<context>` compiles it for
  that context first and answers 400 `script_exception` "compile error" when it does not compile;
- an update whose script is missing answers 400 `illegal_argument_exception` "failed to execute script" caused
  by `resource_not_found_exception` "unable to find script [<id>] in cluster state";
- an update whose stored script does not compile, or that fails while running, answers the same 400 caused by
  `script_exception` "compile error" / "runtime error" (with `script_stack`, `script`, `lang`, and the
  Java exception as its `caused_by`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from search.indices import apply_sync_script

from tests.support.opensearch_errors import OpenSearchError, cause

ScriptTwin = Callable[[Mapping[str, Any] | None, Mapping[str, Any]], dict[str, Any] | None]
"""(current _source, or the upsert for a scripted upsert; params) -> new _source, or None for `ctx.op = 'none'`."""


@dataclass(frozen=True)
class Twin:
    context: str
    run: ScriptTwin


def source_digest(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


# The painless sources the loopback server can compile: SHA-256 of the exact source -> its twin.
TWINS: dict[str, Twin] = {
    # search.indices.APPLY_SCRIPT_SOURCE, implemented by search.indices.apply_sync_script
    "a58f5242e9bcb7b7519946ec3670200d22773f8e5a66b8bcd130c888836c538a": Twin("update", apply_sync_script),
}

# Script contexts of an OpenSearch 2.x node (ScriptModule.CORE_CONTEXTS and the bundled modules).
CONTEXTS = frozenset(
    {
        "update",
        "ingest",
        "processor_conditional",
        "score",
        "filter",
        "aggs",
        "aggs_init",
        "aggs_map",
        "aggs_combine",
        "aggs_reduce",
        "field",
        "number_sort",
        "string_sort",
        "terms_set",
        "template",
        "similarity",
        "similarity_weight",
        "bucket_aggregation",
        "bucket_aggregation_selector",
        "interval",
        "moving-function",
        "painless_test",
        "analysis",
    }
)


class ScriptRuntimeError(Exception):
    """Raised by a twin (or injected by a test) to model a painless runtime error with this Java exception."""

    def __init__(self, java_exception: str, reason: str) -> None:
        super().__init__(reason)
        self.java_exception = java_exception
        self.reason = reason


# What a Python twin's own exceptions stand for when the painless source would fail the same way.
_JAVA_EXCEPTIONS = {
    KeyError: "null_pointer_exception",
    TypeError: "class_cast_exception",
    AttributeError: "illegal_argument_exception",
}


def compile_error(source: str, detail: str) -> OpenSearchError:
    snippet = source[:25]
    return OpenSearchError(
        400,
        "script_exception",
        "compile error",
        cause=cause("illegal_argument_exception", detail),
        script_stack=[snippet, "^---- HERE"],
        script=source,
        lang="painless",
        position={"offset": 0, "start": 0, "end": len(snippet)},
    )


def compile_stored(script_id: str, source: str, context: str) -> Twin:
    """Compile `source` for `context` (`PUT _scripts/<id>/<context>`, or first use): its twin, else the engine's
    error (unknown context: illegal_argument_exception; anything else: a compile error)."""
    if context not in CONTEXTS:
        raise OpenSearchError(
            400,
            "illegal_argument_exception",
            f"failed to parse/compile stored script [{script_id}]",
            cause=cause("illegal_argument_exception", f"Unknown context [{context}]"),
        )
    twin = TWINS.get(source_digest(source))
    if twin is None:
        raise compile_error(
            source,
            f"the loopback server has no Python twin for this painless source (sha256 {source_digest(source)})",
        )
    if twin.context != context:
        raise compile_error(source, f"the Python twin of this source is for the [{twin.context}] context")
    return twin


def failed_to_execute(inner: OpenSearchError) -> OpenSearchError:
    """UpdateHelper.executeScript wraps every script failure."""
    return OpenSearchError(400, "illegal_argument_exception", "failed to execute script", cause=inner)


def missing_script(script_id: str) -> OpenSearchError:
    return failed_to_execute(
        cause("resource_not_found_exception", f"unable to find script [{script_id}] in cluster state")
    )


def run_update_script(
    script_id: str, twin: Twin, current: Mapping[str, Any] | None, params: Mapping[str, Any]
) -> dict[str, Any] | None:
    """Run a compiled update script; a failure inside it is the engine's runtime error."""
    try:
        return twin.run(current, params)
    except ScriptRuntimeError as error:
        java_exception, reason = error.java_exception, error.reason
    except (KeyError, TypeError, AttributeError) as error:
        java_exception = next(name for kind, name in _JAVA_EXCEPTIONS.items() if isinstance(error, kind))
        reason = str(error)
    raise failed_to_execute(
        cause(
            "script_exception",
            "runtime error",
            inner=cause(java_exception, reason),
            script_stack=[],
            script=script_id,
            lang="painless",
        )
    )
