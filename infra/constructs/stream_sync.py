"""DynamoDB streams → OpenSearch: the sync function, its dead-letter queue and one event source mapping per table."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import Duration, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.config import SyncSettings
from infra.constructs.dead_letter_queue import dead_letter_queue
from infra.constructs.vpc_function import Placement, VpcFunction
from infra.nag import acknowledge, finding_resource

# The namespace of the handler's own metrics (EMF, each with the dimensions Environment and Table; see
# stream_sync.telemetry and docs/sync.md "Logs and metrics").
METRICS_NAMESPACE = "RefData/StreamSync"
# The mapping never gives up a systemic fault by count: a partial batch response is a retry attempt, and a hold
# lasts until the record-age bound, near which the handler dead-letters each record with its payload (docs/sync.md).
UNBOUNDED_RETRIES = -1


def key_prefix_filter(schemas: list[str]) -> dict[str, object]:
    """An event filter that admits only records whose pk starts with ``<schema>::`` for an indexable schema.

    Counter items (``counter::...``) and every other non-indexed item type never invoke the function.
    """
    return {"dynamodb": {"Keys": {"pk": {"S": [{"prefix": f"{schema}::"} for schema in schemas]}}}}


@dataclass(frozen=True)
class SyncedTable:
    """A source table as the sync sees it: the table (its stream) and the schemas config assigns it."""

    table: dynamodb.ITable
    schemas: Sequence[str]  # every schema it holds (infra.config.TablePlan.schemas)
    indexable_schemas: Sequence[str]  # what its event filter admits


def schema_tables(scope: Construct, tables: Sequence[SyncedTable]) -> str:
    """``SCHEMA_TABLES``: JSON ``{schema: name of the table that holds it}`` (docs/sync.md). Table names are
    assigned at deploy time, so the JSON is a CloudFormation expression."""
    return Stack.of(scope).to_json_string(
        {schema: synced.table.table_name for synced in tables for schema in synced.schemas}
    )


def stream_arns_of(tables: Sequence[SyncedTable]) -> list[str]:
    arns = [synced.table.table_stream_arn for synced in tables]
    assert all(arns), "every table must have a stream"
    return [arn for arn in arns if arn]


class StreamSync(Construct):
    """Keeps the search indices equal to the table (see docs/sync.md for the guarantees).

    One function reads every table's stream, through one mapping per table whose filter admits that table's
    indexable schemas only. Each mapping reports partial batch failures, bisects failing batches, bounds retries
    by record age only (never by count), and sends what it finally gives up on to the same encrypted queue the
    handler dead-letters permanent failures into, so every record ends indexed, deleted, retried or in the queue.
    The function knows
    which table holds which schema (``SCHEMA_TABLES``) and dead-letters a record of a schema another table holds
    (``wrong-table``), so two tables never write one document.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        environment: str,
        settings: SyncSettings,
        placement: Placement,
        tables: Sequence[SyncedTable],
        geometry_bucket: s3.IBucket,
        role: iam.IRole,
        domain_arn: str,
        domain_endpoint: str,
        bulk_max_bytes: int,
    ) -> None:
        super().__init__(scope, construct_id)
        key = placement.key
        self.dead_letter_queue = dead_letter_queue(
            self,
            "DeadLetterQueue",
            key=key,
            removal_policy=placement.removal_policy,
            owner="the stream sync (the redrive tool re-reads DynamoDB for each message)",
        )
        geometry_objects = geometry_bucket.arn_for_objects("geometries/*")
        stream_arns = stream_arns_of(tables)
        self.handler = VpcFunction(
            self,
            "Function",
            description="DynamoDB stream to OpenSearch sync",
            handler="stream_sync.handler.handler",
            role=role,
            placement=placement,
            memory_mb=settings.memory_mb,
            timeout=Duration.seconds(settings.timeout_seconds),
            reserved_concurrency=settings.reserved_concurrency,
            dead_letter_queue=self.dead_letter_queue,
            wildcard_reason="dynamodb:ListStreams accepts only '*' as well.",
            environment={
                "OPENSEARCH_ENDPOINT": f"https://{domain_endpoint}",
                "DLQ_URL": self.dead_letter_queue.queue_url,
                "GEOMETRY_BUCKET": geometry_bucket.bucket_name,
                "BULK_MAX_BYTES": str(bulk_max_bytes),
                "REQUEST_TIMEOUT_SECONDS": str(settings.request_timeout_seconds),
                "MAX_RECORD_AGE_SECONDS": str(settings.max_record_age_seconds),
                "METRICS_NAMESPACE": METRICS_NAMESPACE,
                "ENVIRONMENT_NAME": environment,
                "SCHEMA_TABLES": schema_tables(self, tables),
            },
            statements=[
                iam.PolicyStatement(
                    actions=["dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"],
                    resources=stream_arns,
                ),
                iam.PolicyStatement(actions=["dynamodb:ListStreams"], resources=["*"]),
                iam.PolicyStatement(actions=["s3:GetObject"], resources=[geometry_objects]),
                iam.PolicyStatement(
                    actions=["sqs:SendMessage"], resources=[self.dead_letter_queue.queue_arn]
                ),
                iam.PolicyStatement(actions=["kms:Decrypt", "kms:GenerateDataKey"], resources=[key.key_arn]),
                iam.PolicyStatement(actions=["es:ESHttpPost"], resources=[f"{domain_arn}/_bulk"]),
            ],
        )
        self.function = self.handler.function
        acknowledge(
            self.handler.policy,
            "Geometry objects are content-addressed under 'geometries/' and their names are unknown until items "
            "are written, so reading them needs that prefix's wildcard (and nothing else in the bucket).",
            f"AwsSolutions-IAM5[Resource::{finding_resource(self, geometry_objects)}]",
        )
        # The id of each table's mapping (its metrics' EventSourceMappingUUID), in the order of `tables`.
        self.mapping_ids: list[str] = []
        # Each table's mapping, in the same order (what must exist before the heartbeat counts its heartbeats due).
        self.mappings: list[lambda_.CfnEventSourceMapping] = []
        for synced in tables:
            source = sources.DynamoEventSource(
                synced.table,
                starting_position=lambda_.StartingPosition.TRIM_HORIZON,
                batch_size=settings.batch_size,
                max_batching_window=Duration.seconds(settings.batching_window_seconds),
                parallelization_factor=settings.parallelization_factor,
                max_record_age=Duration.seconds(settings.max_record_age_seconds),
                bisect_batch_on_error=True,
                report_batch_item_failures=True,
                on_failure=sources.SqsDlq(self.dead_letter_queue),
                filters=[lambda_.FilterCriteria.filter(key_prefix_filter(list(synced.indexable_schemas)))],
                # Its event counts say what it gave up on (alarmed: its on-failure messages hold no payload).
                metrics_config=lambda_.MetricsConfig(metrics=[lambda_.MetricType.EVENT_COUNT]),
            )
            before = {child.node.id for child in self.function.node.children}
            self.function.add_event_source(source)
            (mapping,) = (c for c in self.function.node.children if c.node.id not in before)
            resource = mapping.node.default_child
            assert isinstance(resource, lambda_.CfnEventSourceMapping)
            resource.maximum_retry_attempts = UNBOUNDED_RETRIES
            self.mapping_ids.append(source.event_source_mapping_id)
            self.mappings.append(resource)
