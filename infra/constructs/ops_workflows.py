"""The ops workflows: reindex, reconcile, redrive and tombstone purge as Step Functions state machines whose steps
run in one Lambda worker inside the VPC (``ops.worker``), and the purge's schedule.

Every state machine has the same shape (``lambdas/ops/workflow.py``): **Prepare** (decides and records the plan)
→ for reindex and reconcile, when the plan's source is ``export``: **ExportTable** (``ExportTableToPointInTime``
through the Step Functions SDK integration, the run id as its idempotency token) → **WaitForExport** /
**DescribeExport** until it completes → **ExportReady** (records the manifest) → **Files** (a distributed map over
the export's ``manifest-files.json``, one child execution per data file) → **Parts** (an inline map over the plan's
parts: scan segments, point-in-time slices, consumers, indices) → **Finish** (adds the parts up, does the last
step, writes the summary) → succeed, or **RunFailed** when the summary says failed. Each part is a loop: **Part**
works until its time is nearly up and answers ``done``; a step that fails (including after its retries) goes to
**FinishAfterFailure**, which still writes the summary with what failed.

Maps run ``ops.max_concurrency`` parts at once, and with ``reserve_concurrency`` the worker's reserved
concurrency is the same number: however many runs are going, the domain sees at most that many workers. A
throttled part (``TransientFailure``: OpenSearch or DynamoDB still throttling after the worker's own retries) and a
throttled invocation (``Lambda.TooManyRequestsException``) are retried with backoff from the part's last saved
page: nothing is dropped.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Aws, Duration, RemovalPolicy, Stack, Token
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from infra.config import OpsSettings
from infra.constructs.vpc_function import (
    UNRESERVED_CONCURRENCY_FINDINGS,
    UNRESERVED_CONCURRENCY_REASON,
    Reach,
    VpcFunction,
)
from infra.iam import attach_policy
from infra.nag import acknowledge, finding_resource

OPERATIONS = ("reindex", "reconcile", "redrive", "purge")
TABLE_OPERATIONS = frozenset({"reindex", "reconcile"})  # read the table: scan or export
WORKER_TIMEOUT = Duration.minutes(15)
DEADLINE_MARGIN_SECONDS = 240  # a part stops starting pages with this much of its 15 minutes left
RUN_TIMEOUT = Duration.days(
    7
)  # well inside the tombstone purge's bound (an export run refuses older snapshots)
EXPORT_POLL = Duration.minutes(1)
PARTS_RESULT = {"parts.$": "States.ArrayLength($)"}  # what a map keeps of its iterations: how many ran
SERVICE_ERRORS = (
    "Lambda.ClientExecutionTimeoutException",
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
)
THROTTLED_INVOCATION = "Lambda.TooManyRequestsException"
TRANSIENT_FAILURE = "TransientFailure"  # ops.index.TransientFailure: the error name Lambda reports
# What Step Functions needs to deliver its logs to CloudWatch Logs (vended log delivery accepts only "*").
LOG_DELIVERY_ACTIONS = (
    "logs:CreateLogDelivery",
    "logs:GetLogDelivery",
    "logs:UpdateLogDelivery",
    "logs:DeleteLogDelivery",
    "logs:ListLogDeliveries",
    "logs:PutResourcePolicy",
    "logs:DescribeResourcePolicies",
    "logs:DescribeLogGroups",
)
XRAY_ACTIONS = (
    "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
    "xray:GetSamplingRules",
    "xray:GetSamplingTargets",
)


def state_machine_name(prefix: str, operation: str) -> str:
    return f"{prefix}-{operation}"


class OpsWorkflows(Construct):
    """The worker, one state machine per operation (``state_machines``), their role and logs, the purge schedule."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: OpsSettings,
        name_prefix: str,
        worker_role: iam.IRole,
        admin_role: iam.IRole,
        table: dynamodb.ITable,
        geometry_bucket: s3.IBucket,
        ops_bucket: s3.IBucket,
        dead_letter_queue: sqs.IQueue,
        key: kms.IKey,
        domain_endpoint: str,
        streams_endpoint: str | None,
        bulk_max_bytes: int,
        request_timeout_seconds: int,
        tombstone_min_age_seconds: int,
        reserve_concurrency: bool,
        reaches: Sequence[Reach],
        vpc: ec2.IVpc,
        subnets: ec2.SubnetSelection,
        log_retention: logs.RetentionDays,
        removal_policy: RemovalPolicy,
    ) -> None:
        super().__init__(scope, construct_id)
        stream_arn = table.table_stream_arn
        assert stream_arn is not None, "the table must have a stream"
        runs = ops_bucket.arn_for_objects("runs/*")
        exports = ops_bucket.arn_for_objects("exports/*")
        geometries = geometry_bucket.arn_for_objects("geometries/*")
        self.worker = VpcFunction(
            self,
            "Worker",
            description="Ops workflows worker (reindex, reconcile, redrive, tombstone purge)",
            handler="ops.worker.handler",
            role=worker_role,
            vpc=vpc,
            subnets=subnets,
            key=key,
            log_retention=log_retention,
            removal_policy=removal_policy,
            memory_mb=settings.worker_memory_mb,
            timeout=WORKER_TIMEOUT,
            reserved_concurrency=settings.max_concurrency if reserve_concurrency else None,
            reaches=reaches,
            environment={
                "TABLE_NAME": table.table_name,
                "OPENSEARCH_ENDPOINT": f"https://{domain_endpoint}",
                "ADMIN_ROLE_ARN": admin_role.role_arn,
                "OPS_BUCKET": ops_bucket.bucket_name,
                "GEOMETRY_BUCKET": geometry_bucket.bucket_name,
                "DLQ_URL": dead_letter_queue.queue_url,
                **({"DYNAMODB_STREAMS_ENDPOINT": f"https://{streams_endpoint}"} if streams_endpoint else {}),
                "BULK_MAX_BYTES": str(bulk_max_bytes),
                "REQUEST_TIMEOUT_SECONDS": str(request_timeout_seconds),
                "SCAN_SEGMENTS": str(settings.scan_segments),
                "EXPORT_ABOVE_BYTES": str(settings.export_above_bytes),
                "READ_UNITS_PER_SEGMENT": f"{settings.read_units_per_segment:g}",
                "TOMBSTONE_MIN_AGE_SECONDS": str(tombstone_min_age_seconds),
                "DEADLINE_MARGIN_SECONDS": str(DEADLINE_MARGIN_SECONDS),
            },
            statements=[
                iam.PolicyStatement(
                    actions=[
                        "dynamodb:Scan",
                        "dynamodb:GetItem",
                        "dynamodb:BatchGetItem",
                        "dynamodb:DescribeTable",
                    ],
                    resources=[table.table_arn],
                ),
                iam.PolicyStatement(
                    actions=["dynamodb:GetShardIterator", "dynamodb:GetRecords"], resources=[stream_arn]
                ),
                iam.PolicyStatement(
                    actions=[
                        "sqs:ReceiveMessage",
                        "sqs:DeleteMessage",
                        "sqs:ChangeMessageVisibility",
                        "sqs:GetQueueAttributes",
                    ],
                    resources=[dead_letter_queue.queue_arn],
                ),
                iam.PolicyStatement(actions=["s3:GetObject", "s3:PutObject"], resources=[runs]),
                iam.PolicyStatement(actions=["s3:GetObject"], resources=[exports, geometries]),
                iam.PolicyStatement(
                    actions=["s3:ListBucket"],
                    resources=[ops_bucket.bucket_arn],
                    conditions={"StringLike": {"s3:prefix": ["runs/*"]}},
                ),
                iam.PolicyStatement(actions=["kms:Decrypt", "kms:GenerateDataKey"], resources=[key.key_arn]),
            ],
        )
        acknowledge(
            self.worker.function,
            "Step Functions invokes the worker synchronously and handles each failure (retries with backoff, then "
            "the workflow's failure path writes the run's summary); an asynchronous-invocation DLQ would never "
            "receive anything.",
            "Serverless-LambdaDLQ",
            "NIST.800.53.R5-LambdaDLQ",
            "HIPAA.Security-LambdaDLQ",
        )
        acknowledge(
            self.worker.policy,
            "A run keeps its records under runs/<operation>/<run id>/ and reads its export under exports/<operation>/"
            "<run id>/; run ids exist only at run time, so each grant is to that prefix of the ops bucket only.",
            *(f"AwsSolutions-IAM5[Resource::{finding_resource(self, arn)}]" for arn in (runs, exports)),
        )
        acknowledge(
            self.worker.policy,
            "Geometry objects are content-addressed under 'geometries/' and their names are unknown until items are "
            "written, so a backfill reading them needs that prefix's wildcard (and nothing else in the bucket).",
            f"AwsSolutions-IAM5[Resource::{finding_resource(self, geometries)}]",
        )

        self.role = iam.Role(
            self, "StateMachineRole", assumed_by=iam.ServicePrincipal("states.amazonaws.com")
        )
        self.log_group = logs.LogGroup(
            self, "Logs", encryption_key=key, retention=log_retention, removal_policy=removal_policy
        )
        prefix = name_prefix
        self.state_machines: dict[str, sfn.StateMachine] = {}
        for operation in OPERATIONS:
            body = _Definition(
                self, operation.title(), operation, self.worker, ops_bucket, table, key, settings
            )
            definition = ObjectDefinition(body.start, f"ops {operation}: see docs/operations.md")
            machine = sfn.StateMachine(
                self,
                f"{operation.title()}StateMachine",
                state_machine_name=state_machine_name(prefix, operation),
                definition_body=definition,
                role=self.role.without_policy_updates(),
                logs=sfn.LogOptions(
                    destination=self.log_group, level=sfn.LogLevel.ALL, include_execution_data=False
                ),
                tracing_enabled=True,
                timeout=RUN_TIMEOUT,
            )
            resource = machine.node.default_child
            assert isinstance(resource, sfn.CfnStateMachine)
            resource.definition_substitutions = definition.substitutions
            self.state_machines[operation] = machine
        machine_arns = [_state_machine_arn(prefix, operation) for operation in OPERATIONS]
        executions = [_execution_arn(prefix, operation) for operation in OPERATIONS]
        self.policy = attach_policy(
            self,
            "StateMachinePolicy",
            self.role,
            [
                iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[self.worker.arn]),
                iam.PolicyStatement(
                    actions=["dynamodb:ExportTableToPointInTime"], resources=[table.table_arn]
                ),
                iam.PolicyStatement(
                    actions=["dynamodb:DescribeExport"], resources=[f"{table.table_arn}/export/*"]
                ),
                # DynamoDB writes the export with the caller's permissions; the distributed map reads its manifest.
                iam.PolicyStatement(
                    actions=["s3:AbortMultipartUpload", "s3:PutObject", "s3:PutObjectAcl", "s3:GetObject"],
                    resources=[exports],
                ),
                iam.PolicyStatement(actions=["kms:Decrypt", "kms:GenerateDataKey"], resources=[key.key_arn]),
                # The distributed map runs each export file as a child execution of the same state machine.
                iam.PolicyStatement(actions=["states:StartExecution"], resources=machine_arns),
                iam.PolicyStatement(
                    actions=["states:DescribeExecution", "states:StopExecution"], resources=executions
                ),
                iam.PolicyStatement(actions=list(LOG_DELIVERY_ACTIONS), resources=["*"]),
                iam.PolicyStatement(actions=list(XRAY_ACTIONS), resources=["*"]),
            ],
        )
        for machine in self.state_machines.values():
            machine.node.add_dependency(self.policy)  # its first execution has its permissions
        acknowledge(
            self.policy,
            "CloudWatch Logs vended log delivery (the state machines' logs) and X-Ray accept only '*'.",
            "AwsSolutions-IAM5[Resource::*]",
        )
        acknowledge(
            self.policy,
            "DynamoDB writes a run's export under exports/<operation>/<run id>/ (run ids exist only at run time) and "
            "names the export itself (table/<name>/export/<id>) when it starts it: the grants are to those paths.",
            f"AwsSolutions-IAM5[Resource::{finding_resource(self, exports)}]",
            f"AwsSolutions-IAM5[Resource::{finding_resource(self, f'{table.table_arn}/export/*')}]",
        )
        acknowledge(
            self.policy,
            "Step Functions names the child executions a distributed map starts (one per export file) at run time: "
            "the grant is to these state machines' executions only.",
            *(f"AwsSolutions-IAM5[Resource::{finding_resource(self, arn)}]" for arn in executions),
        )
        self._schedule_purge(settings.purge_schedule, prefix)
        if not reserve_concurrency:
            acknowledge(self.worker.function, UNRESERVED_CONCURRENCY_REASON, *UNRESERVED_CONCURRENCY_FINDINGS)

    def _schedule_purge(self, expression: str, prefix: str) -> None:
        """EventBridge Scheduler starts the purge workflow (input ``{}``: the execution's name is the run id)."""
        role = iam.Role(
            self,
            "PurgeScheduleRole",
            assumed_by=iam.ServicePrincipal(
                "scheduler.amazonaws.com", conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}}
            ),
        )
        policy = attach_policy(
            self,
            "PurgeSchedulePolicy",
            role,
            [
                iam.PolicyStatement(
                    actions=["states:StartExecution"], resources=[_state_machine_arn(prefix, "purge")]
                )
            ],
        )
        self.purge_schedule = scheduler.CfnSchedule(
            self,
            "PurgeSchedule",
            description="Tombstone purge (ops purge): deletes tombstones no late change can reach any more",
            schedule_expression=expression,
            schedule_expression_timezone="UTC",
            flexible_time_window=scheduler.CfnSchedule.FlexibleTimeWindowProperty(mode="OFF"),
            state="ENABLED",
            target=scheduler.CfnSchedule.TargetProperty(
                arn=self.state_machines["purge"].state_machine_arn,
                role_arn=role.role_arn,
                input="{}",
                retry_policy=scheduler.CfnSchedule.RetryPolicyProperty(
                    maximum_retry_attempts=5, maximum_event_age_in_seconds=3600
                ),
            ),
        )
        self.purge_schedule.node.add_dependency(policy)


