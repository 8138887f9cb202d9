"""The index bootstrap custom resource, its handler in the VPC, and the hardened provider framework function."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk.assertions import Capture, Match
from refdata.indexnames import read_alias
from refdata.registry import indexable_schemas
from search.indices import bootstrap_fingerprint
from search.readers import read_role_definitions

from infra.config import EnvironmentConfig
from infra.constructs.vpc_function import ENI_ACTIONS
from tests.infra.conftest import read_roles
from tests.infra.test_stream_sync import (
    XRAY_ACTIONS,
    allow,
    data_key_arn,
    domain_endpoint,
    one,
    permissions,
    policy_attached_to,
    resolve,
    role_arn,
    subnet_refs,
)
from tests.support.template import Template

BOOTSTRAP = "Custom::OpenSearchIndexBootstrap"
FUNCTION = "AWS::Lambda::Function"
HANDLER = "index_bootstrap.handler.on_event"
ADMIN_ROLE_DESCRIPTION = "OpenSearch fine-grained access control master user"
SYNC_ROLE_DESCRIPTION = "DynamoDB stream to OpenSearch sync"
BOOTSTRAP_ROLE_DESCRIPTION = "Index bootstrap custom resource"


def schema_names() -> list[str]:
    return [schema.name for schema in indexable_schemas()]


def bootstrap_properties(stateful: Template, stateless: Template) -> dict[str, Any]:
    _, resource = one(stateless, BOOTSTRAP)
    return resolve(stateful, stateless, resource["Properties"])


def handler_function(stateless: Template) -> tuple[str, dict[str, Any]]:
    return one(stateless, FUNCTION, {"Handler": HANDLER})


def framework_function(stateless: Template) -> tuple[str, dict[str, Any]]:
    """The function CloudFormation calls: the one the custom resource's service token names."""
    token = Capture()
    stateless.has_resource_properties(BOOTSTRAP, {"ServiceToken": {"Fn::GetAtt": [token, "Arn"]}})
    return token.as_string(), stateless.find_resources(FUNCTION)[token.as_string()]


def framework_dead_letter_queue_id(stateless: Template) -> str:
    _, framework = framework_function(stateless)
    return framework["Properties"]["DeadLetterConfig"]["TargetArn"]["Fn::GetAtt"][0]


# --- the custom resource ------------------------------------------------------------------------------------


def test_stateless_stack_has_one_index_bootstrap(stateless: Template) -> None:
    stateless.resource_count_is(BOOTSTRAP, 1)


def test_bootstrap_targets_the_domain_endpoint_over_https(stateful: Template, stateless: Template) -> None:
    assert bootstrap_properties(stateful, stateless)["Endpoint"] == {
        "Fn::Join": ["", ["https://", domain_endpoint(stateful)]]
    }


def test_bootstrap_signs_for_the_environment_region(stateless: Template, config: EnvironmentConfig) -> None:
    stateless.has_resource_properties(BOOTSTRAP, {"Region": config.region})


def test_bootstrap_acts_as_admin_and_maps_the_sync_role(stateful: Template, stateless: Template) -> None:
    properties = bootstrap_properties(stateful, stateless)
    assert properties["AdminRoleArn"] == role_arn(stateful, ADMIN_ROLE_DESCRIPTION)
    assert properties["SyncRoleArn"] == role_arn(stateful, SYNC_ROLE_DESCRIPTION)


def test_bootstrap_covers_exactly_the_indexable_schemas(stateless: Template) -> None:
    stateless.has_resource_properties(BOOTSTRAP, {"Schemas": schema_names()})


def test_bootstrap_fingerprint_tracks_the_desired_templates(
    stateless: Template, config: EnvironmentConfig
) -> None:
    fingerprint = bootstrap_fingerprint(schema_names(), replicas=config.search.replicas)
    stateless.has_resource_properties(BOOTSTRAP, {"Fingerprint": fingerprint})


