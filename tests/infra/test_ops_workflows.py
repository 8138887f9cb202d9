"""The ops workflows in every environment: the worker (settings, environment, exact permissions), the four state
machine definitions, their role, logs and alarms, the purge schedule, and the outputs the laptop CLI reads."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from ops.purge import minimum_age_seconds
from ops.runs import check_run_id

from infra.config import EnvironmentConfig
from infra.constructs.dead_letter_queue import RETENTION
from infra.constructs.heartbeat import PUT_ITEM_TARGET, PUT_METRIC_DATA_TARGET
from infra.constructs.ops_workflows import (
    EXPORT_MAX_POLLS,
    LOG_DELIVERY_ACTIONS,
    OPERATIONS,
    PAUSING_OPERATIONS,
    STARTUP_CHECK_SECONDS,
    map_results_prefix,
)
from infra.constructs.ops_workflows import XRAY_ACTIONS as STATE_MACHINE_XRAY_ACTIONS
from infra.constructs.smoke import SMOKE_VARIABLES, SMOKE_WORKER_POLICY
from infra.constructs.vpc_function import ENI_ACTIONS
from ops import deployed
from tests.infra.templates_helpers import (
    MANAGED_POLICY,
    WORKER_ROLE,
    XRAY_ACTIONS,
    allow,
    allow_each,
    aws_arn,
    data_key_arn,
    dead_letter_queue_id,
    domain_endpoint,
    expected_schema_tables,
    handed_table_arns,
    objects,
    ops_bucket,
    permissions,
    policy_attached_to,
    resolve,
    role_arn,
    s3_arn,
    schema_tables,
    stream_arns,
    worker_function,
    worker_role,
)
from tests.support.template import Template

STATE_MACHINE = "AWS::StepFunctions::StateMachine"
ADMIN_ROLE = "OpenSearch fine-grained access control master user"
TABLE_STATES = {
    "Source",
    "ExportStarted",
    "ExportTable",
    "WaitForExport",
    "DescribeExport",
    "ExportStatus",
    "ExportFailed",
    "ExportReady",
    "Files",
    "StartPolling",
    "CountPoll",
    "PollLimit",
    "ExportTooSlow",
}
COMMON_STATES = {
    "Prepare",
    "Parts",
    "Finish",
    "FinishAfterFailure",
    "RunStatus",
    "RunFailed",
    "RunDone",
    "SummaryFailed",
}
TABLE_OPERATIONS = ("reindex", "reconcile")  # those that read a table (an export above a size) part by part
DISTRIBUTED = {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"}


def machines(stateful: Template, stateless: Template) -> dict[str, dict[str, Any]]:
    """Each operation's state machine properties, with the definition's substitutions put back in place."""
    found = {}
    for resource in stateless.find_resources(STATE_MACHINE).values():
        properties = resolve(stateful, stateless, resource["Properties"])
        text = json.dumps(properties["Definition"])
        for name, value in properties.get("DefinitionSubstitutions", {}).items():
            text = text.replace(json.dumps(f"${{{name}}}"), json.dumps(value))
        properties["Definition"] = json.loads(text)
        found[properties["StateMachineName"].rsplit("-", 1)[1]] = properties
    return found


def all_states(states: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(name, state, the states block it is in), the item processors' states included."""
    for name, state in states.items():
        yield name, state, states
        processor = state.get("ItemProcessor")
        if processor:
            yield from all_states(processor["States"])


