"""Fixtures of the stream sync integration tests; the harness itself is in sync_harness.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from moto import mock_aws
from stream_sync import handler
from sync_harness import FGAC, REGION, Pipeline, bootstrap

from tests.support.aws import use_fake_aws
from tests.support.opensearch_server import LoopbackOpenSearch


@pytest.fixture
def pipeline(monkeypatch: pytest.MonkeyPatch) -> Iterator[Pipeline]:
    use_fake_aws(monkeypatch, REGION)
    with mock_aws(), LoopbackOpenSearch(region=REGION, fgac=FGAC) as server:
        bootstrap(server)
        server.forget_requests()  # tests count the sync's requests
        yield Pipeline(server, monkeypatch).create()
    handler.reset()
