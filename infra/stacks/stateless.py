"""Composition of what can be replaced freely: the sync and bootstrap functions, queues and alarms."""

from __future__ import annotations

from aws_cdk import CfnOutput, Duration, RemovalPolicy, Stack
from constructs import Construct
from ops.purge import minimum_age_seconds
from refdata.registry import indexable_schemas
from search.indices import bootstrap_fingerprint
from search.readers import read_role_definitions

from infra.config import EnvironmentConfig
from infra.constructs.heartbeat import Heartbeat, HeartbeatTable
from infra.constructs.index_bootstrap import IndexBootstrap
from infra.constructs.monitoring import Monitoring, WatchedHeartbeat, WatchedTable
from infra.constructs.ops_workflows import OpsWorkflows, state_machine_name
from infra.constructs.search_domain import domain_arn
from infra.constructs.single_table import index_names
from infra.constructs.smoke import Probe, SmokeAccess
from infra.constructs.stream_sync import METRICS_NAMESPACE, StreamSync, SyncedTable
from infra.constructs.vpc_function import Placement, Reach
from infra.retention import retention
from infra.stacks.stateful import StatefulStack


class StatelessStack(Stack):
    """Functions wired to the stateful stack's table streams, bucket and search domain.

    Everything it uses from the stateful stack arrives through ``infra.handoff`` (SSM parameters), never as a
    CloudFormation import, so the stateful stack can change any of those values without being blocked here.
    """

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
        # RetainExceptOnCreate, as in the stateful stack: a failed first create leaves no log group or queue behind.
        removal = RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE if config.retains_data else RemovalPolicy.DESTROY
        handed = stateful.handoff.receive(self)
        schemas = [schema.name for schema in indexable_schemas()]
        tables = [
            SyncedTable(handed.tables[plan.construct_id], plan.schemas, plan.indexable_schemas)
            for plan in config.source_tables
        ]
        reaches = [
            Reach("SearchIngress", handed.search_security_group, "HTTPS to the search domain"),
            Reach("EndpointIngress", handed.endpoint_security_group, "HTTPS to VPC endpoints"),
        ]
        placement = Placement(
            vpc=handed.vpc,
            subnets=handed.subnets,
            key=handed.key,
            log_retention=retention(config.log_retention_days),
            removal_policy=removal,
            reaches=reaches,
            reserve_concurrency=config.reserve_concurrency,
        )
        self.sync = StreamSync(
            self,
            "StreamSync",
            environment=config.name,
            settings=config.sync,
            tables=tables,
            geometry_bucket=handed.geometry_bucket,
            role=handed.sync_role,
            domain_arn=domain_arn(config.search.domain_name),
            domain_endpoint=handed.search_endpoint,
            bulk_max_bytes=config.search.bulk_max_bytes,
            placement=placement,
        )
        # The smoke run's probe of each read role: mapped to it alone, so it sees what the reader sees.
        probes = [
            Probe(role.name, role.schemas, config.search.probe_role_name(role.name))
            for role in config.search.read_roles
        ]
        self.bootstrap = IndexBootstrap(
            self,
            "IndexBootstrap",
            role=handed.bootstrap_role,
            admin_role=handed.admin_role,
            sync_role=handed.sync_role,
            domain_endpoint=handed.search_endpoint,
            schemas=schemas,
            replicas=config.search.replicas,
            fingerprint=bootstrap_fingerprint(schemas, replicas=config.search.replicas),
            read_roles=read_role_definitions(
                (role.name, role.schemas, (*role.mapped_backend_roles, config.role_arn(probe.role_name)))
                for role, probe in zip(config.search.read_roles, probes, strict=True)
            ),
            placement=placement,
        )
        self.ops = OpsWorkflows(
            self,
            "Ops",
            settings=config.ops,
            name_prefix=config.search.domain_name,
            worker_role=handed.ops_worker_role,
            admin_role=handed.admin_role,
            tables=tables,
            geometry_bucket=handed.geometry_bucket,
            ops_bucket=handed.ops_bucket,
            dead_letter_queue=self.sync.dead_letter_queue,
            domain_endpoint=handed.search_endpoint,
            streams_endpoint=handed.streams_endpoint,
            bulk_max_bytes=config.search.bulk_max_bytes,
            request_timeout_seconds=config.sync.request_timeout_seconds,
            tombstone_min_age_seconds=minimum_age_seconds(config.sync.max_record_age_seconds),
            placement=placement,
        )
        self.heartbeat = Heartbeat(
            self,
            "Heartbeat",
            settings=config.heartbeat,
            tables=[
                HeartbeatTable(
                    plan.label, handed.tables[plan.construct_id], plan.indexable_schemas[0], mapping
                )
                for plan, mapping in zip(config.source_tables, self.sync.mappings, strict=True)
            ],
            key=handed.key,
            environment=config.name,
            metrics_namespace=METRICS_NAMESPACE,
        )
        self.smoke = SmokeAccess(
            self,
            "Smoke",
            worker=self.ops.worker.function,
            worker_role=handed.ops_worker_role,
            tables=tables,
            sync_function=self.sync.function,
            probes=probes,
            domain=domain_arn(config.search.domain_name),
            key=handed.key,
            state_machine=self.ops.state_machines["smoke"],
            state_machine_name=state_machine_name(config.search.domain_name, "smoke"),
            ops_bucket=handed.ops_bucket,
            stack_names=[stateful.stack_name, self.stack_name],
            runner_role_name=config.smoke_runner_role_name,
            deploy_role_arn=config.deploy_role_arn,
            startup_minutes=config.ops.smoke_startup_minutes,
        )
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            environment=config.name,
            account=config.account,
            settings=config.monitoring,
            topic=handed.alarm_topic,
            search=config.search,
            tables=[
                WatchedTable(
                    plan.label,
                    handed.tables[plan.construct_id],
                    index_names(plan.settings),
                    sync_mapping_id=mapping_id,
                )
                for plan, mapping_id in zip(config.source_tables, self.sync.mapping_ids, strict=True)
            ],
            sync_function=self.sync.function,
            sync_timeout=Duration.seconds(config.sync.timeout_seconds),
            sync_metrics_namespace=METRICS_NAMESPACE,
            dead_letter_queues={
                "StreamSync": self.sync.dead_letter_queue,
                "Bootstrap": self.bootstrap.dead_letter_queue,
                "PurgeSchedule": self.ops.schedule_dead_letter_queue,
            },
            ops_workflows=self.ops.state_machines,
            heartbeat=WatchedHeartbeat(
                config.heartbeat,
                [(plan.label, handed.tables[plan.construct_id]) for plan in config.source_tables],
                startup_seconds=60 * config.ops.smoke_startup_minutes,
            ),
        )
        CfnOutput(self, "DeadLetterQueueUrl", value=self.sync.dead_letter_queue.queue_url)
        # What docs/runbook.md asks for by name.
        CfnOutput(self, "SyncFunctionName", value=self.sync.function.function_name)
        CfnOutput(self, "IndexBootstrapFunctionName", value=self.bootstrap.handler.function.function_name)
        CfnOutput(self, "BootstrapDeadLetterQueueUrl", value=self.bootstrap.dead_letter_queue.queue_url)
        CfnOutput(self, "DashboardName", value=self.monitoring.dashboard.dashboard.dashboard_name)
        CfnOutput(
            self,
            "SmokeRunnerRoleArn",
            value=self.smoke.runner_role.role_arn,
            description="The deploy workflow runs python -m ops smoke --assume-role <this> after cdk deploy",
        )
        for operation, machine in self.ops.state_machines.items():
            CfnOutput(
                self,
                f"{operation.title()}StateMachineArn",
                value=machine.state_machine_arn,
                description=f"python -m ops {operation} --env <env> starts this workflow",
            )
        # Documents must not flow before the templates that map them exist.
        self.sync.function.node.add_dependency(self.bootstrap.resource)
