"""The ops workflows: reindex, reconcile, redrive, tombstone purge and the post-deploy smoke run as Step Functions
state machines whose steps run in one Lambda worker inside the VPC (``ops.worker``), and the purge's schedule
(the smoke run's own permissions: infra/constructs/smoke.py).

Every state machine has the same shape (``lambdas/ops/workflow.py``): **Prepare** (decides and records the plan)
→ for reindex and reconcile, when the plan's source is ``export``: **ExportTable** (``ExportTableToPointInTime``
through the Step Functions SDK integration, the run id as its idempotency token) → **WaitForExport** /
**DescribeExport** until it completes → **ExportReady** (records the manifest) → **Files** (a distributed map over
the export's ``manifest-files.json``, one child execution per data file) → **Parts** (a distributed map over the
plan's parts: scan segments, point-in-time slices, consumers, indices) → **Finish** (adds the parts up, does the last
step, writes the summary) → succeed, or **RunFailed** when the summary says failed. Each part is a loop: **Part**
works until its time is nearly up and answers ``done``; a step that fails (including after its retries) goes to
**FinishAfterFailure**, which still writes the summary with what failed. A smoke part may answer ``wait`` instead (a
canary waiting for its table's new event source mapping): its loop waits ``STARTUP_CHECK_SECONDS`` and invokes it
again, so the start-up budget (config ``ops.smoke_startup_minutes``) is the workflow's, never one invocation's.

Both maps are distributed: each part's loop runs in a child execution with its own history, so however long a
part works its loop never fills the run's 25,000-event history (a child's loop is bounded by the run's timeout:
a part answers "not done" only after about 11 minutes of work). The export is polled at most
``EXPORT_MAX_POLLS`` times. Each map's ``ResultWriter`` writes its children's results to the ops bucket under a
literal prefix (``runs/<operation>/_maps/files|parts/``; Step Functions adds ``<map run id>/``, which separates runs:
``manifest.json`` and the result files): held in the state they would count against Step Functions' 256 KiB payload
quota, and an export of enough files would fail the run with ``States.DataLimitExceeded``, which no catch-all
catches. The state keeps only where they are (``$.filesRun``, ``$.partsRun``); nothing reads them back: **Finish**
adds up the parts' states in the run's records.

Maps run ``ops.max_concurrency`` parts at once, and with ``reserve_concurrency`` the worker's reserved
concurrency is that for each of ``ops.concurrent_runs`` runs: a long run leaves the others (the nightly purge, the
post-deploy smoke run) their workers, and the domain sees at most that many. Each state machine has its own role: it may invoke the worker,
start and stop its own children, write their results under its operation's ``_maps/`` (and use the data key the ops
bucket encrypts with), and (reindex, reconcile) export its tables. A
throttled part (``TransientFailure``: OpenSearch or DynamoDB still throttling after the worker's own retries) and a
throttled invocation (``Lambda.TooManyRequestsException``) are retried with backoff from the part's last saved
page: nothing is dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import Aws, Duration, Fn, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from infra.config import OpsSettings
from infra.constructs.dead_letter_queue import dead_letter_queue
from infra.constructs.stream_sync import SyncedTable, schema_tables, stream_arns_of
from infra.constructs.vpc_function import Placement, VpcFunction
from infra.iam import attach_policy
from infra.nag import acknowledge, finding_resource

OPERATIONS = ("reindex", "reconcile", "redrive", "purge", "smoke")
TABLE_OPERATIONS = frozenset({"reindex", "reconcile"})  # read the table: scan or export
WORKER_TIMEOUT = Duration.minutes(15)
DEADLINE_MARGIN_SECONDS = 240  # a part stops starting pages with this much of its 15 minutes left
# well inside the tombstone purge's bound (an export run refuses older snapshots)
RUN_TIMEOUT = Duration.days(7)
EXPORT_POLL_SECONDS = 120
# How often the smoke workflow checks whether a canary waiting for its table's new event source mapping has been
# indexed (a paused part: lambdas/ops/smoke.py). Each check adds 9 events to its part's own history (the Wait's 2,
# the Task's 5, the Choice's 2): at config's longest start-up budget, 60 minutes, 120 checks and about 1,100 events,
# well inside the 25,000.
STARTUP_CHECK_SECONDS = 30
PAUSING_OPERATIONS = frozenset({"smoke"})  # whose parts may pause for the workflow to wait (PartState.paused)
EXPORT_MAX_POLLS = 720  # a day of polling: about 9,400 history events, well inside the 25,000
TOKEN_MARK = "${Token["
MAP_RESULTS = "_maps"  # runs/<operation>/_maps/: the distributed maps' results (map_results_prefix)
# What a distributed map's result writer needs of the ops bucket ("ResultWriter (Map)", IAM policies): it writes
# its children's results under the run's prefix in parts, and aborts an unfinished upload.
RESULT_WRITER_ACTIONS = (
    "s3:PutObject",
    "s3:GetObject",
    "s3:ListMultipartUploadParts",
    "s3:AbortMultipartUpload",
)
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
        tables: Sequence[SyncedTable],
        geometry_bucket: s3.IBucket,
        ops_bucket: s3.IBucket,
        dead_letter_queue: sqs.IQueue,
        domain_endpoint: str,
        streams_endpoint: str | None,
        bulk_max_bytes: int,
        request_timeout_seconds: int,
        tombstone_min_age_seconds: int,
        placement: Placement,
    ) -> None:
        super().__init__(scope, construct_id)
        key = placement.key
        stream_arns = stream_arns_of(tables)
        table_arns = [synced.table.table_arn for synced in tables]
        runs = ops_bucket.arn_for_objects("runs/*")
        self.ops_bucket = ops_bucket
        exports = ops_bucket.arn_for_objects("exports/*")
        geometries = geometry_bucket.arn_for_objects("geometries/*")
        self.worker = VpcFunction(
            self,
            "Worker",
            description="Ops workflows worker (reindex, reconcile, redrive, tombstone purge)",
            handler="ops.worker.handler",
            role=worker_role,
            placement=placement,
            memory_mb=settings.worker_memory_mb,
            timeout=WORKER_TIMEOUT,
            reserved_concurrency=settings.worker_concurrency,
            environment={
                "SCHEMA_TABLES": schema_tables(self, tables),
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
                    resources=table_arns,
                ),
                iam.PolicyStatement(
                    actions=["dynamodb:GetShardIterator", "dynamodb:GetRecords"], resources=stream_arns
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
                # Unconditioned: a GetObject of a key not written yet (a new run's record) answers 404 only to a
                # caller that may list the bucket, and a GetObject carries no s3:prefix (a grant conditioned on it
                # would not apply, and S3 would answer 403).
                iam.PolicyStatement(actions=["s3:ListBucket"], resources=[ops_bucket.bucket_arn]),
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

        self.log_group = logs.LogGroup(
            self,
            "Logs",
            # Under /aws/vendedlogs/ the account's CloudWatch Logs resource policy (5,120 characters) covers the
            # group by that prefix instead of growing by its ARN. The stack's id makes the name new for a new stack:
            # a retained group never blocks the stateless stack's re-creation.
            # (No domain name in it: renaming the domain must not replace the log group.)
            log_group_name=Fn.join(
                "", ["/aws/vendedlogs/states/ops-", Fn.select(2, Fn.split("/", Aws.STACK_ID))]
            ),
            encryption_key=key,
            retention=placement.log_retention,
            removal_policy=placement.removal_policy,
        )
        prefix = name_prefix
        self.state_machines: dict[str, sfn.StateMachine] = {}
        self.roles: dict[str, iam.Role] = {}
        targets = Targets(
            worker_arn=self.worker.arn,
            ops_bucket=ops_bucket.bucket_name,
            key_arn=key.key_arn,
            partition=Aws.PARTITION,
            max_concurrency=settings.max_concurrency,
        )
        export_arns = [f"{arn}/export/*" for arn in table_arns]
        for operation in OPERATIONS:
            title = operation.title()
            role = iam.Role(
                self, f"{title}StateMachineRole", assumed_by=iam.ServicePrincipal("states.amazonaws.com")
            )
            policy = attach_policy(
                self,
                f"{title}StateMachinePolicy",
                role,
                self._machine_statements(
                    operation,
                    prefix,
                    table_arns=table_arns,
                    export_arns=export_arns,
                    exports=exports,
                    key=key,
                ),
            )
            body = ObjectDefinition(
                definition(operation, targets),
                f"ops {operation}: see docs/operations.md",
            )
            machine = sfn.StateMachine(
                self,
                f"{title}StateMachine",
                state_machine_name=state_machine_name(prefix, operation),
                definition_body=body,
                role=role.without_policy_updates(),
                logs=sfn.LogOptions(
                    destination=self.log_group, level=sfn.LogLevel.ALL, include_execution_data=False
                ),
                tracing_enabled=True,
                timeout=RUN_TIMEOUT,
            )
            resource = machine.node.default_child
            assert isinstance(resource, sfn.CfnStateMachine)
            resource.definition_substitutions = body.substitutions
            machine.node.add_dependency(policy)  # its first execution has its permissions
            self.state_machines[operation] = machine
            self.roles[operation] = role
            acknowledge(
                policy,
                "CloudWatch Logs vended log delivery (the state machines' logs) and X-Ray accept only '*'.",
                "AwsSolutions-IAM5[Resource::*]",
            )
            acknowledge(
                policy,
                "Step Functions names the child executions a distributed map starts (one per part or export file) "
                "at run time: the grant is to this state machine's own executions only.",
                f"AwsSolutions-IAM5[Resource::{finding_resource(self, _execution_arn(prefix, operation))}]",
            )
            acknowledge(
                policy,
                "A distributed map writes its children's results under runs/<operation>/_maps/, in a folder Step "
                "Functions names by the map run's id at run time: the grant is to this operation's maps' results "
                "only.",
                f"AwsSolutions-IAM5[Resource::{finding_resource(self, self._map_results(operation))}]",
            )
            if operation in TABLE_OPERATIONS:
                acknowledge(
                    policy,
                    "DynamoDB writes a run's export under exports/<operation>/<run id>/ (run ids exist only at run "
                    "time) and names the export itself (table/<name>/export/<id>) when it starts it: the grants are "
                    "to those paths.",
                    f"AwsSolutions-IAM5[Resource::{finding_resource(self, exports)}]",
                    *(f"AwsSolutions-IAM5[Resource::{finding_resource(self, arn)}]" for arn in export_arns),
                )
        self._schedule_purge(settings.purge_schedule, prefix, key, placement.removal_policy)

    def _machine_statements(
        self,
        operation: str,
        prefix: str,
        *,
        table_arns: Sequence[str],
        export_arns: Sequence[str],
        exports: str,
        key: Any,
    ) -> list[iam.PolicyStatement]:
        """What one operation's state machine may do: invoke the worker, run its own distributed maps' children and
        write their results (with the data key the ops bucket encrypts with), deliver its logs and traces; reindex
        and reconcile also export their tables into the ops bucket."""
        statements = [
            iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[self.worker.arn]),
            # A distributed map runs each item as a child execution of the same state machine.
            iam.PolicyStatement(
                actions=["states:StartExecution"], resources=[_state_machine_arn(prefix, operation)]
            ),
            iam.PolicyStatement(
                actions=["states:DescribeExecution", "states:StopExecution"],
                resources=[_execution_arn(prefix, operation)],
            ),
            iam.PolicyStatement(actions=list(LOG_DELIVERY_ACTIONS), resources=["*"]),
            iam.PolicyStatement(actions=list(XRAY_ACTIONS), resources=["*"]),
            iam.PolicyStatement(
                actions=list(RESULT_WRITER_ACTIONS), resources=[self._map_results(operation)]
            ),
            iam.PolicyStatement(actions=["kms:Decrypt", "kms:GenerateDataKey"], resources=[key.key_arn]),
        ]
        if operation in TABLE_OPERATIONS:
            statements += [
                iam.PolicyStatement(
                    actions=["dynamodb:ExportTableToPointInTime"], resources=list(table_arns)
                ),
                iam.PolicyStatement(actions=["dynamodb:DescribeExport"], resources=list(export_arns)),
                # DynamoDB writes the export with the caller's permissions; the distributed map reads its manifest.
                iam.PolicyStatement(
                    actions=["s3:AbortMultipartUpload", "s3:PutObject", "s3:PutObjectAcl", "s3:GetObject"],
                    resources=[exports],
                ),
            ]
        return statements

    def _map_results(self, operation: str) -> str:
        """Where this operation's distributed maps write their results (`map_results_prefix`), in every run."""
        return self.ops_bucket.arn_for_objects(f"runs/{operation}/{MAP_RESULTS}/*")

    def _schedule_purge(self, expression: str, prefix: str, key: Any, removal_policy: RemovalPolicy) -> None:
        """EventBridge Scheduler starts the purge workflow (input ``{}``: the execution's name is the run id)."""
        # An invocation the scheduler could not deliver after its retries lands here (and its depth alarms).
        self.schedule_dead_letter_queue = dead_letter_queue(
            self,
            "PurgeScheduleDeadLetters",
            key=key,
            removal_policy=removal_policy,
            owner="the tombstone purge's schedule",
        )
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
                ),
                iam.PolicyStatement(
                    actions=["sqs:SendMessage"], resources=[self.schedule_dead_letter_queue.queue_arn]
                ),
                iam.PolicyStatement(actions=["kms:GenerateDataKey", "kms:Decrypt"], resources=[key.key_arn]),
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
                dead_letter_config=scheduler.CfnSchedule.DeadLetterConfigProperty(
                    arn=self.schedule_dead_letter_queue.queue_arn
                ),
            ),
        )
        self.purge_schedule.node.add_dependency(policy)


