"""Environment records validate on construction, and every error names its field as ``<env>.<field>``.

Pure Python: each case edits a shipped config with ``dataclasses.replace`` (which re-runs validation), so no
synth happens here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import is_dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from refdata.registry import REGISTRY

from infra.config import (
    INVERTED_INDEX,
    MAX_SMOKE_STARTUP_MINUTES,
    MIN_SMOKE_STARTUP_MINUTES,
    SMOKE_WAIT_SECONDS,
    CapacityMode,
    ConfigError,
    EnvironmentConfig,
    GsiSettings,
    OpsSettings,
    Projection,
    ProvisionedCapacity,
    ReadRole,
    RemovalPolicy,
    SourceTable,
    TableSettings,
    data_schemas,
    http_payload_limit_bytes,
    instance_type_problem,
    opensearch_instance_types,
    opensearch_warm_instance_types,
)
from infra.environments import environments
from tests.infra.conftest import base_config, production_config, provisioned_config

MiB = 1024 * 1024


def rejects(path: str):  # type: ignore[no-untyped-def]
    """Expects a ConfigError whose message starts with exactly ``<path>: ``."""
    return pytest.raises(ConfigError, match=rf"^{re.escape(path)}: ")


def changed(config: EnvironmentConfig, section: str, **changes: object) -> EnvironmentConfig:
    """``config`` with ``changes`` to one of its sections (``dataclasses.replace`` validates again)."""
    return replace(config, **{section: replace(getattr(config, section), **changes)})


def with_search(config: EnvironmentConfig, **changes: object) -> EnvironmentConfig:
    return changed(config, "search", **changes)


# --- the shipped environments -------------------------------------------------------------------------------


def test_shipped_config_revalidates_unchanged(config: EnvironmentConfig) -> None:
    config.validate()


def test_a_production_environment_retains_its_data(config: EnvironmentConfig) -> None:
    assert config.retains_data or not config.production


def test_account_override_replaces_only_the_named_environment(config: EnvironmentConfig) -> None:
    accounts = {name: env.account for name, env in environments().items()}
    overridden = environments({config.name: "444444444444"})
    assert {name: env.account for name, env in overridden.items()} == accounts | {config.name: "444444444444"}


def test_an_invalid_account_override_is_rejected_with_its_path(config: EnvironmentConfig) -> None:
    with rejects(f"{config.name}.account"):
        environments({config.name: "12345"})


def test_shipped_bulk_payload_stays_below_the_instance_request_limit(config: EnvironmentConfig) -> None:
    assert config.search.bulk_max_bytes < http_payload_limit_bytes(config.search.data_node_type)


@pytest.mark.parametrize(
    ("instance_type", "limit_mib"),
    [
        *(
            (small, 10)
            for small in ("t3.small.search", "t3.medium.search", "m7g.large.search", "r7g.large.search")
        ),
        *((large, 100) for large in ("r7g.xlarge.search", "r7g.2xlarge.search", "or2.16xlarge.search")),
    ],
)
def test_http_payload_limit_follows_instance_size(instance_type: str, limit_mib: int) -> None:
    assert http_payload_limit_bytes(instance_type) == limit_mib * MiB


# --- one wrong value, rejected with its field's path ----------------------------------------------------------

Changes = dict[str, object] | Callable[[EnvironmentConfig], dict[str, object]]
EXISTING_VPC = {"existing_vpc_id": "vpc-0123456789abcdef0"}
ONE_SUBNET = {
    **EXISTING_VPC,
    "existing_isolated_subnet_ids": ("subnet-01",),
    "existing_availability_zones": ("ca-central-1a",),
}
STREAMS_ENDPOINT = "vpce-0a1b2c3d-4e5f.streams.dynamodb.ca-central-1.vpce.amazonaws.com"


def bad(path: str, changes: Changes, id: str = "") -> Any:
    """A case of ``test_a_wrong_value_is_rejected_with_its_fields_path``: ``changes`` to the section ``path`` starts
    with (to the environment itself when the path starts with no section) are rejected as ``<env>.<path>``."""
    shown = ",".join(f"{key}={value}" for key, value in changes.items()) if isinstance(changes, dict) else ""
    return pytest.param(path, changes, id=id or f"{path}:{shown}")


def wrong(path: str, *values: object) -> list[Any]:
    """One case of ``bad`` for each value of the field ``path`` names."""
    return [bad(path, {path.rsplit(".", 1)[-1]: value}) for value in values]


def held(*schemas: str, name: str = "Bookings", **settings: TableSettings) -> dict[str, object]:
    """An additional table named ``name`` holding ``schemas``."""
    return {"additional_tables": (SourceTable(name=name, schemas=schemas, **settings),)}


def capacity(field: str, **changes: int) -> Any:
    """A case of ``bad``: a provisioned main table's capacity ``changes`` rejected as its ``field``."""
    shown = ",".join(f"{key}={value}" for key, value in changes.items())
    provisioned = {"capacity_mode": CapacityMode.PROVISIONED, "provisioned": ProvisionedCapacity(**changes)}
    return bad(f"table.provisioned.{field}", provisioned, f"table.provisioned.{field}:{shown}")


