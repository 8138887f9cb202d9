"""Optional OpenSearch Dashboards sign-in (off by default): Cognito or SAML from config, and the access policy
each needs; without it the REST API and Dashboards stay IAM-only."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from aws_cdk import App, Environment, Stage

from infra.app_builder import committed_context
from infra.config import CognitoLogin, ConfigError, SamlLogin
from infra.environments import environments
from infra.nag import RULE_PACKS
from infra.stacks.stateful import StatefulStack
from tests.infra.conftest import base_config
from tests.support.template import Template

DOMAIN = "AWS::OpenSearchService::Domain"
AUTHENTICATED_ROLE = "arn:aws:iam::111111111111:role/refdata-dev-dashboards-users"
COGNITO = CognitoLogin(
    user_pool_id="ca-central-1_AbCdEf123",
    identity_pool_id="ca-central-1:0f0e0d0c-0b0a-0908-0706-050403020100",
    authenticated_role_arn=AUTHENTICATED_ROLE,
)
IDP = "https://portal.sso.ca-central-1.amazonaws.com/saml/assertion/ExampleIdP"
SAML = SamlLogin(
    idp_entity_id=IDP,
    idp_metadata_xml=f'<md:EntityDescriptor entityID="{IDP}"></md:EntityDescriptor>',
    master_backend_role="search-admins",
)


def stateful_with(login: CognitoLogin | SamlLogin) -> StatefulStack:
    dev = base_config()
    config = replace(dev, search=replace(dev.search, dashboards_login=login))
    environment = Environment(account=dev.account, region=dev.region)
    return StatefulStack(
        Stage(App(context=committed_context()), dev.name, env=environment), "Stateful", config=config
    )


@pytest.fixture(scope="module")
def stacks() -> dict[str, StatefulStack]:
    return {"cognito": stateful_with(COGNITO), "saml": stateful_with(SAML)}


@pytest.fixture(scope="module")
def cognito(stacks: dict[str, StatefulStack]) -> Template:
    return Template.from_stack(stacks["cognito"])


@pytest.fixture(scope="module")
def saml(stacks: dict[str, StatefulStack]) -> Template:
    return Template.from_stack(stacks["saml"])


def domain(template: Template) -> dict[str, Any]:
    (resource,) = template.find_resources(DOMAIN).values()
    return resource["Properties"]  # type: ignore[no-any-return]


def login_statements(template: Template) -> list[dict[str, Any]]:
    """The access policy without the read roles' statements (tests/infra/test_search_domain.py checks those)."""
    statements = domain(template)["AccessPolicies"]["Statement"]
    return [statement for statement in statements if "Condition" not in statement]


def test_shipped_environments_have_no_dashboards_login() -> None:
    assert all(config.search.dashboards_login is None for config in environments().values())


def test_without_a_login_dashboards_has_neither_cognito_nor_saml(stateful: Template) -> None:
    properties = domain(stateful)
    assert "CognitoOptions" not in properties
    assert "SAMLOptions" not in properties["AdvancedSecurityOptions"]
    assert len(login_statements(stateful)) == 1


def test_cognito_login_uses_the_configured_pools_through_a_service_role(cognito: Template) -> None:
    options = domain(cognito)["CognitoOptions"]
    assert options["Enabled"] is True
    assert (options["UserPoolId"], options["IdentityPoolId"]) == (
        COGNITO.user_pool_id,
        COGNITO.identity_pool_id,
    )
    role_id = options["RoleArn"]["Fn::GetAtt"][0]
    role = cognito.find_resources("AWS::IAM::Role")[role_id]["Properties"]
    principal = role["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]
    assert principal == {"Service": "opensearchservice.amazonaws.com"}


def test_cognito_users_act_as_the_authenticated_role_which_the_access_policy_admits(
    cognito: Template,
) -> None:
    (statement,) = login_statements(cognito)
    assert AUTHENTICATED_ROLE in statement["Principal"]["AWS"]


def test_saml_login_names_the_idp_and_its_admin_group(saml: Template) -> None:
    options = domain(saml)["AdvancedSecurityOptions"]["SAMLOptions"]
    assert options["Enabled"] is True
    assert options["Idp"] == {"EntityId": IDP, "MetadataContent": SAML.idp_metadata_xml}
    assert (options["MasterBackendRole"], options["RolesKey"]) == ("search-admins", "Role")


def test_saml_opens_only_dashboards_to_unsigned_browser_requests(saml: Template) -> None:
    signed, browser = login_statements(saml)
    assert signed["Principal"]["AWS"] != "*"
    assert browser["Principal"] == {"AWS": "*"}
    assert browser["Resource"]["Fn::Join"][1][-1] == ":domain/refdata-dev/_dashboards*"


@pytest.mark.parametrize("pack", RULE_PACKS, ids=lambda pack: pack.__name__)
@pytest.mark.parametrize("login", ["cognito", "saml"])
def test_rule_packs_pass_with_either_login(login: str, pack, stacks: dict[str, StatefulStack]) -> None:  # type: ignore[no-untyped-def]
    result = pack().validate_scope(stacks[login])
    assert result.success, [violation.rule_name for violation in result.violations]


@pytest.mark.parametrize(
    ("login", "field"),
    [
        (replace(COGNITO, user_pool_id="pool"), "user_pool_id"),
        (replace(COGNITO, identity_pool_id="ca-central-1_x"), "identity_pool_id"),
        (replace(COGNITO, authenticated_role_arn="users"), "authenticated_role_arn"),
        (replace(SAML, idp_metadata_xml="<html/>"), "idp_metadata_xml"),
        (replace(SAML, master_backend_role=" "), "master_backend_role"),
        (replace(SAML, session_timeout_minutes=5), "session_timeout_minutes"),
    ],
)
def test_invalid_login_setting_names_its_field(login: CognitoLogin | SamlLogin, field: str) -> None:
    dev = base_config()
    with pytest.raises(ConfigError, match=rf"^{dev.name}\.search\.dashboards_login\.{field}: "):
        replace(dev, search=replace(dev.search, dashboards_login=login))
