"""A Python function inside the VPC with its own security group, encrypted log group and exact permissions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.checkov import skip
from infra.iam import attach_policy
from infra.nag import acknowledge

RUNTIME_ROOT = Path(__file__).resolve().parents[2] / "lambdas"


@dataclass(frozen=True)
class Reach:
    """A peer the function calls on HTTPS: the search domain or the VPC endpoints, by their security group."""

    construct_id: str
    security_group: ec2.ISecurityGroup
    description: str


@dataclass(frozen=True, kw_only=True)
class Placement:
    """Where the environment's functions run and what they share: network, data key, log retention, removal
    policy, the peers they reach, and whether the environment reserves concurrency."""

    vpc: ec2.IVpc
    subnets: ec2.SubnetSelection
    key: kms.IKey
    log_retention: logs.RetentionDays
    removal_policy: RemovalPolicy
    reaches: Sequence[Reach]
    reserve_concurrency: bool

    def reserved(self, amount: int) -> int | None:
        """``amount`` of reserved concurrency where the environment reserves any, else none."""
        return amount if self.reserve_concurrency else None


RUNTIME = lambda_.Runtime.PYTHON_3_14


def runtime_code() -> lambda_.Code:
    """The whole ``lambdas/`` tree as one asset (CDK needs a Code instance per stack).

    Runtime code needs only the standard library and the boto3/botocore/urllib3 that the Lambda Python runtime
    provides, so nothing is vendored and no Docker bundling is involved. `refdata` in it is the refdata-client
    package as teams install it (lambdas/pyproject.toml builds it from the same files; the project file stays out).
    """
    return lambda_.Code.from_asset(
        str(RUNTIME_ROOT), exclude=["**/__pycache__", "**/*.pyc", "**/.mypy_cache", "pyproject.toml"]
    )


UNRESERVED_CONCURRENCY_FINDINGS = ("NIST.800.53.R5-LambdaConcurrency", "HIPAA.Security-LambdaConcurrency")
UNRESERVED_CONCURRENCY_REASON = (
    "This environment's config turns reserved concurrency off (reserve_concurrency): Lambda keeps 100 of an "
    "account's concurrency unreserved, so an account whose quota is below 100 plus the reservations (a new "
    "account's quota is often 10) could not deploy at all. The event source mapping's parallelization factor "
    "still bounds the sync's concurrency per shard."
)

ENI_REASON = (
    "Lambda's VPC network-interface management (ec2:CreateNetworkInterface, DeleteNetworkInterface, ...) accepts "
    "only '*' as its resource; every other write in the policy names its resource."
)
ENI_ACTIONS = [
    "ec2:CreateNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSubnets",
    "ec2:DeleteNetworkInterface",
    "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
]


class VpcFunction(Construct):
    """arm64 Python function with X-Ray tracing, optional reserved concurrency, environment variables encrypted
    with the data key, and a customer-managed policy.

    Its security group allows outbound HTTPS only, and ``placement.reaches`` admits it into each peer's group. The subnets
    are isolated (no NAT, no internet gateway), so that reaches nothing but the VPC endpoints and the search
    domain.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        description: str,
        handler: str,
        role: iam.IRole,
        placement: Placement,
        memory_mb: int,
        timeout: Duration,
        reserved_concurrency: int,
        environment: dict[str, str],
        statements: list[iam.PolicyStatement],
        dead_letter_queue: object | None = None,
        wildcard_reason: str = "",
    ) -> None:
        super().__init__(scope, construct_id)
        key, reserved = placement.key, placement.reserved(reserved_concurrency)
        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=placement.vpc,
            description=f"{description}: outbound HTTPS only",
            allow_all_outbound=False,
        )
        self.security_group.add_egress_rule(
            ec2.Peer.any_ipv4(),
            ec2.Port.tcp(443),
            "HTTPS to VPC endpoints and the search domain (no route out)",
        )
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            encryption_key=key,
            retention=placement.log_retention,
            removal_policy=placement.removal_policy,
        )
        self.function = lambda_.Function(
            self,
            "Resource",
            description=description,
            runtime=RUNTIME,
            architecture=lambda_.Architecture.ARM_64,
            handler=handler,
            code=runtime_code(),
            # Imported roles are immutable already; a role made here must not collect CDK's inline grants.
            role=role.without_policy_updates() if isinstance(role, iam.Role) else role,
            memory_size=memory_mb,
            timeout=timeout,
            reserved_concurrent_executions=reserved,
            environment_encryption=key,
            tracing=lambda_.Tracing.ACTIVE,
            log_group=self.log_group,
            logging_format=lambda_.LoggingFormat.JSON,
            vpc=placement.vpc,
            vpc_subnets=placement.subnets,
            security_groups=[self.security_group],
            environment=environment,
            dead_letter_queue=dead_letter_queue,  # type: ignore[arg-type]
        )
        if reserved is None:
            acknowledge(self.function, UNRESERVED_CONCURRENCY_REASON, *UNRESERVED_CONCURRENCY_FINDINGS)
            skip(self.function, UNRESERVED_CONCURRENCY_REASON, "CKV_AWS_115")
        if dead_letter_queue is None:
            skip(
                self.function,
                "Invoked synchronously (by Step Functions or the provider framework), which handles every failure; "
                "an asynchronous-invocation DLQ would never receive anything.",
                "CKV_AWS_116",
            )
        self.policy = attach_policy(
            self,
            "Policy",
            role,
            [
                iam.PolicyStatement(
                    actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                    resources=[self.log_group.log_group_arn],
                ),
                iam.PolicyStatement(actions=ENI_ACTIONS, resources=["*"]),
                iam.PolicyStatement(
                    actions=["xray:PutTraceSegments", "xray:PutTelemetryRecords"], resources=["*"]
                ),
                *statements,
            ],
        )
        # The function must not start before its permissions and its way to each peer exist; and anything that
        # depends on the function (a custom resource, an event source mapping) is deleted before them.
        self.function.node.add_dependency(self.policy)
        for reach in placement.reaches:
            self.function.node.add_dependency(self._allow_https_to(reach))
        acknowledge(
            self.policy,
            "Actions that accept only '*': Lambda's VPC network-interface management and X-Ray segment upload."
            + (f" {wildcard_reason}" if wildcard_reason else ""),
            "AwsSolutions-IAM5[Resource::*]",
        )
        skip(self.policy, ENI_REASON, "CKV_AWS_111")

    def _allow_https_to(self, reach: Reach) -> ec2.CfnSecurityGroupIngress:
        """Admits this function into the peer's group on 443.

        The rule lives here, with the function, so a group in the stateful stack never references a group in the
        stateless stack (which would make the two stacks depend on each other).
        """
        return ec2.CfnSecurityGroupIngress(
            self,
            reach.construct_id,
            group_id=reach.security_group.security_group_id,
            source_security_group_id=self.security_group.security_group_id,
            ip_protocol="tcp",
            from_port=443,
            to_port=443,
            description=reach.description,
        )

    @property
    def arn(self) -> str:
        return self.function.function_arn
