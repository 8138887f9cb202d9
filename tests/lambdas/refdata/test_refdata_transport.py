"""The signed transport against the domain front (which verifies SigV4 signatures) before the real engine."""

from __future__ import annotations

import hashlib
import json
import socket
import threading
from collections.abc import Iterator

import pytest
from botocore.credentials import Credentials
from refdata.transport import (
    NDJSON_CONTENT_TYPE,
    OpenSearchTransport,
    TransportConnectionError,
    TransportError,
    TransportTimeoutError,
    normalize_endpoint,
    path_segment,
)

from tests.support.engine_node import EngineNode
from tests.support.opensearch_server import ROUTE_BULK, ROUTE_INDEX, ROUTE_SCRIPTS, LoopbackOpenSearch

pytestmark = pytest.mark.integration

ACCESS_KEY, SECRET_KEY = "AKIDLOOPBACKTEST", "loopback-secret"
REGION = "eu-west-1"


@pytest.fixture
def server(engine: EngineNode) -> Iterator[LoopbackOpenSearch]:
    with LoopbackOpenSearch(credentials=(ACCESS_KEY, SECRET_KEY), region=REGION, engine=engine) as running:
        yield running


# A request's own timeout where the test is not about timeouts: the engine's first write to an index creates it
# (a cluster-state update), which took over 2 s on a loaded machine.
GENEROUS = 30.0


def transport_for(
    server: LoopbackOpenSearch,
    *,
    timeout: float = GENEROUS,
    secret: str = SECRET_KEY,
    token: str | None = None,
) -> OpenSearchTransport:
    credentials = Credentials(ACCESS_KEY, secret, token=token)
    return OpenSearchTransport(server.endpoint, REGION, timeout_seconds=timeout, credentials=credentials)


def test_requests_carry_a_sigv4_signature_for_service_es(server: LoopbackOpenSearch) -> None:
    response = transport_for(server).request("GET", "_cat/indices?format=json")

    assert response.status == 200
    authorization = server.requests[-1].headers["authorization"]
    assert authorization.startswith(f"AWS4-HMAC-SHA256 Credential={ACCESS_KEY}/")
    assert f"/{REGION}/es/aws4_request" in authorization
    assert "x-amz-date" in server.requests[-1].headers


def test_server_verifies_the_signature_so_a_wrong_secret_is_refused(server: LoopbackOpenSearch) -> None:
    response = transport_for(server, secret="not-the-secret").request("GET", "_cat/indices?format=json")

    assert response.status == 403
    assert "signature" in response.error_reason()


def test_session_token_is_sent_and_signed(server: LoopbackOpenSearch) -> None:
    transport = transport_for(server, token="session-token")

    assert transport.request("GET", "_cat/indices?format=json").status == 200
    assert server.requests[-1].headers["x-amz-security-token"] == "session-token"
    assert "x-amz-security-token" in server.requests[-1].headers["authorization"]


def test_body_bytes_arrive_intact_with_their_sha256(server: LoopbackOpenSearch) -> None:
    lines = [{"index": {"_index": "places", "_id": "geozone::a#1"}}, {"name": "Caf\u00e9 \u2603", "n": 1}]
    body = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode()

    response = transport_for(server).request("POST", "_bulk", body, {"Content-Type": NDJSON_CONTENT_TYPE})

    assert response.status == 200
    recorded = server.requests_to(ROUTE_BULK)[-1]
    assert recorded.body == body
    assert recorded.headers["x-amz-content-sha256"] == hashlib.sha256(body).hexdigest()
    assert recorded.headers["content-type"] == NDJSON_CONTENT_TYPE


def test_json_content_type_is_the_default_for_a_body(server: LoopbackOpenSearch) -> None:
    body = json.dumps({"script": {"lang": "painless", "source": "ctx.op = 'none'"}}).encode()

    transport_for(server).request("PUT", "_scripts/noop", body)

    assert server.requests_to(ROUTE_SCRIPTS)[-1].headers["content-type"] == "application/json"


def test_encoded_path_segments_are_signed_correctly(server: LoopbackOpenSearch) -> None:
    path = f"places/_doc/{path_segment('geozone::bcparks_1#7')}"

    response = transport_for(server).request("GET", path)

    assert response.status == 404
    assert response.json()["error"]["type"] == "index_not_found_exception"


def test_http_error_statuses_are_returned_not_raised(server: LoopbackOpenSearch) -> None:
    server.fail_next(ROUTE_BULK, 429, retry_after=3)

    response = transport_for(server).request("POST", "_bulk", b"{}\n", {"Content-Type": NDJSON_CONTENT_TYPE})

    assert response.status == 429
    assert response.headers["retry-after"] == "3"
    assert "rejected_execution_exception" in response.error_reason()


def test_a_slow_response_raises_a_timeout_error(server: LoopbackOpenSearch) -> None:
    server.delay_next(ROUTE_INDEX, 1.0)

    with pytest.raises(TransportTimeoutError):
        transport_for(server, timeout=0.2).request("HEAD", "places")


def test_a_dropped_connection_raises_a_connection_error(server: LoopbackOpenSearch) -> None:
    server.drop_next(ROUTE_INDEX)

    with pytest.raises(TransportConnectionError):
        transport_for(server).request("HEAD", "places")


def test_a_refused_connection_raises_a_transport_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    transport = OpenSearchTransport(
        f"http://127.0.0.1:{port}", REGION, timeout_seconds=1, credentials=Credentials("a", "b")
    )

    with pytest.raises(TransportError):
        transport.request("GET", "/")


def test_no_retries_happen_inside_the_transport(server: LoopbackOpenSearch) -> None:
    server.fail_next(ROUTE_BULK, 503)
    transport = transport_for(server)

    transport.request("POST", "_bulk", b"{}\n", {"Content-Type": NDJSON_CONTENT_TYPE})

    assert server.count(ROUTE_BULK) == 1


def test_one_transport_is_safe_to_share_between_threads(server: LoopbackOpenSearch) -> None:
    transport = transport_for(server)
    statuses: list[int] = []

    def call() -> None:
        statuses.append(transport.request("GET", "_cat/indices?format=json").status)

    threads = [threading.Thread(target=call) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=5)

    assert statuses == [200] * 8


def test_a_bare_domain_endpoint_means_https() -> None:
    domain = "vpc-x.eu-west-1.es.amazonaws.com"
    assert normalize_endpoint(domain) == f"https://{domain}"
    assert normalize_endpoint("http://127.0.0.1:9200/") == "http://127.0.0.1:9200"
