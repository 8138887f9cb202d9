"""The private network: isolated subnets only, encrypted flow logs, gateway and interface endpoints."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Capture, Match

from infra.config import EnvironmentConfig
from tests.infra.templates_helpers import assert_admits_only_the_functions_on_https, resolve
from tests.support.retention import removal_policies
from tests.support.template import Template

VPC = "AWS::EC2::VPC"
SUBNET = "AWS::EC2::Subnet"
ENDPOINT = "AWS::EC2::VPCEndpoint"
SECURITY_GROUP = "AWS::EC2::SecurityGroup"
INGRESS = "AWS::EC2::SecurityGroupIngress"
INTERFACE_SERVICES = ("sqs", "lambda", "sts")
GATEWAY_SERVICES = ("s3", "dynamodb")
OPEN_CIDRS = ("0.0.0.0/0", "::/0")


def vpc_ref(template: Template) -> dict[str, str]:
    vpcs = template.find_resources(VPC)
    assert len(vpcs) == 1
    return {"Ref": next(iter(vpcs))}


def refs(template: Template, resource_type: str) -> list[dict[str, str]]:
    return [{"Ref": logical_id} for logical_id in template.find_resources(resource_type)]


def key_arn(template: Template) -> dict[str, Any]:
    keys = template.find_resources("AWS::KMS::Key")
    assert len(keys) == 1
    return {"Fn::GetAtt": [next(iter(keys)), "Arn"]}


def flow_log_group_id(template: Template) -> str:
    group = Capture()
    template.has_resource_properties("AWS::EC2::FlowLog", {"LogGroupName": {"Ref": group}})
    return group.as_string()


def endpoint_security_group(template: Template) -> Any:
    groups = Capture()
    template.has_resource_properties(ENDPOINT, {"VpcEndpointType": "Interface", "SecurityGroupIds": groups})
    assert len(groups.as_array()) == 1
    return groups.as_array()[0]


# --- VPC and subnets ----------------------------------------------------------------------------------------


def test_vpc_uses_the_configured_cidr(stateful: Template, config: EnvironmentConfig) -> None:
    stateful.resource_count_is(VPC, 1)
    stateful.has_resource_properties(
        VPC, {"CidrBlock": config.network.cidr, "EnableDnsHostnames": True, "EnableDnsSupport": True}
    )


def test_one_isolated_subnet_per_availability_zone(stateful: Template, config: EnvironmentConfig) -> None:
    stateful.resource_count_is(SUBNET, config.network.max_azs)
    zones = {subnet["Properties"]["AvailabilityZone"] for subnet in stateful.find_resources(SUBNET).values()}
    assert len(zones) == config.network.max_azs


def test_every_subnet_is_isolated_and_assigns_no_public_ips(stateful: Template) -> None:
    isolated = stateful.find_resources(
        SUBNET,
        {
            "Properties": {
                "MapPublicIpOnLaunch": False,
                "Tags": Match.array_with([{"Key": "aws-cdk:subnet-type", "Value": "Isolated"}]),
            }
        },
    )
    assert sorted(isolated) == sorted(stateful.find_resources(SUBNET))


@pytest.mark.parametrize(
    "resource_type",
    [
        "AWS::EC2::NatGateway",
        "AWS::EC2::InternetGateway",
        "AWS::EC2::EgressOnlyInternetGateway",
        "AWS::EC2::VPCGatewayAttachment",
        "AWS::EC2::EIP",
        "AWS::EC2::Route",
    ],
)
def test_network_has_no_route_to_the_internet(stateful: Template, resource_type: str) -> None:
    stateful.resource_count_is(resource_type, 0)


# --- flow logs ----------------------------------------------------------------------------------------------


def test_flow_log_records_all_vpc_traffic_to_cloudwatch_logs(stateful: Template) -> None:
    stateful.resource_count_is("AWS::EC2::FlowLog", 1)
    stateful.has_resource_properties(
        "AWS::EC2::FlowLog",
        {
            "ResourceType": "VPC",
            "ResourceId": vpc_ref(stateful),
            "TrafficType": "ALL",
            "LogDestinationType": "cloud-watch-logs",
            "DeliverLogsPermissionArn": {"Fn::GetAtt": [Match.any_value(), "Arn"]},
        },
    )


def test_flow_log_group_is_encrypted_and_keeps_configured_retention(
    stateful: Template, config: EnvironmentConfig
) -> None:
    group = stateful.find_resources("AWS::Logs::LogGroup")[flow_log_group_id(stateful)]
    assert group["Properties"] == {
        "KmsKeyId": key_arn(stateful),
        "RetentionInDays": config.network.flow_log_retention_days,
    }


def test_flow_log_group_is_retained_with_the_data(stateful: Template, config: EnvironmentConfig) -> None:
    group = stateful.find_resources("AWS::Logs::LogGroup")[flow_log_group_id(stateful)]
    assert (group["DeletionPolicy"], group["UpdateReplacePolicy"]) == removal_policies(config)


def test_flow_log_role_may_write_only_to_its_log_group(stateful: Template) -> None:
    role = Capture()
    stateful.has_resource_properties(
        "AWS::EC2::FlowLog", {"DeliverLogsPermissionArn": {"Fn::GetAtt": [role, "Arn"]}}
    )
    stateful.has_resource_properties(
        "AWS::IAM::ManagedPolicy",
        {
            "Roles": [{"Ref": role.as_string()}],
            "PolicyDocument": {
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Action": ["logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents"],
                        "Resource": {"Fn::GetAtt": [flow_log_group_id(stateful), "Arn"]},
                    }
                ]
            },
        },
    )


# --- endpoints ----------------------------------------------------------------------------------------------


def test_gateway_endpoints_are_s3_and_dynamodb_only(stateful: Template) -> None:
    gateways = stateful.find_resources(ENDPOINT, {"Properties": {"VpcEndpointType": "Gateway"}})
    services = sorted(
        gateway["Properties"]["ServiceName"]["Fn::Join"][1][-1] for gateway in gateways.values()
    )
    assert services == sorted(f".{service}" for service in GATEWAY_SERVICES)


@pytest.mark.parametrize("service", GATEWAY_SERVICES)
def test_gateway_endpoint_serves_every_isolated_route_table(stateful: Template, service: str) -> None:
    stateful.has_resource_properties(
        ENDPOINT,
        {
            "VpcEndpointType": "Gateway",
            "VpcId": vpc_ref(stateful),
            "ServiceName": {"Fn::Join": ["", ["com.amazonaws.", {"Ref": "AWS::Region"}, f".{service}"]]},
            "RouteTableIds": Match.array_equals(refs(stateful, "AWS::EC2::RouteTable")),
        },
    )


def test_interface_endpoints_are_sqs_lambda_sts_and_dynamodb_streams_only(
    stateful: Template, config: EnvironmentConfig
) -> None:
    interfaces = stateful.find_resources(ENDPOINT, {"Properties": {"VpcEndpointType": "Interface"}})
    assert sorted(endpoint["Properties"]["ServiceName"] for endpoint in interfaces.values()) == sorted(
        f"com.amazonaws.{config.region}.{service}" for service in (*INTERFACE_SERVICES, "dynamodb-streams")
    )


def test_the_dynamodb_streams_endpoint_is_named_by_its_own_dns_name(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    """DynamoDB Streams endpoints offer no private DNS name: the ops worker calls the endpoint's regional name,
    the first of its DnsEntries (`<hosted zone>:<name>`), which the handoff passes on."""
    (endpoint_id,) = stateful.find_resources(
        ENDPOINT,
        {
            "Properties": {
                "ServiceName": f"com.amazonaws.{config.region}.dynamodb-streams",
                "PrivateDnsEnabled": False,
                "SecurityGroupIds": [endpoint_security_group(stateful)],
                "SubnetIds": Match.array_equals(refs(stateful, SUBNET)),
            }
        },
    )
    (worker,) = stateless.find_resources(
        "AWS::Lambda::Function", {"Properties": {"Handler": "ops.worker.handler"}}
    )
    variables = resolve(stateful, stateless, stateless.find_resources("AWS::Lambda::Function")[worker])
    first_entry = {"Fn::Select": [0, {"Fn::GetAtt": [endpoint_id, "DnsEntries"]}]}
    regional_name = {"Fn::Select": [1, {"Fn::Split": [":", first_entry]}]}
    assert variables["Properties"]["Environment"]["Variables"]["DYNAMODB_STREAMS_ENDPOINT"] == {
        "Fn::Join": ["", ["https://", regional_name]]
    }


@pytest.mark.parametrize("service", INTERFACE_SERVICES)
def test_interface_endpoint_has_private_dns_in_every_subnet_behind_the_endpoint_group(
    stateful: Template, config: EnvironmentConfig, service: str
) -> None:
    stateful.has_resource_properties(
        ENDPOINT,
        {
            "VpcEndpointType": "Interface",
            "ServiceName": f"com.amazonaws.{config.region}.{service}",
            "VpcId": vpc_ref(stateful),
            "PrivateDnsEnabled": True,
            "SecurityGroupIds": [endpoint_security_group(stateful)],
            "SubnetIds": Match.array_equals(refs(stateful, SUBNET)),
        },
    )


def test_endpoint_security_group_has_no_open_egress(stateful: Template) -> None:
    group_id = endpoint_security_group(stateful)["Fn::GetAtt"][0]
    egress = stateful.find_resources(SECURITY_GROUP)[group_id]["Properties"]["SecurityGroupEgress"]
    # CDK's placeholder rule for allow_all_outbound=False: matches no traffic.
    assert egress == [
        {
            "CidrIp": "255.255.255.255/32",
            "Description": "Disallow all traffic",
            "FromPort": 252,
            "IpProtocol": "icmp",
            "ToPort": 86,
        }
    ]


def test_endpoint_security_group_admits_only_function_groups_on_https(
    stateful: Template, stateless: Template
) -> None:
    group_id = endpoint_security_group(stateful)["Fn::GetAtt"][0]
    assert_admits_only_the_functions_on_https(stateful, stateless, group_id)


# --- no open ingress ----------------------------------------------------------------------------------------


def open_ingress(template: Template) -> list[str]:
    """The security groups and ingress rules that admit any address."""
    rules = [
        (logical_id, rule)
        for logical_id, group in template.find_resources(SECURITY_GROUP).items()
        for rule in group["Properties"].get("SecurityGroupIngress", [])
    ]
    rules += [
        (logical_id, rule["Properties"]) for logical_id, rule in template.find_resources(INGRESS).items()
    ]
    return [
        logical_id
        for logical_id, rule in rules
        if {rule.get("CidrIp"), rule.get("CidrIpv6")} & set(OPEN_CIDRS)
    ]


def test_no_security_group_in_either_stack_admits_the_internet(
    stateful: Template, stateless: Template
) -> None:
    assert (open_ingress(stateful), open_ingress(stateless)) == ([], [])


def test_every_ingress_rule_names_a_source_security_group(stateful: Template, stateless: Template) -> None:
    for template in (stateful, stateless):
        for group in template.find_resources(SECURITY_GROUP).values():
            assert "SecurityGroupIngress" not in group["Properties"]
        for rule in template.find_resources(INGRESS).values():
            assert "SourceSecurityGroupId" in rule["Properties"], rule