class ObjectDefinition(sfn.DefinitionBody):
    """A definition rendered as the JSON object `Definition` (CDK writes the string `DefinitionString`), so cfn-lint
    validates it against the States Language schema, which it cannot do inside a joined string. Values
    CloudFormation assigns (the worker's and the key's ARNs, the bucket's name, the partition) become `${ValueN}`
    placeholders of `DefinitionSubstitutions` (`substitutions`, which the caller sets on the resource).

    The definition is plain States Language data (`definition`), not CDK state constructs: the same JSON, without
    the hundred jsii calls per workflow that would cost each environment's synth a tenth of a second."""

    def __init__(self, states: dict[str, Any], comment: str) -> None:
        super().__init__()
        self._states = states
        self._comment = comment
        self.substitutions: dict[str, str] = {}

    def bind(
        self,
        scope: Construct,
        sfn_principal: iam.IPrincipal,
        sfn_props: sfn.StateMachineProps | dict[str, Any],
        graph: sfn.StateGraph | None = None,
    ) -> sfn.DefinitionConfig:
        body = {**self._states, "Comment": self._comment}
        timeout = sfn_props.get("timeout") if isinstance(sfn_props, dict) else sfn_props.timeout
        if timeout is not None:
            body["TimeoutSeconds"] = timeout.to_seconds()
        return sfn.DefinitionConfig(definition=self._placeholders(body))

    def _placeholders(self, value: object) -> object:
        if isinstance(value, dict):
            return {key: self._placeholders(member) for key, member in value.items()}
        if isinstance(value, list):
            return [self._placeholders(member) for member in value]
        # CDK encodes a token in a string as "${Token[...]}" (checked here rather than with a jsii call per string).
        if isinstance(value, str) and TOKEN_MARK in value:
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


