"""The index bootstrap custom resource, its handler in the VPC, and the hardened provider framework function."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from aws_cdk.assertions import Match
from refdata.indexnames import read_alias
from refdata.registry import indexable_schemas
from search.indices import bootstrap_fingerprint
from search.readers import read_role_definitions

from infra.config import EnvironmentConfig
from infra.constructs.vpc_function import ENI_ACTIONS
from tests.infra.conftest import read_roles
from tests.infra.templates_helpers import (
    BOOTSTRAP,
    TLS_ONLY,
    XRAY_ACTIONS,
    allow,
    data_key_arn,
    domain_endpoint,
    framework_dead_letter_queue_id,
    framework_function,
    handler_function,
    one,
    permissions,
    policy_attached_to,
    resolve,
    role_arn,
)
from tests.support.template import Template

ADMIN_ROLE_DESCRIPTION = "OpenSearch fine-grained access control master user"
SYNC_ROLE_DESCRIPTION = "DynamoDB stream to OpenSearch sync"
BOOTSTRAP_ROLE_DESCRIPTION = "Index bootstrap custom resource"


def schema_names() -> list[str]:
    return [schema.name for schema in indexable_schemas()]


def bootstrap_properties(stateful: Template, stateless: Template) -> dict[str, Any]:
    _, resource = one(stateless, BOOTSTRAP)
    return resolve(stateful, stateless, resource["Properties"])


def bootstrap_role(stateful: Template) -> dict[str, str]:
    return {"Ref": one(stateful, "AWS::IAM::Role", {"Description": BOOTSTRAP_ROLE_DESCRIPTION})[0]}


# --- the custom resource ------------------------------------------------------------------------------------


def test_bootstrap_targets_the_domain_endpoint_over_https(stateful: Template, stateless: Template) -> None:
    assert bootstrap_properties(stateful, stateless)["Endpoint"] == {
        "Fn::Join": ["", ["https://", domain_endpoint(stateful)]]
    }


def test_bootstrap_acts_as_admin_and_maps_the_sync_role(stateful: Template, stateless: Template) -> None:
    properties = bootstrap_properties(stateful, stateless)
    assert properties["AdminRoleArn"] == role_arn(stateful, ADMIN_ROLE_DESCRIPTION)
    assert properties["SyncRoleArn"] == role_arn(stateful, SYNC_ROLE_DESCRIPTION)


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        pytest.param("Region", lambda config: config.region, id="signs_for_the_environment_region"),
        pytest.param("Schemas", lambda _: schema_names(), id="covers_exactly_the_indexable_schemas"),
        pytest.param(
            "Fingerprint",
            lambda config: bootstrap_fingerprint(schema_names(), replicas=config.search.replicas),
            id="fingerprint_tracks_the_desired_templates",
        ),
        pytest.param(
            "Replicas",
            lambda config: str(config.search.replicas),
            id="gives_every_index_the_configured_replicas",
        ),
    ],
)
def test_bootstrap_property(
    stateless: Template, config: EnvironmentConfig, key: str, expected: Callable[[EnvironmentConfig], Any]
) -> None:
    stateless.has_resource_properties(BOOTSTRAP, {key: expected(config)})


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
    documented = (
        "ServiceToken Endpoint Region AdminRoleArn SyncRoleArn Schemas Replicas Fingerprint ReadRoles"
    )
    assert set(resource["Properties"]) == set(documented.split())


# --- the handler --------------------------------------------------------------------------------------------


def test_handler_assumes_the_bootstrap_role(stateful: Template, stateless: Template) -> None:
    _, handler = handler_function(stateless)
    assert resolve(stateful, stateless, handler["Properties"]["Role"]) == role_arn(
        stateful, BOOTSTRAP_ROLE_DESCRIPTION
    )


def test_bootstrap_role_may_only_assume_the_admin_role(stateful: Template) -> None:
    policy = policy_attached_to(stateful, stateful, bootstrap_role(stateful))
    assert permissions(policy["PolicyDocument"]) == allow(
        ["sts:AssumeRole"], role_arn(stateful, ADMIN_ROLE_DESCRIPTION)
    )


def test_handler_policy_grants_only_logs_networking_and_tracing(
    stateful: Template, stateless: Template
) -> None:
    _, handler = handler_function(stateless)
    group_id = handler["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
    policy = policy_attached_to(stateless, stateful, bootstrap_role(stateful))
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


def test_framework_dead_letters_to_an_encrypted_tls_only_queue(
    stateful: Template, stateless: Template
) -> None:
    queue_id = framework_dead_letter_queue_id(stateless)
    queue = stateless.find_resources("AWS::SQS::Queue")[queue_id]
    assert resolve(stateful, stateless, queue["Properties"]["KmsMasterKeyId"]) == data_key_arn(stateful)
    deny = Match.object_like({"Effect": "Deny", "Condition": TLS_ONLY})
    stateless.has_resource_properties(
        "AWS::SQS::QueuePolicy",
        {"Queues": [{"Ref": queue_id}], "PolicyDocument": {"Statement": Match.array_with([deny])}},
    )


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
