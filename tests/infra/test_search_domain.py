"""The OpenSearch domain: sizing from config, VPC placement, encryption, FGAC, logs, access policy, outputs."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from aws_cdk import App, Environment, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk.assertions import Capture, Match
from refdata.indexnames import read_alias

from infra.app_builder import committed_context
from infra.config import ConfigError, EnvironmentConfig, ReaderNetwork
from infra.constructs.search_domain import SearchDomain
from tests.infra.conftest import base_config, read_roles
from tests.infra.templates_helpers import (
    SYNC_ROLE_DESCRIPTION,
    assert_admits_only_the_functions_on_https,
    data_key_arn,
    domain_endpoint,
    one,
    role_arn,
)
from tests.support.retention import removal_policies
from tests.support.template import Template

DOMAIN = "AWS::OpenSearchService::Domain"
LOG_TYPES = ("SEARCH_SLOW_LOGS", "INDEX_SLOW_LOGS", "ES_APPLICATION_LOGS", "AUDIT_LOGS")
PARTITION = {"Ref": "AWS::Partition"}
ADMIN_ROLE_DESCRIPTION = "OpenSearch fine-grained access control master user"


def domain(template: Template) -> dict[str, Any]:
    domains = template.find_resources(DOMAIN)
    assert len(domains) == 1
    return next(iter(domains.values()))


def admin_arn(template: Template, config: EnvironmentConfig) -> Any:
    if config.search.master_role_arn:
        return config.search.master_role_arn
    return role_arn(template, ADMIN_ROLE_DESCRIPTION)


def log_group_ids(template: Template) -> dict[str, str]:
    options = domain(template)["Properties"]["LogPublishingOptions"]
    return {kind: option["CloudWatchLogsLogGroupArn"]["Fn::GetAtt"][0] for kind, option in options.items()}


def domain_group_id(template: Template) -> str:
    group_id = Capture()
    template.has_resource_properties(
        DOMAIN, {"VPCOptions": {"SecurityGroupIds": [{"Fn::GetAtt": [group_id, "GroupId"]}]}}
    )
    return group_id.as_string()


def log_groups(template: Template) -> list[dict[str, Any]]:
    found = template.find_resources("AWS::Logs::LogGroup")
    return [found[group_id] for group_id in log_group_ids(template).values()]


def all_principals(statement: dict[str, Any]) -> list[Any]:
    principal = statement.get("Principal", statement.get("NotPrincipal"))
    if principal in ("*", None):
        return [principal]
    values = []
    for value in principal.values():
        values.extend(value if isinstance(value, list) else [value])
    return values


# --- identity and sizing ------------------------------------------------------------------------------------


def test_environment_has_one_domain_named_from_config(stateful: Template, config: EnvironmentConfig) -> None:
    stateful.resource_count_is(DOMAIN, 1)
    stateful.has_resource_properties(DOMAIN, {"DomainName": config.search.domain_name})


def test_engine_version_follows_config(stateful: Template, config: EnvironmentConfig) -> None:
    stateful.has_resource_properties(DOMAIN, {"EngineVersion": config.search.engine_version})


def test_zone_awareness_follows_config(stateful: Template, config: EnvironmentConfig) -> None:
    zones = config.search.availability_zone_count
    awareness = (
        {"ZoneAwarenessEnabled": True, "ZoneAwarenessConfig": {"AvailabilityZoneCount": zones}}
        if zones > 1
        else {"ZoneAwarenessEnabled": False, "ZoneAwarenessConfig": Match.absent()}
    )
    stateful.has_resource_properties(DOMAIN, {"ClusterConfig": awareness})


def test_data_nodes_and_dedicated_masters_follow_config(
    stateful: Template, config: EnvironmentConfig
) -> None:
    search = config.search
    enabled, count, kind = (
        (True, search.master_node_count, search.master_node_type)
        if search.master_node_count
        else (False, Match.absent(), Match.absent())
    )
    masters = {"DedicatedMasterEnabled": enabled, "DedicatedMasterCount": count, "DedicatedMasterType": kind}
    data = {"InstanceCount": search.data_node_count, "InstanceType": search.data_node_type}
    stateful.has_resource_properties(DOMAIN, {"ClusterConfig": {**data, **masters}})


def test_storage_is_gp3_with_configured_size_iops_and_throughput(
    stateful: Template, config: EnvironmentConfig
) -> None:
    search = config.search
    volume = {"VolumeSize": search.volume_size_gib, "Iops": search.volume_iops}
    storage = {
        "EBSEnabled": True,
        "VolumeType": "gp3",
        **volume,
        "Throughput": search.volume_throughput_mibps,
    }
    stateful.has_resource_properties(DOMAIN, {"EBSOptions": storage})


def test_automated_snapshot_hour_follows_config(stateful: Template, config: EnvironmentConfig) -> None:
    stateful.has_resource_properties(
        DOMAIN, {"SnapshotOptions": {"AutomatedSnapshotStartHour": config.search.snapshot_hour_utc}}
    )


# --- network placement --------------------------------------------------------------------------------------


def test_domain_sits_in_one_isolated_subnet_per_zone(stateful: Template, config: EnvironmentConfig) -> None:
    subnets = Capture()
    stateful.has_resource_properties(DOMAIN, {"VPCOptions": {"SubnetIds": subnets}})
    chosen = [subnet["Ref"] for subnet in subnets.as_array()]
    assert len(chosen) == config.search.availability_zone_count
    all_subnets = stateful.find_resources("AWS::EC2::Subnet")
    zones = {all_subnets[logical_id]["Properties"]["AvailabilityZone"] for logical_id in chosen}
    assert len(zones) == len(chosen)


def test_domain_uses_its_own_security_group_without_inline_rules(
    stateful: Template, config: EnvironmentConfig
) -> None:
    group = stateful.find_resources("AWS::EC2::SecurityGroup")[domain_group_id(stateful)]["Properties"]
    assert config.search.domain_name in group["GroupDescription"]
    assert "SecurityGroupIngress" not in group
    assert [rule["CidrIp"] for rule in group["SecurityGroupEgress"]] == ["255.255.255.255/32"]


def test_domain_admits_only_platform_functions_on_https(stateful: Template, stateless: Template) -> None:
    assert_admits_only_the_functions_on_https(stateful, stateless, domain_group_id(stateful))


# --- encryption and transport -------------------------------------------------------------------------------


def test_data_at_rest_is_encrypted_with_the_data_key(stateful: Template) -> None:
    at_rest = {"Enabled": True, "KmsKeyId": {"Ref": one(stateful, "AWS::KMS::Key")[0]}}
    stateful.has_resource_properties(DOMAIN, {"EncryptionAtRestOptions": at_rest})


def test_node_to_node_traffic_is_encrypted(stateful: Template) -> None:
    stateful.has_resource_properties(DOMAIN, {"NodeToNodeEncryptionOptions": {"Enabled": True}})


def test_endpoint_enforces_https_with_tls_1_2(stateful: Template) -> None:
    endpoint = {"EnforceHTTPS": True, "TLSSecurityPolicy": Match.string_like_regexp(r"^Policy-Min-TLS-1-2")}
    stateful.has_resource_properties(DOMAIN, {"DomainEndpointOptions": endpoint})


# --- fine-grained access control and access policy ----------------------------------------------------------


def test_fine_grained_access_control_has_the_admin_role_as_iam_master_user(
    stateful: Template, config: EnvironmentConfig
) -> None:
    master = {"MasterUserARN": admin_arn(stateful, config)}
    master |= {"MasterUserName": Match.absent(), "MasterUserPassword": Match.absent()}
    security = {"Enabled": True, "InternalUserDatabaseEnabled": False, "MasterUserOptions": master}
    stateful.has_resource_properties(DOMAIN, {"AdvancedSecurityOptions": security})


def resource_suffixes(statement: dict[str, Any]) -> list[str]:
    """Each resource's text after the partition, region and account tokens."""
    resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
    return [resource["Fn::Join"][1][-1] for resource in resources]


