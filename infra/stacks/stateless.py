"""Composition of what can be replaced freely: the sync and bootstrap functions, queues and alarms."""

from __future__ import annotations

from aws_cdk import CfnOutput, RemovalPolicy, Stack
from constructs import Construct
from datamodel.registry import indexable_schemas
from search.indices import bootstrap_fingerprint

from infra.config import EnvironmentConfig
from infra.constructs.index_bootstrap import IndexBootstrap
from infra.constructs.monitoring import Monitoring
from infra.constructs.stream_sync import StreamSync
from infra.retention import retention
from infra.stacks.stateful import StatefulStack


class StatelessStack(Stack):
    """Functions wired to the stateful stack's table stream, bucket and search domain."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: EnvironmentConfig,
        stateful: StatefulStack,
        **kwargs: object,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)  # type: ignore[arg-type]
        self.add_stack_dependency(stateful)
        removal = RemovalPolicy.RETAIN if config.retains_data else RemovalPolicy.DESTROY
        log_retention = retention(config.log_retention_days)
        network, search, access = stateful.network, stateful.search, stateful.search_access
        schemas = [schema.name for schema in indexable_schemas()]
        shared = {
            "vpc": network.vpc,
            "subnets": network.subnets,
            "key": stateful.key,
            "log_retention": log_retention,
            "removal_policy": removal,
        }
        self.sync = StreamSync(
            self,
            "StreamSync",
            settings=config.sync,
            table=stateful.table,
            geometry_bucket=stateful.geometry_bucket,
            geometry_bucket_arn=stateful.geometry_bucket_arn,
            role=access.sync_role,
            domain_arn=search.domain_arn,
            domain_endpoint=search.endpoint,
            bulk_max_bytes=config.search.bulk_max_bytes,
            indexable_schemas=schemas,
            **shared,  # type: ignore[arg-type]
        )
        self.bootstrap = IndexBootstrap(
            self,
            "IndexBootstrap",
            role=access.bootstrap_role,
            admin_role=access.admin_role,
            sync_role=access.sync_role,
            domain_endpoint=search.endpoint,
            schemas=schemas,
            replicas=config.search.replicas,
            fingerprint=bootstrap_fingerprint(schemas, replicas=config.search.replicas),
            **shared,  # type: ignore[arg-type]
        )
        self.monitoring = Monitoring(self, "Monitoring", key=stateful.key)
        self.monitoring.watch_stream_function("StreamSync", self.sync.function)
        self.monitoring.watch_dead_letter_queue("StreamSyncDeadLetters", self.sync.dead_letter_queue)
        self.monitoring.watch_dead_letter_queue("BootstrapDeadLetters", self.bootstrap.dead_letter_queue)
        CfnOutput(self, "AlarmTopicArn", value=self.monitoring.topic.topic_arn)
        CfnOutput(self, "DeadLetterQueueUrl", value=self.sync.dead_letter_queue.queue_url)
        # Documents must not flow before the templates that map them exist.
        self.sync.function.node.add_dependency(self.bootstrap.resource)
        for function in (self.sync.handler, self.bootstrap.handler):
            function.allow_https_to("SearchIngress", search.security_group, "HTTPS to the search domain")
            function.allow_https_to(
                "EndpointIngress", network.endpoint_security_group, "HTTPS to VPC endpoints"
            )
