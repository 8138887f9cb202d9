"""Fixtures of the ops tools' tests; the harness itself is in ops_harness.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

# The harness asserts what the bootstrap and the sync did; rewritten like a test's asserts, a failure shows the diff.
pytest.register_assert_rewrite("ops_harness")

from moto import mock_aws  # noqa: E402
from ops_harness import ADMIN_KEY, ADMIN_ROLE_ARN, REGION, OpsEnv  # noqa: E402

from infra.environments import environments  # noqa: E402
from tests.support.aws import moto_role_of_access_key, use_fake_aws  # noqa: E402
from tests.support.engine_node import EngineNode  # noqa: E402
from tests.support.opensearch_server import FineGrainedAccessControl, LoopbackOpenSearch  # noqa: E402
from tests.support.secured_node import SecuredNode  # noqa: E402


@pytest.fixture(autouse=True)
def configured_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI as the repository root's `ops` package hands it the configured environments."""
    from ops import cli

    monkeypatch.setattr(cli, "ENVIRONMENTS", environments, raising=False)


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    use_fake_aws(monkeypatch, REGION)


@pytest.fixture
def ops_env(aws_env: None, monkeypatch: pytest.MonkeyPatch, engine_as_left: EngineNode) -> Iterator[OpsEnv]:
    """The tools, as the FGAC admin role (every permission), against the real engine behind the domain front."""
    yield from _ops_env(monkeypatch, LoopbackOpenSearch(region=REGION, engine=engine_as_left))


@pytest.fixture
def assumed_env(
    aws_env: None, monkeypatch: pytest.MonkeyPatch, secured_as_left: SecuredNode
) -> Iterator[OpsEnv]:
    """As `ops_env`, on the secured node: credentials that moto's STS hands out for the admin role act as the admin
    role (the worker assumes it, as deployed), and the security plugin decides what that role may do."""
    fgac = FineGrainedAccessControl(
        ADMIN_ROLE_ARN, lambda key: ADMIN_ROLE_ARN if key == ADMIN_KEY else moto_role_of_access_key(key)
    )
    yield from _ops_env(monkeypatch, LoopbackOpenSearch(region=REGION, fgac=fgac, engine=secured_as_left))


def _ops_env(monkeypatch: pytest.MonkeyPatch, front: LoopbackOpenSearch) -> Iterator[OpsEnv]:
    with mock_aws(), front as server:
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", ADMIN_KEY)  # the tools run as the FGAC admin role
        env = OpsEnv(server)
        env.create_table()
        env.bootstrapped()
        yield env
        env.transport.close()


@pytest.fixture
def changed(ops_env: OpsEnv, monkeypatch: pytest.MonkeyPatch) -> OpsEnv:
    """v1 in use and in sync with the table for two schemas; then a deployment creates geozone-v2."""
    ops_env.make_geozone_v2(monkeypatch)
    return ops_env
