"""Stateful resources keep their logical ids forever: a change here means CloudFormation would replace data.

The ids themselves are the shipped configuration's (tests/infra/test_shipped_config.py); these tests hold every
environment to them, and fail on a stateful resource nobody pinned (a new table: pin its ids there)."""

from __future__ import annotations

import pytest

from infra.config import EnvironmentConfig
from tests.infra.conftest import ENVIRONMENTS, Synthesized
from tests.infra.test_shipped_config import PINNED, PINNED_ADDITIONAL_TABLES, PINNED_WITH_BACKUP
from tests.support.retention import removal_policies


def pinned(synthesized: Synthesized, env_name: str) -> dict[str, str]:
    children = synthesized.stack(env_name, "Stateful")["children"]  # construct id -> its children's ids
    found = dict(PINNED)
    for construct_id, (table, vault) in {
        "Table": ({}, PINNED_WITH_BACKUP),
        **PINNED_ADDITIONAL_TABLES,
    }.items():
        if construct_id in children:
            found |= table | (vault if "Vault" in children[construct_id] else {})
    return found


@pytest.mark.parametrize("env_name", ENVIRONMENTS)
def test_stateful_logical_ids_are_pinned(synthesized: Synthesized, env_name: str) -> None:
    resources = synthesized.template_json(env_name, "Stateful")["Resources"]
    expected = pinned(synthesized, env_name)
    actual = {logical_id: resources[logical_id]["Type"] for logical_id in expected if logical_id in resources}
    assert actual == expected


@pytest.mark.parametrize("env_name", ENVIRONMENTS)
def test_every_stateful_resource_is_pinned(synthesized: Synthesized, env_name: str) -> None:
    resources = synthesized.template_json(env_name, "Stateful")["Resources"]
    stateful_types = {*PINNED.values(), *PINNED_WITH_BACKUP.values()}
    unpinned = sorted(
        logical_id
        for logical_id, resource in resources.items()
        if resource["Type"] in stateful_types and logical_id not in pinned(synthesized, env_name)
    )
    assert unpinned == []


def test_an_environment_that_retains_data_retains_every_pinned_resource(
    synthesized: Synthesized, config: EnvironmentConfig
) -> None:
    resources = synthesized.template_json(config.name, "Stateful")["Resources"]
    policies = {
        logical_id: (
            resources[logical_id].get("DeletionPolicy"),
            resources[logical_id].get("UpdateReplacePolicy"),
        )
        for logical_id in pinned(synthesized, config.name)
    }
    expected = removal_policies(config)
    assert policies == {logical_id: expected for logical_id in policies}
