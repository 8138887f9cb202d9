"""Stateful resources keep their logical ids forever: a change here means CloudFormation would replace data."""

from __future__ import annotations

import pytest

from tests.infra.conftest import ENVIRONMENTS, Synthesized

# Logical id → resource type. Never edit an entry to make this test pass: a different id means CloudFormation
# deletes the old resource (test and prod orphan it, dev loses it) and creates an empty one.
PINNED = {
    "DataKey5CEB6F76": "AWS::KMS::Key",
    "Table7ABB320E": "AWS::DynamoDB::Table",
    "GeometryBucket1F491C5F": "AWS::S3::Bucket",
    "GeometryBucketAccessLogsDBD8D12C": "AWS::S3::Bucket",
    # Ops workflow runs: their summaries (the record of every repair and purge) and a run's exports.
    "OpsBucket4D3C0B7D": "AWS::S3::Bucket",
    "SearchC313AE8E": "AWS::OpenSearchService::Domain",
    "NetworkFlowLogs2BEC3212": "AWS::Logs::LogGroup",
    "SearchSearchSlowLogsBB1667C5": "AWS::Logs::LogGroup",
    "SearchIndexSlowLogs5D1D98AC": "AWS::Logs::LogGroup",
    "SearchApplicationLogsBEFD87C3": "AWS::Logs::LogGroup",
    "SearchAuditLogsF1B55D26": "AWS::Logs::LogGroup",
    # Holds the on-call subscriptions people add after deploying.
    "AlarmTopicB56431CA": "AWS::SNS::Topic",
}
# Only environments whose config turns table backups on have a vault.
PINNED_WITH_BACKUP = {"TableVault6854F4A8": "AWS::Backup::BackupVault"}
# Additional source tables (infra/config.py ``additional_tables``), by construct id: the table, and its vault where
# its settings turn backups on. Only the environments that declare the table have it.
PINNED_ADDITIONAL_TABLES = {
    "TableBookings": (
        {"TableBookingsD1978FDB": "AWS::DynamoDB::Table"},
        {"TableBookingsVault45B27EDA": "AWS::Backup::BackupVault"},
    ),
}


def pinned(synthesized: Synthesized, env_name: str) -> dict[str, str]:
    stateful = synthesized.stages[env_name].node.find_child("Stateful")
    found = dict(PINNED)
    for construct_id, (table, vault) in {
        "Table": ({}, PINNED_WITH_BACKUP),
        **PINNED_ADDITIONAL_TABLES,
    }.items():
        construct = stateful.node.try_find_child(construct_id)
        if construct is not None:
            found |= table | (vault if construct.node.try_find_child("Vault") is not None else {})
    return found


def test_dev_declares_the_bookings_table_whose_logical_id_is_pinned(synthesized: Synthesized) -> None:
    assert "TableBookingsD1978FDB" in pinned(synthesized, "dev")
    assert not any(
        id.startswith("TableBookings") for env in ("test", "prod") for id in pinned(synthesized, env)
    )


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


@pytest.mark.parametrize("env_name", ["test", "prod"])
def test_test_and_prod_retain_every_pinned_resource(synthesized: Synthesized, env_name: str) -> None:
    resources = synthesized.template_json(env_name, "Stateful")["Resources"]
    policies = {
        logical_id: (
            resources[logical_id].get("DeletionPolicy"),
            resources[logical_id].get("UpdateReplacePolicy"),
        )
        for logical_id in pinned(synthesized, env_name)
    }
    assert policies == {logical_id: ("Retain", "Retain") for logical_id in policies}
