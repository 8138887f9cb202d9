"""What the stateful stack hands to the stateless stack, through SSM parameters instead of CloudFormation exports.

An export cannot change while another stack imports it, so every stateful change that touched an exported value
(an availability zone, a security group, the stream ARN after a view-type change) would be blocked by the
stateless stack ("export in use"). Here the stateful stack writes each deploy-time value to its own SSM parameter
and the stateless stack reads it as an SSM-typed template parameter: the stateful stack can always change, the
stateless stack picks the new value up on its next deploy, and the CDK CLI never skips deploying a stack that has
SSM-typed parameters (it cannot know whether their values changed), so ``cdk deploy '<env>/*'`` always does.

Values known at synth time (zone names, the subnets of an existing VPC, the roles' fixed names, the domain's
name and ARN) are passed as plain constants; only values CloudFormation assigns at deploy time travel through SSM.
Roles arrive as constant ARNs in the deploying account, so CDK treats them as same-account principals and
never mirrors a grant into a resource policy.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from aws_cdk import Annotations, Aws, Fn, Token
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from aws_cdk import aws_ssm as ssm
from constructs import Construct


def parameter_prefix(environment: str) -> str:
    return f"/refdata/{environment}/stateful"


def stream_parameter(construct_id: str) -> str:
    """The name of a table's stream-ARN parameter: ``table-stream-arn`` for the main table ("Table"), as before
    there were several; ``table-<name in kebab case>-stream-arn`` for ``Table<Name>``."""
    name = re.sub(r"(?<!^)(?=[A-Z])", "-", construct_id.removeprefix("Table")).lower()
    return f"table-{name}-stream-arn" if name else "table-stream-arn"


@dataclass(frozen=True)
class StatefulValues:
    """The stateful resources the stateless stack uses, as seen from the stateless stack."""

    key: kms.IKey
    alarm_topic: sns.ITopic
    tables: Mapping[str, dynamodb.ITable]  # by construct id, the main table ("Table") first
    geometry_bucket: s3.IBucket
    vpc: ec2.IVpc
    subnets: ec2.SubnetSelection
    search_endpoint: str
    search_security_group: ec2.ISecurityGroup
    endpoint_security_group: ec2.ISecurityGroup
    admin_role: iam.IRole
    sync_role: iam.IRole
    bootstrap_role: iam.IRole
    ops_bucket: s3.IBucket
    ops_worker_role: iam.IRole
    streams_endpoint: str | None


class Handoff(Construct):
    """Publishes the stateful stack's deploy-time values (in the stateful stack) and reads them (``receive``,
    called with a construct of the stateless stack)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        environment: str,
        key: kms.IKey,
        alarm_topic: sns.ITopic,
        tables: Mapping[str, dynamodb.ITable],
        geometry_bucket: s3.IBucket,
        vpc: ec2.IVpc,
        search_endpoint: str,
        search_security_group: ec2.ISecurityGroup,
        endpoint_security_group: ec2.ISecurityGroup,
        admin_role_arn: str,
        sync_role_arn: str,
        bootstrap_role_arn: str,
        ops_bucket: s3.IBucket,
        ops_worker_role_arn: str,
        streams_endpoint: str | None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.prefix = parameter_prefix(environment)
        streams = {construct_id: table.table_stream_arn for construct_id, table in tables.items()}
        assert all(streams.values()), "every table must have a stream"
        self._table_ids = list(tables)
        self._zones = list(vpc.availability_zones)
        self._subnet_count = len(vpc.isolated_subnets)
        values = {
            "data-key-arn": key.key_arn,
            "alarm-topic-arn": alarm_topic.topic_arn,
            **{stream_parameter(construct_id): arn for construct_id, arn in streams.items()},
            "geometry-bucket-name": geometry_bucket.bucket_name,
            "vpc-id": vpc.vpc_id,
            **{
                f"isolated-subnet-{position}": subnet.subnet_id
                for position, subnet in enumerate(vpc.isolated_subnets, start=1)
            },
            "search-endpoint": search_endpoint,
            "search-security-group-id": search_security_group.security_group_id,
            "endpoint-security-group-id": endpoint_security_group.security_group_id,
            "admin-role-arn": admin_role_arn,
            "sync-role-arn": sync_role_arn,
            "bootstrap-role-arn": bootstrap_role_arn,
            "ops-bucket-name": ops_bucket.bucket_name,
            "ops-worker-role-arn": ops_worker_role_arn,
            "dynamodb-streams-endpoint": streams_endpoint or "",
        }
        self._constants = {name: value for name, value in values.items() if not Token.is_unresolved(value)}
        self.parameter_names = {
            name: f"{self.prefix}/{name}" for name in values if name not in self._constants
        }
        for name in self.parameter_names:
            ssm.StringParameter(
                self,
                name,
                parameter_name=self.parameter_names[name],
                string_value=values[name],
                description="Read by the stateless stack at each of its deploys (infra/handoff.py)",
            )

    def receive(self, scope: Construct) -> StatefulValues:
        """The handed-over resources as references inside ``scope`` (a construct of the stateless stack)."""
        reader = Construct(scope, "Stateful")

        def read(name: str) -> str:
            if name in self._constants:
                return self._constants[name]
            return ssm.StringParameter.value_for_string_parameter(reader, self.parameter_names[name])

        subnet_ids = [read(f"isolated-subnet-{n}") for n in range(1, self._subnet_count + 1)]
        vpc = ec2.Vpc.from_vpc_attributes(
            reader,
            "Vpc",
            vpc_id=read("vpc-id"),
            availability_zones=self._zones,
            isolated_subnet_ids=subnet_ids,
        )
        for subnet in vpc.isolated_subnets:
            Annotations.of(subnet).acknowledge_warning(
                "@aws-cdk/aws-ec2:noSubnetRouteTableId",
                "The stateless stack places functions in these subnets and never touches their route tables.",
            )
        bucket_name = read("geometry-bucket-name")
        ops_bucket_name = read("ops-bucket-name")
        tables: dict[str, dynamodb.ITable] = {}
        for construct_id in self._table_ids:
            stream_arn = read(stream_parameter(construct_id))
            tables[construct_id] = dynamodb.Table.from_table_attributes(
                reader,
                construct_id,
                # arn:<partition>:dynamodb:<region>:<account>:table/<name>/stream/<label>
                table_name=Fn.select(1, Fn.split("/", stream_arn)),
                table_stream_arn=stream_arn,
            )
        return StatefulValues(
            key=kms.Key.from_key_arn(reader, "DataKey", read("data-key-arn")),
            alarm_topic=sns.Topic.from_topic_arn(reader, "AlarmTopic", read("alarm-topic-arn")),
            tables=tables,
            geometry_bucket=s3.Bucket.from_bucket_attributes(
                reader,
                "GeometryBucket",
                bucket_name=bucket_name,
                bucket_arn=f"arn:{Aws.PARTITION}:s3:::{bucket_name}",
            ),
            vpc=vpc,
            subnets=ec2.SubnetSelection(subnets=vpc.isolated_subnets),
            search_endpoint=read("search-endpoint"),
            search_security_group=ec2.SecurityGroup.from_security_group_id(
                reader, "SearchSecurityGroup", read("search-security-group-id"), mutable=False
            ),
            endpoint_security_group=ec2.SecurityGroup.from_security_group_id(
                reader, "EndpointSecurityGroup", read("endpoint-security-group-id"), mutable=False
            ),
            admin_role=iam.Role.from_role_arn(reader, "AdminRole", read("admin-role-arn"), mutable=False),
            sync_role=iam.Role.from_role_arn(reader, "SyncRole", read("sync-role-arn"), mutable=False),
            bootstrap_role=iam.Role.from_role_arn(
                reader, "BootstrapRole", read("bootstrap-role-arn"), mutable=False
            ),
            ops_bucket=s3.Bucket.from_bucket_attributes(
                reader,
                "OpsBucket",
                bucket_name=ops_bucket_name,
                bucket_arn=f"arn:{Aws.PARTITION}:s3:::{ops_bucket_name}",
            ),
            ops_worker_role=iam.Role.from_role_arn(
                reader, "OpsWorkerRole", read("ops-worker-role-arn"), mutable=False
            ),
            streams_endpoint=read("dynamodb-streams-endpoint") or None,
        )
