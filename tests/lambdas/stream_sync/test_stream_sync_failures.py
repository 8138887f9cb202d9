"""The classification of OpenSearch errors by their cause chain, on the exact shapes an engine answers.

Each shape is what OpenSearch returns in a `_bulk` item's `error` (or a whole request's), as built by:
UpdateHelper.executeScript (every script failure wrapped in `failed to execute script`),
ScriptService.getScriptFromClusterState / putStoredScript, PainlessScript runtime errors,
TransportBulkAction (require_alias, auto-create), IndexNotFoundException, ClusterBlockException (IndexMetadata
write and flood-stage blocks), FieldMapper.parse and DocumentParser (mapper_parsing_exception), and the
security plugin's SecurityFilter (`no permissions for [...] and User [...]`).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from refdata.errors import describe
from stream_sync.failures import classify, classify_response
from stream_sync_fakes import MISSING_SCRIPT, RUNTIME_ERROR


def error(kind: str, reason: str, **more: Any) -> dict[str, Any]:
    """An engine error object: its type, its reason, and any other field the engine sets."""
    return {"type": kind, "reason": reason, **more}


COMPILE_ERROR = {
    "type": "illegal_argument_exception",
    "reason": "failed to execute script",
    "caused_by": {
        "type": "script_exception",
        "reason": "compile error",
        "script_stack": ["... ctx._source.x = ; ...", "                  ^---- HERE"],
        "script": "ctx._source.x = ;",
        "lang": "painless",
        "position": {"offset": 18, "start": 0, "end": 17},
        "caused_by": {
            "type": "illegal_argument_exception",
            "reason": "invalid sequence of tokens near [';'].",
        },
    },
}
ALIAS_MISSING = {
    "type": "index_not_found_exception",
    "reason": "no such index [geozone-write] and [require_alias] request flag is [true] and [geozone-write] is not an alias",
    "index_uuid": "_na_",
    "index": "geozone-write",
}
AUTO_CREATE_FORBIDDEN = {
    "type": "index_not_found_exception",
    "reason": "no such index [geozone-write] and [action.auto_create_index] contains [-*-write] which forbids "
    "automatic creation of the index",
    "index_uuid": "_na_",
    "index": "geozone-write",
}
WRITE_BLOCK = error(
    "cluster_block_exception", "index [geozone-v1] blocked by: [FORBIDDEN/8/index write (api)];"
)
FLOOD_STAGE = error(
    "cluster_block_exception",
    "index [geozone-v1] blocked by: [TOO_MANY_REQUESTS/12/disk usage exceeded flood-stage watermark, "
    "index has read-only-allow-delete block];",
)
MAPPING_CONFLICT = {
    "type": "mapper_parsing_exception",
    "reason": "failed to parse field [capacity] of type [double] in document with id 'geozone::c#1'. "
    "Preview of field's value: 'many'",
    "caused_by": {"type": "number_format_exception", "reason": 'For input string: "many"'},
}
FORBIDDEN = error(
    "security_exception",
    "no permissions for [indices:admin/mapping/put] and User [name=arn:aws:iam::1:role/sync, "
    "backend_roles=[arn:aws:iam::1:role/sync], requestedTenant=null]",
)


@pytest.mark.parametrize(
    ("status", "error", "kind", "transient"),
    [
        (400, MISSING_SCRIPT, "script-unavailable", True),
        (400, COMPILE_ERROR, "script-unavailable", True),
        (400, RUNTIME_ERROR, "script-failed", False),
        (404, ALIAS_MISSING, "write-alias-missing", True),
        (404, AUTO_CREATE_FORBIDDEN, "index-missing", True),
        (403, WRITE_BLOCK, "index-blocked", True),
        (429, FLOOD_STAGE, "index-blocked", True),
        (400, MAPPING_CONFLICT, "mapping-rejected", False),
        (403, FORBIDDEN, "forbidden", True),
        (409, error("version_conflict_engine_exception", "[x]: version conflict"), "version-conflict", True),
        (429, error("rejected_execution_exception", "rejected execution"), "throttled", True),
        (
            400,
            error("illegal_argument_exception", "Document contains at least one immense term"),
            "document-rejected",
            False,
        ),
        (503, error("unavailable_shards_exception", "primary shard is not active"), "http-503", True),
        (400, error("parsing_exception", "unknown"), "http-400", False),
    ],
)
def test_each_engine_error_shape_gets_its_kind(
    status: int, error: dict[str, Any], kind: str, transient: bool
) -> None:
    failure = classify(status, error)

    assert (failure.kind, failure.transient) == (kind, transient)
    assert failure.reason.startswith(f"HTTP {status} {error['type']}: ")


def test_the_reason_names_every_cause_in_the_chain() -> None:
    assert describe(MISSING_SCRIPT) == (
        "illegal_argument_exception: failed to execute script; caused by resource_not_found_exception: "
        "unable to find script [refdata-sync-apply] in cluster state"
    )


def test_a_whole_request_refusal_is_classified_from_its_body() -> None:
    body = b'{"error":{"root_cause":[],"type":"security_exception","reason":"no permissions for [indices:data/write/bulk] and User [name=x, backend_roles=[], requestedTenant=null]"},"status":403}'

    assert classify_response(403, body).kind == "forbidden"
    assert (
        classify_response(403, b'{"Message":"User: x is not authorized to perform: es:ESHttpPost"}').kind
        == "forbidden"
    )
    assert classify_response(502, b"<html>bad gateway</html>").kind == "http-502"


# The engine's document limits (issue 18): MappingLookup.checkLimits in the preflight of a dynamic mapping update,
# ParseContext's depth checks while parsing, and the JSON parser's constraints on a whole request.
TOTAL_FIELDS = error("illegal_argument_exception", "Limit of total fields [1000] has been exceeded")
MAPPING_DEPTH = error(
    "illegal_argument_exception", "Limit of mapping depth [20] has been exceeded due to object field [a.a.a]"
)
FIELD_DEPTH = {
    "type": "mapper_parsing_exception",
    "reason": "failed to parse",
    "caused_by": {
        "type": "parse_exception",
        "reason": "The depth of the field has exceeded the allowed limit of [20]. This limit can be set by changing "
        "the [index.mapping.depth.limit] index level setting.",
    },
}
NAME_TOO_LONG = {
    "type": "x_content_parse_exception",
    "reason": "[1:1] [script] failed to parse field [params]",
    "caused_by": {
        "type": "stream_constraints_exception",
        "reason": "Name length (50001) exceeds the maximum allowed (50000, from "
        "`StreamReadConstraints.getMaxNameLength()`)",
    },
}
NON_NUMERIC = {
    "type": "x_content_parse_exception",
    "reason": "[1:1] [script] failed to parse field [params]",
    "caused_by": {"type": "json_parse_exception", "reason": "Non-standard token 'Infinity'"},
}


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (TOTAL_FIELDS, "document-limit"),
        (MAPPING_DEPTH, "document-limit"),
        (FIELD_DEPTH, "document-limit"),
        (NAME_TOO_LONG, "document-limit"),
        (NON_NUMERIC, "document-unparseable"),
    ],
)
def test_the_engines_limits_and_its_parsers_refusals_are_permanent_and_named(error: Any, kind: str) -> None:
    failure = classify(400, error)
    assert (failure.kind, failure.transient) == (kind, False)
    whole = classify_response(400, json.dumps({"error": error, "status": 400}).encode())
    assert (whole.kind, whole.transient) == (kind, False)


def test_a_value_the_field_refuses_is_still_a_mapping_rejection_not_a_parse_failure() -> None:
    """mapper_parsing_exception wraps a json_parse_exception for a value of the wrong type: the mapping decides."""
    error = {
        "type": "mapper_parsing_exception",
        "reason": "failed to parse field [n] of type [double]",
        "caused_by": {"type": "json_parse_exception", "reason": "Current token (START_OBJECT) not numeric"},
    }
    assert classify(400, error).kind == "mapping-rejected"
