"""Fixtures of the stream sync integration tests; the harness itself is in sync_harness.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

# The harness asserts what the sync wrote; rewritten like a test's asserts, a failure shows the diff.
pytest.register_assert_rewrite("sync_harness")

from moto import mock_aws  # noqa: E402
from stream_sync import handler  # noqa: E402
from sync_harness import FGAC, REGION, Pipeline, bootstrap  # noqa: E402

from tests.support.aws import use_fake_aws  # noqa: E402
from tests.support.engine_node import EngineNode  # noqa: E402
from tests.support.opensearch_server import LoopbackOpenSearch  # noqa: E402
from tests.support.secured_node import SecuredNode  # noqa: E402


@pytest.fixture
def pipeline(monkeypatch: pytest.MonkeyPatch, engine_as_left: EngineNode) -> Iterator[Pipeline]:
    """The sync against the real engine behind the domain front (SigV4, faults, recorded requests)."""
    yield from _pipeline(monkeypatch, LoopbackOpenSearch(region=REGION, engine=engine_as_left))


@pytest.fixture
def fgac_pipeline(monkeypatch: pytest.MonkeyPatch, secured_as_left: SecuredNode) -> Iterator[Pipeline]:
    """The sync against the secured node, whose security plugin decides what each IAM role may do (role mappings,
    document- and field-level security), behind the domain front."""
    yield from _pipeline(monkeypatch, LoopbackOpenSearch(region=REGION, fgac=FGAC, engine=secured_as_left))


def _pipeline(monkeypatch: pytest.MonkeyPatch, front: LoopbackOpenSearch) -> Iterator[Pipeline]:
    use_fake_aws(monkeypatch, REGION)
    with mock_aws(), front as server:
        server.engine.prepared(
            f"sync_harness.bootstrap fgac={server.fgac is not None}", lambda: bootstrap(server)
        )
        server.forget_requests()  # tests count the sync's requests
        yield Pipeline(server, monkeypatch).create()
    handler.reset()
