"""The search roles: fixed names per environment, and an admin role only the bootstrap and named principals assume."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from aws_cdk import App, Environment, RemovalPolicy, Stack

from infra.app_builder import committed_context
from infra.config import SSO_ADMINISTRATORS, EnvironmentConfig
from infra.constructs.search_access import SearchAccess
from tests.infra.conftest import base_config
from tests.infra.templates_helpers import one
from tests.support.template import Template

ROLE = "AWS::IAM::Role"
ADMIN_ROLE_DESCRIPTION = "OpenSearch fine-grained access control master user"
BOOTSTRAP_ROLE_DESCRIPTION = "Index bootstrap custom resource"
OPS_WORKER_ROLE_DESCRIPTION = "Ops workflows worker (reindex, reconcile, redrive, tombstone purge)"


def trust_statements(template: Template) -> list[dict[str, Any]]:
    _, admin = one(template, ROLE, {"Description": ADMIN_ROLE_DESCRIPTION})
    return list(admin["Properties"]["AssumeRolePolicyDocument"]["Statement"])


def access_for(config: EnvironmentConfig) -> Template:
    """Only the search roles of ``config``, in a stack of their own (no full synth)."""
    environment = Environment(account=config.account, region=config.region)
    stack = Stack(App(context=committed_context()), "Access", env=environment)
    SearchAccess(stack, "SearchAccess", config=config, removal_policy=RemovalPolicy.RETAIN)
    return Template.from_stack(stack)


def test_roles_have_fixed_names_per_environment(stateful: Template, config: EnvironmentConfig) -> None:
    names = {resource["Properties"].get("RoleName") for resource in stateful.find_resources(ROLE).values()}
    base = config.search.domain_name
    expected = {f"{base}-{role}" for role in ("search-admin", "stream-sync", "index-bootstrap", "ops-worker")}
    assert expected <= names


def test_admin_role_trusts_only_the_bootstrap_and_ops_worker_roles_and_the_configured_principals(
    stateful: Template, config: EnvironmentConfig
) -> None:
    bootstrap_id, _ = one(stateful, ROLE, {"Description": BOOTSTRAP_ROLE_DESCRIPTION})
    worker_id, _ = one(stateful, ROLE, {"Description": OPS_WORKER_ROLE_DESCRIPTION})
    assert trust_statements(stateful) == [
        {
            "Action": "sts:AssumeRole",
            "Effect": "Allow",
            "Principal": {"AWS": [{"Fn::GetAtt": [bootstrap_id, "Arn"]}, {"Fn::GetAtt": [worker_id, "Arn"]}]},
        },
        {
            "Action": "sts:AssumeRole",
            "Effect": "Allow",
            "Principal": {"AWS": f"arn:aws:iam::{config.account}:root"},
            "Condition": {"ArnLike": {"aws:PrincipalArn": config.admin_principal_arns()}},
        },
    ]


def test_no_trust_statement_admits_a_whole_account_without_naming_principals(stateful: Template) -> None:
    for statement in trust_statements(stateful):
        principal = statement["Principal"]["AWS"]
        if isinstance(principal, str) and principal.endswith(":root"):
            assert statement["Condition"]["ArnLike"]["aws:PrincipalArn"]


@pytest.mark.parametrize(
    ("role_path", "admitted"),
    [
        # IAM Identity Center instances made since late 2023 put the region in the path; older ones do not.
        ("aws-reserved/sso.amazonaws.com/ca-central-1/AWSReservedSSO_AdministratorAccess_0123abcd", True),
        ("aws-reserved/sso.amazonaws.com/AWSReservedSSO_AdministratorAccess_0123abcd", True),
        ("aws-reserved/sso.amazonaws.com/AWSReservedSSO_ReadOnlyAccess_0123abcd", False),
        ("AWSReservedSSO_AdministratorAccess_0123abcd", False),
    ],
)
def test_by_default_the_identity_center_administrators_may_assume_the_admin_role(
    role_path: str, admitted: bool
) -> None:
    """The trust policy as AWS evaluates it (tests/support/iam.py): both path forms of the permission set's roles."""
    from tests.support.iam import Request, decide

    dev = base_config()
    assert dev.search.admin_principals == (SSO_ADMINISTRATORS,)
    (statement,) = [s for s in trust_statements(access_for(dev)) if "Condition" in s]
    principal = f"arn:aws:iam::{dev.account}:role/{role_path}"
    trust = {"Statement": [statement | {"Principal": {"AWS": f"arn:aws:iam::{dev.account}:root"}}]}
    admin_role = dev.role_arn(dev.platform_role_name("search-admin"))
    request = Request(principal, "sts:AssumeRole", admin_role, {"aws:PrincipalArn": principal})
    # The permission set's own policy allows sts:AssumeRole; the trust names the account, which delegates to it.
    administrator = {"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
    assert (decide([administrator], trust, request, resource_policy_required=True) == "allow") is admitted
    assert decide([], trust, request, resource_policy_required=True) == "implicit"


def test_without_admin_principals_only_the_bootstrap_and_the_ops_worker_assume_the_admin_role() -> None:
    dev = base_config()
    template = access_for(replace(dev, search=replace(dev.search, admin_principals=())))
    (statement,) = trust_statements(template)
    assert [set(principal) for principal in statement["Principal"]["AWS"]] == [{"Fn::GetAtt"}, {"Fn::GetAtt"}]


def test_a_principal_of_another_account_is_trusted_through_that_account_only() -> None:
    dev = base_config()
    ci = "arn:aws:iam::999999999999:role/ci/deployer"
    template = access_for(replace(dev, search=replace(dev.search, admin_principals=(ci,))))
    named = trust_statements(template)[1]
    assert named["Principal"] == {"AWS": "arn:aws:iam::999999999999:root"}
    assert named["Condition"] == {"ArnLike": {"aws:PrincipalArn": [ci]}}


def test_a_configured_master_role_replaces_the_admin_role() -> None:
    dev = base_config()
    master = f"arn:aws:iam::{dev.account}:role/platform/search-master"
    template = access_for(replace(dev, search=replace(dev.search, master_role_arn=master)))
    assert not template.find_resources(ROLE, {"Properties": {"Description": ADMIN_ROLE_DESCRIPTION}})
