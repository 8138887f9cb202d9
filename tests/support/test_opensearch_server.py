"""The domain front: what it lets through the engine answers, parameters included, and the errors it makes itself
have the shape of the engine's own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from botocore.credentials import Credentials
from refdata.transport import OpenSearchTransport

from tests.support.engine_node import EngineNode
from tests.support.opensearch_server import ROUTE_INDEX, LoopbackOpenSearch

REGION = "eu-west-1"


@pytest.fixture
def front(engine: EngineNode) -> Iterator[LoopbackOpenSearch]:
    with LoopbackOpenSearch(region=REGION, engine=engine) as running:
        yield running


def _client(front: LoopbackOpenSearch) -> OpenSearchTransport:
    return OpenSearchTransport(
        front.endpoint, REGION, timeout_seconds=30, credentials=Credentials("AKID", "x")
    )


def test_filter_path_is_answered_by_the_engine_exclusions_and_double_wildcards_too(
    front: LoopbackOpenSearch, engine: EngineNode
) -> None:
    engine.request("PUT", "/zones/_doc/1?refresh=true", {"name": "one", "internal": 1})
    client = _client(front)

    excluded = client.request("GET", "zones/_search?filter_path=-hits.hits._source%2C-_shards")
    deep = client.request("GET", "zones/_search?filter_path=%2A%2A._id")

    assert excluded.status == 200, excluded.json()
    hits = excluded.json()["hits"]["hits"]
    assert [hit["_id"] for hit in hits] == ["1"] and "_source" not in hits[0]
    assert "_shards" not in excluded.json()
    assert deep.json() == {"hits": {"hits": [{"_id": "1"}]}}


def test_an_injected_error_is_as_unfiltered_as_the_engines_own_errors(front: LoopbackOpenSearch) -> None:
    """The engine never applies filter_path to an error it answers; an injected error must not either."""
    client = _client(front)
    engines = client.request("GET", "missing?filter_path=missing.settings")
    front.fail_next(ROUTE_INDEX, 429)
    injected = client.request("GET", "missing?filter_path=missing.settings")

    assert engines.status == 404 and injected.status == 429
    assert set(injected.json()) == set(engines.json()) == {"error", "status"}
    assert injected.json()["error"]["type"] == "rejected_execution_exception"