def test_bootstrap_gives_every_index_the_configured_replica_count(
    stateless: Template, config: EnvironmentConfig
) -> None:
    stateless.has_resource_properties(BOOTSTRAP, {"Replicas": str(config.search.replicas)})


def test_bootstrap_puts_the_configured_read_roles_with_their_security(
    stateless: Template, config: EnvironmentConfig
) -> None:
    _, resource = one(stateless, BOOTSTRAP)
    roles = read_roles(config)

    definitions = json.loads(resource["Properties"]["ReadRoles"])

    # Each read role is mapped to its own roles and to the smoke run's probe of it (infra/constructs/smoke.py).
    probes = {role.name: config.role_arn(config.search.probe_role_name(role.name)) for role in roles}
    assert definitions == read_role_definitions(
        (role.name, role.schemas, (*role.mapped_backend_roles, probes[role.name])) for role in roles
    )
    for role in roles:
        assert definitions[role.name]["mapping"]["backend_roles"] == sorted(
            [*role.mapped_backend_roles, probes[role.name]]
        )
        assert [p["index_patterns"] for p in definitions[role.name]["role"]["index_permissions"]] == [
            [read_alias(schema)] for schema in role.schemas
        ]


def test_bootstrap_has_no_undocumented_properties(stateless: Template) -> None:
    _, resource = one(stateless, BOOTSTRAP)
    assert set(resource["Properties"]) == {
        "ServiceToken",
        "Endpoint",
        "Region",
        "AdminRoleArn",
        "SyncRoleArn",
        "Schemas",
        "Replicas",
        "Fingerprint",
        "ReadRoles",
    }


# --- the handler --------------------------------------------------------------------------------------------


def test_handler_runs_python_3_14_on_arm64_with_tracing(stateless: Template) -> None:
    stateless.has_resource_properties(
        FUNCTION,
        {
            "Handler": HANDLER,
            "Runtime": "python3.14",
            "Architectures": ["arm64"],
            "TracingConfig": {"Mode": "Active"},
        },
    )


def test_handler_runs_in_every_isolated_subnet_with_its_own_group(
    stateful: Template, stateless: Template
) -> None:
    _, handler = handler_function(stateless)
    vpc_config = resolve(stateful, stateless, handler["Properties"]["VpcConfig"])
    assert sorted(map(json.dumps, vpc_config["SubnetIds"])) == sorted(map(json.dumps, subnet_refs(stateful)))
    ((group,),) = [vpc_config["SecurityGroupIds"]]
    assert group["Fn::GetAtt"][0] in stateless.find_resources("AWS::EC2::SecurityGroup")


def test_handler_assumes_the_bootstrap_role(stateful: Template, stateless: Template) -> None:
    _, handler = handler_function(stateless)
    assert resolve(stateful, stateless, handler["Properties"]["Role"]) == role_arn(
        stateful, BOOTSTRAP_ROLE_DESCRIPTION
    )