def _worker_task(
    worker_arn: str, operation: str, parameters: dict[str, Any], result_path: str, **fields: Any
) -> dict[str, Any]:
    """A Task invoking the worker for one step; its retries: Lambda's own transient errors, and throttling (an
    invocation over the worker's reserved concurrency, or a `TransientFailure` the worker reports). The result
    always goes to a path: CDK drops a `null` ResultPath, and a missing one is `$` (the result replaces the input)."""
    return {
        "Type": "Task",
        "Resource": worker_arn,
        "Parameters": {**parameters, "operation": operation},
        "ResultPath": result_path,
        "Retry": [
            {"ErrorEquals": list(SERVICE_ERRORS), "IntervalSeconds": 2, "MaxAttempts": 6, "BackoffRate": 2},
            {
                "ErrorEquals": [THROTTLED_INVOCATION, TRANSIENT_FAILURE],
                "IntervalSeconds": 30,
                "MaxAttempts": 8,
                "BackoffRate": 2,
                "MaxDelaySeconds": 300,
                "JitterStrategy": "FULL",
            },
        ],
        **fields,
    }


CAUGHT = {"Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "FinishAfterFailure"}]}


def _part_loop(worker_arn: str, operation: str, label: str) -> dict[str, Any]:
    """A map's item processor: invoke the worker on one part until it answers done; end with {} (the part's results
    are in its state in the ops bucket; the map's result writer writes each child's output). A part that fails for good has its error saved on its state first
    (`part-failed`): the map itself only fails with States.ExceedToleratedFailureThreshold, and the summary names
    each failed part's own error. A pausing operation's part that answers `wait` is invoked again after
    `STARTUP_CHECK_SECONDS` (a wait no invocation's 15 minutes cap)."""
    choices = [{"Variable": "$.progress.done", "BooleanEquals": True, "Next": f"{label}PartFinished"}]
    waits: dict[str, Any] = {}
    if operation in PAUSING_OPERATIONS:
        choices.append({"Variable": "$.progress.wait", "BooleanEquals": True, "Next": f"{label}PartWait"})
        waits[f"{label}PartWait"] = {"Type": "Wait", "Seconds": STARTUP_CHECK_SECONDS, "Next": f"{label}Part"}
    return {
        "StartAt": f"{label}Part",
        "States": {
            f"{label}Part": _worker_task(
                worker_arn,
                operation,
                {"step": "part", "runId.$": "$.runId", "part.$": "$.part"},
                "$.progress",
                Next=f"{label}PartDone",
                Catch=[
                    {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": f"{label}PartFailed"}
                ],
            ),
            f"{label}PartFailed": _worker_task(
                worker_arn,
                operation,
                {"step": "part-failed", "runId.$": "$.runId", "part.$": "$.part", "error.$": "$.error"},
                "$.saved",  # beside `$.error`, which the end state fails with
                Next=f"{label}PartFailedEnd",
                Catch=[
                    {
                        "ErrorEquals": ["States.ALL"],
                        "ResultPath": "$.saveError",
                        "Next": f"{label}PartFailedEnd",
                    }
                ],
            ),
            f"{label}PartFailedEnd": {
                "Type": "Fail",
                "ErrorPath": "$.error.Error",
                "CausePath": "$.error.Cause",
            },
            f"{label}PartDone": {"Type": "Choice", "Choices": choices, "Default": f"{label}Part"},
            **waits,
            f"{label}PartFinished": {"Type": "Pass", "Result": {}, "End": True},
        },
    }


@dataclass(frozen=True)
class Targets:
    """What the workflows' states name: the worker, the ops bucket and the data key (tokens in the construct,
    rendered by `ObjectDefinition`), the partition, and how many parts a map runs at once. The table an export
    reads is the one holding the run's schema: the plan names it (`$.plan.tableArn`)."""

    worker_arn: str
    ops_bucket: str
    key_arn: str
    partition: str
    max_concurrency: int


def map_results_prefix(operation: str, map_name: str) -> str:
    """Where every run of `operation` has its distributed map `map_name` write its children's results. Literal: AWS
    documents only a literal `Bucket` and `Prefix` in a `ResultWriter`. Step Functions adds the map run's id, which
    separates runs ("ResultWriter (Map)": `"Key": "csvProcessJobs/<map run id>/manifest.json"` for the prefix
    `csvProcessJobs`), and writes `manifest.json` and the result files (`SUCCEEDED_0.json`, ...) there. Under
    `runs/<operation>/` (the run records' lifecycle), in a folder no run's records can be: no run id starts with
    `_` (ops.runs.RUN_ID)."""
    return f"runs/{operation}/{MAP_RESULTS}/{map_name}"


def _result_writer(operation: str, map_name: str, targets: Targets) -> dict[str, Any]:
    """A distributed map's results go to the ops bucket, never into the state: whatever their number, the state
    keeps only where they are (`MapRunArn`, `ResultWriterDetails`), well inside the 256 KiB payload quota."""
    return {
        "Resource": f"arn:{targets.partition}:states:::s3:putObject",
        "Parameters": {"Bucket": targets.ops_bucket, "Prefix": map_results_prefix(operation, map_name)},
    }


def definition(operation: str, targets: Targets) -> dict[str, Any]:
    """The States Language definition of one operation's workflow (the shape in the module doc)."""
    worker_arn, max_concurrency = targets.worker_arn, targets.max_concurrency
    states: dict[str, Any] = {
        "Prepare": _worker_task(
            worker_arn,
            operation,
            {"step": "prepare", "input.$": "$", "executionName.$": "$$.Execution.Name"},
            "$.plan",
            Next="Source" if operation in TABLE_OPERATIONS else "Parts",
            **CAUGHT,
        ),
        "Parts": {
            "Type": "Map",
            "ItemsPath": "$.plan.parts",
            "ItemSelector": {"runId.$": "$.plan.runId", "part.$": "$$.Map.Item.Value"},
            "MaxConcurrency": max_concurrency,
            "ItemProcessor": {
                "ProcessorConfig": {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"},
                **_part_loop(worker_arn, operation, "Plan"),
            },
            "ResultWriter": _result_writer(operation, "parts", targets),
            "ResultPath": "$.partsRun",
            "Next": "Finish",
            **CAUGHT,
        },
        "Finish": _worker_task(
            worker_arn,
            operation,
            {"step": "finish", "runId.$": "$.plan.runId"},
            "$.finished",
            Next="RunStatus",
            **CAUGHT,
        ),
        "FinishAfterFailure": _worker_task(
            worker_arn,
            operation,
            {
                "step": "finish",
                "input.$": "$$.Execution.Input",
                "executionName.$": "$$.Execution.Name",
                "error.$": "$.error",
            },
            "$.finished",
            Next="RunStatus",
            # The summary could not be written either: the run fails with the step's own error as the cause.
            Catch=[{"ErrorEquals": ["States.ALL"], "ResultPath": "$.finishError", "Next": "SummaryFailed"}],
        ),
        "SummaryFailed": {"Type": "Fail", "Error": "SummaryFailed", "CausePath": "$.finishError.Cause"},
        "RunStatus": {
            "Type": "Choice",
            "Choices": [{"Variable": "$.finished.status", "StringEquals": "failed", "Next": "RunFailed"}],
            "Default": "RunDone",
        },
        "RunFailed": {"Type": "Fail", "Error": "RunFailed", "CausePath": "$.finished.reason"},
        "RunDone": {"Type": "Succeed"},
    }
    if operation in TABLE_OPERATIONS:
        states |= _export_states(operation, targets)
    return {"StartAt": "Prepare", "States": states}


def _export_states(operation: str, targets: Targets) -> dict[str, Any]:
    """Reading the table from a DynamoDB export: start it (or go on with the run's), wait for it, record it, run
    each data file as a part in a distributed map, then the plan's other parts."""
    worker_arn, ops_bucket, partition = targets.worker_arn, targets.ops_bucket, targets.partition
    return {
        "Source": {
            "Type": "Choice",
            "Choices": [
                {
                    "And": [
                        {"Variable": "$.plan.source", "StringEquals": "export"},
                        {"Variable": "$.plan.exportArn", "IsNull": False},
                    ],
                    "Next": "ExportStarted",
                },
                {"Variable": "$.plan.source", "StringEquals": "export", "Next": "ExportTable"},
            ],
            "Default": "Parts",
        },
        "ExportStarted": {
            "Type": "Pass",
            "Parameters": {"arn.$": "$.plan.exportArn"},
            "ResultPath": "$.export",
            "Next": "StartPolling",
        },
        "StartPolling": {
            "Type": "Pass",
            "Result": {"count": 0},
            "ResultPath": "$.polls",
            "Next": "WaitForExport",
        },
        "ExportTable": {
            "Type": "Task",
            "Resource": f"arn:{partition}:states:::aws-sdk:dynamodb:exportTableToPointInTime",
            "Parameters": {
                "TableArn.$": "$.plan.tableArn",
                "S3Bucket": ops_bucket,
                "S3Prefix.$": f"States.Format('exports/{operation}/{{}}', $.plan.runId)",
                "S3SseAlgorithm": "KMS",
                "S3SseKmsKeyId": targets.key_arn,
                "ExportFormat": "DYNAMODB_JSON",
                "ExportType": "FULL_EXPORT",
                # A retried or resumed run within eight hours gets the same export, not a second one.
                "ClientToken.$": "$.plan.runId",
            },
            "ResultSelector": {"arn.$": "$.ExportDescription.ExportArn"},
            "ResultPath": "$.export",
            "Next": "StartPolling",
            **CAUGHT,
        },
        "WaitForExport": {"Type": "Wait", "Seconds": EXPORT_POLL_SECONDS, "Next": "DescribeExport"},
        "DescribeExport": {
            "Type": "Task",
            "Resource": f"arn:{partition}:states:::aws-sdk:dynamodb:describeExport",
            "Parameters": {"ExportArn.$": "$.export.arn"},
            "ResultSelector": {
                "arn.$": "$.ExportDescription.ExportArn",
                "status.$": "$.ExportDescription.ExportStatus",
                "description.$": "$.ExportDescription",
            },
            "ResultPath": "$.export",
            "Next": "ExportStatus",
            **CAUGHT,
        },
        "ExportStatus": {
            "Type": "Choice",
            "Choices": [
                {"Variable": "$.export.status", "StringEquals": "COMPLETED", "Next": "ExportReady"},
                {"Variable": "$.export.status", "StringEquals": "FAILED", "Next": "ExportFailed"},
            ],
            "Default": "CountPoll",
        },
        "CountPoll": {
            "Type": "Pass",
            "Parameters": {"count.$": "States.MathAdd($.polls.count, 1)"},
            "ResultPath": "$.polls",
            "Next": "PollLimit",
        },
        "PollLimit": {
            "Type": "Choice",
            "Choices": [
                {
                    "Variable": "$.polls.count",
                    "NumericGreaterThanEquals": EXPORT_MAX_POLLS,
                    "Next": "ExportTooSlow",
                }
            ],
            "Default": "WaitForExport",
        },
        "ExportTooSlow": {
            "Type": "Pass",
            "Parameters": {
                "Error": "ExportTooSlow",
                "Cause": f"the export was not complete after {EXPORT_MAX_POLLS} polls "
                f"{EXPORT_POLL_SECONDS} s apart; --resume goes on waiting for it",
            },
            "ResultPath": "$.error",
            "Next": "FinishAfterFailure",
        },
        "ExportFailed": {
            "Type": "Pass",
            "Parameters": {"Error": "ExportFailed", "Cause.$": "States.JsonToString($.export.description)"},
            "ResultPath": "$.error",
            "Next": "FinishAfterFailure",
        },
        "ExportReady": _worker_task(
            worker_arn,
            operation,
            {"step": "export-ready", "runId.$": "$.plan.runId", "export.$": "$.export.description"},
            "$.exportReady",
            Next="Files",
            **CAUGHT,
        ),
        "Files": {
            "Type": "Map",
            "ItemReader": {
                "Resource": f"arn:{partition}:states:::s3:getObject",
                "ReaderConfig": {"InputType": "JSONL"},
                "Parameters": {"Bucket": ops_bucket, "Key.$": "$.exportReady.manifestFilesKey"},
            },
            "ItemSelector": {
                "runId.$": "$.plan.runId",
                "part": {"kind": "file", "key.$": "$$.Map.Item.Value.dataFileS3Key"},
            },
            "MaxConcurrency": targets.max_concurrency,
            "ItemProcessor": {
                "ProcessorConfig": {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"},
                **_part_loop(worker_arn, operation, "Export"),
            },
            "ResultWriter": _result_writer(operation, "files", targets),
            "ResultPath": "$.filesRun",
            "Next": "Parts",
            **CAUGHT,
        },
    }