def gsis(*extra: GsiSettings) -> dict[str, object]:
    return {"extra_gsis": extra}


@pytest.mark.parametrize(
    ("path", "changes"),
    [
        *wrong("account", "12345678901", "1234567890123", "12345678901a", "", "arn:aws:iam::1", 111111111111),
        *wrong("region", "ca-central", "CA-CENTRAL-1", "cacentral1", "ca-central-12", ""),
        *wrong("log_retention_days", 0, 2, 42, 366, 10000),  # not one of CloudWatch Logs' periods
        *wrong(
            "deploy_role", "", "deploy-*", "arn:aws:iam::123:role/deploy", "arn:aws:iam::123456789012:user/ci"
        ),
        # --- source tables
        bad("additional_tables[0].schemas[1]", held("booking", "booking"), "a_schema_repeated_in_one_table"),
        bad("additional_tables[0].schemas[0]", held("bookings"), "an_unknown_schema"),
        bad(
            "additional_tables[0].schemas[1]",
            held("booking", "counter"),
            "the_counter_held_beside_every_schema",
        ),
        bad("additional_tables[0].schemas", held(), "no_schema"),
        bad("additional_tables[0].schemas", held("thread", name="Threads"), "no_indexable_schema"),
        bad("additional_tables[0].name", held("booking", name="bookings"), "lowercase_name"),
        bad("additional_tables[0].name", held("booking", name="Book-ings"), "name_with_a_dash"),
        bad(
            "additional_tables[0].settings.provisioned",
            held("booking", settings=TableSettings(capacity_mode=CapacityMode.PROVISIONED)),
            "provisioned_mode_without_provisioned_settings",
        ),
        bad(
            "additional_tables[1].name",
            {
                "additional_tables": (
                    SourceTable(name="Bookings", schemas=("booking",)),
                    SourceTable(name="Bookings", schemas=("productDate",)),
                )
            },
            "two_tables_of_one_name",
        ),
        bad(
            "additional_tables",
            held(*(name for name in data_schemas() if REGISTRY[name].indexable), name="Everything"),
            "the_main_table_keeps_an_indexable_schema",
        ),
        # --- table
        bad(
            "table.provisioned",
            {"capacity_mode": CapacityMode.PROVISIONED, "provisioned": None},
            "provisioned_mode_without_settings",
        ),
        bad(
            "table.provisioned",
            {"capacity_mode": CapacityMode.ON_DEMAND, "provisioned": ProvisionedCapacity()},
            "settings_with_on_demand_mode",
        ),
        capacity("min_read", min_read=0),
        capacity("min_write", min_write=0),
        capacity("max_read", min_read=50, max_read=10),
        capacity("max_write", min_write=50, max_write=10),
        capacity("target_utilization_percent", target_utilization_percent=95),
        capacity("target_utilization_percent", target_utilization_percent=10),
        bad(
            "table.extra_gsis",
            gsis(INVERTED_INDEX, replace(INVERTED_INDEX, partition_key="other")),
            "duplicate_gsi_names",
        ),
        bad(
            "table.extra_gsis",
            gsis(*(GsiSettings(name=f"index{n:02d}", partition_key=f"attr{n}") for n in range(20))),
            "more_than_nineteen_extra_gsis",
        ),
        bad(
            "table.extra_gsis[0].name",
            gsis(GsiSettings(name="globalId", partition_key="x")),
            "gsi_named_as_the_builtin_index",
        ),
        bad(
            "table.extra_gsis[1].name",
            gsis(INVERTED_INDEX, GsiSettings(name="a b", partition_key="x")),
            "malformed_gsi_name_by_position",
        ),
        bad(
            "table.extra_gsis[0].sort_key",
            gsis(GsiSettings(name="bySk", partition_key="sk", sort_key="1bad key")),
            "malformed_gsi_key_attribute",
        ),
        bad(
            "table.extra_gsis[0].non_key_attributes",
            gsis(GsiSettings(name="byType", partition_key="type", projection=Projection.INCLUDE)),
            "include_projection_without_non_key_attributes",
        ),
        bad(
            "table.extra_gsis[0].non_key_attributes",
            gsis(GsiSettings(name="byType", partition_key="type", non_key_attributes=("name",))),
            "non_key_attributes_without_include_projection",
        ),
        *wrong("table.ttl_attribute", "expires at"),
        *wrong("table.backup_retention_days", 0, 36501),
        # --- network
        *wrong("network.cidr", "10.40.0.0", "10.40.0.0/8", "10.40.0.0/30", "vpc"),
        *wrong("network.max_azs", 4, 0),
        *wrong("network.flow_log_retention_days", 31),
        *wrong("network.existing_vpc_id", "vpc-XYZ"),
        bad("network.existing_isolated_subnet_ids", EXISTING_VPC, "existing_vpc_without_subnets"),
        bad(
            "network.existing_availability_zones",
            {
                **ONE_SUBNET,
                "existing_isolated_subnet_ids": ("subnet-01", "subnet-02"),
                "existing_route_table_ids": ("rtb-01", "rtb-02"),
            },
            "existing_vpc_without_one_zone_per_subnet",
        ),
        bad(
            "network.existing_route_table_ids", ONE_SUBNET, "existing_vpc_without_one_route_table_per_subnet"
        ),
        bad(
            "network.existing_endpoint_security_group_id",
            {**ONE_SUBNET, "existing_route_table_ids": ("rtb-01",)},
            "existing_vpc_without_endpoints_security_group",
        ),
        *(
            bad(
                "network.existing_dynamodb_streams_endpoint",
                {
                    **ONE_SUBNET,
                    "existing_route_table_ids": ("rtb-01",),
                    "existing_endpoint_security_group_id": "sg-0123456789abcdef0",
                    "existing_dynamodb_streams_endpoint": endpoint,
                },
                f"existing_vpcs_streams_endpoint_not_an_endpoint_dns_name:{endpoint}",
            )
            for endpoint in ["vpce-0a1b.dynamodb.ca-central-1.vpce.amazonaws.com", "streams.example.com"]
        ),
        bad(
            "network.existing_dynamodb_streams_endpoint",
            {"existing_dynamodb_streams_endpoint": STREAMS_ENDPOINT},
            "streams_endpoint_without_an_existing_vpc",
        ),
        # --- search
        bad(
            "search.bulk_max_bytes",
            lambda c: {"bulk_max_bytes": http_payload_limit_bytes(c.search.data_node_type)},
            "bulk_at_the_instance_request_limit",
        ),
        bad(
            "search.bulk_max_bytes",
            lambda c: {"bulk_max_bytes": http_payload_limit_bytes(c.search.data_node_type) + MiB},
            "bulk_above_the_instance_request_limit",
        ),
        *wrong("search.bulk_max_bytes", MiB - 1),
        *wrong("search.domain_name", "Refdata", "rd"),
        *wrong("search.engine_version", "Elasticsearch_7.10", "3.3"),
        *wrong("search.data_node_type", "m7g.large.elasticsearch", "m7g.large"),
        *wrong("search.volume_size_gib", 5),
        *wrong("search.master_role_arn", "arn:aws:iam::123:user/admin"),
        *wrong("search.snapshot_hour_utc", 24),
        bad(
            "search.data_node_count",
            lambda c: {"data_node_count": z + 1 if (z := c.search.availability_zone_count) > 1 else 0},
            "data_nodes_not_a_multiple_of_zones",
        ),
        bad(
            "search.replicas",
            lambda c: {"replicas": c.search.data_node_count},
            "as_many_replicas_as_data_nodes",
        ),
        *wrong("search.replicas", -1),
        # A master type the environment's region offers (its data nodes' own): the count is what is wrong.
        bad(
            "search.master_node_count",
            lambda c: {"master_node_type": c.search.data_node_type, "master_node_count": 0},
            "master_type_without_count",
        ),
        bad(
            "search.master_node_count",
            lambda c: {"master_node_type": c.search.data_node_type, "master_node_count": 2},
            "even_master_count",
        ),
        *(
            bad(
                "search.admin_principals[1]",
                lambda c, p=principal: {"admin_principals": (*c.search.admin_principals, p)},
                f"admin_principal_not_a_named_role_pattern:{principal}",
            )
            for principal in [
                "*",
                "aws-reserved/sso.amazonaws.com/*/*",
                "arn:aws:iam::123456789012:role/*",
                "arn:aws:iam::123:role/admin",
                "arn:aws:iam::123456789012:user/admin",
                "role with spaces",
            ]
        ),
        # --- heartbeat (a lag alarm at the maximum record age would never fire: the record is given up by then)
        *wrong("heartbeat.interval_minutes", 0, 61),
        *wrong("heartbeat.lag_alarm_seconds", 59),
        *wrong("heartbeat.alarm_periods", 1, 11),
        bad(
            "heartbeat.lag_alarm_seconds",
            lambda c: {"lag_alarm_seconds": c.sync.max_record_age_seconds},
            "at_record_age",
        ),
        # --- sync
        *wrong("sync.memory_mb", 64),
        *wrong("sync.timeout_seconds", 901),
        *wrong("sync.reserved_concurrency", 0),
        *wrong("sync.batch_size", 10001),
        *wrong("sync.batching_window_seconds", 301),
        *wrong("sync.parallelization_factor", 11),
        *wrong("sync.max_record_age_seconds", 30),
        *wrong("sync.request_timeout_seconds", 0),
        bad("sync.request_timeout_seconds", {"request_timeout_seconds": 120, "timeout_seconds": 120}),
        # --- ops workflows (an inline map runs at most 40 iterations at once)
        *wrong("ops.max_concurrency", 0, 41),
        *wrong("ops.scan_segments", 0),
        *wrong("ops.scan_read_units_per_second", 5),
        *wrong("ops.scan_max_hours", 0),
        *wrong("ops.worker_memory_mb", 256),
        *wrong("ops.purge_schedule", "every day", "rate(1 fortnight)"),
        # No longer than one step's wait: no allowance; beyond the maximum, HeartbeatMissing would wait over an hour.
        *wrong("ops.smoke_startup_minutes", MIN_SMOKE_STARTUP_MINUTES - 1, MAX_SMOKE_STARTUP_MINUTES + 1),
        # --- monitoring
        *wrong("monitoring.free_storage_percent", 0),
        *wrong("monitoring.cpu_percent", 101),
        *wrong("monitoring.master_jvm_memory_pressure_percent", 0),
        *wrong("monitoring.server_error_percent", 150),
        *wrong("monitoring.write_rejections", 0),
        *wrong("monitoring.throttle_events", 0),
        *wrong("monitoring.records_held_for_retry", 0),
        *wrong("monitoring.iterator_age_seconds", 59),
        *wrong("monitoring.replication_lag_seconds", 30),
        # Records older than the mapping's maximum age are given up (dead-lettered): a lag alarm at or beyond that
        # age never fires.
        *(
            bad(
                f"monitoring.{lag}",
                lambda c, lag=lag: {lag: c.sync.max_record_age_seconds},
                f"{lag}_at_record_age",
            )
            for lag in ("iterator_age_seconds", "replication_lag_seconds")
        ),
    ],
)
def test_a_wrong_value_is_rejected_with_its_fields_path(
    config: EnvironmentConfig, path: str, changes: Changes
) -> None:
    section = path.split(".")[0]
    values = changes(config) if callable(changes) else changes
    with rejects(f"{config.name}.{path}"):
        if is_dataclass(getattr(config, section, None)):
            values = {section: replace(getattr(config, section), **values)}
        replace(config, **values)