def access_statements(template: Template) -> list[dict[str, Any]]:
    return list(domain(template)["Properties"]["AccessPolicies"]["Statement"])


def reader_statements(template: Template) -> list[dict[str, Any]]:
    return [statement for statement in access_statements(template) if "Condition" in statement]


def test_access_policy_admits_exactly_the_admin_and_sync_roles_unconditionally(
    stateful: Template, config: EnvironmentConfig
) -> None:
    statements = access_statements(stateful)
    unconditional = [statement for statement in statements if "Condition" not in statement]
    principals = [principal for statement in unconditional for principal in all_principals(statement)]
    assert sorted(map(json.dumps, principals)) == sorted(
        map(json.dumps, [admin_arn(stateful, config), role_arn(stateful, SYNC_ROLE_DESCRIPTION)])
    )


def test_read_roles_reach_only_their_aliases_search_count_and_documents(
    stateful: Template, config: EnvironmentConfig
) -> None:
    name = config.search.domain_name
    expected = []
    for role in read_roles(config):
        # ... and the smoke run's probe of the reader (infra/constructs/smoke.py), in the environment's account.
        probe_role = f":role/{config.search.probe_role_name(role.name)}"
        probe = {"Fn::Join": ["", ["arn:", PARTITION, ":iam::", {"Ref": "AWS::AccountId"}, probe_role]]}
        condition = {"ArnEquals": {"aws:PrincipalArn": [*sorted(role.iam_role_arns), probe]}}
        aliases = [read_alias(schema) for schema in role.schemas]
        expected += [
            (
                condition,
                ["es:ESHttpGet", "es:ESHttpPost"],
                [f":domain/{name}/{alias}/{api}" for alias in aliases for api in ("_search", "_count")],
            ),
            (condition, ["es:ESHttpGet"], [f":domain/{name}/{alias}/_doc/*" for alias in aliases]),
        ]

    statements = reader_statements(stateful)

    assert [(s["Condition"], s["Action"], resource_suffixes(s)) for s in statements] == expected
    for statement in statements:
        named = statement["Condition"]["ArnEquals"]["aws:PrincipalArn"]
        accounts = sorted({arn.split(":")[4] for arn in named if isinstance(arn, str)})
        assert [principal["Fn::Join"][1][-1] for principal in statement["Principal"]["AWS"]] == [
            *(f":iam::{account}:root" for account in accounts),
            ":root",  # the probe's: the deploying account (AWS::AccountId)
        ]


