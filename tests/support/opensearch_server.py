"""The loopback front of an Amazon OpenSearch Service domain, for tests only: an HTTP server on 127.0.0.1 that does
what the service does before a request reaches the engine, then forwards it to a real OpenSearch node
(tests/support/engine_node.py, or the secured node with the security plugin, tests/support/secured_node.py) through
tests/support/engine_proxy.py. The node answers, `filter_path` and every other parameter included; the front never
emulates the engine.

Before forwarding, as the service does:
- like a domain with signed access only, it answers 403 to requests without a SigV4 `Authorization` header for
  service `es`; given credentials it also verifies the signature;
- with `fgac`, every signed request is attributed to the IAM role its access key belongs to and forwarded as that
  role, for the secured node's plugin to decide what the role may do;
- with `access` (tests/support/iam.py `DomainAccess`), IAM decides each signed request first: the domain's access
  policy with the caller's identity policies, answering 403 `{"Message": ...}`.

Tests steer it with fault injection (`fail_next`, `delay_next`, `drop_next`, `lose_response_next`, `fail_item`, `latency_seconds`,
`lose_points_in_time`) and inspect it through `requests`, `count()`, `requests_to()`, and `document()`,
`documents()`, `index_names()` and `aliases_of()`, which ask the node.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import socket
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.support.engine_node import EngineNode
from tests.support.engine_proxy import Forwarded, ItemError, forward, forward_bulk
from tests.support.iam import DomainAccess
from tests.support.secured_node import SecuredNode

# The routes a test can fault or count; requests to any other path are recorded as ROUTE_OTHER.
ROUTE_BULK = "_bulk"
ROUTE_INDEX_TEMPLATE = "_index_template"
ROUTE_INDEX = "index"
ROUTE_SETTINGS = "_settings"
ROUTE_CLUSTER_SETTINGS = "_cluster/settings"
ROUTE_ALIASES = "_aliases"
ROUTE_ALIAS = "_alias"
ROUTE_SCRIPTS = "_scripts"
ROUTE_SECURITY = "_plugins/_security"
ROUTE_OTHER = "other"
# A domain's request idle timeout is longer; the tests' clients never leave a connection idle this long.
_IDLE_CONNECTION_TIMEOUT_SECONDS = 5.0
_DEFAULT_ERROR_TYPES = {
    429: "rejected_execution_exception",  # OpenSearch's name; Elasticsearch said es_rejected_...
    502: "bad_gateway",
    503: "cluster_block_exception",
    504: "gateway_timeout",
}


def _error_body(status: int, error_type: str, reason: str) -> dict[str, Any]:
    """An error in OpenSearch's wire shape."""
    error = {"type": error_type, "reason": reason}
    return {"error": {"root_cause": [error], **error}, "status": status}


@dataclass(frozen=True)
class FineGrainedAccessControl:
    """Attribute signed requests to IAM roles, as a domain with IAM authentication does.

    `principals` maps a request's access key id to the IAM role ARN whose credentials they are (as STS handed
    them out: an assumed-role session acts as its role); `master_role_arn` is the domain's FGAC master user ARN.
    """

    master_role_arn: str
    principals: Mapping[str, str] | Callable[[str], str | None]

    def principal(self, access_key: str) -> str | None:
        lookup = self.principals
        return lookup(access_key) if callable(lookup) else lookup.get(access_key)


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
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
    applied: bool = False  # with drop_connection: the request takes effect, only its response is lost
    method: str | None = None


@dataclass
class _ItemFault:
    error: ItemError
    remaining: int | None  # None: always


def _classify(segments: list[str]) -> str:
    first = segments[0] if segments else ""
    if first in (ROUTE_INDEX_TEMPLATE, ROUTE_SCRIPTS, ROUTE_ALIASES):  # each route is named for its path
        return first
    if segments[:2] == ["_cluster", "settings"]:
        return ROUTE_CLUSTER_SETTINGS
    if segments[:3] == ["_plugins", "_security", "api"]:
        return ROUTE_SECURITY
    if "_alias" in segments[:2] or "_aliases" in segments[1:2]:
        return ROUTE_ALIAS
    if segments[-1:] == ["_bulk"]:
        return ROUTE_BULK
    if segments[-1:] == ["_settings"] and len(segments) <= 2:
        return ROUTE_SETTINGS
    if len(segments) == 1 and not first.startswith("_"):
        return ROUTE_INDEX
    return ROUTE_OTHER


_AUTHORIZATION = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/(?P<service>[^/]+)"
    r"/aws4_request, "
    r"SignedHeaders=(?P<signed>[a-z0-9;\-]+), Signature=(?P<signature>[0-9a-f]{64})$"
)
_SIGNATURE_MISMATCH = "The request signature we calculated does not match the signature you provided."