# --- top-level fields ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["Dev", "d", "1dev", "dev-1", "dev_blue", "averyveryverylongname"])
def test_malformed_environment_name_is_rejected(config: EnvironmentConfig, name: str) -> None:
    # A malformed name cannot prefix its own path, so the record is called "environment".
    with rejects("environment.name"):
        replace(config, name=name)


def test_removal_policy_given_as_its_value_becomes_the_member(config: EnvironmentConfig) -> None:
    retained = replace(config, removal_policy="retain")  # type: ignore[arg-type]
    assert retained.removal_policy is RemovalPolicy.RETAIN


def test_an_unknown_removal_policy_lists_the_valid_values_and_the_nearest(config: EnvironmentConfig) -> None:
    with pytest.raises(
        ConfigError,
        match=rf"^{config.name}\.removal_policy: 'retian' is not one of 'destroy', 'retain' \(did you mean 'retain'\?\)$",
    ):
        replace(config, removal_policy="retian")  # type: ignore[arg-type]


# --- production guard rails ---------------------------------------------------------------------------------


def test_production_with_destroy_removal_policy_is_rejected(config: EnvironmentConfig) -> None:
    with rejects(f"{config.name}.removal_policy"):
        replace(config, production=True, removal_policy=RemovalPolicy.DESTROY)


