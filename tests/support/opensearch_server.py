"""Loopback stand-in for an Amazon OpenSearch Service domain, for tests only.

No OpenSearch server can run here, so this in-memory HTTP server on 127.0.0.1 implements the documented
request and response formats of the APIs the platform uses: composable index templates, indices and their
settings (`PUT <index>/_settings`, replicas, write blocks), cluster settings (`action.auto_create_index`),
aliases (`POST _aliases`, filters, write index), stored scripts (with and without a context), `_doc`, `_mget`,
`_bulk` with per-item status and error and optimistic concurrency (`if_seq_no`/`if_primary_term` against each
document's own sequence number), `_search` and `_count` with the query DSL, sorting, `search_after`,
`seq_no_primary_term` and `slice` (tests/support/opensearch_query.py), point in time (create, search, delete,
keep-alive), `_cat/indices`, and the `filter_path` response filter (field paths with `*`; no exclusions, no `**`).

It is strict where the engine is strict, and answers in the engine's words (type, reason, `caused_by`):
- documents are parsed against the index mappings, which grow dynamically (tests/support/opensearch_mapping.py);
- JSON is parsed as the engine parses it: fractional numbers are doubles, integers exact at any size;
- stored scripts run as registered Python twins of their exact painless source (opensearch_scripts.py);
- a write to a missing index or alias auto-creates an index unless the action carries `require_alias` or
  `action.auto_create_index` forbids it; index write blocks refuse writes;
- with `access` (tests/support/iam.py `DomainAccess`), IAM decides each signed request first, as the service
  does: the domain's access policy with the caller's identity policies, answering 403 `{"Message": ...}`;
- with `fgac`, every signed request is attributed to an IAM role and checked by fine-grained access control
  (opensearch_security.py), including the implicit `indices:admin/create` of an auto-created index and the
  implicit `indices:admin/mapping/put` of a document that adds a field, and the document- and field-level
  security of the caller's roles on every read (`_search`, `_count`, `_doc`, `_mget`; opensearch_dlsfls.py).
It is not OpenSearch: queries support what opensearch_query.py lists (anything else answers 400 saying it is
not emulated); documents are visible without refresh; `_source` keeps parsed values (a real `index` operation
keeps the original bytes, and a script-rebuilt source is written by Java, e.g. `1.0E7`); one shard per index (so
one sequence-number series per index, primary term always 1); a point in time is a copy of its indices;
painless is never executed.

Like a domain with signed access only, it answers 403 to requests without a SigV4 `Authorization` header for
service `es`; given credentials it also verifies the signature.

Tests steer it with fault injection (`fail_next`, `delay_next`, `drop_next`, `enqueue_fault`, `fail_item`,
`fail_script`, `latency_seconds`, `lose_points_in_time`) and inspect it through `requests`, `count()` and
`document()`.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import fnmatch
import hashlib
import itertools
import json
import re
import socket
import threading
import time
from collections import Counter, deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar
from urllib.parse import parse_qsl, unquote, urlsplit

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.support.domain_principals import UNRESTRICTED, FineGrainedAccessControl, Subject
from tests.support.engine_node import EngineNode
from tests.support.engine_proxy import Forwarded, ItemError, forward, forward_bulk
from tests.support.iam import DomainAccess
from tests.support.opensearch_dlsfls import check_role, read_restriction
from tests.support.opensearch_errors import OpenSearchError, cause, index_not_found
from tests.support.opensearch_mapping import DEFAULT_DEPTH_LIMIT, DEFAULT_TOTAL_FIELDS_LIMIT, parse_document
from tests.support.opensearch_query import IndexView, Visible, java_boolean, visible_document
from tests.support.opensearch_query import search as run_search
from tests.support.opensearch_scripts import (
    ScriptRuntimeError,
    Twin,
    compile_stored,
    failed_to_execute,
    missing_script,
    run_update_script,
)
from tests.support.opensearch_security import Authorizer, matches
from tests.support.secured_node import SecuredNode

__all__ = [
    "ROUTE_ALIAS",
    "ROUTE_ALIASES",
    "ROUTE_BULK",
    "ROUTE_CAT_INDICES",
    "ROUTE_CLUSTER_SETTINGS",
    "ROUTE_COUNT",
    "ROUTE_DOC",
    "ROUTE_INDEX",
    "ROUTE_INDEX_TEMPLATE",
    "ROUTE_MAPPING",
    "ROUTE_MGET",
    "ROUTE_POINT_IN_TIME",
    "ROUTE_REFRESH",
    "ROUTE_ROOT",
    "ROUTE_SCRIPTS",
    "ROUTE_SEARCH",
    "ROUTE_SECURITY",
    "ROUTE_SETTINGS",
    "ROUTE_UNKNOWN",
    "Fault",
    "FineGrainedAccessControl",
    "LoopbackOpenSearch",
    "OpenSearchError",
    "RecordedRequest",
    "running_server",
]

ROUTE_ROOT = "root"
ROUTE_BULK = "_bulk"
ROUTE_INDEX_TEMPLATE = "_index_template"
ROUTE_INDEX = "index"
ROUTE_MAPPING = "_mapping"
ROUTE_SETTINGS = "_settings"
ROUTE_CLUSTER_SETTINGS = "_cluster/settings"
ROUTE_ALIASES = "_aliases"
ROUTE_ALIAS = "_alias"
ROUTE_CAT_INDICES = "_cat/indices"
ROUTE_SCRIPTS = "_scripts"
ROUTE_DOC = "_doc"
ROUTE_SEARCH = "_search"
ROUTE_COUNT = "_count"
ROUTE_REFRESH = "_refresh"
ROUTE_MGET = "_mget"
ROUTE_POINT_IN_TIME = "_search/point_in_time"
ROUTE_SECURITY = "_plugins/_security"
ROUTE_UNKNOWN = "unknown"

KNOWN_FIELD_TYPES = frozenset(
    {
        "keyword", "text", "boolean", "geo_shape", "geo_point", "float", "double", "half_float",
        "scaled_float", "long", "integer", "short", "byte", "date", "object", "nested", "flat_object",
        "ip", "binary", "match_only_text", "wildcard",
    }
)  # fmt: skip

# Index settings `PUT <index>/_settings` may change on an open index; the static ones it refuses.
DYNAMIC_INDEX_SETTINGS = frozenset(
    {
        "index.number_of_replicas",
        "index.refresh_interval",
        "index.max_result_window",
        "index.blocks.write",
        "index.blocks.read",
        "index.blocks.read_only",
        "index.blocks.read_only_allow_delete",
        "index.blocks.metadata",
        "index.mapping.total_fields.limit",
        "index.mapping.depth.limit",
    }
)
STATIC_INDEX_SETTINGS = frozenset({"index.number_of_shards", "index.codec", "index.routing_partition_size"})
DEFAULT_INDEX_SETTINGS = {"index": {"number_of_shards": "1", "number_of_replicas": "1"}}
AUTO_CREATE_INDEX = "action.auto_create_index"
# Index blocks in ClusterBlocks order: setting -> (id, status, description).
_WRITE_BLOCKS = (
    ("index.blocks.read_only", 5, 403, "FORBIDDEN/5/index read-only (api)"),
    ("index.blocks.write", 8, 403, "FORBIDDEN/8/index write (api)"),
    (
        "index.blocks.read_only_allow_delete",
        12,
        429,
        "TOO_MANY_REQUESTS/12/disk usage exceeded flood-stage watermark, index has read-only-allow-delete block",
    ),
)
# Action/metadata parameters a `_bulk` line may carry (BulkRequestParser); any other is refused.
_BULK_PARAMETERS = frozenset(
    {
        "_index",
        "_type",
        "_id",
        "routing",
        "op_type",
        "version",
        "version_type",
        "if_seq_no",
        "if_primary_term",
        "retry_on_conflict",
        "pipeline",
        "_source",
        "require_alias",
    }
)
_ITEM_ACTIONS = {
    "index": "indices:data/write/index",
    "create": "indices:data/write/index",
    "update": "indices:data/write/update",
    "delete": "indices:data/write/delete",
}


def _index_not_found(name: str) -> OpenSearchError:
    return index_not_found(name, **{"resource.type": "index_or_alias", "resource.id": name})


def _alias_name_conflict(alias: str) -> OpenSearchError:
    return OpenSearchError(
        400,
        "invalid_alias_name_exception",
        f"Invalid alias name [{alias}]: an index or data stream exists with the same name as the alias",
    )


def _auto_create_rules(value: str) -> tuple[bool, list[tuple[str, bool]]]:
    """AutoCreateIndex.AutoCreate: `true`, `false`, or comma-separated patterns with optional +/- prefixes."""
    if value in ("true", "false"):
        return value == "true", []
    expressions: list[tuple[str, bool]] = []
    for raw in value.split(","):
        pattern = raw.strip()
        if not pattern:
            raise ValueError(
                f"Can't parse [{value}] for setting [{AUTO_CREATE_INDEX}] must be either [true, false, or a comma "
                "separated list of index patterns]"
            )
        if pattern[0] in "+-":
            if len(pattern) == 1:
                raise ValueError(
                    f"Can't parse [{value}] for setting [{AUTO_CREATE_INDEX}] must contain an index name after "
                    f"[{pattern}]"
                )
            expressions.append((pattern[1:], pattern[0] == "+"))
        else:
            expressions.append((pattern, True))
    return True, expressions


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes
    route: str

    def json(self) -> Any:
        return json.loads(self.body)

    def ndjson(self) -> list[Any]:
        return [json.loads(line) for line in self.body.decode("utf-8").splitlines() if line.strip()]


@dataclass(frozen=True)
class Fault:
    """A canned outcome for one request to a route.

    status None means: wait `delay_seconds`, then process the request normally (it takes effect even if
    the client gave up). With a status, the request has no effect and the canned answer is sent after
    the delay. `drop_connection` closes the socket without any response (after reading the request).
    """

    status: int | None = None
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_seconds: float = 0.0
    drop_connection: bool = False
    method: str | None = None


@dataclass
class ItemFault:
    status: int
    error_type: str
    reason: str
    remaining: int | None


@dataclass
class _ScriptFault:
    java_exception: str
    reason: str
    remaining: int | None


@dataclass
class _Index:
    name: str
    uuid: str
    mappings: dict[str, Any]
    settings: dict[str, Any]
    aliases: dict[str, dict[str, Any]]
    created_at: int
    docs: dict[str, dict[str, Any]] = field(default_factory=dict)
    versions: dict[str, int] = field(default_factory=dict)
    seq_no: int = -1  # the shard's last sequence number; each write takes the next one
    doc_seq_nos: dict[str, int] = field(default_factory=dict)  # each live document's own sequence number

    def next_seq_no(self, doc_id: str, *, live: bool) -> int:
        self.seq_no += 1
        if live:
            self.doc_seq_nos[doc_id] = self.seq_no
        else:
            self.doc_seq_nos.pop(doc_id, None)
        return self.seq_no

    def setting(self, dotted: str) -> str | None:
        node: Any = self.settings
        for part in dotted.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return None
            node = node[part]
        return node if isinstance(node, str) else None


@dataclass
class _StoredScript:
    lang: str
    source: str
    compiled: dict[str, Twin] = field(default_factory=dict)  # by context, once compiled


@dataclass
class _BulkOperation:
    op: str
    target: Any
    doc_id: Any
    source: Any
    require_alias: bool
    if_seq_no: Any = None
    if_primary_term: Any = None
    answer: dict[str, Any] | None = None


@dataclass
class _PointInTime:
    """Frozen copies of the indices it was opened on (what a search with this `pit` sees, through the aliases of
    the names it was opened with), alive until `expires_at`."""

    indices: dict[str, _Index]
    named: list[str]
    expires_at: float


def _glob_match(name: str, pattern: str) -> bool:
    return fnmatch.fnmatchcase(name, pattern)


def _patterns_overlap(first: str, second: str) -> bool:
    """Whether some name matches both glob patterns (exact for the `prefix*` patterns used here)."""
    if _glob_match(first, second) or _glob_match(second, first):
        return True
    prefix_a, prefix_b = first.split("*", 1)[0], second.split("*", 1)[0]
    both_wild = "*" in first and "*" in second
    return both_wild and (prefix_a.startswith(prefix_b) or prefix_b.startswith(prefix_a))


def _deep_merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _validate_mappings(mappings: Mapping[str, Any]) -> None:
    def walk(properties: Mapping[str, Any], prefix: str) -> None:
        for name, spec in properties.items():
            if not isinstance(spec, Mapping):
                raise OpenSearchError(
                    400, "mapper_parsing_exception", f"Expected map for property [fields] on field [{name}]"
                )
            field_type = spec.get("type", "object")
            if field_type not in KNOWN_FIELD_TYPES:
                raise OpenSearchError(
                    400,
                    "mapper_parsing_exception",
                    f"No handler for type [{field_type}] declared on field [{prefix}{name}]",
                )
            if isinstance(spec.get("properties"), Mapping):
                walk(spec["properties"], f"{prefix}{name}.")

    properties = mappings.get("properties", {})
    if not isinstance(properties, Mapping):
        raise OpenSearchError(400, "mapper_parsing_exception", "Expected map for property [properties]")
    walk(properties, "")


def _validate_index_name(name: str) -> None:
    if name != name.lower():
        raise OpenSearchError(
            400, "invalid_index_name_exception", f"Invalid index name [{name}], must be lowercase", index=name
        )
    if not name or name.startswith(("_", "-", "+")) or re.search(r'[\\/*?"<>| ,#:]', name):
        raise OpenSearchError(
            400,
            "invalid_index_name_exception",
            f"Invalid index name [{name}], must not start with '_', '-', or '+' and must not contain "
            'any of [\\, /, *, ?, ", <, >, |,  , ,, #, :]',
            index=name,
        )


def _time_value_seconds(text: Any, setting: str) -> float:
    """A TimeValue (`30s`, `10m`, `1h`, `1d`, `500ms`) in seconds, refused in the engine's words otherwise."""
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
    match = re.fullmatch(r"(\d+)(ms|s|m|h|d)", str(text))
    if not match:
        raise OpenSearchError(
            400,
            "illegal_argument_exception",
            f"failed to parse setting [{setting}] with value [{text}] as a time value: unit is missing or "
            "unrecognized",
        )
    return int(match.group(1)) * units[match.group(2)]


