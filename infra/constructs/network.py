"""The private network: isolated subnets, flow logs, and the endpoints the functions reach AWS through."""

from __future__ import annotations

from aws_cdk import CfnResource, Fn, RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.config import ISOLATED_SUBNET_MASK, NetworkSettings
from infra.iam import attach_policy
from infra.nag import acknowledge

# SQS for the dead-letter queues, Lambda for the provider framework invoking its handler, STS for the
# bootstrap and the ops worker assuming the search admin role.
INTERFACE_SERVICES = (
    ("Sqs", ec2.InterfaceVpcEndpointAwsService.SQS),
    ("Lambda", ec2.InterfaceVpcEndpointAwsService.LAMBDA_),
    ("Sts", ec2.InterfaceVpcEndpointAwsService.STS),
)


RETAINED_NETWORK_TYPES = frozenset(
    {"AWS::EC2::VPC", "AWS::EC2::Subnet", "AWS::EC2::RouteTable", "AWS::EC2::SubnetRouteTableAssociation"}
)


class Network(Construct):
    """A VPC with isolated subnets only (no NAT, no internet gateway), or an existing VPC described in config.

    Functions reach S3 and DynamoDB through gateway endpoints and SQS, Lambda, STS and DynamoDB Streams through
    interface endpoints guarded by their own security group; nothing in the VPC can reach the internet.

    DynamoDB Streams endpoints have no private DNS name: clients use the endpoint's own DNS name
    (``streams_endpoint``, or config's ``existing_dynamodb_streams_endpoint`` for an existing VPC; None when neither
    exists, and then the redrive of the event source mapping's on-failure records cannot run in the VPC).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: NetworkSettings,
        key: kms.IKey,
        log_retention: logs.RetentionDays,
        removal_policy: RemovalPolicy,
    ) -> None:
        super().__init__(scope, construct_id)
        if settings.existing_vpc_id:
            self.vpc = ec2.Vpc.from_vpc_attributes(
                self,
                "Resource",
                vpc_id=settings.existing_vpc_id,
                availability_zones=list(settings.existing_availability_zones),
                isolated_subnet_ids=list(settings.existing_isolated_subnet_ids),
                isolated_subnet_route_table_ids=list(settings.existing_route_table_ids),
            )
        else:
            self.vpc = ec2.Vpc(
                self,
                "Resource",
                ip_addresses=ec2.IpAddresses.cidr(settings.cidr),
                max_azs=settings.max_azs,
                nat_gateways=0,
                subnet_configuration=[
                    ec2.SubnetConfiguration(
                        name="Isolated",
                        subnet_type=ec2.SubnetType.PRIVATE_ISOLATED,
                        cidr_mask=ISOLATED_SUBNET_MASK,
                    )
                ],
                restrict_default_security_group=False,
            )
            acknowledge(
                self.vpc,
                "Nothing is placed in the default security group (every resource gets its own); closing it "
                "needs a CDK custom-resource Lambda, a larger surface than the unused group it would close.",
                "NIST.800.53.R5-VPCDefaultSecurityGroupClosed",
                "HIPAA.Security-VPCDefaultSecurityGroupClosed",
                "PCI.DSS.321-VPCDefaultSecurityGroupClosed",
            )
            # A retained domain keeps its network interfaces in these subnets: keep what they stand on too.
            for child in self.vpc.node.find_all():
                if isinstance(child, CfnResource) and child.cfn_resource_type in RETAINED_NETWORK_TYPES:
                    child.apply_removal_policy(removal_policy)
        self.subnets = ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)
        self.isolated_subnets = self.vpc.isolated_subnets
        flow_logs = logs.LogGroup(
            self, "FlowLogs", encryption_key=key, retention=log_retention, removal_policy=removal_policy
        )
        flow_log_role = iam.Role(
            self, "FlowLogRole", assumed_by=iam.ServicePrincipal("vpc-flow-logs.amazonaws.com")
        )
        flow_log_policy = attach_policy(
            self,
            "FlowLogPolicy",
            flow_log_role,
            [
                iam.PolicyStatement(
                    actions=["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
                    resources=[flow_logs.log_group_arn],
                )
            ],
        )
        flow_log = self.vpc.add_flow_log(
            "FlowLog",
            destination=ec2.FlowLogDestination.to_cloud_watch_logs(
                flow_logs, flow_log_role.without_policy_updates()
            ),
            traffic_type=ec2.FlowLogTrafficType.ALL,
        )
        # Flow logs deliver as the role: its permission must exist first (and go last).
        flow_log.node.add_dependency(flow_log_policy)
        self.endpoint_security_group: ec2.ISecurityGroup
        if settings.existing_vpc_id and settings.existing_endpoint_security_group_id:
            # The existing endpoints' own group (config requires it): each function admits itself into it on 443.
            self.endpoint_security_group = ec2.SecurityGroup.from_security_group_id(
                self, "EndpointSecurityGroup", settings.existing_endpoint_security_group_id, mutable=False
            )
        else:
            self.endpoint_security_group = ec2.SecurityGroup(
                self,
                "EndpointSecurityGroup",
                vpc=self.vpc,
                description="Interface endpoints: HTTPS from platform functions only",
                allow_all_outbound=False,
            )
        self.streams_endpoint: str | None = settings.existing_dynamodb_streams_endpoint
        if not settings.existing_vpc_id:
            self.vpc.add_gateway_endpoint(
                "S3", service=ec2.GatewayVpcEndpointAwsService.S3, subnets=[self.subnets]
            )
            self.vpc.add_gateway_endpoint(
                "DynamoDb", service=ec2.GatewayVpcEndpointAwsService.DYNAMODB, subnets=[self.subnets]
            )
            for name, service in INTERFACE_SERVICES:
                self.vpc.add_interface_endpoint(
                    name,
                    service=service,
                    subnets=self.subnets,
                    security_groups=[self.endpoint_security_group],
                    open=False,
                    private_dns_enabled=True,
                )
            streams = self.vpc.add_interface_endpoint(
                "DynamoDbStreams",
                service=ec2.InterfaceVpcEndpointAwsService.DYNAMODB_STREAMS,
                subnets=self.subnets,
                security_groups=[self.endpoint_security_group],
                open=False,
                private_dns_enabled=False,  # not offered for DynamoDB Streams
            )
            # DnsEntries: "<hosted zone id>:<name>"; the first is the regional name.
            self.streams_endpoint = Fn.select(
                1, Fn.split(":", Fn.select(0, streams.vpc_endpoint_dns_entries))
            )