def test_production_without_table_backups_is_rejected(config: EnvironmentConfig) -> None:
    with rejects(f"{config.name}.table.backup_enabled"):
        replace(
            config,
            production=True,
            removal_policy=RemovalPolicy.RETAIN,
            table=replace(config.table, backup_enabled=False),
        )


def test_production_domain_in_fewer_than_three_zones_is_rejected() -> None:
    prod = production_config()
    with rejects(f"{prod.name}.search.availability_zone_count"):
        with_search(prod, availability_zone_count=1, data_node_count=3)


def test_production_domain_without_dedicated_masters_is_rejected() -> None:
    prod = production_config()
    with rejects(f"{prod.name}.search.master_node_count"):
        with_search(prod, master_node_type=None, master_node_count=0)


# --- source tables ------------------------------------------------------------------------------------------


def with_tables(config: EnvironmentConfig, *tables: SourceTable) -> EnvironmentConfig:
    return replace(config, additional_tables=tables)


def test_every_data_schema_belongs_to_exactly_one_table(config: EnvironmentConfig) -> None:
    held = [schema for plan in config.source_tables for schema in plan.schemas]
    assert sorted(held) == sorted(data_schemas())
    assert (
        config.source_tables[0].construct_id == "Table" and config.source_tables[0].settings is config.table
    )


