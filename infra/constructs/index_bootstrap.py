"""The custom resource that creates index templates, versioned indices and aliases at deploy time."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from aws_cdk import CustomResource, Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from aws_cdk import custom_resources as cr
from constructs import Construct

from infra.checkov import skip
from infra.constructs.dead_letter_queue import dead_letter_queue
from infra.constructs.vpc_function import (
    ENI_ACTIONS,
    ENI_REASON,
    UNRESERVED_CONCURRENCY_FINDINGS,
    UNRESERVED_CONCURRENCY_REASON,
    Placement,
    VpcFunction,
)
from infra.iam import attach_policy
from infra.nag import acknowledge


class IndexBootstrap(Construct):
    """Runs ``index_bootstrap.handler.on_event`` through the CDK provider framework on every deploy that
    changes the schemas or their mappings; no console step is needed to make the domain usable.

    The handler assumes the FGAC master role to put templates, the sync script, indices, aliases, the
    stream-sync role mapping and the read roles. ``fingerprint`` (a hash of the desired templates) is a resource
    property so a mapping change triggers an update, which creates the next index version; ``read_roles``
    (``search.readers.read_role_definitions``: the roles and mappings to put, JSON) likewise, so `cdk diff`
    shows every change of a reader's document- or field-level security.

    The provider framework's function stays in the VPC (it reaches Lambda through the interface endpoint and the
    response URL through the S3 gateway endpoint), so no function of the platform has a route to the internet.
    What makes create, delete and rollback safe is ordering instead: the handler depends on its policy and its
    security-group rules, the framework on its policy, and the custom resource on both functions, so the rules
    exist before the first Create and are deleted only after the last Delete (tests/infra/test_deploy_graph.py).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        role: iam.IRole,
        admin_role: iam.IRole,
        sync_role: iam.IRole,
        domain_endpoint: str,
        schemas: list[str],
        replicas: int,
        fingerprint: str,
        read_roles: Mapping[str, Any],
        placement: Placement,
    ) -> None:
        super().__init__(scope, construct_id)
        key, removal_policy = placement.key, placement.removal_policy
        self.handler = VpcFunction(
            self,
            "Function",
            description="OpenSearch index bootstrap (custom resource)",
            handler="index_bootstrap.handler.on_event",
            role=role,
            placement=placement,
            memory_mb=256,
            timeout=Duration.minutes(5),
            reserved_concurrency=1,
            environment={},
            statements=[],
        )
        self.dead_letter_queue = framework_dlq = dead_letter_queue(
            self,
            "ProviderDeadLetterQueue",
            key=key,
            removal_policy=removal_policy,
            owner="the provider framework's function",
        )
        acknowledge(
            self.handler.function,
            "The provider framework invokes this handler synchronously and reports its failure to CloudFormation "
            "(FAILED with the reason); an asynchronous-invocation DLQ would never receive anything.",
            "Serverless-LambdaDLQ",
            "NIST.800.53.R5-LambdaDLQ",
            "HIPAA.Security-LambdaDLQ",
        )
        framework_role = iam.Role(
            self, "ProviderRole", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com")
        )
        framework_logs = logs.LogGroup(
            self,
            "ProviderLogs",
            encryption_key=key,
            retention=placement.log_retention,
            removal_policy=removal_policy,
        )
        self.provider = cr.Provider(
            self,
            "Provider",
            on_event_handler=self.handler.function,
            framework_on_event_role=framework_role.without_policy_updates(),
            log_group=framework_logs,
            vpc=placement.vpc,
            vpc_subnets=placement.subnets,
            security_groups=[self.handler.security_group],
            provider_function_env_encryption=key,
        )
        framework_policy = attach_policy(
            self,
            "ProviderPolicy",
            framework_role,
            [
                # GetFunction: the framework waits for an idle in-VPC handler that has gone inactive.
                iam.PolicyStatement(
                    actions=["lambda:InvokeFunction", "lambda:GetFunction"], resources=[self.handler.arn]
                ),
                iam.PolicyStatement(
                    actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                    resources=[framework_logs.log_group_arn],
                ),
                iam.PolicyStatement(actions=ENI_ACTIONS, resources=["*"]),
                iam.PolicyStatement(
                    actions=["xray:PutTraceSegments", "xray:PutTelemetryRecords"], resources=["*"]
                ),
                iam.PolicyStatement(actions=["kms:Decrypt", "kms:GenerateDataKey"], resources=[key.key_arn]),
                iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[framework_dlq.queue_arn]),
            ],
        )
        self._harden_framework_function(framework_dlq, reserved=placement.reserved(1))
        self.provider.node.add_dependency(framework_policy)
        acknowledge(
            framework_policy,
            "Actions that accept only '*': Lambda's VPC network-interface management and X-Ray segment upload.",
            "AwsSolutions-IAM5[Resource::*]",
        )
        skip(framework_policy, ENI_REASON, "CKV_AWS_111")
        self.resource = CustomResource(
            self,
            "Resource",
            service_token=self.provider.service_token,
            resource_type="Custom::OpenSearchIndexBootstrap",
            properties={
                "Endpoint": f"https://{domain_endpoint}",
                "Region": Stack.of(self).region,
                "AdminRoleArn": admin_role.role_arn,
                "SyncRoleArn": sync_role.role_arn,
                "Schemas": schemas,
                "Replicas": str(replicas),
                "Fingerprint": fingerprint,
                "ReadRoles": json.dumps(read_roles, sort_keys=True, separators=(",", ":")),
            },
        )

    def _harden_framework_function(self, dead_letter_queue: sqs.IQueue, *, reserved: int | None) -> None:
        """The provider framework's own function exposes no props for these; set them on its L1 resource.

        CloudFormation invokes it asynchronously, so a dead-letter queue does catch events it fails on.
        """
        framework = self.provider.node.find_child("framework-onEvent").node.default_child
        assert isinstance(framework, lambda_.CfnFunction)
        framework.memory_size = 256
        if reserved is not None:
            framework.reserved_concurrent_executions = reserved
        else:
            acknowledge(framework, UNRESERVED_CONCURRENCY_REASON, *UNRESERVED_CONCURRENCY_FINDINGS)
            skip(framework, UNRESERVED_CONCURRENCY_REASON, "CKV_AWS_115")
        framework.tracing_config = lambda_.CfnFunction.TracingConfigProperty(mode="Active")
        framework.dead_letter_config = lambda_.CfnFunction.DeadLetterConfigProperty(
            target_arn=dead_letter_queue.queue_arn
        )