def test_access_policy_has_no_wildcard_or_anonymous_principal(stateful: Template) -> None:
    for statement in access_statements(stateful):
        assert "NotPrincipal" not in statement
        for principal in all_principals(statement):
            assert principal not in ("*", None), statement
            assert "*" not in json.dumps(principal), statement


def test_access_policy_covers_only_this_domain(stateful: Template, config: EnvironmentConfig) -> None:
    statements = access_statements(stateful)
    for statement in statements:
        assert statement["Effect"] == "Allow"
        for suffix in resource_suffixes(statement):
            assert suffix.startswith(f":domain/{config.search.domain_name}/"), suffix
    assert resource_suffixes(statements[0]) == [f":domain/{config.search.domain_name}/*"]


# --- logs ---------------------------------------------------------------------------------------------------


def test_every_log_type_is_published(stateful: Template) -> None:
    options = {
        kind: {"Enabled": True, "CloudWatchLogsLogGroupArn": {"Fn::GetAtt": [Match.any_value(), "Arn"]}}
        for kind in LOG_TYPES
    }
    stateful.has_resource_properties(DOMAIN, {"LogPublishingOptions": Match.object_equals(options)})


def test_each_log_type_has_its_own_log_group(stateful: Template) -> None:
    groups = log_group_ids(stateful)
    assert len(set(groups.values())) == len(LOG_TYPES)


def test_domain_log_groups_are_encrypted_and_keep_configured_retention(
    stateful: Template, config: EnvironmentConfig
) -> None:
    for group in log_groups(stateful):
        assert group["Properties"] == {
            "KmsKeyId": data_key_arn(stateful),
            "RetentionInDays": config.log_retention_days,
        }


def test_log_delivery_policy_lets_opensearch_write_to_exactly_its_log_groups(stateful: Template) -> None:
    stateful.resource_count_is("AWS::Logs::ResourcePolicy", 1)
    document = Capture()
    stateful.has_resource_properties(
        "AWS::Logs::ResourcePolicy", {"PolicyDocument": {"Fn::Join": ["", document]}}
    )
    parts = document.as_array()
    text = "".join(part if isinstance(part, str) else "<token>" for part in parts)
    assert '"Principal":{"Service":"es.amazonaws.com"}' in text
    assert '"Effect":"Allow"' in text
    assert '"Action":["logs:PutLogEvents","logs:CreateLogStream"]' in text
    referenced = {part["Fn::GetAtt"][0] for part in parts if isinstance(part, dict) and "Fn::GetAtt" in part}
    assert referenced == set(log_group_ids(stateful).values())