def test_a_schema_claimed_by_two_tables_is_rejected_with_its_field_path(config: EnvironmentConfig) -> None:
    bookings = SourceTable(name="Bookings", schemas=("booking",))
    again = SourceTable(name="Archive", schemas=("productDate", "booking"))
    with pytest.raises(ConfigError) as raised:
        with_tables(config, bookings, again)
    assert str(raised.value) == (
        f"{config.name}.additional_tables[1].schemas[1]: 'booking' is already held by additional_tables[0] "
        "(Bookings)"
    )


def test_a_production_environment_backs_up_every_table() -> None:
    prod = production_config()
    with rejects(f"{prod.name}.additional_tables[0].settings.backup_enabled"):
        with_tables(prod, SourceTable(name="Bookings", schemas=("booking",)))
    backed_up = TableSettings(backup_enabled=True)
    assert with_tables(prod, SourceTable(name="Bookings", schemas=("booking",), settings=backed_up))


def test_a_scan_may_take_at_most_half_of_any_provisioned_tables_read_capacity() -> None:
    dev = base_config()
    small = TableSettings(
        capacity_mode=CapacityMode.PROVISIONED, provisioned=ProvisionedCapacity(min_read=5, max_read=100)
    )
    with pytest.raises(
        ConfigError, match=rf"^{dev.name}\.ops\.scan_read_units_per_second: .*additional_tables\[0\]"
    ):
        changed(
            with_tables(dev, SourceTable(name="Bookings", schemas=("booking",), settings=small)),
            "ops",
            scan_read_units_per_second=51,
        )


# --- table --------------------------------------------------------------------------------------------------


def test_inverted_index_is_a_valid_extra_gsi(config: EnvironmentConfig) -> None:
    assert changed(config, "table", extra_gsis=(INVERTED_INDEX,)).table.extra_gsis == (INVERTED_INDEX,)


# --- network ------------------------------------------------------------------------------------------------


def test_search_zones_beyond_network_max_azs_are_rejected(config: EnvironmentConfig) -> None:
    zones = max(2, config.search.availability_zone_count)
    nodes = config.search.data_node_count
    nodes = nodes if nodes % zones == 0 else nodes * zones
    with rejects(f"{config.name}.search.availability_zone_count"):
        replace(
            config,
            network=replace(config.network, max_azs=zones - 1),
            search=replace(
                config.search,
                availability_zone_count=zones,
                data_node_count=nodes,
                replicas=max(1, config.search.replicas),
            ),
        )


def test_fully_described_existing_vpc_is_accepted(config: EnvironmentConfig) -> None:
    described = changed(
        config,
        "network",
        existing_vpc_id="vpc-0123456789abcdef0",
        existing_isolated_subnet_ids=("subnet-01", "subnet-02", "subnet-03"),
        existing_availability_zones=("ca-central-1a", "ca-central-1b", "ca-central-1d"),
        existing_route_table_ids=("rtb-01", "rtb-02", "rtb-03"),
        existing_endpoint_security_group_id="sg-0123456789abcdef0",
        existing_dynamodb_streams_endpoint=STREAMS_ENDPOINT,
    )
    assert described.network.existing_vpc_id == "vpc-0123456789abcdef0"


# --- instance types: cfn-lint's per-region list (E3653) -----------------------------------------------------


def with_masters(config: EnvironmentConfig, master_node_type: str) -> EnvironmentConfig:
    return with_search(config, master_node_type=master_node_type, master_node_count=3)


def misspelt(instance_type: str) -> str:
    """``r7g.large.search`` as someone types it in a hurry: a letter of its size dropped (``r7g.lare.search``)."""
    family, size, suffix = instance_type.split(".")
    return f"{family}.{size[:-2]}{size[-1]}.{suffix}"


def offered_here(config: EnvironmentConfig) -> list[str]:
    return sorted(opensearch_instance_types()[config.region] - opensearch_warm_instance_types())