def test_handler_logs_to_an_encrypted_group_with_configured_retention(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    _, handler = handler_function(stateless)
    group = stateless.find_resources("AWS::Logs::LogGroup")[
        handler["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
    ]
    assert resolve(stateful, stateless, group["Properties"]) == {
        "KmsKeyId": data_key_arn(stateful),
        "RetentionInDays": config.log_retention_days,
    }


def test_bootstrap_role_may_only_assume_the_admin_role(stateful: Template) -> None:
    bootstrap_role = {"Ref": one(stateful, "AWS::IAM::Role", {"Description": BOOTSTRAP_ROLE_DESCRIPTION})[0]}
    policy = policy_attached_to(stateful, stateful, bootstrap_role)
    assert permissions(policy["PolicyDocument"]) == allow(
        ["sts:AssumeRole"], role_arn(stateful, ADMIN_ROLE_DESCRIPTION)
    )


def test_handler_policy_grants_only_logs_networking_and_tracing(
    stateful: Template, stateless: Template
) -> None:
    _, handler = handler_function(stateless)
    group_id = handler["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
    bootstrap_role = {"Ref": one(stateful, "AWS::IAM::Role", {"Description": BOOTSTRAP_ROLE_DESCRIPTION})[0]}
    policy = policy_attached_to(stateless, stateful, bootstrap_role)
    assert permissions(policy["PolicyDocument"]) == (
        allow(["logs:CreateLogStream", "logs:PutLogEvents"], {"Fn::GetAtt": [group_id, "Arn"]})
        | allow(ENI_ACTIONS + XRAY_ACTIONS, "*")
    )


# --- the provider framework function ------------------------------------------------------------------------


def test_framework_invokes_the_handler(stateless: Template) -> None:
    handler_id, _ = handler_function(stateless)
    _, framework = framework_function(stateless)
    assert framework["Properties"]["Environment"]["Variables"]["USER_ON_EVENT_FUNCTION_ARN"] == {
        "Fn::GetAtt": [handler_id, "Arn"]
    }


def test_framework_is_traced(stateless: Template) -> None:
    _, framework = framework_function(stateless)
    assert framework["Properties"]["TracingConfig"] == {"Mode": "Active"}


def test_framework_dead_letters_to_an_encrypted_tls_only_queue(
    stateful: Template, stateless: Template
) -> None:
    queue_id = framework_dead_letter_queue_id(stateless)
    queue = stateless.find_resources("AWS::SQS::Queue")[queue_id]
    assert resolve(stateful, stateless, queue["Properties"]["KmsMasterKeyId"]) == data_key_arn(stateful)
    stateless.has_resource_properties(
        "AWS::SQS::QueuePolicy",
        {
            "Queues": [{"Ref": queue_id}],
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}}
                        )
                    ]
                )
            },
        },
    )


def test_framework_runs_in_the_vpc_with_encrypted_environment(
    stateful: Template, stateless: Template
) -> None:
    _, framework = framework_function(stateless)
    properties = resolve(stateful, stateless, framework["Properties"])
    assert sorted(map(json.dumps, properties["VpcConfig"]["SubnetIds"])) == sorted(
        map(json.dumps, subnet_refs(stateful))
    )
    assert properties["KmsKeyArn"] == data_key_arn(stateful)


def test_framework_logs_to_an_encrypted_group_with_configured_retention(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    _, framework = framework_function(stateless)
    group_id = framework["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
    group = stateless.find_resources("AWS::Logs::LogGroup")[group_id]
    assert resolve(stateful, stateless, group["Properties"]) == {
        "KmsKeyId": data_key_arn(stateful),
        "RetentionInDays": config.log_retention_days,
    }


def test_framework_role_has_exactly_the_permissions_it_needs(stateful: Template, stateless: Template) -> None:
    handler_id, _ = handler_function(stateless)
    framework_id, framework = framework_function(stateless)
    role_id = framework["Properties"]["Role"]["Fn::GetAtt"][0]
    group_id = framework["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
    policy = resolve(
        stateful, stateless, policy_attached_to(stateless, stateful, {"Ref": role_id})["PolicyDocument"]
    )
    assert permissions(policy) == (
        allow(["lambda:InvokeFunction", "lambda:GetFunction"], {"Fn::GetAtt": [handler_id, "Arn"]})
        | allow(["logs:CreateLogStream", "logs:PutLogEvents"], {"Fn::GetAtt": [group_id, "Arn"]})
        | allow(ENI_ACTIONS + XRAY_ACTIONS, "*")
        | allow(["kms:Decrypt", "kms:GenerateDataKey"], data_key_arn(stateful))
        | allow(["sqs:SendMessage"], {"Fn::GetAtt": [framework_dead_letter_queue_id(stateless), "Arn"]})
    )
    assert framework_id != handler_id


def test_stateless_stack_has_exactly_the_sync_handler_framework_and_ops_worker_functions(
    stateless: Template,
) -> None:
    # A fifth function would be a hidden CDK provider (log retention, auto-delete) nobody hardened.
    stateless.resource_count_is(FUNCTION, 4)
