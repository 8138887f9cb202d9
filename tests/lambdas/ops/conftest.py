"""Fixtures of the ops tools' tests; the harness itself is in ops_harness.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from moto import mock_aws
from ops_harness import REGION, OpsEnv

from tests.support.opensearch_server import LoopbackOpenSearch


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


@pytest.fixture
def ops_env(aws_env: None) -> Iterator[OpsEnv]:
    with mock_aws(), LoopbackOpenSearch(region=REGION) as server:
        env = OpsEnv(server)
        env.create_table()
        env.bootstrap()
        yield env
        env.transport.close()
