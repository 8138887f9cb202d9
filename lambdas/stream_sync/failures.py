"""What an OpenSearch error means for a record: one pure function over the error's `caused_by` chain.

OpenSearch often reports the cause of a failure only in `caused_by`: an update whose stored script is missing
answers `illegal_argument_exception: failed to execute script`, and only its cause says `unable to find
script [...] in cluster state`. So the whole chain is read, and the first rule of `RULES` (in table order)
that matches any level of it decides; an error no rule matches falls back to its HTTP status.

Transient means systemic or passing: retried within the invocation, then reported for redelivery, and
dead-lettered with its payload once the record nears `MAX_RECORD_AGE_SECONDS`. Permanent means this
document fails the same way again: dead-lettered at once with its payload and reason.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from refdata.errors import cause_chain, describe
from refdata.limits import DOCUMENT_LIMIT

SCRIPT_UNAVAILABLE: Final = "script-unavailable"
SCRIPT_FAILED: Final = "script-failed"
SCRIPT_KINDS: Final = frozenset({SCRIPT_UNAVAILABLE, SCRIPT_FAILED})


@dataclass(frozen=True)
class Rule:
    error_type: str
    reason_contains: str | None
    kind: str
    transient: bool


RULES: Final = (
    # The stored script is missing or does not compile: a deployment fault that fails every record alike.
    Rule("resource_not_found_exception", "unable to find script", SCRIPT_UNAVAILABLE, True),
    Rule("script_exception", "compile error", SCRIPT_UNAVAILABLE, True),
    # The script compiled but failed on this document (runtime error): it fails the same way again.
    Rule("script_exception", None, SCRIPT_FAILED, False),
    # require_alias and the write alias does not exist: never auto-create an index in its place.
    Rule("index_not_found_exception", "[require_alias] request flag is [true]", "write-alias-missing", True),
    Rule("index_not_found_exception", None, "index-missing", True),
    Rule("illegal_argument_exception", "no write index is defined for alias", "write-index-undefined", True),
    # index.blocks.write (403) or the flood-stage read_only_allow_delete block (429): lifted by an operator
    # or by freed disk.
    Rule("cluster_block_exception", None, "index-blocked", True),
    # A permission the role lacks (FGAC): a deployment fault like a missing script, not a property of the record.
    Rule("security_exception", None, "forbidden", True),
    Rule("version_conflict_engine_exception", None, "version-conflict", True),
    Rule("rejected_execution_exception", None, "throttled", True),
    Rule("es_rejected_execution_exception", None, "throttled", True),
    # The engine's limits on one document or on the index's mapping (refdata.limits checks them before sending;
    # the index's total reaches its limit only in the engine, as other documents add fields).
    Rule("illegal_argument_exception", "Limit of total fields", DOCUMENT_LIMIT, False),
    Rule("illegal_argument_exception", "Limit of mapping depth", DOCUMENT_LIMIT, False),
    Rule("parse_exception", "index.mapping.depth.limit", DOCUMENT_LIMIT, False),
    # The JSON parser's own limits (name length, nesting, number length): the whole request is refused.
    Rule("stream_constraints_exception", None, DOCUMENT_LIMIT, False),
    # The document itself does not fit the mapping, or the engine refuses its content.
    Rule("mapper_parsing_exception", None, "mapping-rejected", False),
    Rule("strict_dynamic_mapping_exception", None, "mapping-rejected", False),
    # JSON the parser refuses (`NaN`, `Infinity`, ...): the whole request is refused.
    Rule("x_content_parse_exception", None, "document-unparseable", False),
    Rule("json_parse_exception", None, "document-unparseable", False),
    Rule("illegal_argument_exception", None, "document-rejected", False),
)


@dataclass(frozen=True)
class Failure:
    kind: str
    transient: bool
    reason: str


def classify(status: int, error: Any) -> Failure:
    """The failure of one `_bulk` item (or of a whole request) with HTTP `status` and OpenSearch `error`."""
    levels = cause_chain(error)
    reason = f"HTTP {status} {describe(error)}"
    for rule in RULES:
        for kind, text in levels:
            if kind == rule.error_type and (rule.reason_contains is None or rule.reason_contains in text):
                return Failure(rule.kind, rule.transient, reason)
    if status == 403:
        return Failure("forbidden", True, reason)
    transient = status == 429 or status >= 500 or status in (404, 408, 409)
    return Failure(f"http-{status}", transient, reason)


def classify_response(status: int, body: bytes) -> Failure:
    """A whole-request failure: the `error` of its JSON body when there is one (an IAM refusal answers
    `{"Message": ...}`), else its first bytes."""
    try:
        payload = json.loads(body)
    except ValueError:
        payload = None
    if isinstance(payload, Mapping) and isinstance(payload.get("error"), Mapping):
        return classify(status, payload["error"])
    return classify(status, body[:300].decode("utf-8", "replace"))
