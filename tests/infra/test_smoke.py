"""What the smoke run needs in every environment (infra/constructs/smoke.py): the ops worker's settings and its
canary-only permissions, a probe role per configured read role (mapped to it alone, admitted like it, assumable by
the worker only), the smoke runner role the deploy workflow assumes and its exact permissions, and the outputs."""

from __future__ import annotations

import json
from typing import Any

from refdata.indexnames import read_alias
from refdata.reserved import CANARY, scope_prefix

from infra.config import SMOKE_WAIT_SECONDS, EnvironmentConfig
from infra.constructs.ops_workflows import state_machine_name
from infra.constructs.smoke import SMOKE_WORKER_POLICY
from ops import deployed
from tests.infra.conftest import read_roles
from tests.infra.templates_helpers import (
    ITEM_WRITES,
    MANAGED_POLICY,
    MAPPING,
    WORKER_ROLE,
    admitted,
    allow,
    allow_each,
    aws_arn,
    data_key_arn,
    kms_via,
    mappings,
    objects,
    ops_bucket,
    permissions,
    policy_attached_to,
    quoted,
    resolve,
    role_arn,
    s3_arn,
    stream_arns,
    table_arns,
    worker_function,
    worker_role,
)
from tests.support.template import Template

ROLE = "AWS::IAM::Role"


def worker_variables(stateful: Template, stateless: Template) -> dict[str, Any]:
    _, worker = worker_function(stateless)
    return dict(resolve(stateful, stateless, worker["Properties"]["Environment"]["Variables"]))


def probes(stateless: Template) -> dict[str, tuple[str, dict[str, Any]]]:
    """Role name -> (logical id, properties) of every probe role."""
    return {
        r["Properties"]["RoleName"]: (logical_id, r["Properties"])
        for logical_id, r in stateless.find_resources(ROLE).items()
        if "-probe-" in str(r["Properties"].get("RoleName", ""))
    }


def joined(value: dict[str, Any], stateful: Template, stateless: Template) -> Any:
    """A `Fn::Join`ed JSON environment variable as JSON, each CloudFormation expression kept as a JSON string."""
    separator, parts = resolve(stateful, stateless, value)["Fn::Join"]
    return json.loads(separator.join(p if isinstance(p, str) else quoted(p) for p in parts))


