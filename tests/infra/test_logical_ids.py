"""Stateful resources keep their logical ids forever: a change here means CloudFormation would replace data.

The ids themselves are the shipped configuration's (tests/infra/test_shipped_config.py); these tests hold every
environment to them, and fail on a stateful resource nobody pinned (a new table: after review, `make pins` pins its
ids there)."""

from __future__ import annotations

import pytest

from infra.config import EnvironmentConfig
from tests.infra.conftest import ENVIRONMENTS, Synthesized
from tests.infra.test_shipped_config import PINNED, PINNED_WITH_BACKUP, pinned
from tests.support.retention import removal_policies


@pytest.mark.parametrize("env_name", ENVIRONMENTS)
def test_stateful_logical_ids_are_pinned(synthesized: Synthesized, env_name: str) -> None:
    resources = synthesized.template_json(env_name, "Stateful")["Resources"]
    expected = pinned(synthesized, env_name)
    actual = {logical_id: resources[logical_id]["Type"] for logical_id in expected if logical_id in resources}
    assert actual == expected


def unpinned_failure(resources: dict[str, dict], pinned: dict[str, str]) -> str | None:
    """What the pin test says of the stateful resources of a template's ``resources`` that ``pinned`` lacks: every
    id in full, and how to pin it (None: every one is pinned)."""
    stateful_types = {*PINNED.values(), *PINNED_WITH_BACKUP.values()}
    unpinned = sorted(
        f"{logical_id} ({resource['Type']})"
        for logical_id, resource in resources.items()
        if resource["Type"] in stateful_types and logical_id not in pinned
    )
    if not unpinned:
        return None
    return (
        f"stateful resources nobody pinned: {', '.join(unpinned)}. A new source table's: run `make pins` after "
        "review (it pins the table and its vault in tests/infra/test_shipped_config.py, and refuses to change a "
        "pinned id); anything else: pin it in PINNED there."
    )


@pytest.mark.parametrize("env_name", ENVIRONMENTS)
def test_every_stateful_resource_is_pinned(synthesized: Synthesized, env_name: str) -> None:
    resources = synthesized.template_json(env_name, "Stateful")["Resources"]
    failure = unpinned_failure(resources, pinned(synthesized, env_name))
    if failure:
        pytest.fail(failure, pytrace=False)


def test_an_unpinned_table_fails_the_pin_test_naming_its_ids_in_full_and_make_pins() -> None:
    table, vault = "TablePlanted0123ABCD", "TablePlantedVault4567CDEF"
    resources = {
        table: {"Type": "AWS::DynamoDB::Table"},
        vault: {"Type": "AWS::Backup::BackupVault"},
        "PlantedQueue89ABCDEF": {"Type": "AWS::SQS::Queue"},  # not stateful: never asked to be pinned
    }
    failure = unpinned_failure(resources, {})
    assert failure is not None
    assert f"{table} (AWS::DynamoDB::Table), {vault} (AWS::Backup::BackupVault)." in failure
    assert "run `make pins` after review" in failure and "PlantedQueue" not in failure
    assert (
        unpinned_failure(resources, {table: "AWS::DynamoDB::Table", vault: "AWS::Backup::BackupVault"})
        is None
    )


def test_an_environment_that_retains_data_retains_every_pinned_resource(
    synthesized: Synthesized, config: EnvironmentConfig
) -> None:
    resources = synthesized.template_json(config.name, "Stateful")["Resources"]
    policies = {
        i: (resources[i].get("DeletionPolicy"), resources[i].get("UpdateReplacePolicy"))
        for i in pinned(synthesized, config.name)
    }
    expected = removal_policies(config)
    assert policies == {logical_id: expected for logical_id in policies}