class LoopbackOpenSearch:
    """The front on 127.0.0.1:<ephemeral port> before `engine`; thread-safe; use as a context manager.

    `credentials` (access key, secret key), or a map of access key to secret key, makes it verify signatures,
    not only their presence.
    `fgac` attributes each signed request to the IAM role its access key belongs to; with the secured `engine`
    (tests/support/secured_node.py) the request is forwarded as that role and the security plugin decides.
    """

    def __init__(
        self,
        *,
        credentials: tuple[str, str] | Mapping[str, str] | None = None,
        region: str | None = None,
        latency_seconds: float = 0.0,
        fgac: FineGrainedAccessControl | None = None,
        access: DomainAccess | None = None,
        engine: EngineNode,
    ) -> None:
        if access is not None and fgac is None:
            raise ValueError("access needs fgac: IAM decides for the role a request is attributed to")
        if (fgac is not None) != isinstance(engine, SecuredNode):
            raise ValueError(
                "fine-grained access control is the secured node's plugin: fgac goes with a SecuredNode"
            )
        self.access = access
        self.secrets = dict([credentials]) if isinstance(credentials, tuple) else credentials
        self.region = region
        self.latency_seconds = latency_seconds
        self.fgac = fgac
        self.engine = engine
        self._lock = threading.Lock()
        self._item_faults: dict[str, deque[_ItemFault]] = {}
        self.requests: list[RecordedRequest] = []
        self._faults: dict[str, deque[Fault]] = {}
        self._stopping = threading.Event()
        self._server = _Server(("127.0.0.1", 0), _make_handler(self))
        self._thread: threading.Thread | None = None
        self.port: int = self._server.server_address[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self) -> LoopbackOpenSearch:
        if isinstance(self.engine, SecuredNode) and self.fgac is not None:
            self.engine.map_master(self.fgac.master_role_arn)
        serve = self._server.serve_forever
        self._thread = threading.Thread(target=serve, args=(0.01,), name="loopback-opensearch", daemon=True)
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

    def _enqueue(self, route: str, fault: Fault, times: int) -> None:
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
        """The next `times` requests to `route` (one of the ROUTE_* names) fail with `status` and an OpenSearch
        error body."""
        error_type = error_type or _DEFAULT_ERROR_TYPES.get(status, "exception")
        body = _error_body(status, error_type, reason or f"injected {status}")
        headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
        self._enqueue(route, Fault(status=status, body=body, headers=headers, method=method), times)

    def delay_next(self, route: str, seconds: float) -> None:
        """The next request waits `seconds`; then it takes effect normally."""
        self._enqueue(route, Fault(delay_seconds=seconds), 1)

    def drop_next(self, route: str, *, times: int = 1, method: str | None = None) -> None:
        """The next requests are read, not applied, and the connection is closed without a response."""
        self._enqueue(route, Fault(drop_connection=True, method=method), times)

    def lose_response_next(self, route: str, *, times: int = 1, method: str | None = None) -> None:
        """The next requests take effect, and the connection is closed before their response: what a client whose
        request timed out or was reset after the domain applied it sees, without waiting on the real clock."""
        self._enqueue(route, Fault(drop_connection=True, applied=True, method=method), times)

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
        fault = _ItemFault(ItemError(status, error_type, reason), times)
        with self._lock:
            self._item_faults.setdefault(doc_id, deque()).append(fault)

    def lose_points_in_time(self) -> None:
        """What a node restart or a blue/green deployment does on the service: every point in time is gone."""
        freed = self.engine.request("DELETE", "/_search/point_in_time/_all")
        assert freed.status == 200, freed.body

    # --- inspection ------------------------------------------------------------------------------

    def count(self, route: str, method: str | None = None) -> int:
        """Requests received for `route` (faulted ones included), optionally only one method ("PUT")."""
        return len(self.requests_to(route, method))

    def forget_requests(self) -> None:
        """Drop what was recorded so far (e.g. a test's set-up), keeping the cluster's state."""
        with self._lock:
            self.requests.clear()

    def requests_to(self, route: str, method: str | None = None) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.route == route and method in (None, r.method)]

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
        return dict(self.engine.request("GET", f"/{index}/_alias").body[index]["aliases"])

    # --- request handling (called from server threads) -------------------------------------------

    def forward(
        self, request: RecordedRequest, segments: list[str], raw_path: str, principal: str | None
    ) -> Forwarded:
        """A request the front let through, answered by the real engine (per-item bulk faults made here); on the
        secured node it acts for the verified IAM principal (its role ARN), never for a header the client sent."""
        headers, body = request.headers, request.body
        if request.route == ROUTE_BULK and request.method in ("POST", "PUT"):
            index = segments[0] if len(segments) == 2 else None
            return forward_bulk(self.engine, raw_path, headers, body, index, self._item_error, principal)
        return forward(self.engine, request.method, raw_path, headers, body, principal)

    def _item_error(self, doc_id: str) -> ItemError | None:
        """The fault at the head of a document's queue, used up once its `remaining` count runs out."""
        with self._lock:
            queue = self._item_faults.get(doc_id)
            if not queue:
                return None
            fault = queue[0]
            if fault.remaining is not None:
                fault.remaining -= 1
                if fault.remaining <= 0:
                    queue.popleft()
            return fault.error

    def _next_fault(self, route: str, method: str) -> Fault | None:
        with self._lock:
            queue = self._faults.get(route, deque())
            for position, fault in enumerate(queue):
                if fault.method is None or fault.method.upper() == method:
                    del queue[position]
                    return fault
            return None

    def _sleep(self, seconds: float) -> None:
        """Sleeps that end early when the server stops, so fixtures never hang."""
        if seconds > 0:
            self._stopping.wait(seconds)

    def _signature_refusal(
        self, request: RecordedRequest, raw_path: str, raw_host: str, body_sha256: str
    ) -> str | None:
        """Why the service refuses the request's signature (403), or None."""
        authorization = request.headers.get("authorization")
        if not authorization:
            return "Missing Authentication Token: request is not signed"
        match = _AUTHORIZATION.match(authorization)
        if not match or match["service"] != "es" or "x-amz-date" not in request.headers:
            return f"Authorization header is not SigV4 for es: {_SIGNATURE_MISMATCH}"
        if self.region is not None and match["region"] != self.region:
            return f"Credential should be scoped to region {self.region}"
        if request.headers.get("x-amz-content-sha256") != body_sha256:
            return f"x-amz-content-sha256 does not match the body. {_SIGNATURE_MISMATCH}"
        if self.secrets is None:
            return None
        access_key = match["key"]
        secret_key = self.secrets.get(access_key)
        if secret_key is None:
            return "The security token included in the request is invalid"
        headers = {name: request.headers.get(name, "") for name in match["signed"].split(";")}
        aws_request = AWSRequest(request.method, f"http://{raw_host}{raw_path}", headers, request.body)
        aws_request.context["timestamp"] = request.headers["x-amz-date"]
        signer = SigV4Auth(Credentials(access_key, secret_key), match["service"], match["region"])
        canonical = signer.canonical_request(aws_request)
        expected = signer.signature(signer.string_to_sign(aws_request, canonical), aws_request)
        return None if expected == match["signature"] else _SIGNATURE_MISMATCH

    def principal_of(self, request: RecordedRequest) -> str | None:
        """The IAM role ARN a signed request acts as, under FGAC (None: no FGAC, or an access key no principal
        owns, which IAM refuses before FGAC sees the request)."""
        match = _AUTHORIZATION.match(request.headers.get("authorization", ""))
        return self.fgac.principal(match["key"]) if self.fgac is not None and match else None


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


