"""The ops workflows in every environment: the worker (settings, environment, exact permissions), the four state
machine definitions, their role, logs and alarms, the purge schedule, and the outputs the laptop CLI reads."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from aws_cdk.assertions import Template
from ops import deployed
from ops.purge import minimum_age_seconds

from infra.config import EnvironmentConfig
from infra.constructs.dead_letter_queue import RETENTION
from infra.constructs.ops_workflows import OPERATIONS
from infra.constructs.vpc_function import ENI_ACTIONS
from tests.infra.test_stream_sync import (
    MANAGED_POLICY,
    XRAY_ACTIONS,
    allow,
    data_key_arn,
    dead_letter_queue_id,
    domain_endpoint,
    expected_schema_tables,
    one,
    permissions,
    resolve,
    role_arn,
    schema_tables,
    stream_arns,
)

FUNCTION = "AWS::Lambda::Function"
STATE_MACHINE = "AWS::StepFunctions::StateMachine"
WORKER_HANDLER = "ops.worker.handler"
WORKER_ROLE = "Ops workflows worker (reindex, reconcile, redrive, tombstone purge)"
ADMIN_ROLE = "OpenSearch fine-grained access control master user"
TABLE_STATES = {"Source", "ExportStarted", "ExportTable", "WaitForExport", "DescribeExport", "ExportStatus"}
TABLE_STATES |= {"ExportFailed", "ExportReady", "Files"}
COMMON_STATES = {"Prepare", "Parts", "Finish", "FinishAfterFailure", "RunStatus", "RunFailed", "RunDone"}


def worker_function(stateless: Template) -> tuple[str, dict[str, Any]]:
    return one(stateless, FUNCTION, {"Handler": WORKER_HANDLER})


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


def ops_bucket(stateful: Template) -> str:
    (bucket_id,) = stateful.find_resources(
        "AWS::S3::Bucket", {"Properties": {"LoggingConfiguration": {"LogFilePrefix": "ops/"}}}
    )
    return bucket_id


def handed_table_arns(
    stateful: Template, config: EnvironmentConfig, suffix: str = ""
) -> list[dict[str, Any]]:
    """Each source table's ARN as the stateless stack builds it: from the table name in its handed-over stream
    ARN."""
    prefix = f"arn:aws:dynamodb:{config.region}:{config.account}:table/"
    return [
        {
            "Fn::Join": [
                "",
                [prefix, {"Fn::Select": [1, {"Fn::Split": ["/", stream]}]}, *([suffix] if suffix else [])],
            ]
        }
        for stream in stream_arns(stateful, config).values()
    ]


def allow_each(actions: list[str], resources: list[Any]) -> set[tuple[str, str, str]]:
    return {triple for resource in resources for triple in allow(actions, resource)}


def objects(stateful: Template, prefix: str) -> dict[str, Any]:
    bucket = {"Ref": ops_bucket(stateful)}
    return {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":s3:::", bucket, f"/{prefix}"]]}


def test_the_worker_is_sized_by_config_and_runs_as_the_ops_worker_role(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    _, worker = worker_function(stateless)
    properties = resolve(stateful, stateless, worker["Properties"])
    assert (properties["MemorySize"], properties["Timeout"]) == (config.ops.worker_memory_mb, 900)
    assert properties["Role"] == role_arn(stateful, WORKER_ROLE)
    assert properties.get("ReservedConcurrentExecutions") == (
        config.ops.max_concurrency if config.reserve_concurrency else None
    )


def test_the_worker_environment_is_exactly_what_ops_worker_reads(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    _, worker = worker_function(stateless)
    variables = resolve(stateful, stateless, worker["Properties"]["Environment"]["Variables"])
    streams = variables.pop("DYNAMODB_STREAMS_ENDPOINT")  # asserted with the endpoint (test_network.py)
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
    worker_role = {"Ref": one(stateful, "AWS::IAM::Role", {"Description": WORKER_ROLE})[0]}
    (policy,) = [
        p["Properties"]
        for p in stateless.find_resources(MANAGED_POLICY).values()
        if resolve(stateful, stateless, p["Properties"]["Roles"]) == [worker_role]
    ]
    document = resolve(stateful, stateless, policy["PolicyDocument"])
    bucket = {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":s3:::", {"Ref": ops_bucket(stateful)}]]}
    geometries = {
        "Fn::Join": [
            "",
            ["arn:", {"Ref": "AWS::Partition"}, ":s3:::", {"Ref": "GeometryBucket1F491C5F"}, "/geometries/*"],
        ]
    }
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
        | allow(["s3:ListBucket"], bucket, when={"StringLike": {"s3:prefix": ["runs/*"]}})
        | allow(["s3:GetObject"], objects(stateful, "exports/*"))
        | allow(["s3:GetObject"], geometries)
        | allow(["kms:Decrypt", "kms:GenerateDataKey"], data_key_arn(stateful))
    )


def test_the_ops_worker_role_may_only_assume_the_admin_role(stateful: Template) -> None:
    worker_role = {"Ref": one(stateful, "AWS::IAM::Role", {"Description": WORKER_ROLE})[0]}
    (policy,) = [
        p["Properties"]
        for p in stateful.find_resources(MANAGED_POLICY).values()
        if p["Properties"]["Roles"] == [worker_role]
    ]
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
    group = resolve(
        stateful, stateless, stateless.find_resources("AWS::Logs::LogGroup")[log_group]["Properties"]
    )
    assert group == {"KmsKeyId": data_key_arn(stateful), "RetentionInDays": config.log_retention_days}


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
        expected = COMMON_STATES | (TABLE_STATES if operation in ("reindex", "reconcile") else set())
        assert top == expected, operation


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
            {"prepare", "part", "finish"}
            | ({"export-ready"} if operation in ("reindex", "reconcile") else set())
        )
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
        maps = [
            state for _, state, _ in all_states(machine["Definition"]["States"]) if state["Type"] == "Map"
        ]
        assert len(maps) == (2 if operation in ("reindex", "reconcile") else 1)
        for state in maps:
            assert state["MaxConcurrency"] == config.ops.max_concurrency
            assert state["ResultSelector"] == {"parts.$": "States.ArrayLength($)"}
            ends = [s for s in state["ItemProcessor"]["States"].values() if s.get("End")]
            assert ends == [{"Type": "Pass", "Result": {}, "End": True}]


def test_a_large_table_is_exported_and_read_file_by_file(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    for operation in ("reindex", "reconcile"):
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
        choices = states["ExportStatus"]["Choices"]
        assert [(c["StringEquals"], c["Next"]) for c in choices] == [
            ("COMPLETED", "ExportReady"),
            ("FAILED", "ExportFailed"),
        ]
        assert states["ExportStatus"]["Default"] == "WaitForExport"
        files = states["Files"]
        assert files["ItemProcessor"]["ProcessorConfig"] == {
            "Mode": "DISTRIBUTED",
            "ExecutionType": "STANDARD",
        }
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
        assert {"Prepare", "Parts"} <= set(caught)
        for name in caught:
            assert states[name]["Catch"] == [
                {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "FinishAfterFailure"}
            ]
        assert states["FinishAfterFailure"]["Parameters"]["error.$"] == "$.error"
        assert states["RunFailed"] == {"Type": "Fail", "Error": "RunFailed", "CausePath": "$.finished.reason"}


def test_the_state_machine_role_has_exactly_the_permissions_its_states_use(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    worker_id, _ = worker_function(stateless)
    (role_id,) = {
        m["Properties"]["RoleArn"]["Fn::GetAtt"][0] for m in stateless.find_resources(STATE_MACHINE).values()
    }
    policy = next(
        p["Properties"]
        for p in stateless.find_resources(MANAGED_POLICY).values()
        if p["Properties"]["Roles"] == [{"Ref": role_id}]
    )
    granted = permissions(resolve(stateful, stateless, policy["PolicyDocument"]))
    arn = {"Fn::GetAtt": [worker_id, "Arn"]}
    machine_arns = {
        json.dumps(
            {
                "Fn::Join": [
                    "",
                    [
                        "arn:",
                        {"Ref": "AWS::Partition"},
                        ":states:",
                        {"Ref": "AWS::Region"},
                        ":",
                        {"Ref": "AWS::AccountId"},
                        f":{kind}:{config.search.domain_name}-{operation}{suffix}",
                    ],
                ]
            },
            sort_keys=True,
        )
        for operation in OPERATIONS
        for kind, suffix in (("stateMachine", ""), ("execution", "/*"))
    }
    states = {(e, a, r) for e, a, r in granted if a.startswith("states:")}
    assert {r for _, _, r in states} == machine_arns
    assert {a for _, a, _ in states} == {
        "states:StartExecution",
        "states:DescribeExecution",
        "states:StopExecution",
    }
    assert granted - states == (
        allow(["lambda:InvokeFunction"], arn)  # the unqualified function: no version or alias is invoked
        | allow(
            ["s3:AbortMultipartUpload", "s3:PutObject", "s3:PutObjectAcl", "s3:GetObject"],
            objects(stateful, "exports/*"),
        )
        | allow(["kms:Decrypt", "kms:GenerateDataKey"], data_key_arn(stateful))
        | allow_each(["dynamodb:ExportTableToPointInTime"], handed_table_arns(stateful, config))
        | allow_each(["dynamodb:DescribeExport"], handed_table_arns(stateful, config, "/export/*"))
        | allow(
            [
                "logs:CreateLogDelivery",
                "logs:GetLogDelivery",
                "logs:UpdateLogDelivery",
                "logs:DeleteLogDelivery",
                "logs:ListLogDeliveries",
                "logs:PutResourcePolicy",
                "logs:DescribeResourcePolicies",
                "logs:DescribeLogGroups",
            ],
            "*",
        )
        | allow(
            [
                "xray:PutTraceSegments",
                "xray:PutTelemetryRecords",
                "xray:GetSamplingRules",
                "xray:GetSamplingTargets",
            ],
            "*",
        )
    )
    for logical_id in stateless.find_resources(STATE_MACHINE):  # a first execution has its permissions
        assert any(
            "StateMachinePolicy" in d for d in stateless.to_json()["Resources"][logical_id]["DependsOn"]
        )


def test_the_purge_runs_on_its_schedule(stateless: Template, config: EnvironmentConfig) -> None:
    (schedule,) = stateless.find_resources("AWS::Scheduler::Schedule").values()
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
    (policy,) = [
        p
        for p in stateless.find_resources(MANAGED_POLICY).values()
        if p["Properties"]["Roles"] == [{"Ref": role_id}]
    ]
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Action"] == "states:StartExecution"
    assert statement["Resource"]["Fn::Join"][1][-1] == f":stateMachine:{config.search.domain_name}-purge"


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