def _flat_settings(settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """Settings as dotted keys (`index.` added where missing); scalars as strings, None kept (a reset)."""
    flat: dict[str, Any] = {}

    def walk(value: Any, prefix: str) -> None:
        if isinstance(value, Mapping):
            for key, member in value.items():
                walk(member, f"{prefix}{key}.")
            return
        key = prefix[:-1]
        if not key.startswith("index."):
            key = f"index.{key}"
        flat[key] = None if value is None else (str(value).lower() if isinstance(value, bool) else str(value))

    walk(settings or {}, "")
    return flat


def _nested_settings(flat: Mapping[str, Any]) -> dict[str, Any]:
    nested: dict[str, Any] = {}
    for key, value in flat.items():
        parts = key.split(".")
        node = nested
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return nested


def _replica_count(value: Any) -> str:
    try:
        replicas = int(str(value))
    except ValueError:
        raise OpenSearchError(
            400,
            "illegal_argument_exception",
            f"Failed to parse value [{value}] for setting [index.number_of_replicas]",
        ) from None
    if replicas < 0:
        raise OpenSearchError(
            400,
            "illegal_argument_exception",
            f"Failed to parse value [{value}] for setting [index.number_of_replicas] must be >= 0",
        )
    return str(replicas)


class _Cluster:
    """The in-memory cluster state; every public method runs under one lock."""

    def __init__(self, *, auto_create_index: bool) -> None:
        self.lock = threading.RLock()
        # Node setting (opensearch.yml); `PUT _cluster/settings` persistent and transient values override it.
        self.node_settings: dict[str, str] = {AUTO_CREATE_INDEX: "true" if auto_create_index else "false"}
        self.cluster_settings: dict[str, dict[str, str]] = {"persistent": {}, "transient": {}}
        self.templates: dict[str, dict[str, Any]] = {}
        self.scripts: dict[str, _StoredScript] = {}
        # Fine-grained access control's REST API: roles and role mappings by name.
        self.security: dict[str, dict[str, dict[str, Any]]] = {"roles": {}, "rolesmapping": {}}
        self.authorizer = Authorizer(self.security)
        self.indices: dict[str, _Index] = {}
        self.item_faults: dict[str, deque[ItemFault]] = {}
        self.script_faults: dict[str, deque[_ScriptFault]] = {}
        self.points_in_time: dict[str, _PointInTime] = {}
        self._uuids = itertools.count(1)
        self._contexts = itertools.count(1)

    # --- access control --------------------------------------------------------------------------

    def aliases_by_index(self, names: Sequence[str]) -> dict[str, tuple[str, ...]]:
        """What the security plugin checks for these names: each concrete index with the aliases on it (a name
        that is not an index, e.g. one about to be created, stands for itself)."""
        return {name: tuple(self.indices[name].aliases) if name in self.indices else () for name in names}

    def request_targets(self, expression: str) -> list[str]:
        """The concrete indices a request names (patterns and aliases resolved), or the names themselves when
        they resolve to nothing (the security check runs before the action answers 404)."""
        names: list[str] = []
        for part in expression.split(","):
            try:
                names.extend(self.resolve(part))
            except OpenSearchError:
                names.append(part)
        return sorted(set(names))

    def check_indices(self, subject: Subject, actions: Sequence[str], names: Sequence[str]) -> None:
        self.authorizer.check_indices(subject, actions, self.aliases_by_index(names))

    # --- cluster settings ------------------------------------------------------------------------

    def setting(self, key: str) -> str:
        for scope in ("transient", "persistent"):
            if key in self.cluster_settings[scope]:
                return self.cluster_settings[scope][key]
        return self.node_settings[key]

    def put_cluster_settings(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Like Amazon OpenSearch Service: only the flat form (`"action.auto_create_index": ...`) is accepted."""
        answer: dict[str, Any] = {"acknowledged": True, "persistent": {}, "transient": {}}
        staged = {scope: dict(values) for scope, values in self.cluster_settings.items()}
        for scope in ("persistent", "transient"):
            values = body.get(scope) or {}
            changed: dict[str, Any] = {}
            for key, value in values.items():
                if isinstance(value, Mapping):
                    raise OpenSearchError(
                        400,
                        "illegal_argument_exception",
                        f"[{scope}.{key}]: Amazon OpenSearch Service accepts only the flat settings form, e.g. "
                        f'{{"{scope}": {{"{AUTO_CREATE_INDEX}": false}}}}',
                    )
                if key != AUTO_CREATE_INDEX:
                    raise OpenSearchError(
                        400,
                        "illegal_argument_exception",
                        f"cluster setting [{key}] is not emulated by the loopback server",
                    )
                if value is None:
                    staged[scope].pop(key, None)
                    continue
                text = str(value).lower() if isinstance(value, bool) else str(value)
                try:
                    _auto_create_rules(text)
                except ValueError as invalid:
                    raise OpenSearchError(
                        400,
                        "illegal_argument_exception",
                        f"illegal value can't update [{key}] from [{self.setting(key)}] to [{text}]",
                        cause=cause("illegal_argument_exception", str(invalid)),
                    ) from None
                staged[scope][key] = changed[key] = text
            answer[scope] = _nested_settings(changed)
        self.cluster_settings = staged
        return answer

    def get_cluster_settings(self, flat: bool) -> dict[str, Any]:
        return {
            scope: dict(values) if flat else _nested_settings(values)
            for scope, values in self.cluster_settings.items()
        }

    def should_auto_create(self, name: str) -> bool:
        """AutoCreateIndex.shouldAutoCreate: True, or IndexNotFoundException with the setting's reason."""
        value = self.setting(AUTO_CREATE_INDEX)
        enabled, expressions = _auto_create_rules(value)
        if not enabled:
            raise index_not_found(name, f"[{AUTO_CREATE_INDEX}] is [false]")
        for pattern, include in expressions:
            if matches(pattern, name):
                if include:
                    return True
                raise index_not_found(
                    name,
                    f"[{AUTO_CREATE_INDEX}] contains [-{pattern}] which forbids automatic creation of the index",
                )
        if not expressions:
            return True
        raise index_not_found(name, f"[{AUTO_CREATE_INDEX}] ([{value}]) doesn't match")

    # --- templates -------------------------------------------------------------------------------

    def put_template(self, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        patterns = body.get("index_patterns")
        if isinstance(patterns, str):
            patterns = [patterns]
        if not patterns:
            raise OpenSearchError(
                400,
                "action_request_validation_exception",
                "Validation Failed: 1: index patterns are missing;",
            )
        template = body.get("template", {})
        _validate_mappings(template.get("mappings", {}))
        if "settings" in template:
            self._validated_settings(_flat_settings(template.get("settings")))
        priority = int(body.get("priority", 0))
        for other_name, other in self.templates.items():
            if other_name == name or int(other.get("priority", 0)) != priority:
                continue
            if any(_patterns_overlap(a, b) for a in patterns for b in other["index_patterns"]):
                raise OpenSearchError(
                    400,
                    "illegal_argument_exception",
                    f"index template [{name}] has index patterns {patterns} matching patterns from existing "
                    f"templates [{other_name}] with patterns ({other_name} => {other['index_patterns']}) "
                    f"that have the same priority [{priority}], multiple index templates may not match "
                    "during index creation, please use a different priority",
                )
        stored = copy.deepcopy(dict(body))
        stored["index_patterns"] = list(patterns)
        self.templates[name] = stored
        return {"acknowledged": True}

    def get_templates(self, name: str | None) -> dict[str, Any]:
        names = sorted(n for n in self.templates if name is None or _glob_match(n, name))
        if name is not None and not names:
            raise OpenSearchError(
                404, "resource_not_found_exception", f"index template matching [{name}] not found"
            )
        return {
            "index_templates": [
                {"name": n, "index_template": copy.deepcopy(self.templates[n])} for n in names
            ]
        }

    def delete_template(self, name: str) -> dict[str, Any]:
        if name not in self.templates:
            raise OpenSearchError(404, "index_template_missing_exception", f"index_template [{name}] missing")
        del self.templates[name]
        return {"acknowledged": True}

    def _matching_template(self, index: str) -> dict[str, Any] | None:
        candidates = [
            t for t in self.templates.values() if any(_glob_match(index, p) for p in t["index_patterns"])
        ]
        if not candidates:
            return None
        return max(candidates, key=lambda t: int(t.get("priority", 0)))

    # --- indices ---------------------------------------------------------------------------------

    def _alias_owners(self, alias: str) -> list[_Index]:
        return [index for index in self.indices.values() if alias in index.aliases]

    def is_alias(self, name: str) -> bool:
        return any(name in index.aliases for index in self.indices.values())

    @staticmethod
    def _validated_settings(flat: dict[str, Any]) -> dict[str, Any]:
        if flat.get("index.number_of_replicas") is not None:
            flat["index.number_of_replicas"] = _replica_count(flat["index.number_of_replicas"])
        return flat

    def create_index(self, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        _validate_index_name(name)
        if name in self.indices:
            existing = self.indices[name]
            raise OpenSearchError(
                400,
                "resource_already_exists_exception",
                f"index [{name}/{existing.uuid}] already exists",
                index_uuid=existing.uuid,
                index=name,
            )
        if self._alias_owners(name):
            raise OpenSearchError(
                400,
                "invalid_index_name_exception",
                f"Invalid index name [{name}], an alias with the same name already exists",
                index=name,
            )
        template = self._matching_template(name) or {}
        template_body = template.get("template", {})
        mappings = _deep_merge(template_body.get("mappings", {}), body.get("mappings", {}))
        _validate_mappings(mappings)
        flat = {
            **_flat_settings(DEFAULT_INDEX_SETTINGS),
            **_flat_settings(template_body.get("settings")),
            **_flat_settings(body.get("settings")),
        }
        settings = _nested_settings(self._validated_settings(flat))
        aliases = {
            **copy.deepcopy(template_body.get("aliases", {})),
            **copy.deepcopy(body.get("aliases", {})),
        }
        for alias, spec in aliases.items():
            if alias in self.indices or alias == name:
                raise _alias_name_conflict(alias)
            if spec.get("is_write_index") and any(
                i.aliases[alias].get("is_write_index") for i in self._alias_owners(alias)
            ):
                raise OpenSearchError(
                    400, "illegal_state_exception", f"alias [{alias}] has more than one write index"
                )
        uuid = hashlib.sha1(f"{name}-{next(self._uuids)}".encode()).hexdigest()[:22]
        self.indices[name] = _Index(
            name=name,
            uuid=uuid,
            mappings=mappings,
            settings=settings,
            aliases={alias: dict(spec) for alias, spec in aliases.items()},
            created_at=int(time.time() * 1000),
        )
        return {"acknowledged": True, "shards_acknowledged": True, "index": name}

    def delete_index(self, expression: str) -> dict[str, Any]:
        for name in self.resolve(expression, allow_aliases=False):
            del self.indices[name]
        return {"acknowledged": True}

    def resolve(self, expression: str, *, allow_aliases: bool = True) -> list[str]:
        """Concrete index names for a comma list of indices, aliases and patterns."""
        names: list[str] = []
        for part in expression.split(","):
            if part in ("_all", "*"):
                names.extend(self.indices)
            elif "*" in part:
                names.extend(n for n in self.indices if _glob_match(n, part))
                if allow_aliases:
                    aliases = {
                        a for index in self.indices.values() for a in index.aliases if _glob_match(a, part)
                    }
                    names.extend(i.name for a in sorted(aliases) for i in self._alias_owners(a))
            elif part in self.indices:
                names.append(part)
            elif allow_aliases and self._alias_owners(part):
                names.extend(index.name for index in self._alias_owners(part))
            else:
                raise _index_not_found(part)
        return sorted(set(names))

    def get_indices(self, expression: str) -> dict[str, Any]:
        return {
            name: {
                "aliases": copy.deepcopy(self.indices[name].aliases),
                "mappings": copy.deepcopy(self.indices[name].mappings),
                "settings": self._settings_answer(self.indices[name]),
            }
            for name in self.resolve(expression)
        }

    @staticmethod
    def _settings_answer(index: _Index) -> dict[str, Any]:
        return _deep_merge(
            index.settings,
            {
                "index": {
                    "provided_name": index.name,
                    "uuid": index.uuid,
                    "creation_date": str(index.created_at),
                }
            },
        )

    def get_settings(self, expression: str) -> dict[str, Any]:
        return {
            name: {"settings": self._settings_answer(self.indices[name])} for name in self.resolve(expression)
        }

    def update_settings(self, expression: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """`PUT <index>/_settings`: dynamic settings only; null resets a setting."""
        names = self.resolve(expression)
        settings = body.get("settings") if isinstance(body.get("settings"), Mapping) else body
        flat = _flat_settings(settings)
        for key in flat:
            if key in STATIC_INDEX_SETTINGS:
                listed = ", ".join(f"[{name}/{self.indices[name].uuid}]" for name in names)
                raise OpenSearchError(
                    400,
                    "illegal_argument_exception",
                    f"Can't update non dynamic settings [[{key}]] for open indices [{listed}]",
                )
            if key not in DYNAMIC_INDEX_SETTINGS:
                raise OpenSearchError(
                    400,
                    "illegal_argument_exception",
                    f"unknown setting [{key}] please check that any required plugins are installed, or check the "
                    "breaking changes documentation for removed settings",
                )
            if key.startswith("index.blocks.") and flat[key] is not None:
                java_boolean(flat[key])
        self._validated_settings(flat)
        for name in names:
            index = self.indices[name]
            merged = {**_flat_settings(index.settings), **flat}
            if merged.get("index.number_of_replicas") is None:
                merged["index.number_of_replicas"] = "1"
            index.settings = _nested_settings({k: v for k, v in merged.items() if v is not None})
        return {"acknowledged": True}

    def get_mappings(self, expression: str) -> dict[str, Any]:
        return {
            name: {"mappings": copy.deepcopy(self.indices[name].mappings)}
            for name in self.resolve(expression)
        }

    def cat_indices(self, expression: str | None) -> list[dict[str, Any]]:
        names = self.resolve(expression) if expression else sorted(self.indices)
        return [
            {
                "health": "green",
                "status": "open",
                "index": name,
                "uuid": self.indices[name].uuid,
                "pri": self.indices[name].setting("index.number_of_shards") or "1",
                "rep": self.indices[name].setting("index.number_of_replicas") or "1",
                "docs.count": str(len(self.indices[name].docs)),
                "docs.deleted": "0",
            }
            for name in names
        ]

    # --- aliases ---------------------------------------------------------------------------------

    def get_aliases(self, expression: str | None, alias_pattern: str | None) -> dict[str, Any]:
        names = self.resolve(expression) if expression else sorted(self.indices)
        result: dict[str, Any] = {}
        for name in names:
            aliases = {
                alias: copy.deepcopy(spec)
                for alias, spec in self.indices[name].aliases.items()
                if alias_pattern is None or any(_glob_match(alias, p) for p in alias_pattern.split(","))
            }
            if alias_pattern is None or aliases:
                result[name] = {"aliases": aliases}
        if alias_pattern is not None and not result:
            raise _AliasMissing(alias_pattern)
        return result

    def alias_action_targets(self, body: Mapping[str, Any]) -> list[tuple[list[str], list[str]]]:
        """Per alias action: the security actions it needs and the indices it touches (for the check)."""
        checks: list[tuple[list[str], list[str]]] = []
        for action in body.get("actions") or []:
            if not isinstance(action, Mapping) or len(action) != 1:
                continue
            ((kind, spec),) = action.items()
            expressions = spec.get("indices") or [spec.get("index")]
            names = [n for e in expressions if isinstance(e, str) for n in self.request_targets(e)]
            needed = ["indices:admin/aliases"] + (["indices:admin/delete"] if kind == "remove_index" else [])
            checks.append((needed, names))
        return checks

    def update_aliases(self, body: Mapping[str, Any]) -> dict[str, Any]:
        actions = body.get("actions")
        if not isinstance(actions, list) or not actions:
            raise OpenSearchError(
                400,
                "action_request_validation_exception",
                "Validation Failed: 1: Must specify at least one alias action;",
            )
        staged = {name: copy.deepcopy(index.aliases) for name, index in self.indices.items()}
        removed_indices: set[str] = set()
        for action in actions:
            ((kind, spec),) = action.items()
            index_names = self._action_targets(spec, "index", "indices")
            if kind == "remove_index":
                removed_indices.update(index_names)
                continue
            alias_names = spec.get("aliases") or [spec.get("alias")]
            if not all(alias_names):
                raise OpenSearchError(
                    400,
                    "action_request_validation_exception",
                    "Validation Failed: 1: [alias/aliases] is either missing or null;",
                )
            for index_name in index_names:
                for alias in alias_names:
                    if kind == "add":
                        if alias in self.indices:
                            raise _alias_name_conflict(alias)
                        entry = {
                            k: copy.deepcopy(spec[k])
                            for k in ("filter", "is_write_index", "routing")
                            if k in spec
                        }
                        staged[index_name][alias] = entry
                    elif kind == "remove":
                        if alias not in staged[index_name] and spec.get("must_exist", True) is not False:
                            raise OpenSearchError(
                                404, "aliases_not_found_exception", f"aliases [{alias}] missing"
                            )
                        staged[index_name].pop(alias, None)
                    else:
                        raise OpenSearchError(
                            400, "illegal_argument_exception", f"Unsupported action [{kind}]"
                        )
        for name in removed_indices:
            staged.pop(name, None)
        writers: dict[str, list[str]] = {}
        for name, aliases in staged.items():
            for alias, spec in aliases.items():
                if spec.get("is_write_index"):
                    writers.setdefault(alias, []).append(name)
        for alias, names in writers.items():
            if len(names) > 1:
                raise OpenSearchError(
                    400,
                    "illegal_state_exception",
                    f"alias [{alias}] has more than one write index [{','.join(sorted(names))}]",
                )
        for name in removed_indices:
            del self.indices[name]
        for name, aliases in staged.items():
            self.indices[name].aliases = aliases
        return {"acknowledged": True}

    def _action_targets(self, spec: Mapping[str, Any], single: str, plural: str) -> list[str]:
        expressions = spec.get(plural) or [spec.get(single)]
        if not all(expressions):
            raise OpenSearchError(
                400,
                "action_request_validation_exception",
                "Validation Failed: 1: One of [index] or [indices] is required;",
            )
        names: list[str] = []
        for expression in expressions:
            names.extend(self.resolve(expression, allow_aliases=False))
        return names

    def write_index(self, target: str) -> str:
        """The concrete index a write to `target` (index or alias) goes to (IndexNameExpressionResolver)."""
        if target in self.indices:
            return target
        owners = self._alias_owners(target)
        if not owners:
            raise _index_not_found(target)
        explicit = [i for i in owners if i.aliases[target].get("is_write_index")]
        if explicit:
            return explicit[0].name
        if len(owners) == 1 and owners[0].aliases[target].get("is_write_index") is not False:
            return owners[0].name
        raise OpenSearchError(
            400,
            "illegal_argument_exception",
            f"no write index is defined for alias [{target}]. The write index may be explicitly disabled "
            "using is_write_index=false or the alias points to multiple indices without one being "
            "designated as a write index",
        )

    # --- security API ----------------------------------------------------------------------------

    def put_security(self, kind: str, name: str, body: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
        """PUT _plugins/_security/api/{roles,rolesmapping}/<name>: 201 CREATED or 200 OK, as documented."""
        if kind == "roles" and not isinstance(body.get("index_permissions", []), list):
            raise OpenSearchError(400, "bad_request", "index_permissions must be an array")
        if kind == "roles":
            check_role(body)
        if kind == "rolesmapping" and not isinstance(body.get("backend_roles", []), list):
            raise OpenSearchError(400, "bad_request", "backend_roles must be an array")
        existed = name in self.security[kind]
        self.security[kind][name] = copy.deepcopy(dict(body))
        status = "OK" if existed else "CREATED"
        return (200 if existed else 201), {"status": status, "message": f"'{name}' {status.lower()}."}

    # --- scripts ---------------------------------------------------------------------------------

    def put_script(self, script_id: str, body: Mapping[str, Any], context: str | None) -> dict[str, Any]:
        """`PUT _scripts/<id>` stores the source; `PUT _scripts/<id>/<context>` compiles it for that context first."""
        script = body.get("script")
        if not isinstance(script, Mapping) or not script.get("source") or not script.get("lang"):
            raise OpenSearchError(
                400, "illegal_argument_exception", "must specify lang and source for stored script"
            )
        if script["lang"] != "painless":
            raise OpenSearchError(
                400,
                "illegal_argument_exception",
                f"unable to put stored script with unsupported lang [{script['lang']}]",
            )
        stored = _StoredScript(script["lang"], script["source"])
        if context is not None:
            stored.compiled[context] = compile_stored(script_id, stored.source, context)
        self.scripts[script_id] = stored
        return {"acknowledged": True}

    def get_script(self, script_id: str) -> tuple[int, dict[str, Any]]:
        stored = self.scripts.get(script_id)
        if stored is None:
            return 404, {"_id": script_id, "found": False}
        return 200, {
            "_id": script_id,
            "found": True,
            "script": {"lang": stored.lang, "source": stored.source},
        }

    def delete_script(self, script_id: str) -> dict[str, Any]:
        if script_id not in self.scripts:
            raise OpenSearchError(
                404, "resource_not_found_exception", f"stored script [{script_id}] does not exist"
            )
        del self.scripts[script_id]
        return {"acknowledged": True}

    def _update_script(self, script_id: str) -> Twin:
        """ScriptService.compile for the update context: the stored script, compiled (cached) or refused."""
        stored = self.scripts.get(script_id)
        if stored is None:
            raise missing_script(script_id)
        twin = stored.compiled.get("update")
        if twin is None:
            try:
                twin = stored.compiled["update"] = compile_stored(script_id, stored.source, "update")
            except OpenSearchError as refused:
                raise failed_to_execute(refused) from None
        return twin

    # --- documents -------------------------------------------------------------------------------

    def _visible(
        self, subject: Subject, name: str, named: Sequence[str], frozen: _Index | None = None
    ) -> Visible:
        """Index `name` (or a point in time's `frozen` copy of it) as `subject` sees it through the names of the
        request (`named`): the filters of the aliases it used, and its document- and field-level security."""
        index = frozen or self.indices[name]
        restriction = read_restriction(subject, self.authorizer.roles(subject), name, tuple(index.aliases))
        return Visible(
            index=IndexView(name, index.mappings, index.docs),
            alias_filters=[
                spec["filter"]
                for alias, spec in index.aliases.items()
                if alias in named and spec.get("filter")
            ],
            document_filter=restriction.document_filter(),
            fields=restriction.visible,
            seq_nos=index.doc_seq_nos,
        )

    def get_document(self, subject: Subject, target: str, doc_id: str) -> tuple[int, dict[str, Any]]:
        names = self.resolve(target)
        if len(names) != 1:
            raise OpenSearchError(
                400,
                "illegal_argument_exception",
                f"alias [{target}] has more than one index associated with it [{names}], can't execute a "
                "single index op",
            )
        index = self.indices[names[0]]
        view = self._visible(subject, index.name, ())
        source = index.docs.get(doc_id)
        source = None if source is None else visible_document(view, source)
        if source is None:
            return 404, {"_index": index.name, "_id": doc_id, "found": False}
        return 200, {
            "_index": index.name,
            "_id": doc_id,
            "_version": index.versions[doc_id],
            "_seq_no": index.doc_seq_nos[doc_id],
            "_primary_term": 1,
            "found": True,
            "_source": copy.deepcopy(dict(source)),
        }

    def multi_get(self, subject: Subject, expression: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """`POST <index>/_mget {"ids": [...]}`: one entry per id, in order, `found` or not."""
        ids = body.get("ids")
        if not isinstance(ids, list) or not ids or not all(isinstance(doc_id, str) for doc_id in ids):
            raise OpenSearchError(
                400, "action_request_validation_exception", "Validation Failed: 1: no documents to get;"
            )
        docs = []
        for doc_id in ids:
            status, answer = self.get_document(subject, expression, doc_id)
            docs.append(
                answer if status == 200 else {"_index": answer["_index"], "_id": doc_id, "found": False}
            )
        return {"docs": docs}

    # --- point in time ---------------------------------------------------------------------------

    def open_point_in_time(self, expression: str, keep_alive: Any, now: float) -> dict[str, Any]:
        seconds = _time_value_seconds(keep_alive, "keep_alive")
        if seconds > 86400:
            raise OpenSearchError(
                400,
                "illegal_argument_exception",
                f"Keep alive for request ({keep_alive}) is too large. It must be less than (1d). This limit can be "
                "set by changing the [point_in_time.max_keep_alive] cluster level setting.",
            )
        names = self.resolve(expression)
        pit_id = base64.urlsafe_b64encode(f"pit-{next(self._contexts)}-{expression}".encode()).decode()
        self.points_in_time[pit_id] = _PointInTime(
            indices={name: copy.deepcopy(self.indices[name]) for name in names},
            named=expression.split(","),
            expires_at=now + seconds,
        )
        shards = {"total": len(names), "successful": len(names), "skipped": 0, "failed": 0}
        return {"pit_id": pit_id, "_shards": shards, "creation_time": int(now * 1000)}

    def point_in_time(self, spec: Any, now: float) -> tuple[str, _PointInTime]:
        """The live point in time a search's `pit` names, its keep-alive extended; a missing or expired one is
        the engine's 404."""
        if not isinstance(spec, Mapping) or not isinstance(spec.get("id"), str):
            raise OpenSearchError(400, "parsing_exception", "[pit] needs an [id]")
        pit_id = spec["id"]
        found = self.points_in_time.get(pit_id)
        if found is None or found.expires_at <= now:
            self.points_in_time.pop(pit_id, None)
            raise OpenSearchError(
                404,
                "search_phase_execution_exception",
                "all shards failed",
                cause=cause("search_context_missing_exception", f"No search context found for id [{pit_id}]"),
                phase="query",
            )
        if "keep_alive" in spec:
            found.expires_at = now + _time_value_seconds(spec["keep_alive"], "keep_alive")
        return pit_id, found

    def close_points_in_time(self, body: Mapping[str, Any]) -> dict[str, Any]:
        ids = body.get("pit_id")
        ids = [ids] if isinstance(ids, str) else ids
        if not isinstance(ids, list) or not ids:
            raise OpenSearchError(
                400, "action_request_validation_exception", "Validation Failed: 1: no pit ids;"
            )
        return {
            "pits": [{"successful": self.points_in_time.pop(i, None) is not None, "pit_id": i} for i in ids]
        }

    def search(
        self,
        subject: Subject,
        expression: str | None,
        body: Mapping[str, Any] | None,
        *,
        count_only: bool = False,
        now: float = 0.0,
    ) -> dict[str, Any]:
        """`_search` / `_count` over the concrete indices of `expression`, each through the filters of the aliases
        the expression names and the caller's document- and field-level security; or `_search` over the frozen
        indices of the body's `pit` (then `expression` must be None: a search with a point in time names no
        index)."""
        if body is None or "pit" not in body:
            named = (expression or "_all").split(",")
            views = [self._visible(subject, name, named) for name in self.resolve(expression or "_all")]
            return copy.deepcopy(run_search(views, body, count_only=count_only))
        if expression is not None:
            raise OpenSearchError(
                400,
                "action_request_validation_exception",
                "Validation Failed: 1: [indices] cannot be used with point in time. Do not specify any index with "
                "point in time.;",
            )
        pit_id, pit = self.point_in_time(body["pit"], now)
        views = [self._visible(subject, name, pit.named, frozen) for name, frozen in pit.indices.items()]
        return {"pit_id": pit_id} | copy.deepcopy(run_search(views, body))

    # --- _bulk -----------------------------------------------------------------------------------

    def bulk(
        self,
        subject: Subject,
        default_index: str | None,
        lines: list[str] | list[bytes],
        *,
        require_alias: bool = False,
    ) -> dict[str, Any]:
        """TransportBulkAction: the whole request is parsed first (a malformed request changes nothing), the
        cluster permission `indices:data/write/bulk` is checked, missing indices are auto-created (or refused),
        then each concrete index's items run as one shard request (`indices:data/write/bulk[s]` and each
        item's action checked on that index, then its write blocks)."""
        started = time.monotonic()
        operations = self._parse_bulk(lines, default_index, require_alias)
        self.authorizer.check_cluster(subject, "indices:data/write/bulk")
        cannot_create = self._auto_create(subject, operations)
        groups: dict[str, list[_BulkOperation]] = {}
        resolved: dict[str, str] = {}  # within one request the cluster's aliases do not change
        for operation in operations:
            if operation.answer is None:
                index_name = self._concrete_target(operation, cannot_create, resolved)
                if index_name is not None:
                    groups.setdefault(index_name, []).append(operation)
        for index_name, group in groups.items():
            self._run_shard(subject, self.indices[index_name], group)
        items = []
        errors = False
        for operation in operations:
            answer = operation.answer
            assert answer is not None
            errors = errors or "error" in answer
            items.append({operation.op: answer})
        return {"took": int((time.monotonic() - started) * 1000), "errors": errors, "items": items}

    @staticmethod
    def _parse_bulk(
        lines: list[str] | list[bytes], default_index: str | None, default_require_alias: bool
    ) -> list[_BulkOperation]:
        operations: list[_BulkOperation] = []
        position = 0
        while position < len(lines):
            line_number = position + 1
            try:
                header = _parse_line(lines[position])
                ((op, meta),) = header.items()
            except (ValueError, AttributeError) as error:
                raise OpenSearchError(
                    400, "illegal_argument_exception", f"Malformed action/metadata line [{line_number}]"
                ) from error
            if op not in _ITEM_ACTIONS:
                raise OpenSearchError(
                    400,
                    "illegal_argument_exception",
                    f"Malformed action/metadata line [{line_number}], expected one of [create, delete, "
                    f"index, update] but found [{op}]",
                )
            if type(meta) is not dict:
                raise OpenSearchError(
                    400,
                    "illegal_argument_exception",
                    f"Malformed action/metadata line [{line_number}], expected START_OBJECT or END_OBJECT",
                )
            for key in meta:
                if key not in _BULK_PARAMETERS:
                    raise OpenSearchError(
                        400,
                        "illegal_argument_exception",
                        f"Action/metadata line [{line_number}] contains an unknown parameter [{key}]",
                    )
            require_alias = default_require_alias
            if "require_alias" in meta:
                require_alias = java_boolean(meta["require_alias"])
            position += 1
            source: Any = None
            if op != "delete":
                if position >= len(lines):
                    raise OpenSearchError(
                        400,
                        "illegal_argument_exception",
                        "The bulk request must be terminated by a newline [\\n]",
                    )
                try:
                    source = _parse_line(lines[position])
                except ValueError as error:
                    if op == "update":
                        # BulkRequestParser parses an update's body while it reads the request (an index or create
                        # source is parsed later, on its shard): the whole request is refused.
                        raise _unparseable_update(lines[position], error) from None
                    source = _UNPARSEABLE
                position += 1
            refused = _compare_and_write_refusal(meta)
            if refused is not None:
                raise OpenSearchError(
                    400, "action_request_validation_exception", f"Validation Failed: 1: {refused};"
                )
            operations.append(
                _BulkOperation(
                    op,
                    meta.get("_index", default_index),
                    meta.get("_id"),
                    source,
                    require_alias,
                    meta.get("if_seq_no"),
                    meta.get("if_primary_term"),
                )
            )
        return operations

    def _auto_create(self, subject: Subject, operations: list[_BulkOperation]) -> dict[str, OpenSearchError]:
        """Create the missing indices that writes (not deletes) name, unless one of them requires an alias:
        as the requesting user (`indices:admin/auto_create` is checked as `indices:admin/create`). Returns the
        names that `action.auto_create_index` forbids, with their error."""
        requires_alias: dict[str, bool] = {}
        for operation in operations:
            if operation.op != "delete" and isinstance(operation.target, str) and operation.target:
                requires_alias[operation.target] = requires_alias.get(operation.target, False) or (
                    operation.require_alias
                )
        cannot_create: dict[str, OpenSearchError] = {}
        for name, required in requires_alias.items():
            if name in self.indices or self.is_alias(name):
                continue
            try:
                self.should_auto_create(name)
            except OpenSearchError as refused:
                cannot_create[name] = refused
                continue
            if required:
                continue
            try:
                self.check_indices(subject, ["indices:admin/create"], [name])
                self.create_index(name, {})
            except OpenSearchError as failed:
                for operation in operations:
                    if operation.target == name and operation.answer is None:
                        operation.answer = _item_failure(name, operation.doc_id, failed)
        return cannot_create

    def _concrete_target(
        self,
        operation: _BulkOperation,
        cannot_create: Mapping[str, OpenSearchError],
        resolved: dict[str, str],
    ) -> str | None:
        """The concrete index of one item, or None with the item's failure set (TransportBulkAction order:
        require_alias, then indices that could not be created, then resolution)."""
        target, doc_id = operation.target, operation.doc_id
        failure: OpenSearchError | None = None
        if not target or not isinstance(target, str):
            failure = OpenSearchError(
                400, "action_request_validation_exception", "Validation Failed: 1: index is missing;"
            )
        elif doc_id is None and operation.op != "index":
            failure = OpenSearchError(
                400, "action_request_validation_exception", "Validation Failed: 1: id is missing;"
            )
        elif operation.require_alias and not self.is_alias(target):
            failure = index_not_found(
                target, f"[require_alias] request flag is [true] and [{target}] is not an alias"
            )
        elif target in cannot_create:
            failure = cannot_create[target]
        else:
            concrete = resolved.get(target)
            if concrete is not None:
                return concrete
            try:
                concrete = resolved[target] = self.write_index(target)
            except OpenSearchError as unresolved:
                failure = unresolved
            else:
                return concrete
        operation.answer = _item_failure(target, doc_id, failure)
        return None

    def _run_shard(self, subject: Subject, index: _Index, group: list[_BulkOperation]) -> None:
        actions = ["indices:data/write/bulk[s]", *dict.fromkeys(_ITEM_ACTIONS[o.op] for o in group)]
        try:
            self.check_indices(subject, actions, [index.name])
            self._check_write_blocks(index)
        except OpenSearchError as refused:
            for operation in group:
                operation.answer = _item_failure(index.name, operation.doc_id, refused)
            return
        for operation in group:
            operation.answer = self._bulk_item(subject, operation, index)

    @staticmethod
    def _check_write_blocks(index: _Index) -> None:
        blocks = [(status, text) for key, _, status, text in _WRITE_BLOCKS if index.setting(key) == "true"]
        if blocks:
            raise OpenSearchError(
                max(status for status, _ in blocks),
                "cluster_block_exception",
                f"index [{index.name}] blocked by: [{', '.join(text for _, text in blocks)}];",
            )

    def _bulk_item(self, subject: Subject, operation: _BulkOperation, index: _Index) -> dict[str, Any]:
        doc_id = operation.doc_id
        if doc_id is None:
            doc_id = hashlib.sha1(f"{index.name}{index.seq_no}{time.time()}".encode()).hexdigest()[:20]
        try:
            if self.item_faults:
                self._raise_item_fault(doc_id, index.name)
            if operation.source is _UNPARSEABLE:
                raise OpenSearchError(400, "mapper_parsing_exception", "failed to parse", index=index.name)
            if operation.if_seq_no is not None:
                self._compare(index, doc_id, operation.if_seq_no, operation.if_primary_term)
            status, result = self._apply(subject, operation.op, index, doc_id, operation.source)
        except OpenSearchError as error:
            return _item_failure(index.name, doc_id, error)
        # A noop writes nothing and takes no sequence number; every other outcome (a delete of a missing
        # document included) is an operation on the shard.
        seq_no = (
            index.doc_seq_nos[doc_id]
            if result == "noop"
            else index.next_seq_no(doc_id, live=doc_id in index.docs)
        )
        return {
            "_index": index.name,
            "_id": doc_id,
            "_version": index.versions.get(doc_id, 1),
            "result": result,
            "_shards": {"total": 1, "successful": 1, "failed": 0},
            "_seq_no": seq_no,
            "_primary_term": 1,
            "status": status,
        }

    @staticmethod
    def _compare(index: _Index, doc_id: str, if_seq_no: Any, if_primary_term: Any) -> None:
        """Optimistic concurrency (InternalEngine): the write applies only to the document as last read."""
        current = index.doc_seq_nos.get(doc_id) if doc_id in index.docs else None
        if current == if_seq_no and if_primary_term == 1:
            return
        found = (
            "but no document was found"
            if current is None
            else f"current document has seqNo [{current}] and primary term [1]"
        )
        raise OpenSearchError(
            409,
            "version_conflict_engine_exception",
            f"[{doc_id}]: version conflict, required seqNo [{if_seq_no}], primary term [{if_primary_term}]. {found}",
            index=index.name,
        )

    def _raise_item_fault(self, doc_id: str, index_name: str) -> None:
        fault = _take_fault(self.item_faults.get(doc_id))
        if fault is None:
            return
        raise OpenSearchError(fault.status, fault.error_type, fault.reason, index=index_name)

    def _apply(self, subject: Subject, op: str, index: _Index, doc_id: str, source: Any) -> tuple[int, str]:
        exists = doc_id in index.docs
        if op == "delete":
            if not exists:
                return 404, "not_found"
            del index.docs[doc_id]
            index.versions[doc_id] += 1
            return 200, "deleted"
        if op == "create" and exists:
            raise OpenSearchError(
                409,
                "version_conflict_engine_exception",
                f"[{doc_id}]: version conflict, document already exists "
                f"(current version [{index.versions[doc_id]}])",
                index=index.name,
            )
        if op in ("index", "create"):
            self._store(subject, index, doc_id, source, fresh=True)
            return (200, "updated") if exists else (201, "created")
        return self._update(subject, index, doc_id, source, exists)

    def _update(
        self, subject: Subject, index: _Index, doc_id: str, body: Any, exists: bool
    ) -> tuple[int, str]:
        if type(body) is not dict and not isinstance(body, Mapping):  # `type` first: the ABC check is slow
            raise OpenSearchError(
                400, "x_content_parse_exception", "[UpdateRequest] failed to parse", index=index.name
            )
        if "script" in body:
            script = body["script"]
            script_id = script.get("id") if type(script) is dict or isinstance(script, Mapping) else None
            if script_id is None:
                raise OpenSearchError(
                    400,
                    "illegal_argument_exception",
                    "inline scripts are not emulated by the loopback server",
                )
            if exists:
                current: dict[str, Any] | None = index.docs[doc_id]
            elif body.get("scripted_upsert"):
                current = dict(body.get("upsert", {}))
            elif "upsert" in body:
                self._store(subject, index, doc_id, dict(body["upsert"]))
                return 201, "created"
            else:
                raise OpenSearchError(
                    404, "document_missing_exception", f"[{doc_id}]: document missing", index=index.name
                )
            twin = self._update_script(script_id)
            if self.script_faults:
                self._raise_script_fault(doc_id, script_id)
            # Script twins are pure (they never mutate what they are given), so no copies here.
            replacement = run_update_script(script_id, twin, current, script.get("params", {}))
            if replacement is None:
                return 200, "noop"
            # The replacement is built from this request's freshly parsed JSON: nothing else holds it.
            self._store(subject, index, doc_id, replacement, fresh=True)
            return (200, "updated") if exists else (201, "created")
        if "doc" in body:
            if exists:
                merged = _deep_merge(index.docs[doc_id], body["doc"])
                if merged == index.docs[doc_id] and body.get("detect_noop", True):
                    return 200, "noop"
                self._store(subject, index, doc_id, merged, fresh=True)
                return 200, "updated"
            if body.get("doc_as_upsert"):
                self._store(subject, index, doc_id, dict(body["doc"]))
                return 201, "created"
            if "upsert" in body:
                self._store(subject, index, doc_id, dict(body["upsert"]))
                return 201, "created"
            raise OpenSearchError(
                404, "document_missing_exception", f"[{doc_id}]: document missing", index=index.name
            )
        raise OpenSearchError(
            400, "action_request_validation_exception", "Validation Failed: 1: script or doc is missing;"
        )

    def _raise_script_fault(self, doc_id: str, script_id: str) -> None:
        fault = _take_fault(self.script_faults.get(doc_id))
        if fault is None:
            return

        def failing(_current: Mapping[str, Any] | None, _params: Mapping[str, Any]) -> dict[str, Any] | None:
            raise ScriptRuntimeError(fault.java_exception, fault.reason)

        run_update_script(script_id, Twin("update", failing), None, {})

    def _store(
        self, subject: Subject, index: _Index, doc_id: str, source: Any, *, fresh: bool = False
    ) -> None:
        """Index ``source``: parsed against the mappings, which grow (as the user: `indices:admin/mapping/put`)
        when it adds fields. ``fresh`` sources (parsed from the request being handled) are not copied."""
        update = parse_document(
            index.mappings,
            source,
            doc_id,
            depth_limit=int(index.setting("index.mapping.depth.limit") or DEFAULT_DEPTH_LIMIT),
            total_fields_limit=int(
                index.setting("index.mapping.total_fields.limit") or DEFAULT_TOTAL_FIELDS_LIMIT
            ),
        )
        if update is not None:
            self.check_indices(subject, ["indices:admin/mapping/put"], [index.name])
            index.mappings = update
        index.docs[doc_id] = source if fresh else copy.deepcopy(source)
        index.versions[doc_id] = index.versions.get(doc_id, 0) + 1


_FaultT = TypeVar("_FaultT", ItemFault, _ScriptFault)


def _take_fault(queue: deque[_FaultT] | None) -> _FaultT | None:
    """The fault at the head of a document's queue, used up once its ``remaining`` count runs out (None: always)."""
    if not queue:
        return None
    fault = queue[0]
    if fault.remaining is not None:
        fault.remaining -= 1
        if fault.remaining <= 0:
            queue.popleft()
    return fault


def _compare_and_write_refusal(meta: Mapping[str, Any]) -> str | None:
    """validateSeqNoBasedCASParams: `if_seq_no` needs `if_primary_term` and excludes `version`."""
    if "if_seq_no" in meta:
        if "version" in meta or "version_type" in meta:
            return "compare and write operations can not use versioning"
        if "if_primary_term" not in meta:
            return "ifSeqNo is set, but primary term is [0]"
    elif "if_primary_term" in meta:
        return f"ifSeqNo is unassigned, but primary term is [{meta['if_primary_term']}]"
    return None


def _item_failure(index: Any, doc_id: Any, error: OpenSearchError) -> dict[str, Any]:
    return {"_index": index, "_id": doc_id, "status": error.status, "error": error.error_object()}


_UNPARSEABLE = object()
# json.dumps' output (same separators, ASCII), without the circular-reference bookkeeping: answers are trees.
_encode_response = json.JSONEncoder(check_circular=False).encode
# The engine's JSON parser (Jackson as OpenSearch configures it, XContentContraints): no NaN or Infinity, field
# names of at most 50,000 characters, at most 1,000 levels of nesting.
MAX_NAME_LENGTH = 50_000
MAX_NESTING_DEPTH = 1000


class JsonParseError(ValueError):
    """Jackson refused the JSON: `error_type` is its exception (json_parse_exception, stream_constraints_exception)."""

    def __init__(self, error_type: str, reason: str) -> None:
        super().__init__(reason)
        self.error_type = error_type
        self.reason = reason


def _non_numeric(token: str) -> Any:
    raise JsonParseError(
        "json_parse_exception",
        f"Non-standard token '{token}': enable `JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS` to allow",
    )


def _checked_names(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    for name, _ in pairs:
        length = len(name.encode("utf-16-le")) // 2  # Java's String.length()
        if length > MAX_NAME_LENGTH:
            raise JsonParseError(
                "stream_constraints_exception",
                f"Name length ({length}) exceeds the maximum allowed ({MAX_NAME_LENGTH}, from "
                "`StreamReadConstraints.getMaxNameLength()`)",
            )
    return dict(pairs)


_decoder = json.JSONDecoder(parse_constant=_non_numeric)
# Only a line longer than the name limit can hold a name over it: such lines check every object's names.
_long_line_decoder = json.JSONDecoder(parse_constant=_non_numeric, object_pairs_hook=_checked_names)
_scan_json = _decoder.scan_once  # type: ignore[attr-defined]  # the C scanner json.loads runs, without its per-call wrapping


def engine_json(text: str | bytes) -> Any:
    """`json.loads` as the engine's parser accepts JSON (JsonParseError for what it refuses)."""
    if isinstance(text, bytes):
        text = text.decode(json.detect_encoding(text), "surrogatepass")  # as json.loads decodes bytes
    decoder = _long_line_decoder if len(text) > MAX_NAME_LENGTH else _decoder
    try:
        return decoder.decode(text)
    except RecursionError:  # Python's own limit is near Jackson's 1,000 levels
        raise JsonParseError(
            "stream_constraints_exception",
            f"Document nesting depth exceeds the maximum allowed ({MAX_NESTING_DEPTH}, from "
            "`StreamReadConstraints.getMaxNestingDepth()`)",
        ) from None


def _unparseable_update(line: str | bytes, error: ValueError) -> OpenSearchError:
    """The engine's answer to an update body its parser refuses (the `line:column` is not reproduced)."""
    if isinstance(error, JsonParseError):
        inner = cause(error.error_type, error.reason)
    else:
        inner = cause("json_parse_exception", str(error))
    text = line if isinstance(line, str) else line.decode("utf-8", "replace")
    where = (
        "[1:1] [script] failed to parse field [params]"
        if '"params"' in text
        else "[1:1] [UpdateRequest] failed to parse"
    )
    return OpenSearchError(400, "x_content_parse_exception", where, cause=inner)


_ASCII_WHITESPACE = " \t\n\r\x0b\x0c"  # what bytes.strip() strips (str.strip() also strips Unicode spaces)


def _bulk_lines(body: bytes) -> list[str] | list[bytes]:
    """The non-blank NDJSON lines of a `_bulk` body: decoded once as UTF-8 when the body is UTF-8, else bytes
    (which `json.loads` decodes line by line, detecting the encoding). Both keep exactly the same lines,
    since byte 0x0A occurs in UTF-8 only as a newline."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return [line for line in body.split(b"\n") if line.strip()]
    return [line for line in text.split("\n") if line.strip(_ASCII_WHITESPACE)]


def _parse_line(line: str | bytes) -> Any:
    """`engine_json` of one NDJSON line. A str line that is exactly one JSON value goes straight to the C
    scanner; anything else (surrounding whitespace, a BOM, errors, a line long enough to hold an over-long name)
    takes `engine_json` of the line's original bytes, so results and errors are those of parsing every line
    whole."""
    if isinstance(line, str):
        if len(line) <= MAX_NAME_LENGTH:
            try:
                value, end = _scan_json(line, 0)
            except (StopIteration, ValueError, RecursionError):
                pass
            else:
                if end == len(line):
                    return value
        line = line.encode("utf-8")
    return engine_json(line)


@dataclass
class _FilterNode:
    """One level of a `filter_path`: exact field names and `*` patterns -> the next level, or None where a
    path ends (everything below is kept)."""

    exact: dict[str, _FilterNode | None] = field(default_factory=dict)
    patterns: list[tuple[re.Pattern[str] | None, _FilterNode | None]] = field(default_factory=list)

    def child(self, part: str) -> _FilterNode | None:
        if "*" not in part:
            node = self.exact.get(part, _FilterNode())
            self.exact.setdefault(part, node)
            return node
        for pattern, node in self.patterns:
            if (pattern.pattern if pattern else "*") == part:
                return node
        matcher = None if part == "*" else re.compile(".*".join(re.escape(p) for p in part.split("*")))
        node = _FilterNode()
        self.patterns.append((matcher, node))
        return node

    def end(self, part: str) -> None:
        if "*" not in part:
            self.exact[part] = None
            return
        matcher = None if part == "*" else re.compile(".*".join(re.escape(p) for p in part.split("*")))
        self.patterns = [
            (m, n)
            for m, n in self.patterns
            if (m.pattern if m else "*") != (matcher.pattern if matcher else "*")
        ]
        self.patterns.append((matcher, None))

    def lookup(self, key: str) -> list[_FilterNode | None]:
        found = [self.exact[key]] if key in self.exact else []
        for pattern, node in self.patterns:
            if pattern is None or pattern.fullmatch(key):
                found.append(node)
        return found


_FILTERED_OUT = object()


def _response_filter(expression: str | None) -> _FilterNode | None:
    """OpenSearch's `filter_path` query parameter: comma-separated dotted field paths, `*` matching any
    characters within one name; arrays are filtered element by element and what is left empty disappears.
    Exclusions (`-path`) and `**` are not emulated (400)."""
    paths = [path.strip() for path in (expression or "").split(",") if path.strip()]
    if not paths:
        return None
    root = _FilterNode()
    for path in paths:
        if path.startswith("-") or "**" in path:
            raise OpenSearchError(
                400,
                "illegal_argument_exception",
                f"filter_path [{path}]: exclusions and ** are not emulated by the loopback server",
            )
        *parents, last = path.split(".")
        node: _FilterNode | None = root
        for part in parents:
            assert node is not None
            node = node.child(part)
            if node is None:  # a shorter path already keeps everything below
                break
        else:
            assert node is not None
            node.end(last)
    return root


def _merged(nodes: list[_FilterNode]) -> _FilterNode:
    merged = _FilterNode()
    for node in nodes:
        for name, below in node.exact.items():
            if name not in merged.exact:
                merged.exact[name] = below
            else:
                other = merged.exact[name]
                merged.exact[name] = None if other is None or below is None else _merged([other, below])
        merged.patterns.extend(node.patterns)
    return merged


def _filter_value(value: Any, node: _FilterNode) -> Any:
    if isinstance(value, list):
        kept = []
        for element in value:
            filtered = _filter_value(element, node)
            if filtered is not _FILTERED_OUT:
                kept.append(filtered)
        return kept if kept else _FILTERED_OUT
    if not isinstance(value, dict):
        return _FILTERED_OUT  # the path goes deeper than this value
    result = {}
    exact, patterns = node.exact, node.patterns
    if not exact and len(patterns) == 1 and patterns[0][0] is None:  # a lone `*`: every key, same level below
        below_all = patterns[0][1]
        for key, member in value.items():
            filtered = member if below_all is None else _filter_value(member, below_all)
            if filtered is not _FILTERED_OUT:
                result[key] = filtered
        return result if result else _FILTERED_OUT
    for key, member in value.items():
        if patterns:
            found = node.lookup(key)
            if not found:
                continue
            below = (
                None
                if None in found
                else (found[0] if len(found) == 1 else _merged([n for n in found if n is not None]))
            )
        elif key in exact:
            below = exact[key]
        else:
            continue
        if below is None:
            result[key] = member
            continue
        filtered = _filter_value(member, below)
        if filtered is not _FILTERED_OUT:
            result[key] = filtered
    return result if result else _FILTERED_OUT


def _filter_response(payload: Any, response_filter: _FilterNode | None) -> Any:
    if response_filter is None or not isinstance(payload, dict | list):
        return payload
    filtered = _filter_value(payload, response_filter)
    return {} if filtered is _FILTERED_OUT else filtered


class _AliasMissing(Exception):
    def __init__(self, alias: str) -> None:
        super().__init__(alias)
        self.alias = alias


def _classify(segments: list[str]) -> str:
    if not segments:
        return ROUTE_ROOT
    first, last = segments[0], segments[-1]
    if first == "_index_template":
        return ROUTE_INDEX_TEMPLATE
    if segments[:2] == ["_cluster", "settings"]:
        return ROUTE_CLUSTER_SETTINGS
    if first == "_cat" and len(segments) >= 2 and segments[1] == "indices":
        return ROUTE_CAT_INDICES
    if first == "_scripts":
        return ROUTE_SCRIPTS
    if segments[:3] == ["_plugins", "_security", "api"]:
        return ROUTE_SECURITY
    if first == "_aliases":
        return ROUTE_ALIASES
    if "_alias" in segments[:2] or "_aliases" in segments[1:2]:
        return ROUTE_ALIAS
    if last == "_bulk":
        return ROUTE_BULK
    if segments[-2:] == ["_search", "point_in_time"] and len(segments) <= 3:
        return ROUTE_POINT_IN_TIME
    if last == "_mget" and len(segments) <= 2:
        return ROUTE_MGET
    if len(segments) == 3 and segments[1] == "_doc":
        return ROUTE_DOC
    if last == "_settings" and len(segments) <= 2:
        return ROUTE_SETTINGS
    if last in ("_search", "_count", "_refresh", "_mapping") and len(segments) <= 2:
        return {
            "_search": ROUTE_SEARCH,
            "_count": ROUTE_COUNT,
            "_refresh": ROUTE_REFRESH,
            "_mapping": ROUTE_MAPPING,
        }[last]
    if len(segments) == 1 and not first.startswith("_"):
        return ROUTE_INDEX
    return ROUTE_UNKNOWN


_AUTHORIZATION = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/(?P<service>[^/]+)"
    r"/aws4_request, "
    r"SignedHeaders=(?P<signed>[a-z0-9;\-]+), Signature=(?P<signature>[0-9a-f]{64})$"
)


class LoopbackOpenSearch:
    """A thread-safe in-memory OpenSearch on 127.0.0.1:<ephemeral port>; use as a context manager.

    `credentials` (access key, secret key), or a map of access key to secret key, makes it verify signatures,
    not only their presence.
    `fgac` attributes each signed request to the IAM role its access key belongs to
    (tests/support/domain_principals.py); with a secured `engine` (tests/support/secured_node.py) the request is
    forwarded as that role and the security plugin decides.
    `auto_create_index` is the node's `action.auto_create_index` (a `PUT _cluster/settings` overrides it).
    `max_body_bytes` emulates Amazon OpenSearch Service's per-instance-type request size limit (HTTP 413).
    """

    def __init__(
        self,
        *,
        require_signature: bool = True,
        credentials: tuple[str, str] | Mapping[str, str] | None = None,
        region: str | None = None,
        latency_seconds: float = 0.0,
        auto_create_index: bool = True,
        fgac: FineGrainedAccessControl | None = None,
        idle_connection_timeout_seconds: float = 5.0,
        max_body_bytes: int | None = None,
        access: DomainAccess | None = None,
        engine: EngineNode | None = None,
    ) -> None:
        if access is not None and fgac is None:
            raise ValueError("access needs fgac: IAM decides for the role a request is attributed to")
        if engine is not None and (fgac is not None) != isinstance(engine, SecuredNode):
            raise ValueError(
                "fine-grained access control is the secured node's plugin: fgac goes with a SecuredNode"
            )
        if engine is not None and not auto_create_index:
            raise ValueError(
                "the real engine's action.auto_create_index is a cluster setting: PUT _cluster/settings"
            )
        self.require_signature = require_signature
        self.access = access
        self.max_body_bytes = max_body_bytes
        self.credentials = credentials
        self.region = region
        self.latency_seconds = latency_seconds
        self.fgac = fgac
        self.engine = engine
        self.cluster = _Cluster(auto_create_index=auto_create_index)
        self.requests: list[RecordedRequest] = []
        self.route_counts: Counter[str] = Counter()
        self._faults: dict[str, deque[Fault]] = {}
        self._stopping = threading.Event()
        self._server = _Server(("127.0.0.1", 0), _make_handler(self, idle_connection_timeout_seconds))
        self._thread: threading.Thread | None = None
        self.port: int = self._server.server_address[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self) -> LoopbackOpenSearch:
        if isinstance(self.engine, SecuredNode) and self.fgac is not None:
            self.engine.map_master(self.fgac.master_role_arn)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.01},
            name="loopback-opensearch",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5)
        self._server.close_all_connections()
        self._server.server_close()

    def __enter__(self) -> LoopbackOpenSearch:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # --- fault injection -------------------------------------------------------------------------

    def enqueue_fault(self, route: str, fault: Fault, *, times: int = 1) -> None:
        """The next `times` requests to `route` (one of the ROUTE_* names) get `fault`."""
        with self.cluster.lock:
            self._faults.setdefault(route, deque()).extend([fault] * times)

    def fail_next(
        self,
        route: str,
        status: int,
        *,
        times: int = 1,
        retry_after: int | None = None,
        error_type: str | None = None,
        reason: str | None = None,
        method: str | None = None,
    ) -> None:
        """The next `times` requests to `route` fail with `status` and an OpenSearch error body."""
        default_type = {
            429: "rejected_execution_exception",  # OpenSearch's name; Elasticsearch said es_rejected_...
            500: "exception",
            502: "bad_gateway",
            503: "cluster_block_exception",
            504: "gateway_timeout",
        }.get(status, "exception")
        error = OpenSearchError(status, error_type or default_type, reason or f"injected {status}")
        headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
        self.enqueue_fault(
            route, Fault(status=status, body=error.body(), headers=headers, method=method), times=times
        )

    def delay_next(
        self,
        route: str,
        seconds: float,
        *,
        times: int = 1,
        status: int | None = None,
        method: str | None = None,
    ) -> None:
        """The next requests wait `seconds`; then they take effect normally (or answer `status`)."""
        body = OpenSearchError(status, "exception", f"injected {status}").body() if status else None
        fault = Fault(status=status, body=body, delay_seconds=seconds, method=method)
        self.enqueue_fault(route, fault, times=times)

    def drop_next(self, route: str, *, times: int = 1, method: str | None = None) -> None:
        """The next requests are read, not applied, and the connection is closed without a response."""
        self.enqueue_fault(route, Fault(drop_connection=True, method=method), times=times)

    def fail_item(
        self,
        doc_id: str,
        *,
        status: int = 400,
        error_type: str = "mapper_parsing_exception",
        reason: str = "failed to parse field [geometry] of type [geo_shape]",
        times: int | None = 1,
    ) -> None:
        """Bulk items for `doc_id` fail with this per-item error: `times` times, or always when None.

        Typical: 400 mapper_parsing_exception, 409 version_conflict_engine_exception,
        429 rejected_execution_exception (OpenSearch's name for Elasticsearch's
        es_rejected_execution_exception).
        """
        with self.cluster.lock:
            self.cluster.item_faults.setdefault(doc_id, deque()).append(
                ItemFault(status, error_type, reason, times)
            )

    def fail_script(
        self,
        doc_id: str,
        *,
        java_exception: str = "null_pointer_exception",
        reason: str = 'Cannot invoke "Object.toString()" because "value" is null',
        times: int | None = 1,
    ) -> None:
        """Stored scripts running for `doc_id` fail with a painless runtime error (`java_exception` as its
        cause): `times` times, or always when None."""
        if self.engine is not None:
            raise ValueError(
                "the real engine runs the stored script: store one that fails (painless) instead"
            )
        with self.cluster.lock:
            self.cluster.script_faults.setdefault(doc_id, deque()).append(
                _ScriptFault(java_exception, reason, times)
            )

    def lose_points_in_time(self) -> None:
        """What a node restart or a blue/green deployment does on the service: every point in time is gone."""
        if self.engine is not None:
            freed = self.engine.request("DELETE", "/_search/point_in_time/_all")
            assert freed.status == 200, freed.body
            return
        with self.cluster.lock:
            self.cluster.points_in_time.clear()

    def clear_faults(self) -> None:
        with self.cluster.lock:
            self._faults.clear()
            self.cluster.item_faults.clear()
            self.cluster.script_faults.clear()

    # --- inspection ------------------------------------------------------------------------------

    def count(self, route: str, method: str | None = None) -> int:
        """Requests received for `route` (faulted ones included), optionally only one method."""
        with self.cluster.lock:
            if method is None:
                return self.route_counts[route]
            return sum(1 for r in self.requests if r.route == route and r.method == method.upper())

    def forget_requests(self) -> None:
        """Drop what was recorded so far (e.g. a test's set-up), keeping the cluster's state."""
        with self.cluster.lock:
            self.requests.clear()
            self.route_counts.clear()

    def requests_to(self, route: str, method: str | None = None) -> list[RecordedRequest]:
        with self.cluster.lock:
            return [
                r
                for r in self.requests
                if r.route == route and (method is None or r.method == method.upper())
            ]

    def document(self, target: str, doc_id: str) -> dict[str, Any] | None:
        """The `_source` of `doc_id` in an index, or in an alias's write index; None when absent."""
        if self.engine is not None:
            found = self.engine.request("GET", f"/{target}/_doc/{doc_id}")
            return found.body.get("_source") if found.status == 200 and found.body.get("found") else None
        with self.cluster.lock:
            if target not in self.cluster.indices and not self.cluster._alias_owners(target):
                return None
            try:
                name = self.cluster.write_index(target)
            except OpenSearchError:
                return None
            source = self.cluster.indices[name].docs.get(doc_id)
            return copy.deepcopy(source) if source is not None else None

    def documents(self, index: str) -> dict[str, dict[str, Any]]:
        if self.engine is not None:  # what a reader sees once the index refreshed (the test's inspection)
            self.engine.request("POST", f"/{index}/_refresh")
            hits = self.engine.request("POST", f"/{index}/_search", {"size": 10_000, "sort": ["_doc"]}).body
            return {hit["_id"]: hit["_source"] for hit in hits["hits"]["hits"]}
        with self.cluster.lock:
            return copy.deepcopy(self.cluster.indices[index].docs)

    def index_names(self) -> list[str]:
        if self.engine is not None:
            rows = self.engine.request("GET", "/_cat/indices?format=json&h=index").body
            return sorted(row["index"] for row in rows if not row["index"].startswith("."))
        with self.cluster.lock:
            return sorted(self.cluster.indices)

    def aliases_of(self, index: str) -> dict[str, dict[str, Any]]:
        if self.engine is not None:
            return self.engine.request("GET", f"/{index}/_alias").body[index]["aliases"]
        with self.cluster.lock:
            return copy.deepcopy(self.cluster.indices[index].aliases)

    # --- request handling (called from server threads) -------------------------------------------

    def forward(
        self, request: RecordedRequest, segments: list[str], raw_path: str, subject: Subject
    ) -> Forwarded:
        """A request the front let through, answered by the real engine (per-item bulk faults made here); on the
        secured node it acts for the verified IAM principal (its role ARN), never for a header the client sent."""
        assert self.engine is not None
        principal = subject.name if self.fgac is not None else None
        if request.route == ROUTE_BULK and request.method in ("POST", "PUT"):
            path_index = segments[0] if len(segments) == 2 else None
            return forward_bulk(
                self.engine, raw_path, request.headers, request.body, path_index, self._item_error, principal
            )
        return forward(self.engine, request.method, raw_path, request.headers, request.body, principal)

    def _item_error(self, doc_id: str) -> ItemError | None:
        with self.cluster.lock:
            fault = _take_fault(self.cluster.item_faults.get(doc_id))
        return None if fault is None else ItemError(fault.status, fault.error_type, fault.reason)

    def _next_fault(self, route: str, method: str) -> Fault | None:
        with self.cluster.lock:
            queue = self._faults.get(route)
            if not queue:
                return None
            for position, fault in enumerate(queue):
                if fault.method is None or fault.method.upper() == method:
                    del queue[position]
                    return fault
            return None

    def _record(self, request: RecordedRequest) -> None:
        with self.cluster.lock:
            self.requests.append(request)
            self.route_counts[request.route] += 1

    def sleep(self, seconds: float) -> None:
        """Sleeps that end early when the server stops, so fixtures never hang."""
        if seconds > 0:
            self._stopping.wait(seconds)

    def _check_signature(
        self, request: RecordedRequest, raw_path: str, raw_host: str, body_sha256: str | None = None
    ) -> OpenSearchError | None:
        authorization = request.headers.get("authorization")
        denied = "The request signature we calculated does not match the signature you provided."
        if not authorization:
            return OpenSearchError(
                403, "security_exception", "Missing Authentication Token: request is not signed"
            )
        match = _AUTHORIZATION.match(authorization)
        if not match or match["service"] != "es" or "x-amz-date" not in request.headers:
            return OpenSearchError(
                403, "security_exception", f"Authorization header is not SigV4 for es: {denied}"
            )
        if self.region is not None and match["region"] != self.region:
            return OpenSearchError(
                403, "security_exception", f"Credential should be scoped to region {self.region}"
            )
        if body_sha256 is None:
            body_sha256 = hashlib.sha256(request.body).hexdigest()
        if request.headers.get("x-amz-content-sha256") != body_sha256:
            return OpenSearchError(
                403, "security_exception", f"x-amz-content-sha256 does not match the body. {denied}"
            )
        if self.credentials is None:
            return None
        secrets = dict([self.credentials]) if isinstance(self.credentials, tuple) else dict(self.credentials)
        access_key = match["key"]
        secret_key = secrets.get(access_key)
        if secret_key is None:
            return OpenSearchError(
                403, "security_exception", "The security token included in the request is invalid"
            )
        signed = match["signed"].split(";")
        headers = {name: request.headers.get(name, "") for name in signed}
        aws_request = AWSRequest(
            method=request.method, url=f"http://{raw_host}{raw_path}", headers=headers, data=request.body
        )
        aws_request.context["timestamp"] = request.headers["x-amz-date"]
        signer = SigV4Auth(Credentials(access_key, secret_key), match["service"], match["region"])
        canonical = signer.canonical_request(aws_request)
        expected = signer.signature(signer.string_to_sign(aws_request, canonical), aws_request)
        if expected != match["signature"]:
            return OpenSearchError(403, "security_exception", denied)
        return None

    def subject_of(self, request: RecordedRequest) -> Subject | OpenSearchError:
        """Who a request acts as: everything without FGAC; with it, the IAM role of the signing access key
        (an access key no principal owns is refused by IAM before FGAC sees the request)."""
        if self.fgac is None:
            return UNRESTRICTED
        match = _AUTHORIZATION.match(request.headers.get("authorization", ""))
        subject = self.fgac.subject(match["key"]) if match else None
        if subject is None:
            return OpenSearchError(
                403, "security_exception", "The security token included in the request is invalid."
            )
        return subject

    def _dispatch(self, request: RecordedRequest, segments: list[str], subject: Subject) -> tuple[int, Any]:
        cluster = self.cluster
        method, route, query = request.method, request.route, request.query
        authorizer = cluster.authorizer

        def body() -> Any:
            if not request.body:
                return {}
            try:
                return engine_json(request.body)
            except ValueError as error:
                raise OpenSearchError(
                    400, "parse_exception", f"request body is required / not JSON: {error}"
                ) from error

        def allow_cluster(action: str) -> None:
            authorizer.check_cluster(subject, action)

        def allow_indices(actions: list[str], expression: str) -> None:
            cluster.check_indices(subject, actions, cluster.request_targets(expression))

        with cluster.lock:
            if route == ROUTE_ROOT and method in ("GET", "HEAD"):
                allow_cluster("cluster:monitor/main")
                return 200, {
                    "name": "loopback",
                    "cluster_name": "loopback",
                    "version": {"distribution": "opensearch", "number": "2.19.0"},
                }
            if route == ROUTE_INDEX_TEMPLATE:
                name = segments[1] if len(segments) > 1 else None
                if method in ("PUT", "POST") and name:
                    allow_cluster("indices:admin/index_template/put")
                    return 200, cluster.put_template(name, body())
                if method == "GET":
                    allow_cluster("indices:admin/index_template/get")
                    return 200, cluster.get_templates(name)
                if method == "DELETE" and name:
                    allow_cluster("indices:admin/index_template/delete")
                    return 200, cluster.delete_template(name)
            if route == ROUTE_INDEX:
                name = segments[0]
                if method == "PUT":
                    request_body = body()
                    aliases = ["indices:admin/aliases"] if request_body.get("aliases") else []
                    cluster.check_indices(subject, ["indices:admin/create", *aliases], [name])
                    return 200, cluster.create_index(name, request_body)
                if method == "HEAD":
                    allow_indices(["indices:admin/get"], name)
                    try:
                        cluster.resolve(name)
                    except OpenSearchError:
                        return 404, None
                    return 200, None
                if method == "GET":
                    allow_indices(["indices:admin/get"], name)
                    return 200, cluster.get_indices(name)
                if method == "DELETE":
                    allow_indices(["indices:admin/delete"], name)
                    return 200, cluster.delete_index(name)
            if route == ROUTE_MAPPING and method == "GET":
                expression = segments[0] if len(segments) == 2 else "_all"
                allow_indices(["indices:admin/mappings/get"], expression)
                return 200, cluster.get_mappings(expression)
            if route == ROUTE_SETTINGS:
                expression = segments[0] if len(segments) == 2 else "_all"
                if method == "PUT":
                    allow_indices(["indices:admin/settings/update"], expression)
                    return 200, cluster.update_settings(expression, body())
                if method == "GET":
                    allow_indices(["indices:monitor/settings/get"], expression)
                    return 200, cluster.get_settings(expression)
            if route == ROUTE_CLUSTER_SETTINGS:
                if method == "PUT":
                    allow_cluster("cluster:admin/settings/update")
                    return 200, cluster.put_cluster_settings(body())
                if method == "GET":
                    allow_cluster("cluster:monitor/state")
                    return 200, cluster.get_cluster_settings(query.get("flat_settings") == "true")
            if route == ROUTE_CAT_INDICES and method == "GET":
                if query.get("format") != "json":
                    raise OpenSearchError(400, "illegal_argument_exception", "only format=json is emulated")
                listed = segments[2] if len(segments) > 2 else None
                allow_indices(["indices:monitor/stats"], listed or "_all")
                return 200, cluster.cat_indices(listed)
            if route == ROUTE_ALIASES and method == "POST":
                request_body = body()
                for actions, names in cluster.alias_action_targets(request_body):
                    cluster.check_indices(subject, actions, names)
                return 200, cluster.update_aliases(request_body)
            if route == ROUTE_ALIASES and method == "GET":
                allow_indices(["indices:admin/aliases/get"], "_all")
                return 200, cluster.get_aliases(None, None)
            if route == ROUTE_ALIAS and method in ("GET", "HEAD"):
                position = segments.index("_alias") if "_alias" in segments else segments.index("_aliases")
                owner = segments[0] if position == 1 else None
                alias = segments[position + 1] if len(segments) > position + 1 else None
                allow_indices(["indices:admin/aliases/get"], owner or "_all")
                return 200, cluster.get_aliases(owner, alias)
            if route == ROUTE_SCRIPTS and len(segments) in (2, 3):
                context = segments[2] if len(segments) == 3 else None
                if method in ("PUT", "POST"):
                    allow_cluster("cluster:admin/script/put")
                    return 200, cluster.put_script(segments[1], body(), context)
                if method == "GET" and context is None:
                    allow_cluster("cluster:admin/script/get")
                    return cluster.get_script(segments[1])
                if method == "DELETE" and context is None:
                    allow_cluster("cluster:admin/script/delete")
                    return 200, cluster.delete_script(segments[1])
            if route == ROUTE_SECURITY and len(segments) == 5 and segments[3] in ("roles", "rolesmapping"):
                refusal = authorizer.security_api_refusal(subject)
                if refusal is not None:
                    return 403, {"status": "FORBIDDEN", "message": refusal}
                if method == "PUT":
                    return cluster.put_security(segments[3], segments[4], body())
                if method == "GET":
                    found = cluster.security[segments[3]].get(segments[4])
                    if found is None:
                        return 404, {"status": "NOT_FOUND", "message": f"{segments[4]} not found."}
                    return 200, {segments[4]: found}
                if method == "DELETE":
                    if cluster.security[segments[3]].pop(segments[4], None) is None:
                        return 404, {"status": "NOT_FOUND", "message": f"{segments[4]} not found."}
                    return 200, {"status": "OK", "message": f"'{segments[4]}' deleted."}
            if route == ROUTE_DOC and method == "GET":
                allow_indices(["indices:data/read/get"], segments[0])
                return cluster.get_document(subject, segments[0], segments[2])
            if route == ROUTE_SEARCH and len(segments) == 1 and "pit" in (request_body := body() or {}):
                spec = request_body["pit"]
                pit = cluster.points_in_time.get(spec.get("id")) if isinstance(spec, Mapping) else None
                cluster.check_indices(
                    subject, ["indices:data/read/search"], sorted(pit.indices) if pit else []
                )
                return 200, cluster.search(subject, None, request_body, now=time.time())
            if route in (ROUTE_SEARCH, ROUTE_COUNT) and method in ("GET", "POST"):
                expression = segments[0] if len(segments) == 2 else "_all"
                allow_indices(["indices:data/read/search"], expression)
                return 200, cluster.search(
                    subject, expression, body(), count_only=route == ROUTE_COUNT, now=time.time()
                )
            if route == ROUTE_MGET and method in ("GET", "POST") and len(segments) == 2:
                allow_cluster("indices:data/read/mget")
                allow_indices(["indices:data/read/mget[shard]"], segments[0])
                return 200, cluster.multi_get(subject, segments[0], body())
            if route == ROUTE_POINT_IN_TIME and method == "POST" and len(segments) == 3:
                allow_indices(["indices:data/read/point_in_time/create"], segments[0])
                if "keep_alive" not in query:
                    raise OpenSearchError(
                        400,
                        "action_request_validation_exception",
                        "Validation Failed: 1: keep alive not specified;",
                    )
                return 200, cluster.open_point_in_time(segments[0], query["keep_alive"], time.time())
            if route == ROUTE_POINT_IN_TIME and method == "DELETE" and len(segments) == 2:
                request_body = body()
                ids = request_body.get("pit_id")
                named = [
                    cluster.points_in_time.get(i) for i in ([ids] if isinstance(ids, str) else ids or [])
                ]
                indices = sorted({name for pit in named if pit is not None for name in pit.indices})
                cluster.check_indices(subject, ["indices:data/read/point_in_time/delete"], indices)
                return 200, cluster.close_points_in_time(request_body)
            if route == ROUTE_REFRESH and method in ("GET", "POST"):
                allow_indices(["indices:admin/refresh"], segments[0] if len(segments) == 2 else "_all")
                return 200, {"_shards": {"total": 1, "successful": 1, "failed": 0}}
            if route == ROUTE_BULK and method in ("POST", "PUT"):
                content_type = request.headers.get("content-type", "").split(";")[0].strip()
                if content_type not in ("application/json", "application/x-ndjson"):
                    raise OpenSearchError(
                        406,
                        "content_type_exception",
                        f"Content-Type header [{content_type}] is not supported",
                    )
                if not request.body.endswith(b"\n"):
                    raise OpenSearchError(
                        400,
                        "illegal_argument_exception",
                        "The bulk request must be terminated by a newline [\\n]",
                    )
                lines = _bulk_lines(request.body)
                if not lines:
                    raise OpenSearchError(
                        400, "action_request_validation_exception", "Validation Failed: 1: no requests added;"
                    )
                return 200, cluster.bulk(
                    subject,
                    segments[0] if len(segments) == 2 else None,
                    lines,
                    require_alias=query.get("require_alias") in ("", "true"),
                )
        return 400, {"error": f"no handler found for uri [{request.path}] and method [{method}]"}


class _Server(ThreadingHTTPServer):
    # The default backlog of 5 drops SYNs under concurrent clients, which costs a 1 s retransmit.
    request_queue_size = 128
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._connections: set[Any] = set()
        self._connections_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def close_all_connections(self) -> None:
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients that time out or hang up mid-response are expected in fault tests."""


def _make_handler(owner: LoopbackOpenSearch, idle_timeout: float) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = idle_timeout

        def setup(self) -> None:
            super().setup()
            # Headers and body go out in separate writes; without this, delayed ACKs add ~40 ms per call.
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: tests assert on recorded requests instead."""

        def do_GET(self) -> None:
            self._handle()

        do_PUT = do_POST = do_DELETE = do_HEAD = do_GET

        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body, body_sha256 = self._read_body(length)
            split = urlsplit(self.path)
            segments = [unquote(part) for part in split.path.split("/") if part]
            request = RecordedRequest(
                method=self.command,
                path=unquote(split.path),
                query=dict(parse_qsl(split.query, keep_blank_values=True)),
                headers={name.lower(): value for name, value in self.headers.items()},
                body=body,
                route=_classify(segments),
            )
            owner._record(request)
            owner.sleep(owner.latency_seconds)
            # A signed-only domain refuses unsigned requests before anything else can happen.
            denied = (
                owner._check_signature(request, self.path, self.headers.get("Host", ""), body_sha256)
                if owner.require_signature
                else None
            )
            subject = owner.subject_of(request) if denied is None else denied
            if isinstance(subject, OpenSearchError):
                self._send(subject.status, {"message": subject.reason, "error": subject.body()["error"]})
                return
            refused = (
                owner.access.refusal(subject.name, request.method, request.path) if owner.access else None
            )
            if refused is not None:  # IAM decides before the engine, and answers in the service's shape
                self._send(403, refused)
                return
            if owner.max_body_bytes is not None and len(body) > owner.max_body_bytes:
                self._send(413, {"Message": f"Request size exceeded {owner.max_body_bytes} bytes"})
                return
            try:
                response_filter = _response_filter(request.query.get("filter_path"))
            except OpenSearchError as error:
                self._send(error.status, error.body())
                return
            fault = owner._next_fault(request.route, request.method)
            if fault is not None:
                owner.sleep(fault.delay_seconds)
                if fault.drop_connection:
                    self.close_connection = True
                    with contextlib.suppress(OSError):
                        self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if fault.status is not None:
                    self._send(fault.status, _filter_response(fault.body, response_filter), fault.headers)
                    return
            if owner.engine is not None and (request.route != ROUTE_SECURITY or owner.fgac is not None):
                forwarded = owner.forward(request, segments, self.path, subject)
                self._send(forwarded.status, forwarded.body, content_type=forwarded.content_type)
                return
            try:
                status, payload = owner._dispatch(request, segments, subject)
            except OpenSearchError as error:
                status, payload = error.status, error.body()
            except _AliasMissing as missing:
                status, payload = 404, {"error": f"alias [{missing.alias}] missing", "status": 404}
            self._send(status, _filter_response(payload, response_filter))

        def _read_body(self, length: int) -> tuple[bytes, str]:
            """The body (shorter if the client hangs up) and its SHA-256, hashed piece by piece as it arrives
            rather than in one pass after the last byte."""
            digest = hashlib.sha256()
            chunks = []
            while length > 0:
                chunk = self.rfile.read1(length)
                if not chunk:
                    break
                digest.update(chunk)
                chunks.append(chunk)
                length -= len(chunk)
            return (chunks[0] if len(chunks) == 1 else b"".join(chunks)), digest.hexdigest()

        def _send(
            self,
            status: int,
            payload: Any,
            headers: Mapping[str, str] | None = None,
            content_type: str = "application/json; charset=UTF-8",
        ) -> None:
            if payload is None:
                data = b""
            elif isinstance(payload, bytes):
                data = payload
            else:
                data = _encode_response(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

    return Handler


def running_server(**options: Any) -> Iterator[LoopbackOpenSearch]:
    """Generator for a pytest fixture: `yield from running_server()`; the server stops itself after."""
    server = LoopbackOpenSearch(**options).start()
    try:
        yield server
    finally:
        server.stop()
