"""Deploy-graph checks: what a first ``cdk deploy``, a ``cdk destroy`` or a rollback would hit, in every environment.

The fine-grained assertions elsewhere check each resource's properties; these check the graph between resources
(CloudFormation creates a resource after its dependencies and deletes it before them) and the permissions one AWS
service needs from another. The analysis is in ``tests/infra/deploy_graph.py`` (pure helpers, each tested on
hand-written templates in ``test_deploy_graph_helpers.py``); the templates are the session's synthesized ones.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.environments import environments
from infra.templates import Stack
from tests.infra import deploy_graph as dg
from tests.infra.conftest import STACK_KINDS, Synthesized

_templates: dict[str, dict[str, Any]] = {}


@pytest.fixture
def templates(synthesized: Synthesized, env: str) -> dict[str, Any]:
    """The environment's two templates by stack kind, read once per session."""
    if env not in _templates:
        _templates[env] = {kind: synthesized.template_json(env, kind) for kind in STACK_KINDS}
    return _templates[env]


def assert_none(problems: list[str], what: str) -> None:
    if problems:
        pytest.fail(f"{what}: {len(problems)} problem(s)\n  - " + "\n  - ".join(problems), pytrace=False)


def test_custom_resources_depend_on_everything_their_functions_need(templates: dict[str, Any]) -> None:
    """A custom resource runs its service-token function and, with the CDK provider framework, the user handler
    named in its environment. Their role's policies, their security groups' rules and (in a VPC) the template's VPC
    endpoints must be in the custom resource's closure: otherwise ``cdk destroy`` or a failed first deploy's
    rollback deletes them first, the Delete call can no longer reach Lambda or the domain and hangs
    (DELETE_FAILED / ROLLBACK_FAILED), and on create the handler may start before it can reach the domain."""
    assert_none(dg.custom_resource_problems(templates), "custom resources ordered before what they need")


def test_provider_framework_may_invoke_and_get_its_user_functions(templates: dict[str, Any]) -> None:
    """The framework's onEvent function invokes the user handler and, when an idle in-VPC function has gone
    inactive, waits for it with ``lambda:GetFunction``: its role needs both on the handler."""
    assert_none(dg.provider_framework_problems(templates), "provider framework permissions")


def test_every_alarm_topic_lets_cloudwatch_publish(templates: dict[str, Any], env: str) -> None:
    """A topic policy replaces SNS's default policy: it must allow ``cloudwatch.amazonaws.com`` ``sns:Publish`` for
    this account's alarms (and be created before them); an encrypted topic's key must let CloudWatch use it."""
    config = environments()[env]
    pseudo = Stack(f"{env}/Stateless", {}, "", config.account, config.region).pseudo_parameters()
    assert_none(dg.alarm_topic_problems(templates, pseudo), "alarm notifications")


def test_log_writers_are_created_after_the_permission_to_write(templates: dict[str, Any]) -> None:
    """OpenSearch checks at domain creation that it may write its log groups (``AWS::Logs::ResourcePolicy``);
    flow logs and functions write as their role: each grant must be ordered before its writer."""
    assert_none(dg.log_delivery_problems(templates), "log delivery permissions ordered before the writers")


def test_lambda_validations_at_creation_are_ordered(templates: dict[str, Any]) -> None:
    """Lambda validates the execution role at CreateFunction (ENI actions in a VPC, the dead-letter target) and at
    CreateEventSourceMapping (stream reads, on-failure destination): the grants must exist by then."""
    assert_none(dg.lambda_validation_problems(templates), "permissions Lambda validates at creation")


def test_stateful_resources_state_deletion_and_replacement_policies(
    templates: dict[str, Any], env: str
) -> None:
    """Tables, buckets, keys, domains, log groups, vaults and queues say what happens on delete and on replacement;
    in environments that retain data both are Retain, and so are the network, security groups and master role the
    retained domain stands on (a retained domain whose subnets or master role were deleted cannot be used)."""
    retains = environments()[env].retains_data
    assert_none(dg.retention_problems(templates, retains), "deletion and update-replace policies")


def test_stateful_stack_is_termination_protected_where_data_is_retained(
    synthesized: Synthesized, env: str
) -> None:
    template_file = synthesized.stack(env, "Stateful")["templateFile"]
    manifest = json.loads((synthesized.outdir / f"assembly-{env}" / "manifest.json").read_text())
    protected = dg.termination_protection(manifest, template_file)
    assert protected is not None, f"{env}/Stateful: no stack artifact deploys {template_file}"
    if environments()[env].retains_data:
        assert protected, f"{env}/Stateful ({template_file}): terminationProtection is false in the assembly"


def test_stateless_stack_strands_no_export(templates: dict[str, Any]) -> None:
    """The stateless stack reads what the stateful stack hands over from SSM parameters the stateful stack writes:
    no ``Fn::ImportValue`` / ``Fn::GetStackOutput`` and no exports, so no stateful change is ever blocked by an
    "export in use" (and the CLI never skips the stateless deploy: it has SSM-typed parameters)."""
    assert_none(dg.cross_stack_problems(templates), "cross-stack values")


def test_search_domains_upgrade_their_engine_in_place(templates: dict[str, Any]) -> None:
    """Without ``UpdatePolicy.EnableVersionUpgrade`` an ``EngineVersion`` change replaces the domain."""
    assert_none(dg.engine_upgrade_problems(templates), "engine upgrades")