@pytest.mark.parametrize("field", ["data_node_type", "master_node_type"])
def test_a_misspelt_instance_type_names_the_field_and_the_type_meant(
    config: EnvironmentConfig, field: str
) -> None:
    meant = config.search.data_node_type
    typo = misspelt(meant)
    changes = {"data_node_type": typo} if field == "data_node_type" else {}
    with pytest.raises(
        ConfigError,
        match=rf"^{config.name}\.search\.{field}: {re.escape(repr(typo))} is not an OpenSearch instance type "
        rf"\(did you mean {re.escape(repr(meant))}\?\) [^\n]*cfn-lint[^\n]*$",
    ):
        with_search(with_masters(config, typo if field == "master_node_type" else meant), **changes)


def test_every_type_offered_in_the_region_is_a_valid_data_and_master_node_type(
    config: EnvironmentConfig,
) -> None:
    for instance_type in offered_here(config):
        assert instance_type_problem(instance_type, config.region) is None, instance_type
    assert with_masters(config, offered_here(config)[0]).search.master_node_type == offered_here(config)[0]


def test_a_type_offered_only_in_other_regions_is_refused_as_not_offered_here(
    config: EnvironmentConfig,
) -> None:
    offered = opensearch_instance_types()
    elsewhere = sorted(frozenset().union(*offered.values()) - offered[config.region])
    if not elsewhere:
        pytest.skip(f"{config.region} offers every listed type")
    with rejects(f"{config.name}.search.data_node_type") as refused:
        with_search(config, data_node_type=elsewhere[0])
    assert f"{elsewhere[0]!r} is not offered in {config.region}" in str(refused.value)


@pytest.mark.parametrize("field", ["data_node_type", "master_node_type"])
def test_an_ultrawarm_type_is_no_data_or_master_node(config: EnvironmentConfig, field: str) -> None:
    warm = sorted(opensearch_warm_instance_types())[0]
    with rejects(f"{config.name}.search.{field}") as refused:
        if field == "master_node_type":
            with_masters(config, warm)
        else:
            with_search(config, data_node_type=warm)
    assert "UltraWarm" in str(refused.value)


def test_the_instance_types_are_the_list_cfn_lints_own_rule_checks() -> None:
    """Read from the installed cfn-lint at validation time: the same data E3653 checks templates against."""
    from importlib import resources

    import cfnlint.data.schemas.extensions.aws_opensearchservice_domain as listed

    data = json.loads(resources.files(listed).joinpath("clusterconfig_instancetype_enum.json").read_text())
    regions = {region: frozenset(entry["enum"]) for region, entry in data.items() if isinstance(entry, dict)}
    assert opensearch_instance_types() == regions


def test_the_warm_types_are_botocores_ultrawarm_enum() -> None:
    import botocore.session

    model = botocore.session.get_session().get_service_model("opensearch")
    assert opensearch_warm_instance_types() == frozenset(
        model.shape_for("OpenSearchWarmPartitionInstanceType").enum
    )


def test_multi_zone_domain_without_replicas_is_rejected() -> None:
    base = base_config()
    test = with_search(
        replace(base, network=replace(base.network, max_azs=2)),
        availability_zone_count=2,
        data_node_count=2,
        replicas=1,
    )
    with rejects(f"{test.name}.search.replicas"):
        with_search(test, replicas=0)


def test_every_shipped_environment_can_allocate_all_its_replicas(config: EnvironmentConfig) -> None:
    assert config.search.replicas < config.search.data_node_count


def test_admin_principal_paths_resolve_in_the_environment_account(config: EnvironmentConfig) -> None:
    changed = with_search(config, admin_principals=("platform/search-operators-*",))
    assert changed.admin_principal_arns() == [
        f"arn:aws:iam::{config.account}:role/platform/search-operators-*"
    ]


def test_valid_master_role_arn_is_accepted(config: EnvironmentConfig) -> None:
    arn = f"arn:aws:iam::{config.account}:role/platform/search-admin"
    assert with_search(config, master_role_arn=arn).search.master_role_arn == arn


# --- read roles ---------------------------------------------------------------------------------------------


def reader(config: EnvironmentConfig, **changes: object) -> ReadRole:
    role = ReadRole(
        name="app_reader", schemas=("geozone",), iam_role_arns=(f"arn:aws:iam::{config.account}:role/app",)
    )
    return replace(role, **changes)


def with_readers(config: EnvironmentConfig, *roles: ReadRole) -> EnvironmentConfig:
    return with_search(config, read_roles=(*config.search.read_roles, *roles))


