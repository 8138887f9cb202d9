"""Environment records validate on construction, and every error names its field as ``<env>.<field>``.

Pure Python: each case edits a shipped config with ``dataclasses.replace`` (which re-runs validation), so no
synth happens here.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

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


def with_table(config: EnvironmentConfig, **changes: object) -> EnvironmentConfig:
    return replace(config, table=replace(config.table, **changes))


def with_network(config: EnvironmentConfig, **changes: object) -> EnvironmentConfig:
    return replace(config, network=replace(config.network, **changes))


def with_search(config: EnvironmentConfig, **changes: object) -> EnvironmentConfig:
    return replace(config, search=replace(config.search, **changes))


def with_sync(config: EnvironmentConfig, **changes: object) -> EnvironmentConfig:
    return replace(config, sync=replace(config.sync, **changes))


def with_ops(config: EnvironmentConfig, **changes: object) -> EnvironmentConfig:
    return replace(config, ops=replace(config.ops, **changes))


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
        ("t3.small.search", 10),
        ("t3.medium.search", 10),
        ("m7g.large.search", 10),
        ("r7g.large.search", 10),
        ("r7g.xlarge.search", 100),
        ("r7g.2xlarge.search", 100),
        ("or2.16xlarge.search", 100),
    ],
)
def test_http_payload_limit_follows_instance_size(instance_type: str, limit_mib: int) -> None:
    assert http_payload_limit_bytes(instance_type) == limit_mib * MiB


# --- top-level fields ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["Dev", "d", "1dev", "dev-1", "dev_blue", "averyveryverylongname"])
def test_malformed_environment_name_is_rejected(config: EnvironmentConfig, name: str) -> None:
    # A malformed name cannot prefix its own path, so the record is called "environment".
    with rejects("environment.name"):
        replace(config, name=name)


@pytest.mark.parametrize("account", ["12345678901", "1234567890123", "12345678901a", "", "arn:aws:iam::1"])
def test_malformed_account_id_is_rejected(config: EnvironmentConfig, account: str) -> None:
    with rejects(f"{config.name}.account"):
        replace(config, account=account)


def test_non_string_account_id_is_rejected(config: EnvironmentConfig) -> None:
    with rejects(f"{config.name}.account"):
        replace(config, account=111111111111)  # type: ignore[arg-type]


@pytest.mark.parametrize("region", ["ca-central", "CA-CENTRAL-1", "cacentral1", "ca-central-12", ""])
def test_bad_region_is_rejected(config: EnvironmentConfig, region: str) -> None:
    with rejects(f"{config.name}.region"):
        replace(config, region=region)


def test_removal_policy_given_as_its_value_becomes_the_member(config: EnvironmentConfig) -> None:
    retained = replace(config, removal_policy="retain")  # type: ignore[arg-type]
    assert retained.removal_policy is RemovalPolicy.RETAIN


def test_an_unknown_removal_policy_lists_the_valid_values_and_the_nearest(config: EnvironmentConfig) -> None:
    with pytest.raises(
        ConfigError,
        match=rf"^{config.name}\.removal_policy: 'retian' is not one of 'destroy', 'retain' \(did you mean 'retain'\?\)$",
    ):
        replace(config, removal_policy="retian")  # type: ignore[arg-type]


@pytest.mark.parametrize("days", [0, 2, 42, 366, 10000])
def test_log_retention_outside_cloudwatch_periods_is_rejected(config: EnvironmentConfig, days: int) -> None:
    with rejects(f"{config.name}.log_retention_days"):
        replace(config, log_retention_days=days)


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


def test_a_schema_repeated_in_one_table_is_rejected(config: EnvironmentConfig) -> None:
    with rejects(f"{config.name}.additional_tables[0].schemas[1]"):
        with_tables(config, SourceTable(name="Bookings", schemas=("booking", "booking")))


@pytest.mark.parametrize(
    ("table", "field"),
    [
        (SourceTable(name="Bookings", schemas=("bookings",)), "schemas[0]"),
        (SourceTable(name="Bookings", schemas=("booking", "counter")), "schemas[1]"),
        (SourceTable(name="Bookings", schemas=()), "schemas"),
        (SourceTable(name="Threads", schemas=("thread",)), "schemas"),
        (SourceTable(name="bookings", schemas=("booking",)), "name"),
        (SourceTable(name="Book-ings", schemas=("booking",)), "name"),
        (
            SourceTable(
                name="Bookings",
                schemas=("booking",),
                settings=TableSettings(capacity_mode=CapacityMode.PROVISIONED),
            ),
            "settings.provisioned",
        ),
    ],
)
def test_an_invalid_additional_table_is_rejected_by_field(
    config: EnvironmentConfig, table: SourceTable, field: str
) -> None:
    with rejects(f"{config.name}.additional_tables[0].{field}"):
        with_tables(config, table)


def test_two_tables_of_one_name_are_rejected(config: EnvironmentConfig) -> None:
    with rejects(f"{config.name}.additional_tables[1].name"):
        with_tables(
            config,
            SourceTable(name="Bookings", schemas=("booking",)),
            SourceTable(name="Bookings", schemas=("productDate",)),
        )


def test_the_main_table_keeps_an_indexable_schema(config: EnvironmentConfig) -> None:
    with rejects(f"{config.name}.additional_tables"):
        indexable = tuple(name for name in data_schemas() if REGISTRY[name].indexable)
        with_tables(config, SourceTable(name="Everything", schemas=indexable))


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
        with_ops(
            with_tables(dev, SourceTable(name="Bookings", schemas=("booking",), settings=small)),
            scan_read_units_per_second=51,
        )


# --- table --------------------------------------------------------------------------------------------------


def test_provisioned_capacity_mode_without_provisioned_settings_is_rejected(
    config: EnvironmentConfig,
) -> None:
    with rejects(f"{config.name}.table.provisioned"):
        with_table(config, capacity_mode=CapacityMode.PROVISIONED, provisioned=None)


def test_provisioned_settings_with_on_demand_mode_are_rejected(config: EnvironmentConfig) -> None:
    with rejects(f"{config.name}.table.provisioned"):
        with_table(config, capacity_mode=CapacityMode.ON_DEMAND, provisioned=ProvisionedCapacity())


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"min_read": 0}, "min_read"),
        ({"min_write": 0}, "min_write"),
        ({"min_read": 50, "max_read": 10}, "max_read"),
        ({"min_write": 50, "max_write": 10}, "max_write"),
        ({"target_utilization_percent": 95}, "target_utilization_percent"),
        ({"target_utilization_percent": 10}, "target_utilization_percent"),
    ],
)
def test_invalid_provisioned_capacity_names_its_field(
    config: EnvironmentConfig, changes: dict[str, int], field: str
) -> None:
    with rejects(f"{config.name}.table.provisioned.{field}"):
        with_table(
            config,
            capacity_mode=CapacityMode.PROVISIONED,
            provisioned=ProvisionedCapacity(**changes),
        )


def test_duplicate_gsi_names_are_rejected(config: EnvironmentConfig) -> None:
    with rejects(f"{config.name}.table.extra_gsis"):
        with_table(config, extra_gsis=(INVERTED_INDEX, replace(INVERTED_INDEX, partition_key="other")))


def test_more_than_nineteen_extra_gsis_are_rejected(config: EnvironmentConfig) -> None:
    gsis = tuple(GsiSettings(name=f"index{n:02d}", partition_key=f"attr{n}") for n in range(20))
    with rejects(f"{config.name}.table.extra_gsis"):
        with_table(config, extra_gsis=gsis)


def test_gsi_named_globalid_is_rejected_as_the_builtin_index(config: EnvironmentConfig) -> None:
    with rejects(f"{config.name}.table.extra_gsis[0].name"):
        with_table(config, extra_gsis=(GsiSettings(name="globalId", partition_key="x"),))


def test_malformed_gsi_name_names_its_position(config: EnvironmentConfig) -> None:
    with rejects(f"{config.name}.table.extra_gsis[1].name"):
        with_table(config, extra_gsis=(INVERTED_INDEX, GsiSettings(name="a b", partition_key="x")))


def test_malformed_gsi_key_attribute_is_rejected(config: EnvironmentConfig) -> None:
    with rejects(f"{config.name}.table.extra_gsis[0].sort_key"):
        with_table(config, extra_gsis=(GsiSettings(name="bySk", partition_key="sk", sort_key="1bad key"),))


def test_include_projection_without_non_key_attributes_is_rejected(config: EnvironmentConfig) -> None:
    gsi = GsiSettings(name="byType", partition_key="type", projection=Projection.INCLUDE)
    with rejects(f"{config.name}.table.extra_gsis[0].non_key_attributes"):
        with_table(config, extra_gsis=(gsi,))


def test_non_key_attributes_without_include_projection_are_rejected(config: EnvironmentConfig) -> None:
    gsi = GsiSettings(name="byType", partition_key="type", non_key_attributes=("name",))
    with rejects(f"{config.name}.table.extra_gsis[0].non_key_attributes"):
        with_table(config, extra_gsis=(gsi,))


def test_inverted_index_is_a_valid_extra_gsi(config: EnvironmentConfig) -> None:
    assert with_table(config, extra_gsis=(INVERTED_INDEX,)).table.extra_gsis == (INVERTED_INDEX,)


def test_malformed_ttl_attribute_is_rejected(config: EnvironmentConfig) -> None:
    with rejects(f"{config.name}.table.ttl_attribute"):
        with_table(config, ttl_attribute="expires at")


@pytest.mark.parametrize("days", [0, 36501])
def test_backup_retention_out_of_range_is_rejected(config: EnvironmentConfig, days: int) -> None:
    with rejects(f"{config.name}.table.backup_retention_days"):
        with_table(config, backup_retention_days=days)


# --- network ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cidr", ["10.40.0.0", "10.40.0.0/8", "10.40.0.0/30", "vpc"])
def test_bad_vpc_cidr_is_rejected(config: EnvironmentConfig, cidr: str) -> None:
    with rejects(f"{config.name}.network.cidr"):
        with_network(config, cidr=cidr)


def test_max_azs_above_three_is_rejected(config: EnvironmentConfig) -> None:
    with rejects(f"{config.name}.network.max_azs"):
        with_network(config, max_azs=4)


def test_max_azs_of_zero_is_rejected_as_max_azs(config: EnvironmentConfig) -> None:
    with rejects(f"{config.name}.network.max_azs"):
        with_network(config, max_azs=0)


def test_bad_flow_log_retention_is_rejected(config: EnvironmentConfig) -> None:
    with rejects(f"{config.name}.network.flow_log_retention_days"):
        with_network(config, flow_log_retention_days=31)


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


def test_malformed_existing_vpc_id_is_rejected(config: EnvironmentConfig) -> None:
    with rejects(f"{config.name}.network.existing_vpc_id"):
        with_network(config, existing_vpc_id="vpc-XYZ")


def test_existing_vpc_without_subnets_is_rejected(config: EnvironmentConfig) -> None:
    with rejects(f"{config.name}.network.existing_isolated_subnet_ids"):
        with_network(config, existing_vpc_id="vpc-0123456789abcdef0")


def test_existing_vpc_without_one_zone_per_subnet_is_rejected(config: EnvironmentConfig) -> None:
    with rejects(f"{config.name}.network.existing_availability_zones"):
        with_network(
            config,
            existing_vpc_id="vpc-0123456789abcdef0",
            existing_isolated_subnet_ids=("subnet-01", "subnet-02"),
            existing_availability_zones=("ca-central-1a",),
            existing_route_table_ids=("rtb-01", "rtb-02"),
        )


def test_existing_vpc_without_one_route_table_per_subnet_is_rejected(config: EnvironmentConfig) -> None:
    with rejects(f"{config.name}.network.existing_route_table_ids"):
        with_network(
            config,
            existing_vpc_id="vpc-0123456789abcdef0",
            existing_isolated_subnet_ids=("subnet-01",),
            existing_availability_zones=("ca-central-1a",),
        )


@pytest.mark.parametrize(
    "endpoint", ["vpce-0a1b.dynamodb.ca-central-1.vpce.amazonaws.com", "streams.example.com"]
)
def test_an_existing_vpcs_streams_endpoint_must_be_an_endpoint_dns_name(
    config: EnvironmentConfig, endpoint: str
) -> None:
    with rejects(f"{config.name}.network.existing_dynamodb_streams_endpoint"):
        with_network(
            config,
            existing_vpc_id="vpc-0123456789abcdef0",
            existing_isolated_subnet_ids=("subnet-01",),
            existing_availability_zones=("ca-central-1a",),
            existing_route_table_ids=("rtb-01",),
            existing_endpoint_security_group_id="sg-0123456789abcdef0",
            existing_dynamodb_streams_endpoint=endpoint,
        )


def test_a_streams_endpoint_is_only_named_for_an_existing_vpc(config: EnvironmentConfig) -> None:
    endpoint = "vpce-0a1b2c3d-4e5f.streams.dynamodb.ca-central-1.vpce.amazonaws.com"
    with rejects(f"{config.name}.network.existing_dynamodb_streams_endpoint"):
        with_network(config, existing_dynamodb_streams_endpoint=endpoint)


def test_fully_described_existing_vpc_is_accepted(config: EnvironmentConfig) -> None:
    described = with_network(
        config,
        existing_vpc_id="vpc-0123456789abcdef0",
        existing_isolated_subnet_ids=("subnet-01", "subnet-02", "subnet-03"),
        existing_availability_zones=("ca-central-1a", "ca-central-1b", "ca-central-1d"),
        existing_route_table_ids=("rtb-01", "rtb-02", "rtb-03"),
        existing_endpoint_security_group_id="sg-0123456789abcdef0",
        existing_dynamodb_streams_endpoint="vpce-0a1b2c3d-4e5f.streams.dynamodb.ca-central-1.vpce.amazonaws.com",
    )
    assert described.network.existing_vpc_id == "vpc-0123456789abcdef0"


def test_an_existing_vpc_names_its_endpoints_security_group(config: EnvironmentConfig) -> None:
    with rejects(f"{config.name}.network.existing_endpoint_security_group_id"):
        with_network(
            config,
            existing_vpc_id="vpc-0123456789abcdef0",
            existing_isolated_subnet_ids=("subnet-01",),
            existing_availability_zones=("ca-central-1a",),
            existing_route_table_ids=("rtb-01",),
        )


# --- search -------------------------------------------------------------------------------------------------


def test_bulk_max_bytes_at_the_instance_request_limit_is_rejected(config: EnvironmentConfig) -> None:
    limit = http_payload_limit_bytes(config.search.data_node_type)
    with rejects(f"{config.name}.search.bulk_max_bytes"):
        with_search(config, bulk_max_bytes=limit)


def test_bulk_max_bytes_above_the_instance_request_limit_is_rejected(config: EnvironmentConfig) -> None:
    limit = http_payload_limit_bytes(config.search.data_node_type)
    with rejects(f"{config.name}.search.bulk_max_bytes"):
        with_search(config, bulk_max_bytes=limit + MiB)


def test_bulk_max_bytes_below_one_mib_is_rejected(config: EnvironmentConfig) -> None:
    with rejects(f"{config.name}.search.bulk_max_bytes"):
        with_search(config, bulk_max_bytes=MiB - 1)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"domain_name": "Refdata"}, "domain_name"),
        ({"domain_name": "rd"}, "domain_name"),
        ({"engine_version": "Elasticsearch_7.10"}, "engine_version"),
        ({"engine_version": "3.3"}, "engine_version"),
        ({"data_node_type": "m7g.large.elasticsearch"}, "data_node_type"),
        ({"data_node_type": "m7g.large"}, "data_node_type"),
        ({"volume_size_gib": 5}, "volume_size_gib"),
        ({"master_role_arn": "arn:aws:iam::123:user/admin"}, "master_role_arn"),
        ({"snapshot_hour_utc": 24}, "snapshot_hour_utc"),
    ],
)
def test_invalid_search_setting_names_its_field(
    config: EnvironmentConfig, changes: dict[str, object], field: str
) -> None:
    with rejects(f"{config.name}.search.{field}"):
        with_search(config, **changes)


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


def test_data_nodes_not_a_multiple_of_zones_are_rejected(config: EnvironmentConfig) -> None:
    zones = config.search.availability_zone_count
    with rejects(f"{config.name}.search.data_node_count"):
        with_search(config, data_node_count=zones + 1 if zones > 1 else 0)


def test_as_many_replicas_as_data_nodes_is_rejected(config: EnvironmentConfig) -> None:
    with rejects(f"{config.name}.search.replicas"):
        with_search(config, replicas=config.search.data_node_count)


def test_negative_replicas_are_rejected(config: EnvironmentConfig) -> None:
    with rejects(f"{config.name}.search.replicas"):
        with_search(config, replicas=-1)


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


def test_master_type_without_master_count_is_rejected(config: EnvironmentConfig) -> None:
    # A master type the environment's region offers (its data nodes' own): the count is what is wrong.
    with rejects(f"{config.name}.search.master_node_count"):
        with_search(config, master_node_type=config.search.data_node_type, master_node_count=0)


def test_even_master_count_is_rejected(config: EnvironmentConfig) -> None:
    with rejects(f"{config.name}.search.master_node_count"):
        with_search(config, master_node_type=config.search.data_node_type, master_node_count=2)


@pytest.mark.parametrize(
    "principal",
    [
        "*",
        "aws-reserved/sso.amazonaws.com/*/*",
        "arn:aws:iam::123456789012:role/*",
        "arn:aws:iam::123:role/admin",
        "arn:aws:iam::123456789012:user/admin",
        "role with spaces",
    ],
)
def test_admin_principal_that_is_not_a_named_role_pattern_is_rejected(
    config: EnvironmentConfig, principal: str
) -> None:
    with rejects(f"{config.name}.search.admin_principals[1]"):
        with_search(config, admin_principals=(*config.search.admin_principals, principal))


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
    ],
)
def test_invalid_read_role_names_its_field(
    config: EnvironmentConfig, changes: dict[str, object], field: str
) -> None:
    position = len(config.search.read_roles)
    with rejects(f"{config.name}.search.read_roles[{position}].{field}"):
        with_readers(config, reader(config, **changes))


def test_two_read_roles_of_one_name_are_rejected(config: EnvironmentConfig) -> None:
    with rejects(f"{config.name}.search.read_roles"):
        with_readers(config, reader(config), reader(config))


@pytest.mark.parametrize("purpose", ["stream-sync", "index-bootstrap", "search-admin", "ops-worker"])
def test_a_platform_role_cannot_be_a_reader(config: EnvironmentConfig, purpose: str) -> None:
    arn = config.role_arn(f"{config.search.domain_name}-{purpose}")
    position = len(config.search.read_roles)
    with rejects(f"{config.name}.search.read_roles[{position}].iam_role_arns[0]"):
        with_readers(config, reader(config, iam_role_arns=(arn,)))


def test_a_read_role_of_backend_roles_only_is_accepted(config: EnvironmentConfig) -> None:
    changed = with_readers(config, reader(config, iam_role_arns=(), backend_roles=("saml-readers",)))
    assert changed.search.read_roles[-1].mapped_backend_roles == ("saml-readers",)


# --- sync ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"memory_mb": 64}, "memory_mb"),
        ({"timeout_seconds": 901}, "timeout_seconds"),
        ({"reserved_concurrency": 0}, "reserved_concurrency"),
        ({"batch_size": 10001}, "batch_size"),
        ({"batching_window_seconds": 301}, "batching_window_seconds"),
        ({"parallelization_factor": 11}, "parallelization_factor"),
        ({"max_record_age_seconds": 30}, "max_record_age_seconds"),
        ({"request_timeout_seconds": 120, "timeout_seconds": 120}, "request_timeout_seconds"),
        ({"request_timeout_seconds": 0}, "request_timeout_seconds"),
    ],
)
def test_invalid_sync_setting_names_its_field(
    config: EnvironmentConfig, changes: dict[str, int], field: str
) -> None:
    with rejects(f"{config.name}.sync.{field}"):
        with_sync(config, **changes)


# --- ops workflows ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_concurrency", 0),
        ("max_concurrency", 41),  # an inline map runs at most 40 iterations at once
        ("scan_segments", 0),
        ("scan_read_units_per_second", 5),
        ("scan_max_hours", 0),
        ("worker_memory_mb", 256),
        ("purge_schedule", "every day"),
        ("purge_schedule", "rate(1 fortnight)"),
        (
            "smoke_startup_minutes",
            MIN_SMOKE_STARTUP_MINUTES - 1,
        ),  # no longer than one step's wait: no allowance
        ("smoke_startup_minutes", MAX_SMOKE_STARTUP_MINUTES + 1),  # HeartbeatMissing would wait over an hour
    ],
)
def test_invalid_ops_settings_name_their_field(config: EnvironmentConfig, field: str, value: object) -> None:
    with rejects(f"{config.name}.ops.{field}"):
        with_ops(config, **{field: value})


def test_a_scan_may_take_at_most_half_of_a_provisioned_tables_read_capacity() -> None:
    test = provisioned_config()
    assert test.table.provisioned is not None
    with rejects(f"{test.name}.ops.scan_read_units_per_second"):
        with_ops(test, scan_read_units_per_second=test.table.provisioned.max_read // 2 + 1)


def test_the_export_crossover_is_what_the_scan_reads_in_its_time_budget(config: EnvironmentConfig) -> None:
    ops = config.ops
    assert ops.export_above_bytes == ops.scan_read_units_per_second * 4096 * ops.scan_max_hours * 3600
    assert ops.read_units_per_segment * min(ops.max_concurrency, ops.scan_segments) == (
        ops.scan_read_units_per_second
    )


def with_monitoring(config: EnvironmentConfig, **changes: object) -> EnvironmentConfig:
    return replace(config, monitoring=replace(config.monitoring, **changes))


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"free_storage_percent": 0}, "free_storage_percent"),
        ({"cpu_percent": 101}, "cpu_percent"),
        ({"master_jvm_memory_pressure_percent": 0}, "master_jvm_memory_pressure_percent"),
        ({"server_error_percent": 150}, "server_error_percent"),
        ({"write_rejections": 0}, "write_rejections"),
        ({"throttle_events": 0}, "throttle_events"),
        ({"records_held_for_retry": 0}, "records_held_for_retry"),
        ({"iterator_age_seconds": 59}, "iterator_age_seconds"),
        ({"replication_lag_seconds": 30}, "replication_lag_seconds"),
    ],
)
def test_invalid_monitoring_threshold_names_its_field(
    config: EnvironmentConfig, changes: dict[str, int], field: str
) -> None:
    with rejects(f"{config.name}.monitoring.{field}"):
        with_monitoring(config, **changes)


@pytest.mark.parametrize("lag", ["iterator_age_seconds", "replication_lag_seconds"])
def test_lag_alarm_at_or_beyond_the_maximum_record_age_is_rejected(
    config: EnvironmentConfig, lag: str
) -> None:
    """Records older than the mapping's maximum age are given up (dead-lettered): an alarm later never fires."""
    with rejects(f"{config.name}.monitoring.{lag}"):
        with_monitoring(config, **{lag: config.sync.max_record_age_seconds})


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


@pytest.mark.parametrize(
    "role", ["", "deploy-*", "arn:aws:iam::123:role/deploy", "arn:aws:iam::123456789012:user/ci"]
)
def test_deploy_role_that_is_not_one_named_role_is_rejected(config: EnvironmentConfig, role: str) -> None:
    with rejects(f"{config.name}.deploy_role"):
        replace(config, deploy_role=role)


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
    """Inclusive: the docs' `3-60 minutes` are both valid (one past them: test_invalid_ops_settings_name_their_field)."""
    for minutes in (MIN_SMOKE_STARTUP_MINUTES, MAX_SMOKE_STARTUP_MINUTES):
        ops = replace(config.ops, smoke_startup_minutes=minutes)
        assert replace(config, ops=ops).ops.smoke_startup_minutes == minutes


def test_the_statements_check_reads_ranges_maxima_and_defaults() -> None:
    text = "a\n\n`ops.smoke_startup_minutes`, 7 minutes by default, 3-60\nminutes, up to 60 minutes\n\nup to 9 minutes"

    assert startup_budget_statements(text) == {"range": [(3, 60)], "max": [(60,)], "default": [(7,)]}