def test_the_worker_is_sized_by_config_and_runs_as_the_ops_worker_role(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    _, worker = worker_function(stateless)
    properties = resolve(stateful, stateless, worker["Properties"])
    assert (properties["MemorySize"], properties["Timeout"]) == (config.ops.worker_memory_mb, 900)
    assert properties["Role"] == role_arn(stateful, WORKER_ROLE)
    assert properties.get("ReservedConcurrentExecutions") == (
        config.ops.max_concurrency * config.ops.concurrent_runs if config.reserve_concurrency else None
    )


def test_a_run_at_full_width_leaves_another_run_its_workers(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    """A long reindex must not starve the nightly purge: the worker's reserved concurrency (where there is one)
    holds every map of one run at full width and as many again."""
    _, worker = worker_function(stateless)
    reserved = worker["Properties"].get("ReservedConcurrentExecutions")
    widest = max(
        state["MaxConcurrency"]
        for machine in machines(stateful, stateless).values()
        for _, state, _ in all_states(machine["Definition"]["States"])
        if state["Type"] == "Map"
    )
    if config.reserve_concurrency:
        assert reserved >= 2 * widest, f"reserved {reserved} for maps {widest} wide"


def test_the_worker_environment_is_exactly_what_ops_worker_reads(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    _, worker = worker_function(stateless)
    variables = resolve(stateful, stateless, worker["Properties"]["Environment"]["Variables"])
    streams = variables.pop("DYNAMODB_STREAMS_ENDPOINT")  # asserted with the endpoint (test_network.py)
    for name in SMOKE_VARIABLES:
        variables.pop(name)  # the smoke run's, asserted in test_smoke.py
    assert streams["Fn::Join"][1][0] == "https://"
    tables = schema_tables(stateful, stateless, variables.pop("SCHEMA_TABLES"))
    assert tables == expected_schema_tables(stateful, config)  # each run reads its schema's table
    assert variables == {
        "OPENSEARCH_ENDPOINT": {"Fn::Join": ["", ["https://", domain_endpoint(stateful)]]},
        "ADMIN_ROLE_ARN": role_arn(stateful, ADMIN_ROLE),
        "OPS_BUCKET": {"Ref": ops_bucket(stateful)},
        "GEOMETRY_BUCKET": {"Ref": "GeometryBucket1F491C5F"},
        "DLQ_URL": {"Ref": dead_letter_queue_id(stateless)},
        "BULK_MAX_BYTES": str(config.search.bulk_max_bytes),
        "REQUEST_TIMEOUT_SECONDS": str(config.sync.request_timeout_seconds),
        "SCAN_SEGMENTS": str(config.ops.scan_segments),
        "EXPORT_ABOVE_BYTES": str(config.ops.export_above_bytes),
        "READ_UNITS_PER_SEGMENT": f"{config.ops.read_units_per_segment:g}",
        "TOMBSTONE_MIN_AGE_SECONDS": str(minimum_age_seconds(config.sync.max_record_age_seconds)),
        "DEADLINE_MARGIN_SECONDS": "240",
    }


def test_tombstones_outlive_the_stream_the_record_age_and_the_dead_letter_queue(
    stateless: Template, config: EnvironmentConfig
) -> None:
    _, worker = worker_function(stateless)
    age = int(worker["Properties"]["Environment"]["Variables"]["TOMBSTONE_MIN_AGE_SECONDS"])
    assert age == 24 * 3600 + config.sync.max_record_age_seconds + RETENTION.to_seconds()


def test_the_worker_policy_grants_exactly_what_the_operations_call(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    _, worker = worker_function(stateless)
    group_id = worker["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
    (policy,) = [
        p["Properties"]
        for logical_id, p in stateless.find_resources(MANAGED_POLICY).items()
        if resolve(stateful, stateless, p["Properties"]["Roles"]) == [worker_role(stateful)]
        and not logical_id.startswith(SMOKE_WORKER_POLICY)  # the smoke run's, asserted in test_smoke.py
    ]
    document = resolve(stateful, stateless, policy["PolicyDocument"])
    assert permissions(document) == (
        allow(["logs:CreateLogStream", "logs:PutLogEvents"], {"Fn::GetAtt": [group_id, "Arn"]})
        | allow(ENI_ACTIONS + XRAY_ACTIONS, "*")
        | allow_each(
            ["dynamodb:Scan", "dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:DescribeTable"],
            handed_table_arns(stateful, config),
        )
        | allow_each(
            ["dynamodb:GetShardIterator", "dynamodb:GetRecords"], list(stream_arns(stateful, config).values())
        )
        | allow(
            [
                "sqs:ReceiveMessage",
                "sqs:DeleteMessage",
                "sqs:ChangeMessageVisibility",
                "sqs:GetQueueAttributes",
            ],
            {"Fn::GetAtt": [dead_letter_queue_id(stateless), "Arn"]},
        )
        | allow(["s3:GetObject", "s3:PutObject"], objects(stateful, "runs/*"))
        # ListBucket unconditioned: GetObject of a missing key is 404, not 403
        | allow(["s3:ListBucket"], s3_arn(ops_bucket(stateful)))
        | allow(["s3:GetObject"], objects(stateful, "exports/*"))
        | allow(["s3:GetObject"], s3_arn("GeometryBucket1F491C5F", "/geometries/*"))
        | allow(["kms:Decrypt", "kms:GenerateDataKey"], data_key_arn(stateful))
    )


def test_the_ops_worker_role_may_only_assume_the_admin_role(stateful: Template) -> None:
    policy = policy_attached_to(stateful, stateful, worker_role(stateful))
    assert permissions(policy["PolicyDocument"]) == allow(["sts:AssumeRole"], role_arn(stateful, ADMIN_ROLE))


def test_there_is_one_named_state_machine_per_operation_logging_everything_and_traced(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    found = machines(stateful, stateless)
    (log_group,) = {
        m["LoggingConfiguration"]["Destinations"][0]["CloudWatchLogsLogGroup"]["LogGroupArn"]["Fn::GetAtt"][0]
        for m in found.values()
    }
    assert sorted(found) == sorted(OPERATIONS)
    for operation, machine in found.items():
        assert machine["StateMachineName"] == f"{config.search.domain_name}-{operation}"
        assert machine["LoggingConfiguration"]["Level"] == "ALL"
        assert machine["LoggingConfiguration"]["IncludeExecutionData"] is False
        assert machine["TracingConfiguration"] == {"Enabled": True}
        assert machine["Definition"]["TimeoutSeconds"] == 7 * 86400
    group = stateless.find_resources("AWS::Logs::LogGroup")[log_group]["Properties"]
    group = resolve(stateful, stateless, group)
    name = group.pop("LogGroupName")
    assert group == {"KmsKeyId": data_key_arn(stateful), "RetentionInDays": config.log_retention_days}
    # Vended logs: the account's Logs resource policy covers the prefix; the stack's id keeps a retained group from
    # blocking a new stack.
    stack_id = {"Fn::Select": [2, {"Fn::Split": ["/", {"Ref": "AWS::StackId"}]}]}
    assert name == {"Fn::Join": ["", ["/aws/vendedlogs/states/ops-", stack_id]]}


def test_every_transition_names_a_state_and_every_state_is_reached(
    stateful: Template, stateless: Template
) -> None:
    for operation, machine in machines(stateful, stateless).items():
        definition = machine["Definition"]
        for name, state, block in all_states(definition["States"]):
            targets = [state.get("Next"), state.get("Default")]
            targets += [choice["Next"] for choice in state.get("Choices", [])]
            targets += [catch["Next"] for catch in state.get("Catch", [])]
            missing = [t for t in targets if t is not None and t not in block]
            assert not missing, f"{operation}: {name} goes to {missing}"
            assert state.get("End") or state["Type"] in ("Choice", "Succeed", "Fail") or state.get("Next"), (
                name
            )
        top = set(definition["States"])
        expected = COMMON_STATES | (TABLE_STATES if operation in TABLE_OPERATIONS else set())
        assert top == expected, operation


def test_a_paused_smoke_part_is_invoked_again_after_a_wait_and_no_other_part_loop_waits(
    stateful: Template, stateless: Template
) -> None:
    """A smoke canary waiting for a new event source mapping answers `wait`: its loop waits STARTUP_CHECK_SECONDS in
    the workflow and invokes the part again (the check), so no worker invocation holds the start-up budget."""
    waiting = set()
    for operation, machine in machines(stateful, stateless).items():
        for _, state, block in all_states(machine["Definition"]["States"]):
            progress = state.get("Choices", [{}])[0].get("Variable", "").startswith("$.progress.")
            if state["Type"] != "Choice" or not progress:
                continue
            part = state["Default"]
            waits = [choice for choice in state["Choices"] if choice["Variable"] == "$.progress.wait"]
            if operation not in PAUSING_OPERATIONS:
                assert not waits and not [s for s in block.values() if s["Type"] == "Wait"], operation
                continue
            assert state["Choices"][0]["Variable"] == "$.progress.done"  # a finished part never waits
            (wait,) = waits
            assert wait["BooleanEquals"] is True
            assert block[wait["Next"]] == {"Type": "Wait", "Seconds": STARTUP_CHECK_SECONDS, "Next": part}
            assert block[part]["Parameters"]["step"] == "part"
            waiting.add(operation)
    assert waiting == PAUSING_OPERATIONS == {"smoke"}


def test_each_step_invokes_the_worker_for_its_operation_and_retries_throttling(
    stateful: Template, stateless: Template
) -> None:
    worker_id, _ = worker_function(stateless)
    for operation, machine in machines(stateful, stateless).items():
        tasks = [
            (name, state)
            for name, state, _ in all_states(machine["Definition"]["States"])
            if state["Type"] == "Task" and state["Resource"] == {"Fn::GetAtt": [worker_id, "Arn"]}
        ]
        steps = {state["Parameters"]["step"] for _, state in tasks}
        assert steps == (
            {"prepare", "part", "part-failed", "finish"}
            | ({"export-ready"} if operation in TABLE_OPERATIONS else set())
        )
        states = {name: state for name, state, _ in all_states(machine["Definition"]["States"])}
        for name, state in tasks:
            if state["Parameters"]["step"] != "part":
                continue
            # A part that fails for good saves its own error first, then fails its map iteration with it.
            (caught,) = state["Catch"]
            saved = states[caught["Next"]]
            assert (caught["ErrorEquals"], saved["Parameters"]["step"]) == (["States.ALL"], "part-failed"), (
                name
            )
            assert saved["Parameters"]["error.$"] == caught["ResultPath"], name
            # Its result goes beside the error, not over it (a missing ResultPath is "$": the result replaces the input).
            kept = f"{saved.get('ResultPath', '$')}."
            assert not f"{caught['ResultPath']}.".startswith(kept), (name, saved.get("ResultPath"))
            end = states[saved["Next"]]
            assert (end["Type"], end["CausePath"]) == ("Fail", f"{caught['ResultPath']}.Cause"), name
            assert [c["Next"] for c in saved["Catch"]] == [saved["Next"]], name
        for name, state in tasks:
            assert state["Parameters"]["operation"] == operation, name
            retried = {error for retry in state["Retry"] for error in retry["ErrorEquals"]}
            assert {
                "TransientFailure",
                "Lambda.TooManyRequestsException",
                "Lambda.ServiceException",
            } <= retried
            throttled = next(r for r in state["Retry"] if "TransientFailure" in r["ErrorEquals"])
            assert throttled["MaxAttempts"] >= 8 and throttled["BackoffRate"] == 2


def test_maps_run_at_most_the_configured_concurrency_and_keep_results_small(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    for operation, machine in machines(stateful, stateless).items():
        states = all_states(machine["Definition"]["States"])
        maps = [state for _, state, _ in states if state["Type"] == "Map"]
        assert len(maps) == (2 if operation in TABLE_OPERATIONS else 1)
        for state in maps:
            assert state["MaxConcurrency"] == config.ops.max_concurrency
            # Each part's loop in a child execution: its invocations never fill the run's 25,000-event history.
            assert state["ItemProcessor"]["ProcessorConfig"] == DISTRIBUTED
            # Its children's results go to the ops bucket, never into the state (over 256 KiB there,
            # States.DataLimitExceeded would fail the run); nothing selects from them. A literal prefix: the map
            # run's id, which Step Functions adds, separates runs.
            name = state["ResultPath"].removeprefix("$.").removesuffix("Run")
            put_object = {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":states:::s3:putObject"]]}
            where = {"Bucket": {"Ref": ops_bucket(stateful)}, "Prefix": map_results_prefix(operation, name)}
            assert state["ResultWriter"] == {"Resource": put_object, "Parameters": where}
            assert "ResultSelector" not in state
            ends = [s for s in state["ItemProcessor"]["States"].values() if s.get("End")]
            assert ends == [{"Type": "Pass", "Result": {}, "End": True}]


def result_writers(value: Any) -> Iterator[Any]:
    """Every `ResultWriter` anywhere in a definition (a map inside a map's item processor included)."""
    if isinstance(value, dict):
        for key, member in value.items():
            if key == "ResultWriter":
                yield member
            yield from result_writers(member)
    elif isinstance(value, list):
        for member in value:
            yield from result_writers(member)


def paths_in(value: Any, where: str = "ResultWriter") -> Iterator[str]:
    """Where `value` holds a path or an expression: a key ending in `.$` (JSONPath, intrinsics) or a JSONata
    `{% ... %}` string."""
    if isinstance(value, dict):
        for key, member in value.items():
            if key.endswith(".$"):
                yield f"{where}.{key}"
            yield from paths_in(member, f"{where}.{key}")
    elif isinstance(value, list):
        for number, member in enumerate(value):
            yield from paths_in(member, f"{where}[{number}]")
    elif isinstance(value, str) and value.strip().startswith("{%"):
        yield f"{where}: {value}"


def test_no_result_writer_reads_a_path(stateful: Template, stateless: Template) -> None:
    """AWS documents only a literal `Bucket` and `Prefix` in a ResultWriter; what a path there reads (the map's
    input or its results) is left open, and interpreters differ. Every definition's writers are literal."""
    for operation, machine in machines(stateful, stateless).items():
        writers = list(result_writers(machine["Definition"]))
        assert writers, operation
        for writer in writers:
            assert not list(paths_in(writer)), (operation, writer)


def test_the_paths_check_finds_every_kind_of_path() -> None:
    writer = {"Parameters": {"Bucket": "b", "Prefix.$": "$.run"}, "Arguments": {"Prefix": "{% $run %}"}}

    assert list(paths_in(writer)) == [
        "ResultWriter.Parameters.Prefix.$",
        "ResultWriter.Arguments.Prefix: {% $run %}",
    ]
    assert list(
        result_writers({"States": {"M": {"ItemProcessor": {"States": {"N": {"ResultWriter": 1}}}}}})
    ) == [1]


def test_the_maps_results_are_never_a_runs_records() -> None:
    """Results of every run of an operation share its literal prefix; no run id can name that folder."""
    for operation in OPERATIONS:
        folder = map_results_prefix(operation, "parts").split("/")[2]
        with pytest.raises(ValueError):
            check_run_id(folder)


def test_a_large_table_is_exported_and_read_file_by_file(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    for operation in TABLE_OPERATIONS:
        states = machines(stateful, stateless)[operation]["Definition"]["States"]
        export = states["ExportTable"]
        assert export["Resource"]["Fn::Join"][1][-1] == ":states:::aws-sdk:dynamodb:exportTableToPointInTime"
        assert export["Parameters"] == {
            "TableArn.$": "$.plan.tableArn",  # the table that holds the run's schema (prepare reads it)
            "S3Bucket": {"Ref": ops_bucket(stateful)},
            "S3Prefix.$": f"States.Format('exports/{operation}/{{}}', $.plan.runId)",
            "S3SseAlgorithm": "KMS",
            "S3SseKmsKeyId": data_key_arn(stateful),
            "ExportFormat": "DYNAMODB_JSON",
            "ExportType": "FULL_EXPORT",
            "ClientToken.$": "$.plan.runId",  # a retried or resumed run gets the same export
        }
        assert states["DescribeExport"]["Parameters"] == {"ExportArn.$": "$.export.arn"}
        choices = [(c["StringEquals"], c["Next"]) for c in states["ExportStatus"]["Choices"]]
        assert choices == [("COMPLETED", "ExportReady"), ("FAILED", "ExportFailed")]
        assert states["ExportStatus"]["Default"] == "CountPoll"  # bounded: at most EXPORT_MAX_POLLS polls
        limit = {"Variable": "$.polls.count", "NumericGreaterThanEquals": EXPORT_MAX_POLLS}
        assert states["PollLimit"]["Choices"] == [{**limit, "Next": "ExportTooSlow"}]
        assert EXPORT_MAX_POLLS * 13 < 25_000 // 2  # 13 history events a poll, half the history at most
        files = states["Files"]
        assert files["ItemProcessor"]["ProcessorConfig"] == DISTRIBUTED
        assert files["ItemReader"]["ReaderConfig"] == {"InputType": "JSONL"}
        assert files["ItemReader"]["Parameters"] == {
            "Bucket": {"Ref": ops_bucket(stateful)},
            "Key.$": "$.exportReady.manifestFilesKey",
        }
        assert files["ItemSelector"]["part"] == {"kind": "file", "key.$": "$$.Map.Item.Value.dataFileS3Key"}


def test_a_failed_step_still_writes_the_summary_and_fails_the_run(
    stateful: Template, stateless: Template
) -> None:
    for machine in machines(stateful, stateless).values():
        states = machine["Definition"]["States"]
        caught = [name for name, state in states.items() if state.get("Catch")]
        assert {"Prepare", "Parts", "Finish", "FinishAfterFailure"} <= set(caught)
        assert states["FinishAfterFailure"]["Catch"] == [
            {"ErrorEquals": ["States.ALL"], "ResultPath": "$.finishError", "Next": "SummaryFailed"}
        ]
        assert states["SummaryFailed"]["Type"] == "Fail"
        for name in set(caught) - {"FinishAfterFailure"}:
            assert states[name]["Catch"] == [
                {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "FinishAfterFailure"}
            ]
        assert states["FinishAfterFailure"]["Parameters"]["error.$"] == "$.error"
        assert states["RunFailed"] == {"Type": "Fail", "Error": "RunFailed", "CausePath": "$.finished.reason"}


def test_each_state_machine_role_has_exactly_the_permissions_its_states_use(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    worker_id, _ = worker_function(stateless)
    resources = stateless.find_resources(STATE_MACHINE)
    roles = {m["Properties"]["RoleArn"]["Fn::GetAtt"][0] for m in resources.values()}
    assert len(roles) == len(OPERATIONS)  # one role each: no workflow may start another
    for logical_id, machine in resources.items():
        operation = machine["Properties"]["StateMachineName"].rsplit("-", 1)[1]
        role_id = machine["Properties"]["RoleArn"]["Fn::GetAtt"][0]
        (policy_id,) = [
            policy_id
            for policy_id, p in stateless.find_resources(MANAGED_POLICY).items()
            if p["Properties"]["Roles"] == [{"Ref": role_id}]
        ]
        policy = stateless.to_json()["Resources"][policy_id]["Properties"]
        granted = permissions(resolve(stateful, stateless, policy["PolicyDocument"]))

        name = f"{config.search.domain_name}-{operation}"
        expected = (
            allow(["lambda:InvokeFunction"], {"Fn::GetAtt": [worker_id, "Arn"]})  # unqualified: no alias
            | allow(["states:StartExecution"], aws_arn("states", f":stateMachine:{name}"))
            | allow(
                ["states:DescribeExecution", "states:StopExecution"],
                aws_arn("states", f":execution:{name}/*"),
            )
            | allow(list(LOG_DELIVERY_ACTIONS), "*")
            | allow(list(STATE_MACHINE_XRAY_ACTIONS), "*")
            # its distributed maps' result writers ("IAM policies for ResultWriter"), into the KMS-encrypted ops bucket
            | allow(
                ["s3:PutObject", "s3:GetObject", "s3:ListMultipartUploadParts", "s3:AbortMultipartUpload"],
                objects(stateful, f"{map_results_prefix(operation, '')}*"),
            )
            | allow(["kms:Decrypt", "kms:GenerateDataKey"], data_key_arn(stateful))
        )
        if operation in TABLE_OPERATIONS:
            expected |= (
                allow(
                    ["s3:AbortMultipartUpload", "s3:PutObject", "s3:PutObjectAcl", "s3:GetObject"],
                    objects(stateful, "exports/*"),
                )
                | allow_each(["dynamodb:ExportTableToPointInTime"], handed_table_arns(stateful, config))
                | allow_each(["dynamodb:DescribeExport"], handed_table_arns(stateful, config, "/export/*"))
            )
        assert granted == expected, operation
        assert (
            policy_id in stateless.to_json()["Resources"][logical_id]["DependsOn"]
        )  # a first execution has them


def test_the_purge_runs_on_its_schedule(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    (schedule,) = [
        s
        for s in stateless.find_resources("AWS::Scheduler::Schedule").values()
        if s["Properties"]["Target"]["Arn"]
        not in (PUT_ITEM_TARGET, PUT_METRIC_DATA_TARGET)  # the heartbeat's
    ]
    purge_id = next(
        logical_id
        for logical_id, machine in stateless.find_resources(STATE_MACHINE).items()
        if machine["Properties"]["StateMachineName"].endswith("-purge")
    )
    properties = schedule["Properties"]
    assert properties["ScheduleExpression"] == config.ops.purge_schedule
    assert properties["ScheduleExpressionTimezone"] == "UTC" and properties["State"] == "ENABLED"
    assert properties["Target"]["Arn"] == {"Ref": purge_id} and properties["Target"]["Input"] == "{}"
    role_id = properties["Target"]["RoleArn"]["Fn::GetAtt"][0]
    role = stateless.to_json()["Resources"][role_id]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert role == [
        {
            "Action": "sts:AssumeRole",
            "Effect": "Allow",
            "Principal": {"Service": "scheduler.amazonaws.com"},
            "Condition": {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}},
        }
    ]
    policy = policy_attached_to(stateless, stateful, {"Ref": role_id})
    start, send, encrypt = policy["PolicyDocument"]["Statement"]
    assert start["Action"] == "states:StartExecution"
    assert start["Resource"]["Fn::Join"][1][-1] == f":stateMachine:{config.search.domain_name}-purge"
    # What the scheduler could not deliver after its retries goes to its dead-letter queue (alarmed).
    queue = properties["Target"]["DeadLetterConfig"]["Arn"]
    assert send == {"Action": "sqs:SendMessage", "Effect": "Allow", "Resource": queue}
    assert sorted(encrypt["Action"]) == ["kms:Decrypt", "kms:GenerateDataKey"]
    assert properties["Target"]["RetryPolicy"] == {
        "MaximumRetryAttempts": 5,
        "MaximumEventAgeInSeconds": 3600,
    }


@pytest.mark.parametrize("operation", OPERATIONS)
def test_the_cli_finds_each_workflow_and_the_bucket_in_the_stacks_outputs(
    stateful: Template, stateless: Template, operation: str
) -> None:
    outputs = stateless.to_json()["Outputs"]
    machine = outputs[deployed.STATE_MACHINE_OUTPUTS[operation]]["Value"]["Ref"]
    assert stateless.to_json()["Resources"][machine]["Properties"]["StateMachineName"].endswith(
        f"-{operation}"
    )
    assert stateful.to_json()["Outputs"][deployed.BUCKET_OUTPUT]["Value"] == {"Ref": ops_bucket(stateful)}