# --- retention and outputs ----------------------------------------------------------------------------------


def test_domain_is_retained_in_test_and_prod(stateful: Template, config: EnvironmentConfig) -> None:
    deletion, replacement = removal_policies(config)
    stateful.has_resource(DOMAIN, {"DeletionPolicy": deletion, "UpdateReplacePolicy": replacement})


def test_domain_log_groups_are_retained_with_the_domain(
    stateful: Template, config: EnvironmentConfig
) -> None:
    policy, _ = removal_policies(config)
    groups = log_groups(stateful)
    assert [group["DeletionPolicy"] for group in groups] == [policy] * len(groups)


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        pytest.param(
            "SearchEndpoint",
            lambda stateful, _: {"Fn::Join": ["", ["https://", domain_endpoint(stateful)]]},
            id="search_endpoint_is_the_https_endpoint",
        ),
        pytest.param(
            "SearchDashboardsUrl",
            lambda stateful, _: {"Fn::Join": ["", ["https://", domain_endpoint(stateful), "/_dashboards"]]},
            id="dashboards_url_points_at_dashboards",
        ),
        pytest.param("SearchAdminRoleArn", admin_arn, id="admin_role_arn_is_the_master_user"),
        pytest.param(
            "SearchSyncRoleArn",
            lambda stateful, _: role_arn(stateful, SYNC_ROLE_DESCRIPTION),
            id="sync_role_arn_is_the_sync_role",
        ),
    ],
)
def test_output(
    stateful: Template,
    config: EnvironmentConfig,
    output: str,
    expected: Callable[[Template, EnvironmentConfig], Any],
) -> None:
    stateful.has_output(output, {"Value": expected(stateful, config)})


def test_readers_named_in_config_reach_the_domain_on_https_only() -> None:
    """Readers and Dashboards users need a network path: config admits their security groups and CIDRs."""
    config = base_config()
    readers = ReaderNetwork(security_group_ids=("sg-0123456789abcdef0",), cidrs=("10.90.0.0/16",))
    settings = replace(config.search, reader_network=readers, dashboards_login=None)
    stack = Stack(
        App(context=committed_context()),
        "Readers",
        env=Environment(account=config.account, region=config.region),
    )
    vpc = ec2.Vpc(
        stack,
        "Vpc",
        max_azs=3,
        nat_gateways=0,
        subnet_configuration=[
            ec2.SubnetConfiguration(name="Isolated", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)
        ],
    )
    role = iam.Role(stack, "Admin", assumed_by=iam.AccountRootPrincipal())
    SearchDomain(
        stack,
        "Search",
        settings=settings,
        vpc=vpc,
        subnets=vpc.isolated_subnets,
        key=kms.Key(stack, "Key"),
        admin_role=role,
        client_roles=[],
        log_retention=logs.RetentionDays.ONE_WEEK,
        removal_policy=RemovalPolicy.DESTROY,
    )
    template = Template.from_stack(stack)
    rules = [r["Properties"] for r in template.find_resources("AWS::EC2::SecurityGroupIngress").values()]
    sources = {(r.get("SourceSecurityGroupId") or r.get("CidrIp"), r["FromPort"], r["ToPort"]) for r in rules}
    assert sources == {("sg-0123456789abcdef0", 443, 443), ("10.90.0.0/16", 443, 443)}


@pytest.mark.parametrize(
    ("readers", "message"),
    [
        ({"security_group_ids": ("sg-nope",)}, "security_group_ids[0]: 'sg-nope' is not a security group id"),
        ({"cidrs": ("10.90.1.0/16",)}, "cidrs[0]: '10.90.1.0/16' is not an IPv4 CIDR"),
        ({"cidrs": ("0.0.0.0/0",)}, "cidrs[0]: '0.0.0.0/0' admits more than a /8"),
    ],
)
def test_a_bad_reader_network_names_its_field(readers: dict[str, Any], message: str) -> None:
    base = base_config()
    with pytest.raises(ConfigError, match=re.escape(f"{base.name}.search.reader_network.{message}")):
        replace(base, search=replace(base.search, reader_network=ReaderNetwork(**readers)))
