"""The loopback front of an Amazon OpenSearch Service domain, for tests only: an HTTP server on 127.0.0.1 that does
what the service does before a request reaches the engine, then forwards it to a real OpenSearch node
(tests/support/engine_node.py, or the secured node with the security plugin, tests/support/secured_node.py) through
tests/support/engine_proxy.py. The node answers; the front never emulates the engine.

Before forwarding, as the service does:
- like a domain with signed access only, it answers 403 to requests without a SigV4 `Authorization` header for
  service `es`; given credentials it also verifies the signature;
- with `fgac`, every signed request is attributed to the IAM role its access key belongs to
  (tests/support/domain_principals.py) and forwarded as that role, for the secured node's plugin to decide;
- with `access` (tests/support/iam.py `DomainAccess`), IAM decides each signed request first: the domain's access
  policy with the caller's identity policies, answering 403 `{"Message": ...}`;
- `max_body_bytes` is the instance type's request size limit (HTTP 413).

Tests steer it with fault injection (`fail_next`, `delay_next`, `drop_next`, `enqueue_fault`, `fail_item`,
`latency_seconds`, `lose_points_in_time`) and inspect it through `requests`, `count()`, `requests_to()`, and
`document()`, `documents()`, `index_names()` and `aliases_of()`, which ask the node.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import socket
import threading
from collections import Counter, deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.support.domain_principals import UNRESTRICTED, FineGrainedAccessControl, Subject
from tests.support.engine_node import EngineNode
from tests.support.engine_proxy import Forwarded, ItemError, forward, forward_bulk
from tests.support.iam import DomainAccess
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


class OpenSearchError(Exception):
    """An error the front answers itself (a refused signature, an injected fault), in OpenSearch's wire shape."""

    def __init__(self, status: int, error_type: str, reason: str) -> None:
        super().__init__(reason)
        self.status, self.error_type, self.reason = status, error_type, reason

    def body(self) -> dict[str, Any]:
        error = {"type": self.error_type, "reason": self.reason}
        return {"error": {"root_cause": [error], **error}, "status": self.status}


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


def _take_fault(queue: deque[ItemFault] | None) -> ItemFault | None:
    """The fault at the head of a document's queue, used up once its ``remaining`` count runs out (None: always)."""
    if not queue:
        return None
    fault = queue[0]
    if fault.remaining is not None:
        fault.remaining -= 1
        if fault.remaining <= 0:
            queue.popleft()
    return fault


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
    `max_body_bytes` emulates Amazon OpenSearch Service's per-instance-type request size limit (HTTP 413).
    """

    def __init__(
        self,
        *,
        require_signature: bool = True,
        credentials: tuple[str, str] | Mapping[str, str] | None = None,
        region: str | None = None,
        latency_seconds: float = 0.0,
        fgac: FineGrainedAccessControl | None = None,
        idle_connection_timeout_seconds: float = 5.0,
        max_body_bytes: int | None = None,
        access: DomainAccess | None = None,
        engine: EngineNode,
    ) -> None:
        if access is not None and fgac is None:
            raise ValueError("access needs fgac: IAM decides for the role a request is attributed to")
        if (fgac is not None) != isinstance(engine, SecuredNode):
            raise ValueError(
                "fine-grained access control is the secured node's plugin: fgac goes with a SecuredNode"
            )
        self.require_signature = require_signature
        self.access = access
        self.max_body_bytes = max_body_bytes
        self.credentials = credentials
        self.region = region
        self.latency_seconds = latency_seconds
        self.fgac = fgac
        self.engine = engine
        self._lock = threading.Lock()
        self._item_faults: dict[str, deque[ItemFault]] = {}
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
        with self._lock:
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
        with self._lock:
            self._item_faults.setdefault(doc_id, deque()).append(ItemFault(status, error_type, reason, times))

    def lose_points_in_time(self) -> None:
        """What a node restart or a blue/green deployment does on the service: every point in time is gone."""
        freed = self.engine.request("DELETE", "/_search/point_in_time/_all")
        assert freed.status == 200, freed.body

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()
            self._item_faults.clear()

    # --- inspection ------------------------------------------------------------------------------

    def count(self, route: str, method: str | None = None) -> int:
        """Requests received for `route` (faulted ones included), optionally only one method."""
        with self._lock:
            if method is None:
                return self.route_counts[route]
            return sum(1 for r in self.requests if r.route == route and r.method == method.upper())

    def forget_requests(self) -> None:
        """Drop what was recorded so far (e.g. a test's set-up), keeping the cluster's state."""
        with self._lock:
            self.requests.clear()
            self.route_counts.clear()

    def requests_to(self, route: str, method: str | None = None) -> list[RecordedRequest]:
        with self._lock:
            return [
                r
                for r in self.requests
                if r.route == route and (method is None or r.method == method.upper())
            ]

    def document(self, target: str, doc_id: str) -> dict[str, Any] | None:
        """The `_source` of `doc_id` in an index, or in an alias's write index; None when absent."""
        found = self.engine.request("GET", f"/{target}/_doc/{doc_id}")
        return found.body.get("_source") if found.status == 200 and found.body.get("found") else None

    def documents(self, index: str) -> dict[str, dict[str, Any]]:
        """What a reader sees once the index refreshed (the test's inspection)."""
        self.engine.request("POST", f"/{index}/_refresh")
        hits = self.engine.request("POST", f"/{index}/_search", {"size": 10_000, "sort": ["_doc"]}).body
        return {hit["_id"]: hit["_source"] for hit in hits["hits"]["hits"]}

    def index_names(self) -> list[str]:
        rows = self.engine.request("GET", "/_cat/indices?format=json&h=index").body
        return sorted(row["index"] for row in rows if not row["index"].startswith("."))

    def aliases_of(self, index: str) -> dict[str, dict[str, Any]]:
        aliases: dict[str, dict[str, Any]] = self.engine.request("GET", f"/{index}/_alias").body[index][
            "aliases"
        ]
        return aliases

    # --- request handling (called from server threads) -------------------------------------------

    def forward(
        self, request: RecordedRequest, segments: list[str], raw_path: str, subject: Subject
    ) -> Forwarded:
        """A request the front let through, answered by the real engine (per-item bulk faults made here); on the
        secured node it acts for the verified IAM principal (its role ARN), never for a header the client sent."""
        principal = subject.name if self.fgac is not None else None
        if request.route == ROUTE_BULK and request.method in ("POST", "PUT"):
            path_index = segments[0] if len(segments) == 2 else None
            return forward_bulk(
                self.engine, raw_path, request.headers, request.body, path_index, self._item_error, principal
            )
        return forward(self.engine, request.method, raw_path, request.headers, request.body, principal)

    def _item_error(self, doc_id: str) -> ItemError | None:
        with self._lock:
            fault = _take_fault(self._item_faults.get(doc_id))
        return None if fault is None else ItemError(fault.status, fault.error_type, fault.reason)

    def _next_fault(self, route: str, method: str) -> Fault | None:
        with self._lock:
            queue = self._faults.get(route)
            if not queue:
                return None
            for position, fault in enumerate(queue):
                if fault.method is None or fault.method.upper() == method:
                    del queue[position]
                    return fault
            return None

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
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
            forwarded = owner.forward(request, segments, self.path, subject)
            self._send(forwarded.status, forwarded.body, content_type=forwarded.content_type)

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
                data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

    return Handler