class ObjectDefinition(sfn.DefinitionBody):
    """A state machine definition rendered as the JSON object `Definition` instead of the string `DefinitionString`
    CDK writes, so that cfn-lint validates it against the States Language schema (it cannot see into a joined
    string). Values CloudFormation assigns (function and table ARNs, the bucket's name) become `${ValueN}`
    placeholders of `DefinitionSubstitutions` (`substitutions`, set on the resource by the caller). Nothing is
    granted through the graph: the role's permissions are the managed policy's (CDK's own chain body would add an
    inline policy for a distributed map)."""

    def __init__(self, start: sfn.IChainable, comment: str) -> None:
        super().__init__()
        self._start = start
        self._comment = comment
        self.substitutions: dict[str, str] = {}

    def bind(
        self,
        scope: Construct,
        sfn_principal: iam.IPrincipal,
        sfn_props: sfn.StateMachineProps,
        graph: sfn.StateGraph | None = None,
    ) -> sfn.DefinitionConfig:
        states = sfn.StateGraph(self._start.start_state, self._comment)
        definition = {**states.to_graph_json(), "Comment": self._comment}
        if sfn_props.timeout is not None:
            definition["TimeoutSeconds"] = sfn_props.timeout.to_seconds()
        return sfn.DefinitionConfig(definition=self._placeholders(definition, Stack.of(scope)))

    def _placeholders(self, value: object, stack: Stack) -> object:
        if isinstance(value, dict):
            return {key: self._placeholders(member, stack) for key, member in value.items()}
        if isinstance(value, list):
            return [self._placeholders(member, stack) for member in value]
        if isinstance(value, str) and Token.is_unresolved(value):
            resolved = stack.resolve(value)
            if not isinstance(resolved, dict):
                return resolved  # a token CDK renders as a plain value
            names = {token: name for name, token in self.substitutions.items()}
            name = names.get(value) or f"Value{len(self.substitutions)}"
            self.substitutions[name] = value
            return f"${{{name}}}"
        return value