def _make_handler(owner: LoopbackOpenSearch) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = _IDLE_CONNECTION_TIMEOUT_SECONDS

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
                headers={name.lower(): value for name, value in self.headers.items()},
                body=body,
                route=_classify(segments),
            )
            with owner._lock:
                owner.requests.append(request)
            owner._sleep(owner.latency_seconds)
            # A signed-only domain refuses unsigned requests before anything else can happen.
            refusal = owner._signature_refusal(request, self.path, self.headers.get("Host", ""), body_sha256)
            principal = owner.principal_of(request)
            if refusal is None and owner.fgac is not None and principal is None:
                refusal = "The security token included in the request is invalid."
            if refusal is not None:
                error = _error_body(403, "security_exception", refusal)["error"]
                self._send(403, {"message": refusal, "error": error})
                return
            if owner.access is not None and principal is not None:  # IAM decides before the engine
                refused = owner.access.refusal(principal, request.method, request.path)
                if refused is not None:  # in the service's shape
                    self._send(403, refused)
                    return
            fault = owner._next_fault(request.route, request.method)
            if fault is not None:
                owner._sleep(fault.delay_seconds)
                if fault.drop_connection:
                    if fault.applied:
                        owner.forward(request, segments, self.path, principal)
                    self.close_connection = True
                    with contextlib.suppress(OSError):
                        self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if fault.status is not None:
                    self._send(fault.status, fault.body, fault.headers)
                    return
            forwarded = owner.forward(request, segments, self.path, principal)
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
            if not isinstance(payload, bytes):
                payload = b"" if payload is None else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

    return Handler
