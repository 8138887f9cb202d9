"""Fixtures of the ops tools' tests; the harness itself is in ops_harness.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from moto import mock_aws
from ops_harness import ADMIN_KEY, FGAC, REGION, OpsEnv

from tests.support.aws import use_fake_aws
from tests.support.opensearch_server import LoopbackOpenSearch


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    use_fake_aws(monkeypatch, REGION)


@pytest.fixture
def ops_env(aws_env: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[OpsEnv]:
    with mock_aws(), LoopbackOpenSearch(region=REGION, fgac=FGAC) as server:
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", ADMIN_KEY)  # the tools run as the FGAC admin role
        env = OpsEnv(server)
        env.create_table()
        env.bootstrap()
        yield env
        env.transport.close()
