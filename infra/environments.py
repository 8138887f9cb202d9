"""The deployment environments. Edit the account ids here (or override them: docs/deploy.md, "1. Accounts")."""

from __future__ import annotations

from infra.config import (
    CapacityMode,
    EnvironmentConfig,
    HeartbeatSettings,
    MonitoringSettings,
    NetworkSettings,
    OpsSettings,
    ProvisionedCapacity,
    ReadRole,
    RemovalPolicy,
    SearchSettings,
    SourceTable,
    SyncSettings,
    TableSettings,
    environment_map,
)

# Example account ids; replace with yours, or pass `-c account.<env>=<id>` to the CDK CLI.
EXAMPLE_ACCOUNTS = {"dev": "111111111111", "test": "222222222222", "prod": "333333333333"}
REGION = "ca-central-1"


def public_search(account: str, environment: str) -> ReadRole:
    """The public sites' read role: zones and product dates, never bookings; no hidden item, no internal field.

    Its IAM role belongs to the application team (example name: edit it, or add roles, per environment).
    """
    return ReadRole(
        name="public_search",
        schemas=("geozone", "productDate"),
        iam_role_arns=(f"arn:aws:iam::{account}:role/refdata-{environment}-public-search",),
    )


def environments(accounts: dict[str, str] | None = None) -> dict[str, EnvironmentConfig]:
    """Builds and validates every environment; ``accounts`` overrides the example account ids."""
    account = {**EXAMPLE_ACCOUNTS, **(accounts or {})}
    envs = (
        EnvironmentConfig(
            name="dev",
            account=account["dev"],
            region=REGION,
            removal_policy=RemovalPolicy.DESTROY,
            log_retention_days=30,
            table=TableSettings(),
            # As in the production system the seeds come from, bookings (transactional) live apart from the
            # reference data; dev ships two tables so every check runs on a two-table environment.
            additional_tables=(SourceTable(name="Bookings", schemas=("booking",)),),
            network=NetworkSettings(cidr="10.40.0.0/16", max_azs=2, flow_log_retention_days=30),
            search=SearchSettings(
                domain_name="refdata-dev",
                bulk_max_bytes=9 * 1024 * 1024,
                read_roles=(public_search(account["dev"], "dev"),),
            ),
            ops=OpsSettings(max_concurrency=2, scan_segments=4, scan_read_units_per_second=200),
            # A heartbeat every five minutes is enough for a development domain: HeartbeatMissing fires after 15
            # quiet minutes (three intervals cover a new mapping's start-up).
            heartbeat=HeartbeatSettings(interval_minutes=5),
            reserve_concurrency=False,
        ),
        EnvironmentConfig(
            name="test",
            account=account["test"],
            region=REGION,
            removal_policy=RemovalPolicy.RETAIN,
            log_retention_days=90,
            table=TableSettings(
                capacity_mode=CapacityMode.PROVISIONED,
                provisioned=ProvisionedCapacity(min_read=5, max_read=200, min_write=5, max_write=200),
                contributor_insights=True,
                backup_enabled=True,
                backup_retention_days=14,
            ),
            network=NetworkSettings(cidr="10.41.0.0/16", max_azs=2),
            search=SearchSettings(
                domain_name="refdata-test",
                data_node_type="m7g.large.search",
                data_node_count=2,
                availability_zone_count=2,
                replicas=1,
                volume_size_gib=50,
                bulk_max_bytes=9 * 1024 * 1024,
                read_roles=(public_search(account["test"], "test"),),
            ),
            # Provisioned at up to 200 read units: a repair scan may take half of them.
            ops=OpsSettings(max_concurrency=4, scan_segments=8, scan_read_units_per_second=100),
            # Provisioned capacity scales out only after minutes above its target: load tests here throttle
            # briefly by design, so only sustained throttling pages.
            monitoring=MonitoringSettings(throttle_events=100),
        ),
        EnvironmentConfig(
            name="prod",
            account=account["prod"],
            region=REGION,
            removal_policy=RemovalPolicy.RETAIN,
            log_retention_days=365,
            production=True,
            table=TableSettings(contributor_insights=True, backup_enabled=True, backup_retention_days=35),
            network=NetworkSettings(cidr="10.42.0.0/16", max_azs=3, flow_log_retention_days=365),
            search=SearchSettings(
                domain_name="refdata-prod",
                data_node_type="r7g.large.search",
                data_node_count=3,
                master_node_type="m7g.large.search",
                master_node_count=3,
                availability_zone_count=3,
                replicas=2,
                volume_size_gib=200,
                bulk_max_bytes=9 * 1024 * 1024,
                read_roles=(public_search(account["prod"], "prod"),),
            ),
            sync=SyncSettings(reserved_concurrency=20, parallelization_factor=2),
            ops=OpsSettings(max_concurrency=8, scan_segments=16, scan_read_units_per_second=2000),
            heartbeat=HeartbeatSettings(interval_minutes=1, lag_alarm_seconds=180),
        ),
    )
    return environment_map(*envs)