def test_the_worker_knows_each_tables_event_source_mapping(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    variables = worker_variables(stateful, stateless)
    found = joined(variables["EVENT_SOURCE_MAPPINGS"], stateful, stateless)
    streams = stream_arns(stateful, config)
    by_stream = {json.dumps(arn): construct_id for construct_id, arn in streams.items()}
    ids = {}
    for logical_id, mapping in stateless.find_resources(MAPPING).items():
        source = resolve(stateful, stateless, mapping["Properties"]["EventSourceArn"])
        ids[by_stream[json.dumps(source)]] = logical_id
    expected = {}
    for plan in config.source_tables:
        table = {"Fn::Select": [1, {"Fn::Split": ["/", streams[plan.construct_id]]}]}
        expected[quoted(table)] = quoted({"Ref": ids[plan.construct_id]})
    assert found == expected
    assert len(mappings(stateful, stateless, config)) == len(found)


def test_the_worker_knows_every_read_role_with_its_probe_and_its_wait(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    variables = worker_variables(stateful, stateless)
    readers = joined(variables["SMOKE_READERS"], stateful, stateless)
    found = probes(stateless)
    expected = []
    for role in config.search.read_roles:
        logical_id, _ = found[config.search.probe_role_name(role.name)]
        arn = quoted({"Fn::GetAtt": [logical_id, "Arn"]})
        expected.append({"name": role.name, "schemas": list(role.schemas), "probeRoleArn": arn})
    assert readers == expected
    assert variables["SMOKE_WAIT_SECONDS"] == str(SMOKE_WAIT_SECONDS)
    assert variables["SMOKE_STARTUP_MINUTES"] == str(config.ops.smoke_startup_minutes)


def test_each_read_role_has_a_probe_only_the_worker_may_assume_that_may_read_exactly_what_its_reader_reads(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    """In one account, the access policy's statement naming the account root (with an aws:PrincipalArn condition)
    only delegates to the caller's identity policy: the probe must itself be allowed its reader's read-alias
    requests, and nothing else, or every smoke run ends in 403 at the reader step."""
    found = probes(stateless)
    assert sorted(found) == sorted(
        config.search.probe_role_name(role.name) for role in config.search.read_roles
    )
    for role in read_roles(config):
        logical_id, properties = found[config.search.probe_role_name(role.name)]
        (statement,) = resolve(stateful, stateless, properties["AssumeRolePolicyDocument"])["Statement"]
        assert statement["Principal"] == {"AWS": role_arn(stateful, WORKER_ROLE)}
        assert statement["Action"] == "sts:AssumeRole" and "Condition" not in statement
        assert "ManagedPolicyArns" not in properties and "Policies" not in properties
        attached = [
            p["Properties"]
            for p in stateless.find_resources(MANAGED_POLICY).values()
            if {"Ref": logical_id} in p["Properties"]["Roles"]
        ]
        assert len(attached) == 1, f"{role.name}: {len(attached)} policies on its probe"
        granted = permissions(attached[0]["PolicyDocument"])
        probe_arn = f":role/{properties['RoleName']}"
        assert granted and granted == admitted(stateful, probe_arn), role.name
        assert {action for _, action, _ in granted} == {"es:ESHttpGet", "es:ESHttpPost"}
        for _, _, resource in granted:
            assert any(f"/{read_alias(schema)}/" in resource for schema in role.schemas), resource
        assert len(properties["RoleName"]) <= 64


def test_the_worker_may_write_only_canaries_and_read_only_the_mappings(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    (policy,) = [
        p["Properties"]
        for logical_id, p in stateless.find_resources(MANAGED_POLICY).items()
        if logical_id.startswith(SMOKE_WORKER_POLICY)
    ]
    assert resolve(stateful, stateless, policy["Roles"]) == [worker_role(stateful)]
    tables = table_arns(stateful, config)
    expected: set[tuple[str, str, str]] = set()
    for plan in config.source_tables:
        prefixes = [scope_prefix(schema, CANARY) for schema in plan.indexable_schemas]
        keys = [f"{prefix}*" if prefix.endswith("::") else prefix for prefix in prefixes]
        only = {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": keys}}
        expected |= allow(ITEM_WRITES, tables[plan.construct_id], only)
    expected |= allow(["kms:Encrypt", "kms:DescribeKey"], data_key_arn(stateful), kms_via("dynamodb"))
    for logical_id in stateless.find_resources(MAPPING):
        arn = aws_arn("lambda", ":event-source-mapping:", {"Ref": logical_id})
        expected |= allow(["lambda:GetEventSourceMapping"], arn)
    for logical_id, _ in probes(stateless).values():
        expected |= allow(["sts:AssumeRole"], {"Fn::GetAtt": [logical_id, "Arn"]})
    assert permissions(resolve(stateful, stateless, policy["PolicyDocument"])) == expected


def test_the_deploy_role_may_assume_the_smoke_runner_which_may_only_run_and_follow_the_smoke(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    (logical_id, runner), *others = [
        (i, r["Properties"])
        for i, r in stateless.find_resources(ROLE).items()
        if r["Properties"].get("RoleName") == config.smoke_runner_role_name
    ]
    assert others == []
    (trust,) = runner["AssumeRolePolicyDocument"]["Statement"]
    account = config.deploy_role_arn.split(":")[4]
    assert trust["Condition"] == {"ArnEquals": {"aws:PrincipalArn": config.deploy_role_arn}}
    # Matched by name under its account: the deploy role need not exist when the stack is deployed.
    assert trust["Principal"] == {"AWS": f"arn:{config.partition}:iam::{account}:root"}
    policy = policy_attached_to(stateless, stateful, {"Ref": logical_id})
    machine = next(
        i
        for i, m in stateless.find_resources("AWS::StepFunctions::StateMachine").items()
        if m["Properties"]["StateMachineName"] == state_machine_name(config.search.domain_name, "smoke")
    )
    expected = (
        allow_each(
            ["cloudformation:DescribeStacks"],
            [
                aws_arn("cloudformation", f":stack/{config.name}-{kind}/*")
                for kind in ("Stateful", "Stateless")
            ],
        )
        | allow(["states:StartExecution"], {"Ref": machine})
        | allow(
            ["states:DescribeExecution", "states:GetExecutionHistory"],
            aws_arn("states", f":execution:{state_machine_name(config.search.domain_name, 'smoke')}:*"),
        )
        | allow(["s3:GetObject"], objects(stateful, "runs/smoke/*"))
        | allow(["s3:ListBucket"], s3_arn(ops_bucket(stateful)))
        | allow(["kms:Decrypt"], data_key_arn(stateful))
    )
    assert permissions(resolve(stateful, stateless, policy["PolicyDocument"])) == expected


def test_the_stack_names_the_smoke_workflow_and_its_runner_for_the_cli_and_the_workflow(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    outputs = stateless.to_json()["Outputs"]
    machine = outputs[deployed.STATE_MACHINE_OUTPUTS["smoke"]]["Value"]["Ref"]
    assert stateless.to_json()["Resources"][machine]["Properties"]["StateMachineName"].endswith("-smoke")
    runner = outputs["SmokeRunnerRoleArn"]["Value"]["Fn::GetAtt"][0]
    assert stateless.to_json()["Resources"][runner]["Properties"]["RoleName"] == config.smoke_runner_role_name
