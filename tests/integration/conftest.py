"""Fixtures of the stream sync integration tests; the harness itself is in sync_harness.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from moto import mock_aws
from stream_sync import handler
from sync_harness import REGION, Pipeline, bootstrap

from tests.support.opensearch_server import LoopbackOpenSearch


@pytest.fixture
def pipeline(monkeypatch: pytest.MonkeyPatch) -> Iterator[Pipeline]:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws(), LoopbackOpenSearch(region=REGION) as server:
        bootstrap(server)
        yield Pipeline(server, monkeypatch).create()
    handler.reset()
