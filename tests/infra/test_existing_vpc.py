"""An environment can place everything in an existing VPC described in config, still without lookups."""

from __future__ import annotations

import dataclasses

import pytest
from aws_cdk import App
from aws_cdk.assertions import Match

from infra.app_builder import build_environment, committed_context
from infra.config import NetworkSettings
from tests.infra.conftest import production_config
from tests.support.template import Template

EXISTING = NetworkSettings(
    existing_vpc_id="vpc-0abc1234def567890",
    existing_availability_zones=("ca-central-1a", "ca-central-1b", "ca-central-1d"),
    existing_isolated_subnet_ids=("subnet-0aaa1111", "subnet-0bbb2222", "subnet-0ccc3333"),
    existing_route_table_ids=("rtb-0aaa1111", "rtb-0bbb2222", "rtb-0ccc3333"),
    existing_endpoint_security_group_id="sg-0e0d0c0b0a0908070",
)


@pytest.fixture(scope="module")
def existing_vpc_templates(tmp_path_factory: pytest.TempPathFactory) -> tuple[Template, Template]:
    config = dataclasses.replace(production_config(), network=EXISTING)
    app = App(context=committed_context(), outdir=str(tmp_path_factory.mktemp("existing-vpc")))
    stage = build_environment(app, config)
    assembly = app.synth()
    stateful, stateless = (
        Template.from_json(assembly.get_stack_artifact(stage.node.find_child(kind).artifact_id).template)  # type: ignore[attr-defined]
        for kind in ("Stateful", "Stateless")
    )
    return stateful, stateless


def test_no_vpc_subnets_or_endpoints_are_created(existing_vpc_templates: tuple[Template, Template]) -> None:
    stateful, _ = existing_vpc_templates
    for resource_type in ("AWS::EC2::VPC", "AWS::EC2::Subnet", "AWS::EC2::VPCEndpoint"):
        stateful.resource_count_is(resource_type, 0)


def test_the_functions_admit_themselves_into_the_existing_endpoints_group_and_no_unused_group_is_made(
    existing_vpc_templates: tuple[Template, Template],
) -> None:
    stateful, stateless = existing_vpc_templates
    groups = [
        g["Properties"]["GroupDescription"]
        for g in stateful.find_resources("AWS::EC2::SecurityGroup").values()
    ]
    assert not [g for g in groups if g.startswith("Interface endpoints")]
    ingress = [r["Properties"] for r in stateless.find_resources("AWS::EC2::SecurityGroupIngress").values()]
    into_endpoints = [r for r in ingress if r["GroupId"] == EXISTING.existing_endpoint_security_group_id]
    # The sync, the index bootstrap and the ops worker each admit themselves (their own rules), on 443 only.
    assert len(into_endpoints) == 3 and {(r["FromPort"], r["ToPort"]) for r in into_endpoints} == {(443, 443)}


def test_flow_logs_are_still_enabled_on_the_existing_vpc(
    existing_vpc_templates: tuple[Template, Template],
) -> None:
    stateful, _ = existing_vpc_templates
    stateful.has_resource_properties(
        "AWS::EC2::FlowLog",
        {"ResourceId": EXISTING.existing_vpc_id, "ResourceType": "VPC", "TrafficType": "ALL"},
    )


def test_domain_and_functions_use_the_configured_subnets(
    existing_vpc_templates: tuple[Template, Template],
) -> None:
    stateful, stateless = existing_vpc_templates
    subnets = list(EXISTING.existing_isolated_subnet_ids)
    stateful.has_resource_properties(
        "AWS::OpenSearchService::Domain",
        {"VPCOptions": {"SubnetIds": subnets, "SecurityGroupIds": Match.any_value()}},
    )
    stateless.has_resource_properties(
        "AWS::Lambda::Function",
        {"Handler": "stream_sync.handler.handler", "VpcConfig": Match.object_like({"SubnetIds": subnets})},
    )