def test_a_read_role_maps_its_iam_roles_then_its_other_backend_roles(config: EnvironmentConfig) -> None:
    role = reader(config, backend_roles=("search-readers",))
    assert role.mapped_backend_roles == (f"arn:aws:iam::{config.account}:role/app", "search-readers")


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"name": "Readers"}, "name"),
        ({"name": "all_access"}, "name"),
        ({"name": "refdata_stream_sync"}, "name"),
        ({"schemas": ()}, "schemas"),
        ({"schemas": ("geozone", "geozone")}, "schemas"),
        ({"schemas": ("geozone", "thread")}, "schemas[1]"),
        ({"schemas": ("parks",)}, "schemas[0]"),
        ({"iam_role_arns": (), "backend_roles": ()}, "iam_role_arns"),
        ({"iam_role_arns": ("arn:aws:iam::111111111111:user/someone",)}, "iam_role_arns[0]"),
        ({"iam_role_arns": ("arn:aws:iam::111111111111:role/apps/reader",)}, "iam_role_arns[0]"),
        ({"iam_role_arns": ("arn:aws:iam::111111111111:role/app-*",)}, "iam_role_arns[0]"),
        ({"backend_roles": (" ",)}, "backend_roles[0]"),
        # A platform role cannot be a reader.
        *(
            pytest.param(
                lambda c, p=purpose: {"iam_role_arns": (c.role_arn(f"{c.search.domain_name}-{p}"),)},
                "iam_role_arns[0]",
                id=f"platform_role:{purpose}",
            )
            for purpose in ("stream-sync", "index-bootstrap", "search-admin", "ops-worker")
        ),
    ],
)
def test_invalid_read_role_names_its_field(config: EnvironmentConfig, changes: Changes, field: str) -> None:
    position = len(config.search.read_roles)
    values = changes(config) if callable(changes) else changes
    with rejects(f"{config.name}.search.read_roles[{position}].{field}"):
        with_readers(config, reader(config, **values))


def test_two_read_roles_of_one_name_are_rejected(config: EnvironmentConfig) -> None:
    with rejects(f"{config.name}.search.read_roles"):
        with_readers(config, reader(config), reader(config))


def test_a_read_role_of_backend_roles_only_is_accepted(config: EnvironmentConfig) -> None:
    changed = with_readers(config, reader(config, iam_role_arns=(), backend_roles=("saml-readers",)))
    assert changed.search.read_roles[-1].mapped_backend_roles == ("saml-readers",)


# --- ops workflows ------------------------------------------------------------------------------------------


