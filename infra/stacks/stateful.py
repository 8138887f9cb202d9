"""Composition of everything that holds data: key, tables, geometry bucket, network and search domain."""

from __future__ import annotations

import math

from aws_cdk import CfnOutput, RemovalPolicy, Stack
from constructs import Construct
from ops.purge import minimum_age_seconds

from infra.config import EnvironmentConfig
from infra.constructs.alarm_topic import AlarmTopic
from infra.constructs.data_key import DataKey
from infra.constructs.geometry_bucket import GeometryBucket
from infra.constructs.network import Network
from infra.constructs.ops_bucket import OpsBucket
from infra.constructs.search_access import SearchAccess
from infra.constructs.search_domain import SearchDomain
from infra.constructs.single_table import SingleTable
from infra.constructs.team_access import TeamAccess
from infra.handoff import Handoff
from infra.retention import retention


class StatefulStack(Stack):
    """Resources whose logical ids never change (pinned by tests) and which test and prod retain."""

    def __init__(
        self, scope: Construct, construct_id: str, *, config: EnvironmentConfig, **kwargs: object
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)  # type: ignore[arg-type]
        # RetainExceptOnCreate: kept on every update and delete, except when the create that made it rolls back
        # (then it is empty): a failed first create leaves no named role, policy or domain behind to collide with.
        removal = RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE if config.retains_data else RemovalPolicy.DESTROY
        log_retention = retention(config.log_retention_days)
        self.key = DataKey(self, "DataKey", removal_policy=removal).key
        # One table per source table, the main one ("Table") first: construct ids fix their logical ids.
        self.tables = {
            plan.construct_id: SingleTable(
                self, plan.construct_id, settings=plan.settings, key=self.key, removal_policy=removal
            ).table
            for plan in config.source_tables
        }
        geometry = GeometryBucket(self, "GeometryBucket", key=self.key, removal_policy=removal)
        self.geometry_bucket = geometry.bucket
        self.ops_bucket = OpsBucket(
            self,
            "OpsBucket",
            key=self.key,
            access_logs=geometry.access_logs,
            removal_policy=removal,
            export_days=math.ceil(minimum_age_seconds(config.sync.max_record_age_seconds) / 86400),
        ).bucket
        self.network = Network(
            self,
            "Network",
            settings=config.network,
            key=self.key,
            log_retention=retention(config.network.flow_log_retention_days),
            removal_policy=removal,
        )
        self.search_access = SearchAccess(self, "SearchAccess", config=config, removal_policy=removal)
        self.search = SearchDomain(
            self,
            "Search",
            settings=config.search,
            vpc=self.network.vpc,
            subnets=self.network.isolated_subnets,
            key=self.key,
            admin_role=self.search_access.admin_role,
            client_roles=[self.search_access.sync_role],
            log_retention=log_retention,
            removal_policy=removal,
        )
        self.alarm_topic = AlarmTopic(self, "AlarmTopic", key=self.key, removal_policy=removal).topic
        CfnOutput(
            self,
            "AlarmTopicArn",
            value=self.alarm_topic.topic_arn,
            description="Subscribe on-call here: every alarm of the environment notifies this topic",
        )
        for construct_id, table in self.tables.items():
            CfnOutput(self, f"{construct_id}Name", value=table.table_name)
        CfnOutput(
            self,
            "SchemaTables",
            value=self.to_json_string(
                {
                    schema: self.tables[plan.construct_id].table_name
                    for plan in config.source_tables
                    for schema in plan.schemas
                }
            ),
            description="Which table holds each schema, as JSON: refdata-client's Tables.parse (README, For application teams)",
        )
        CfnOutput(self, "GeometryBucketName", value=self.geometry_bucket.bucket_name)
        CfnOutput(
            self,
            "OpsBucketName",
            value=self.ops_bucket.bucket_name,
            description="Ops workflow runs: records, summaries (runs/) and DynamoDB exports (exports/)",
        )
        CfnOutput(self, "SearchEndpoint", value=f"https://{self.search.endpoint}")
        CfnOutput(self, "SearchDashboardsUrl", value=f"https://{self.search.endpoint}/_dashboards")
        CfnOutput(
            self,
            "SearchAdminRoleArn",
            value=self.search_access.admin_role.role_arn,
            description="FGAC master user: assume it to administer the domain and map further backend roles",
        )
        CfnOutput(
            self,
            "SearchSyncRoleArn",
            value=self.search_access.sync_role.role_arn,
            description="Mapped by the index bootstrap to the write-only 'refdata_stream_sync' FGAC role",
        )
        self.team_access = TeamAccess(
            self,
            "TeamAccess",
            tables=list(self.tables.values()),
            geometry_bucket=self.geometry_bucket,
            key=self.key,
            domain_arn=self.search.domain_arn,
            read_roles=config.search.read_roles,
        )
        CfnOutput(
            self,
            "WriterPolicyArn",
            value=self.team_access.writer_policy.managed_policy_arn,
            description="Attach to an application's writer role (of this account): items, counters, geometries "
            "and the data key through DynamoDB and S3 (docs/client.md)",
        )
        CfnOutput(
            self,
            "ReaderPolicyArns",
            value=self.to_json_string(dict(self.team_access.reader_policy_arns)),
            description="Each read role's policy, as JSON {read role: policy ARN}: attach it to that read role's "
            "IAM roles of this account (docs/operations.md, Read roles)",
        )
        CfnOutput(
            self,
            "DataKeyArn",
            value=self.key.key_arn,
            description="The data key every table and bucket is encrypted with (the writer's policy grants its use)",
        )
        self.handoff = Handoff(
            self,
            "Handoff",
            environment=config.name,
            key=self.key,
            alarm_topic=self.alarm_topic,
            tables=self.tables,
            geometry_bucket=self.geometry_bucket,
            vpc=self.network.vpc,
            search_endpoint=self.search.endpoint,
            search_security_group=self.search.security_group,
            endpoint_security_group=self.network.endpoint_security_group,
            admin_role_arn=self.search_access.admin_role_arn,
            sync_role_arn=self.search_access.sync_role_arn,
            bootstrap_role_arn=self.search_access.bootstrap_role_arn,
            ops_bucket=self.ops_bucket,
            ops_worker_role_arn=self.search_access.ops_worker_role_arn,
            streams_endpoint=self.network.streams_endpoint,
        )