def _state_machine_arn(prefix: str, operation: str) -> str:
    name = state_machine_name(prefix, operation)
    return f"arn:{Aws.PARTITION}:states:{Aws.REGION}:{Aws.ACCOUNT_ID}:stateMachine:{name}"


def _execution_arn(prefix: str, operation: str) -> str:
    name = state_machine_name(prefix, operation)
    return f"arn:{Aws.PARTITION}:states:{Aws.REGION}:{Aws.ACCOUNT_ID}:execution:{name}/*"


class _Definition(Construct):
    """One operation's states (the shape in the module doc); ``start`` is the first."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        operation: str,
        worker: VpcFunction,
        ops_bucket: s3.IBucket,
        table: dynamodb.ITable,
        key: kms.IKey,
        settings: OpsSettings,
    ) -> None:
        super().__init__(scope, construct_id)
        self._operation = operation
        self._worker = worker
        run_failed = sfn.Fail(self, "RunFailed", error="RunFailed", cause_path="$.finished.reason")
        status = (
            sfn.Choice(self, "RunStatus")
            .when(sfn.Condition.string_equals("$.finished.status", "failed"), run_failed)
            .otherwise(sfn.Succeed(self, "RunDone"))
        )
        finish = self._invoke("Finish", {"step": "finish", "runId.$": "$.plan.runId"}, "$.finished").next(
            status
        )
        self._failed = self._invoke(
            "FinishAfterFailure",
            {
                "step": "finish",
                "input.$": "$$.Execution.Input",
                "executionName.$": "$$.Execution.Name",
                "error.$": "$.error",
            },
            "$.finished",
        ).next(status)
        prepare = self._caught(
            self._invoke(
                "Prepare",
                {"step": "prepare", "input.$": "$", "executionName.$": "$$.Execution.Name"},
                "$.plan",
            )
        )
        parts = self._caught(
            sfn.Map(
                self,
                "Parts",
                items_path="$.plan.parts",
                item_selector={"runId.$": "$.plan.runId", "part.$": "$$.Map.Item.Value"},
                max_concurrency=settings.max_concurrency,
                result_selector=PARTS_RESULT,
                result_path="$.partsRun",
            ).item_processor(self._part_loop("Inline"))
        )
        parts.next(finish)
        self.start: sfn.IChainable = prepare
        if operation not in TABLE_OPERATIONS:
            prepare.next(parts)
            return
        files = self._caught(
            sfn.DistributedMap(
                self,
                "Files",
                item_reader=sfn.S3JsonLItemReader(
                    bucket=ops_bucket, key=sfn.JsonPath.string_at("$.exportReady.manifestFilesKey")
                ),
                item_selector={
                    "runId.$": "$.plan.runId",
                    "part": {"kind": "file", "key.$": "$$.Map.Item.Value.dataFileS3Key"},
                },
                max_concurrency=settings.max_concurrency,
                map_execution_type=sfn.StateMachineType.STANDARD,
                result_selector=PARTS_RESULT,
                result_path="$.filesRun",
            ).item_processor(self._part_loop("Export"))
        )
        export_ready = self._caught(
            self._invoke(
                "ExportReady",
                {"step": "export-ready", "runId.$": "$.plan.runId", "export.$": "$.export.description"},
                "$.exportReady",
            )
        )
        export_failed = sfn.Pass(
            self,
            "ExportFailed",
            parameters={"Error": "ExportFailed", "Cause.$": "States.JsonToString($.export.description)"},
            result_path="$.error",
        ).next(self._failed)
        wait = sfn.Wait(self, "WaitForExport", time=sfn.WaitTime.duration(EXPORT_POLL))
        describe = self._caught(
            tasks.CallAwsService(
                self,
                "DescribeExport",
                service="dynamodb",
                action="describeExport",
                parameters={"ExportArn.$": "$.export.arn"},
                iam_resources=[f"{table.table_arn}/export/*"],
                result_selector={
                    "arn.$": "$.ExportDescription.ExportArn",
                    "status.$": "$.ExportDescription.ExportStatus",
                    "description.$": "$.ExportDescription",
                },
                result_path="$.export",
            )
        )
        wait.next(describe)
        describe.next(
            sfn.Choice(self, "ExportStatus")
            .when(sfn.Condition.string_equals("$.export.status", "COMPLETED"), export_ready)
            .when(sfn.Condition.string_equals("$.export.status", "FAILED"), export_failed)
            .otherwise(wait)
        )
        export_ready.next(files)
        files.next(parts)
        start_export = self._caught(
            tasks.CallAwsService(
                self,
                "ExportTable",
                service="dynamodb",
                action="exportTableToPointInTime",
                parameters={
                    "TableArn": table.table_arn,
                    "S3Bucket": ops_bucket.bucket_name,
                    "S3Prefix.$": f"States.Format('exports/{operation}/{{}}', $.plan.runId)",
                    "S3SseAlgorithm": "KMS",
                    "S3SseKmsKeyId": key.key_arn,
                    "ExportFormat": "DYNAMODB_JSON",
                    "ExportType": "FULL_EXPORT",
                    # A retried or resumed run within eight hours gets the same export, not a second one.
                    "ClientToken.$": "$.plan.runId",
                },
                iam_resources=[table.table_arn],
                result_selector={"arn.$": "$.ExportDescription.ExportArn"},
                result_path="$.export",
            )
        ).next(wait)
        resume_export = sfn.Pass(
            self, "ExportStarted", parameters={"arn.$": "$.plan.exportArn"}, result_path="$.export"
        ).next(wait)
        prepare.next(
            sfn.Choice(self, "Source")
            .when(
                sfn.Condition.and_(
                    sfn.Condition.string_equals("$.plan.source", "export"),
                    sfn.Condition.is_not_null("$.plan.exportArn"),
                ),
                resume_export,
            )
            .when(sfn.Condition.string_equals("$.plan.source", "export"), start_export)
            .otherwise(parts)
        )

    def _invoke(self, construct_id: str, payload: dict[str, object], result_path: str) -> tasks.LambdaInvoke:
        task = tasks.LambdaInvoke(
            self,
            construct_id,
            lambda_function=self._worker.function,
            payload=sfn.TaskInput.from_object({**payload, "operation": self._operation}),
            payload_response_only=True,
            retry_on_service_exceptions=False,
            result_path=result_path,
        )
        task.add_retry(
            errors=list(SERVICE_ERRORS),
            interval=Duration.seconds(2),
            max_attempts=6,
            backoff_rate=2,
        )
        task.add_retry(
            errors=[THROTTLED_INVOCATION, TRANSIENT_FAILURE],
            interval=Duration.seconds(30),
            max_attempts=8,
            backoff_rate=2,
            max_delay=Duration.minutes(5),
            jitter_strategy=sfn.JitterType.FULL,
        )
        return task

    def _part_loop(self, label: str) -> sfn.IChainable:
        """Invoke the worker on one part until it answers done."""
        part = self._invoke(
            f"{label}Part", {"step": "part", "runId.$": "$.runId", "part.$": "$.part"}, "$.progress"
        )
        part.next(
            sfn.Choice(self, f"{label}PartDone")
            .when(
                sfn.Condition.boolean_equals("$.progress.done", True),
                # An iteration ends with {}: a map's results stay small however many parts it runs.
                sfn.Pass(self, f"{label}PartFinished", result=sfn.Result.from_object({})),
            )
            .otherwise(part)
        )
        return part

    def _caught(self, state: sfn.TaskStateBase | sfn.MapBase) -> sfn.TaskStateBase | sfn.MapBase:
        state.add_catch(self._failed, errors=["States.ALL"], result_path="$.error")
        return state