def test_a_scan_may_take_at_most_half_of_a_provisioned_tables_read_capacity() -> None:
    test = provisioned_config()
    assert test.table.provisioned is not None
    with rejects(f"{test.name}.ops.scan_read_units_per_second"):
        changed(test, "ops", scan_read_units_per_second=test.table.provisioned.max_read // 2 + 1)


def test_the_export_crossover_is_what_the_scan_reads_in_its_time_budget(config: EnvironmentConfig) -> None:
    ops = config.ops
    assert ops.export_above_bytes == ops.scan_read_units_per_second * 4096 * ops.scan_max_hours * 3600
    assert ops.read_units_per_segment * min(ops.max_concurrency, ops.scan_segments) == (
        ops.scan_read_units_per_second
    )


def test_shipped_thresholds_follow_aws_recommendations_for_opensearch(config: EnvironmentConfig) -> None:
    """AWS's "Recommended CloudWatch alarms for Amazon OpenSearch Service": 25 % free storage per node, CPU 80 %,
    JVM 95 %, old generation 80 %, masters' CPU 50 %, 5xx 10 % of requests, any new write rejection."""
    monitoring = config.monitoring
    assert (
        monitoring.free_storage_percent,
        monitoring.cpu_percent,
        monitoring.jvm_memory_pressure_percent,
        monitoring.old_gen_jvm_memory_pressure_percent,
        monitoring.master_cpu_percent,
        monitoring.master_jvm_memory_pressure_percent,
        monitoring.master_old_gen_jvm_memory_pressure_percent,
        monitoring.server_error_percent,
        monitoring.write_rejections,
    ) == (25, 80, 95, 80, 50, 95, 80, 10, 1)


# --- deploy role ---------------------------------------------------------------------------------------------


def test_deploy_role_defaults_to_a_named_role_in_the_environments_account(config: EnvironmentConfig) -> None:
    assert config.deploy_role_arn == f"arn:aws:iam::{config.account}:role/refdata-github-deploy"


def test_deploy_role_may_be_a_path_or_a_role_in_another_account(config: EnvironmentConfig) -> None:
    assert (
        replace(config, deploy_role="ci/deployer").deploy_role_arn
        == f"arn:aws:iam::{config.account}:role/ci/deployer"
    )
    tooling = "arn:aws:iam::444444444444:role/github-deploy"
    assert replace(config, deploy_role=tooling).deploy_role_arn == tooling


def test_the_smoke_runs_waits_and_cleanup_fit_one_worker_invocation_and_its_start_up_wait_is_the_workflows() -> (
    None
):
    """The smoke run's three step waits and the 240 s it keeps for its cleanup fit the ops worker's 15 minutes; the
    start-up budget is waited out by the workflow (a check every STARTUP_CHECK_SECONDS), so however long config
    allows, no invocation holds it, and its checks stay well inside a part's 25,000-event history (9 events each)."""
    from ops.smoke import DEFAULT_STARTUP_MINUTES, DEFAULT_WAIT_SECONDS

    from infra.constructs.ops_workflows import STARTUP_CHECK_SECONDS

    assert SMOKE_WAIT_SECONDS == DEFAULT_WAIT_SECONDS
    assert OpsSettings().smoke_startup_minutes == DEFAULT_STARTUP_MINUTES
    assert 3 * SMOKE_WAIT_SECONDS + 240 < 15 * 60
    assert MIN_SMOKE_STARTUP_MINUTES * 60 > SMOKE_WAIT_SECONDS
    assert 9 * (MAX_SMOKE_STARTUP_MINUTES * 60 // STARTUP_CHECK_SECONDS) < 25_000 // 10


def test_the_former_seconds_field_is_refused_with_what_it_became() -> None:
    with pytest.raises(
        ConfigError, match=r"'smoke_startup_seconds' is now 'smoke_startup_minutes'"
    ) as refused:
        OpsSettings(smoke_startup_seconds=400)  # type: ignore[call-arg]

    assert f"{MIN_SMOKE_STARTUP_MINUTES}-{MAX_SMOKE_STARTUP_MINUTES}" in str(refused.value)


STARTUP_DOCS = (
    "README.md",
    *sorted(f"docs/{page.name}" for page in (Path(__file__).resolve().parents[2] / "docs").glob("*.md")),
)


def startup_budget_statements(text: str) -> dict[str, list[tuple[int, ...]]]:
    """What the paragraphs naming `ops.smoke_startup_minutes` say of it: ranges (`3-60 minutes`), maxima (`up to 60
    minutes`), defaults (`7 minutes by default`)."""
    found: dict[str, list[tuple[int, ...]]] = {"range": [], "max": [], "default": []}
    for paragraph in re.split(r"\n\s*\n", text):
        if "ops.smoke_startup_minutes" not in paragraph:
            continue
        flat = " ".join(paragraph.split())
        found["range"] += [(int(a), int(b)) for a, b in re.findall(r"(\d+)-(\d+) minutes", flat)]
        found["max"] += [(int(a),) for a in re.findall(r"up to (\d+) minutes", flat)]
        found["default"] += [(int(a),) for a in re.findall(r"(\d+) minutes by default", flat)]
    return found


@pytest.mark.parametrize("doc", STARTUP_DOCS)
def test_the_docs_state_the_start_up_budgets_bounds_and_default_as_validation_has_them(doc: str) -> None:
    text = (Path(__file__).resolve().parents[2] / doc).read_text()
    stated = startup_budget_statements(text)

    assert set(stated["range"]) <= {(MIN_SMOKE_STARTUP_MINUTES, MAX_SMOKE_STARTUP_MINUTES)}, stated
    assert set(stated["max"]) <= {(MAX_SMOKE_STARTUP_MINUTES,)}, stated
    assert set(stated["default"]) <= {(OpsSettings().smoke_startup_minutes,)}, stated
    if doc == "docs/runbook.md":  # where an operator raising the budget reads its bounds
        assert stated["range"] and stated["max"] and stated["default"], stated


def test_the_bounds_the_docs_state_are_accepted(config: EnvironmentConfig) -> None:
    """Inclusive: the docs' `3-60 minutes` are both valid (one past them: test_a_wrong_value_is_rejected_with_its_fields_path)."""
    for minutes in (MIN_SMOKE_STARTUP_MINUTES, MAX_SMOKE_STARTUP_MINUTES):
        ops = replace(config.ops, smoke_startup_minutes=minutes)
        assert replace(config, ops=ops).ops.smoke_startup_minutes == minutes


def test_the_statements_check_reads_ranges_maxima_and_defaults() -> None:
    text = "a\n\n`ops.smoke_startup_minutes`, 7 minutes by default, 3-60\nminutes, up to 60 minutes\n\nup to 9 minutes"

    assert startup_budget_statements(text) == {"range": [(3, 60)], "max": [(60,)], "default": [(7,)]}
