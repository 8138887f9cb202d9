"""Deploy-graph analysis of synthesized CloudFormation templates: small pure helpers over template dicts.

CloudFormation creates a resource after everything it depends on and deletes it before everything it depends on
(on ``cdk destroy`` and on the rollback of a failed create alike). A resource's dependencies are its
``DependsOn`` plus every ``Ref``, ``Fn::GetAtt`` and ``Fn::Sub`` (``${LogicalId}``, ``${LogicalId.Attr}``) naming
another resource of the same template; parameters and pseudo-parameters are not resources.

One environment is two templates, ``{"Stateful": ..., "Stateless": ...}`` (``Templates``). A value one stack takes
from the other (``Fn::ImportValue``, ``Fn::GetStackOutput``, an SSM-typed template parameter whose default names an
``AWS::SSM::Parameter`` of the other template, or a role's fixed name or ARN) is ordered by the stage's stack
dependency, so a resource of the other template always counts as ordered; ``resolve`` follows such values to the
resources they stand for, so a check can look at, say, the key policy of the key that encrypts a topic.

Each ``*_problems`` function is one deploy-graph check: it returns one message per defect, naming the logical ids
(``<stack kind>/<logical id>``) and what is missing, and an empty list when the environment is sound.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Any, ParamSpec

from infra.templates import (  # noqa: F401 (re-exported for the checks' tests)
    DOMAIN_NETWORK_TYPES,
    PSEUDO_PARAMETERS,
    STATEFUL_TYPES,
    SUB_VARIABLE,
    referenced_names,
    sub_names,
)

Template = Mapping[str, Any]
Templates = Mapping[str, Template]  # stack kind ("Stateful", "Stateless") → template
Node = tuple[str, str]  # (stack kind, logical id)
P = ParamSpec("P")

SSM_PARAMETER_TYPE_PREFIX = "AWS::SSM::Parameter::Value<"
CDK_BOOTSTRAP_PARAMETER = "BootstrapVersion"

FUNCTION = "AWS::Lambda::Function"
ROLE = "AWS::IAM::Role"
POLICY_TYPES = ("AWS::IAM::ManagedPolicy", "AWS::IAM::Policy", "AWS::IAM::RolePolicy")
SECURITY_GROUP = "AWS::EC2::SecurityGroup"
SECURITY_GROUP_RULES = {
    # rule type → the properties naming the groups it connects
    "AWS::EC2::SecurityGroupIngress": ("GroupId", "SourceSecurityGroupId"),
    "AWS::EC2::SecurityGroupEgress": ("GroupId", "DestinationSecurityGroupId"),
}
VPC_ENDPOINT = "AWS::EC2::VPCEndpoint"
CUSTOM_RESOURCE = "AWS::CloudFormation::CustomResource"
# The CDK provider framework names the user functions it runs in its own environment.
PROVIDER_USER_FUNCTION_VARIABLES = ("USER_ON_EVENT_FUNCTION_ARN", "USER_IS_COMPLETE_FUNCTION_ARN")
# What the framework calls on a user function: Invoke, and GetFunction in the waiter it runs when an idle in-VPC
# function has gone inactive (ResourceNotReadyException).
PROVIDER_USER_FUNCTION_ACTIONS = ("lambda:InvokeFunction", "lambda:GetFunction")
TOPIC = "AWS::SNS::Topic"
TOPIC_POLICY_TYPES = {"AWS::SNS::TopicPolicy": "Topics", "AWS::SNS::TopicInlinePolicy": "TopicArn"}
ALARM_TYPES = ("AWS::CloudWatch::Alarm", "AWS::CloudWatch::CompositeAlarm")
ALARM_ACTION_PROPERTIES = ("AlarmActions", "OKActions", "InsufficientDataActions")
CLOUDWATCH = "cloudwatch.amazonaws.com"
# What CloudWatch needs on the key of an encrypted topic (AWS: "CloudWatch alarm actions for encrypted topics").
KMS_ACTIONS_FOR_CLOUDWATCH = ("kms:Decrypt", "kms:GenerateDataKey*")
KMS_KEY = "AWS::KMS::Key"
KMS_ALIAS = "AWS::KMS::Alias"
DOMAIN = "AWS::OpenSearchService::Domain"
LOG_GROUP = "AWS::Logs::LogGroup"
LOG_RESOURCE_POLICY = "AWS::Logs::ResourcePolicy"
LOG_DELIVERY_ACTIONS = ("logs:PutLogEvents", "logs:CreateLogStream")
OPENSEARCH = "es.amazonaws.com"
FLOW_LOG = "AWS::EC2::FlowLog"
EVENT_SOURCE_MAPPING = "AWS::Lambda::EventSourceMapping"
SSM_PARAMETER = "AWS::SSM::Parameter"
QUEUE = "AWS::SQS::Queue"
ENI_ACTION = "ec2:CreateNetworkInterface"
# What Lambda checks the execution role may do on a function's dead-letter target, by the target's type.
DEAD_LETTER_ACTIONS = {QUEUE: "sqs:SendMessage", TOPIC: "sns:Publish"}

# RetainExceptOnCreate keeps the resource too, except on the rollback of the deploy that created it (then empty).
RETAINING_POLICIES = {
    "DeletionPolicy": ("Retain", "RetainExceptOnCreate"),
    "UpdateReplacePolicy": ("Retain",),
}


def listed(check: Callable[P, Iterator[str]]) -> Callable[P, list[str]]:
    """A check that yields its messages, returning them as a list."""

    @functools.wraps(check)
    def collected(*args: P.args, **kwargs: P.kwargs) -> list[str]:
        return list(check(*args, **kwargs))

    return collected


# --- templates ------------------------------------------------------------------------------------------------


def resources(template: Template) -> Mapping[str, Any]:
    return template.get("Resources", {})  # type: ignore[no-any-return]


def resource_type(templates: Templates, node: Node) -> str | None:
    resource = resources(templates[node[0]]).get(node[1])
    return None if resource is None else str(resource.get("Type"))


def properties(templates: Templates, node: Node) -> Mapping[str, Any]:
    return resources(templates[node[0]])[node[1]].get("Properties", {})  # type: ignore[no-any-return]


def of_type(template: Template, *types: str) -> list[tuple[str, Mapping[str, Any]]]:
    return [(logical_id, r) for logical_id, r in resources(template).items() if r.get("Type") in types]


def nodes_of_type(templates: Templates, *types: str) -> list[Node]:
    return [(kind, logical_id) for kind, t in templates.items() for logical_id, _ in of_type(t, *types)]


def is_custom_resource(resource: Mapping[str, Any]) -> bool:
    kind = str(resource.get("Type", ""))
    return kind.startswith("Custom::") or kind == CUSTOM_RESOURCE


def as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def name(node: Node) -> str:
    return f"{node[0]}/{node[1]}"


def names(nodes: Iterable[Node]) -> str:
    return ", ".join(sorted(name(node) for node in nodes)) or "(none)"


# --- the dependency graph of one template ---------------------------------------------------------------------


def direct_dependencies(template: Template, logical_id: str) -> set[str]:
    """The resources ``logical_id`` depends on directly: ``DependsOn`` and every reference to another resource."""
    all_resources = resources(template)
    resource = all_resources[logical_id]
    edges = set(as_list(resource.get("DependsOn")))
    body = {key: item for key, item in resource.items() if key not in ("Type", "DependsOn", "Condition")}
    edges |= referenced_names(body)
    return {target for target in edges if target in all_resources and target != logical_id}


def dependency_closure(template: Template, logical_id: str) -> frozenset[str]:
    """Every resource ``logical_id`` depends on, directly or transitively (not itself)."""
    seen: set[str] = set()
    stack = [logical_id]
    while stack:
        for target in direct_dependencies(template, stack.pop()):
            if target not in seen:
                seen.add(target)
                stack.append(target)
    seen.discard(logical_id)
    return frozenset(seen)


def ordered_before(templates: Templates, subject: Node, dependency: Node) -> bool:
    """Whether CloudFormation creates ``dependency`` before ``subject`` and deletes it after: another stack of the
    environment is ordered by the stack dependency; within one template it must be in the dependency closure."""
    if dependency[0] != subject[0]:
        return True
    return dependency[1] in dependency_closure(templates[subject[0]], subject[1])


# --- resolving values to resources, across the environment's two templates ----------------------------------


def _ssm_parameter_defaults(template: Template) -> dict[str, Any]:
    return {
        parameter_name: parameter.get("Default")
        for parameter_name, parameter in template.get("Parameters", {}).items()
        if str(parameter.get("Type", "")).startswith(SSM_PARAMETER_TYPE_PREFIX)
    }


def _written_parameter(templates: Templates, parameter_name: Any) -> Iterator[tuple[str, Any]]:
    """(kind, Value) of every ``AWS::SSM::Parameter`` whose ``Name`` is ``parameter_name``."""
    for node in nodes_of_type(templates, SSM_PARAMETER):
        if properties(templates, node).get("Name") == parameter_name:
            yield node[0], properties(templates, node).get("Value")


def _role_named(templates: Templates, string: str) -> set[Node]:
    """Roles whose fixed ``RoleName`` is ``string`` or ends ``string`` as an ARN (``arn:*:iam::*:role/[path/]name``;
    pseudo-parameters rendered as ``*``)."""
    found = set()
    for role in nodes_of_type(templates, ROLE):
        role_name = properties(templates, role).get("RoleName")
        if isinstance(role_name, str) and (
            string == role_name
            or re.fullmatch(r"arn:[^:]+:iam::[^:]*:role/(?:[^/]+/)*" + re.escape(role_name), string)
        ):
            found.add(role)
    return found


def render(value: Any, pseudo: Mapping[str, str] | None = None) -> str | None:
    """``value`` as a plain string: literals, ``Fn::Join`` and ``Fn::Sub`` of them, and pseudo-parameters from
    ``pseudo`` (``"*"`` for any pseudo-parameter when ``pseudo`` is None); None when it names anything else."""
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, dict) or len(value) != 1:
        return None
    ((function, argument),) = value.items()
    if function == "Ref" and argument in PSEUDO_PARAMETERS:
        return "*" if pseudo is None else pseudo.get(argument)
    if function == "Fn::Join" and isinstance(argument, list) and len(argument) == 2:
        parts = [render(part, pseudo) for part in as_list(argument[1])]
        if isinstance(argument[0], str) and all(part is not None for part in parts):
            return argument[0].join(parts)  # type: ignore[arg-type]
        return None
    if function == "Fn::Sub" and isinstance(argument, str):
        rendered: str | None = argument
        for variable in SUB_VARIABLE.findall(argument):
            if variable.startswith("!"):
                continue
            replacement = render({"Ref": variable}, pseudo) if variable in PSEUDO_PARAMETERS else None
            if replacement is None or rendered is None:
                return None
            rendered = rendered.replace("${" + variable + "}", replacement)
        return None if rendered is None else rendered.replace("${!", "${")
    return None


def resolve(templates: Templates, kind: str, value: Any, _depth: int = 0) -> set[Node]:
    """The resources ``value`` (an expression of the ``kind`` template) stands for, in either template.

    Follows ``Ref``/``Fn::GetAtt``/``Fn::Sub`` to resources of the same template, ``Fn::ImportValue`` to the output
    exporting that name, ``Fn::GetStackOutput`` to the other template's output of that name, an SSM-typed
    parameter to the ``AWS::SSM::Parameter`` its default names, and a role's fixed name or ARN to the role.
    """
    if _depth > 8:
        return set()
    template = templates[kind]
    own = resources(template)
    parameters = _ssm_parameter_defaults(template)
    found: set[Node] = set()

    def follow(other_kind: str, expression: Any) -> None:
        found.update(resolve(templates, other_kind, expression, _depth + 1))

    def walk(node: Any) -> None:
        if isinstance(node, str):
            found.update(_role_named(templates, node))
            return
        if isinstance(node, list):
            for item in node:
                walk(item)
            return
        if not isinstance(node, dict):
            return
        if len(node) == 1:
            ((function, argument),) = node.items()
            if function == "Fn::ImportValue":
                for other_kind, other in templates.items():
                    for output in other.get("Outputs", {}).values():
                        if output.get("Export", {}).get("Name") == argument:
                            follow(other_kind, output.get("Value"))
                return
            if function == "Fn::GetStackOutput" and isinstance(argument, dict):
                for other_kind, other in templates.items():
                    if other_kind != kind and argument.get("OutputName") in other.get("Outputs", {}):
                        follow(other_kind, other["Outputs"][argument["OutputName"]].get("Value"))
                return
            if function in ("Fn::Join", "Fn::Sub"):
                rendered = render(node)
                if rendered is not None:
                    walk(rendered)
        for referenced in referenced_names(node):
            if referenced in own:
                found.add((kind, referenced))
            elif referenced in parameters:
                for other_kind, written in _written_parameter(templates, parameters[referenced]):
                    follow(other_kind, written)
        for function, argument in node.items():
            if function not in ("Ref", "Fn::GetAtt", "Fn::ImportValue", "Fn::GetStackOutput"):
                walk(argument)

    walk(value)
    return found


def resolve_to(templates: Templates, kind: str, value: Any, *types: str) -> list[Node]:
    """The resources of one of ``types`` that ``value`` stands for (``resolve``), sorted."""
    return sorted(n for n in resolve(templates, kind, value) if resource_type(templates, n) in types)


# --- IAM documents --------------------------------------------------------------------------------------------


def statements(document: Any) -> list[Mapping[str, Any]]:
    if not isinstance(document, dict):
        return []
    return [statement for statement in as_list(document.get("Statement")) if isinstance(statement, dict)]


def action_covered(statement: Mapping[str, Any], action: str) -> bool:
    """Whether the statement's actions include every action matching ``action`` (which may end in ``*``)."""
    wanted = action.lower()
    if "Action" in statement:
        return any(
            isinstance(pattern, str) and fnmatchcase(wanted, pattern.lower())
            for pattern in as_list(statement["Action"])
        )
    if "NotAction" in statement:
        return not any(
            isinstance(pattern, str)
            and (fnmatchcase(wanted, pattern.lower()) or fnmatchcase(pattern.lower(), wanted))
            for pattern in as_list(statement["NotAction"])
        )
    return False


def service_principals(statement: Mapping[str, Any], pseudo: Mapping[str, str] | None = None) -> set[str]:
    principal = statement.get("Principal")
    if not isinstance(principal, dict):
        return set()
    return {rendered for item in as_list(principal.get("Service")) if (rendered := render(item, pseudo))}


def resource_covered(
    templates: Templates, kind: str, statement: Mapping[str, Any], target: Node | None
) -> bool:
    """Whether the statement's ``Resource`` names ``target`` (``*``, or an expression resolving to it; any
    resource when ``target`` is None)."""
    return "Resource" in statement and any(
        item == "*" or target is None or target in resolve(templates, kind, item)
        for item in as_list(statement["Resource"])
    )


def allowing_statements(
    templates: Templates,
    kind: str,
    document: Any,
    action: str,
    target: Node | None = None,
    service: str | None = None,
    pseudo: Mapping[str, str] | None = None,
) -> list[Mapping[str, Any]]:
    """The Allow statements of ``document`` (an expression of the ``kind`` template) granting ``action`` on
    ``target`` (to the service principal ``service``, if given)."""
    return [
        statement
        for statement in statements(document)
        if statement.get("Effect") == "Allow"
        and action_covered(statement, action)
        and resource_covered(templates, kind, statement, target)
        and (service is None or service in service_principals(statement, pseudo))
    ]


def json_policy_document(value: Any) -> Any:
    """A policy document given as a JSON string (``AWS::Logs::ResourcePolicy``), possibly a ``Fn::Join`` of
    literals and references, parsed with each reference put back as an expression: ``"<ref>:*"`` comes back as
    ``{"Fn::Join": ["", [<ref>, ":*"]]}``. Dicts are returned as they are; None when it is not JSON."""
    if isinstance(value, dict) and not any(key.startswith("Fn::") for key in value):
        return value
    tokens: list[Any] = []

    def flatten(node: Any) -> str:
        if isinstance(node, str):
            return node
        if isinstance(node, dict) and set(node) == {"Fn::Join"} and isinstance(node["Fn::Join"][0], str):
            separator, parts = node["Fn::Join"]
            return str(separator).join(flatten(part) for part in as_list(parts))
        tokens.append(node)
        return f"@@{len(tokens) - 1}@@"

    try:
        document = json.loads(flatten(value))
    except (TypeError, ValueError):
        return None

    def restore(node: Any) -> Any:
        if isinstance(node, str) and "@@" in node:
            parts = [
                tokens[int(piece)] if index % 2 else piece
                for index, piece in enumerate(re.split(r"@@(\d+)@@", node))
                if piece != ""
            ]
            return parts[0] if len(parts) == 1 else {"Fn::Join": ["", parts]}
        if isinstance(node, dict):
            return {key: restore(item) for key, item in node.items()}
        if isinstance(node, list):
            return [restore(item) for item in node]
        return node

    return restore(document)


def role_of(templates: Templates, subject: Node, role_property: str = "Role") -> Node | None:
    """The role a function (``Role``) or flow log (``DeliverLogsPermissionArn``) runs as, when it is a template role."""
    roles = resolve_to(templates, subject[0], properties(templates, subject).get(role_property), ROLE)
    return roles[0] if len(roles) == 1 else None


def attached_policies(templates: Templates, role: Node) -> list[Node]:
    """Every ``AWS::IAM::ManagedPolicy``/``AWS::IAM::Policy`` listing ``role`` in ``Roles`` and every
    ``AWS::IAM::RolePolicy`` naming it in ``RoleName``, in either template."""
    found = []
    for node in nodes_of_type(templates, *POLICY_TYPES):
        props = properties(templates, node)
        named = as_list(props.get("Roles")) + as_list(props.get("RoleName"))
        if any(role in resolve(templates, node[0], item) for item in named):
            found.append(node)
    return sorted(found)


def role_documents(templates: Templates, role: Node) -> list[tuple[Node, Any]]:
    """(where it lives, policy document) of every policy granting ``role`` something: its attached policies and
    its own inline ``Policies``."""
    documents = [
        (node, properties(templates, node).get("PolicyDocument"))
        for node in attached_policies(templates, role)
    ]
    for inline in as_list(properties(templates, role).get("Policies")):
        if isinstance(inline, dict):
            documents.append((role, inline.get("PolicyDocument")))
    return documents


def granting_policies(
    templates: Templates, role: Node, action: str, target: Node | None = None
) -> list[Node]:
    """Where the permission ``action`` on ``target`` comes from for ``role`` (policies, or the role for inline)."""
    documents = role_documents(templates, role)
    return sorted(
        {where for where, doc in documents if allowing_statements(templates, where[0], doc, action, target)}
    )


def permission_order_problems(
    templates: Templates, subject: Node, role: Node, action: str, target: Node | None, why: str
) -> list[str]:
    """``role`` must be granted ``action`` on ``target`` by a policy ordered before ``subject``."""
    grants = granting_policies(templates, role, action, target)
    on = f" on {name(target)}" if target else ""
    if not grants:
        return [f"{name(subject)}: no policy of its role {name(role)} allows {action}{on} ({why})"]
    if any(ordered_before(templates, subject, grant) for grant in grants):
        return []
    return [
        f"{name(subject)}: {names(grants)} (allowing {action}{on} to {name(role)}) is not in its dependency "
        f"closure, so CloudFormation may create it first and delete the grant first ({why})"
    ]


# --- 1. custom resources ---------------------------------------------------------------------------------------


def custom_resources(templates: Templates) -> list[Node]:
    return [
        (kind, i) for kind, t in templates.items() for i, r in resources(t).items() if is_custom_resource(r)
    ]


def service_token_functions(templates: Templates, custom_resource: Node) -> list[Node]:
    token = properties(templates, custom_resource).get("ServiceToken")
    return resolve_to(templates, custom_resource[0], token, FUNCTION)


def user_functions(templates: Templates, framework: Node) -> set[Node]:
    """The user functions the CDK provider framework names in the ``framework`` function's environment."""
    variables = properties(templates, framework).get("Environment", {}).get("Variables", {})
    return {
        n
        for variable in PROVIDER_USER_FUNCTION_VARIABLES
        if variable in variables
        for n in resolve_to(templates, framework[0], variables[variable], FUNCTION)
    }


def functions_run_by(templates: Templates, custom_resource: Node) -> list[Node]:
    """The function a custom resource's ``ServiceToken`` names, plus the user functions the CDK provider framework
    names in that function's environment."""
    framework = service_token_functions(templates, custom_resource)
    return sorted(set(framework).union(*(user_functions(templates, function) for function in framework)))


def security_groups_of(templates: Templates, function: Node) -> set[Node]:
    groups = properties(templates, function).get("VpcConfig", {}).get("SecurityGroupIds")
    return set(resolve_to(templates, function[0], groups, SECURITY_GROUP))


def what_a_function_needs(templates: Templates, function: Node, kind: str) -> dict[Node, str]:
    """The resources of the ``kind`` template ``function`` needs to run: its role's policies, the security-group
    rules of its groups and, in a VPC, the template's VPC endpoints; each with why."""
    needs: dict[Node, str] = {}
    role = role_of(templates, function)
    if role is not None:
        for policy in attached_policies(templates, role):
            needs[policy] = f"policy of its role {name(role)}"
    groups = security_groups_of(templates, function)
    for rule_type, group_properties in SECURITY_GROUP_RULES.items():
        for logical_id, rule in of_type(templates[kind], rule_type):
            rule_props = rule.get("Properties", {})
            connected = set().union(*(resolve(templates, kind, rule_props.get(p)) for p in group_properties))
            if connected & groups:
                needs[(kind, logical_id)] = f"rule of its security group {names(connected & groups)}"
    if "VpcConfig" in properties(templates, function):
        for logical_id, _ in of_type(templates[kind], VPC_ENDPOINT):
            needs[(kind, logical_id)] = "VPC endpoint of its network"
    return {node: why for node, why in needs.items() if node[0] == kind}


@listed
def custom_resource_problems(templates: Templates) -> Iterator[str]:
    """Check 1: each custom resource's dependency closure holds what the functions it runs need (their role's
    policies, their security groups' rules, the VPC endpoints), or on delete/rollback those go first and the
    Delete call hangs (and on create the handler may start before it can reach its targets)."""
    for subject in custom_resources(templates):
        kind = subject[0]
        closure = dependency_closure(templates[kind], subject[1])
        missing: dict[Node, list[str]] = {}
        for function in functions_run_by(templates, subject):
            if function[0] != kind:
                continue
            for needed, why in what_a_function_needs(templates, function, kind).items():
                if needed[1] not in closure:
                    missing.setdefault(needed, []).append(f"{why}, for {name(function)}")
        for needed, whys in sorted(missing.items()):
            yield (
                f"{name(subject)}: {name(needed)} ({resource_type(templates, needed)}; {'; '.join(sorted(whys))}) "
                "is not in its dependency closure"
            )


# --- 2. the provider framework's own permissions ---------------------------------------------------------------


@listed
def provider_framework_problems(templates: Templates) -> Iterator[str]:
    """Check 2: every provider-framework function (a custom resource's service token naming user functions in its
    environment) may ``lambda:InvokeFunction`` and ``lambda:GetFunction`` each user function."""
    frameworks = {
        f for custom in custom_resources(templates) for f in service_token_functions(templates, custom)
    }
    for framework in sorted(frameworks):
        users = user_functions(templates, framework)
        if not users:
            continue
        role = role_of(templates, framework)
        if role is None:
            yield f"{name(framework)}: its role is not a role of this environment; cannot check"
            continue
        for user in sorted(users):
            for action in PROVIDER_USER_FUNCTION_ACTIONS:
                if not granting_policies(templates, role, action, user):
                    yield (
                        f"{name(framework)}: no policy of its role {name(role)} allows {action} on the user "
                        f"function {name(user)}"
                    )


# --- 3. alarm actions ------------------------------------------------------------------------------------------


def _scoped_to_account(statement: Mapping[str, Any], pseudo: Mapping[str, str]) -> bool:
    """Whether the statement's condition limits it to this account's alarms (``aws:SourceAccount`` equal to the
    account, or ``aws:SourceArn`` within ``arn:<partition>:cloudwatch:<region>:<account>:alarm:``)."""
    account = pseudo["AWS::AccountId"]
    alarms = f"arn:{pseudo['AWS::Partition']}:cloudwatch:{pseudo['AWS::Region']}:{account}:alarm:"
    for block in (statement.get("Condition") or {}).values():
        if not isinstance(block, dict):
            continue
        for key, values in block.items():
            rendered = [render(value, pseudo) for value in as_list(values)]
            if not rendered or any(value is None for value in rendered):
                continue
            if key.lower() == "aws:sourceaccount" and all(value == account for value in rendered):
                return True
            if key.lower() == "aws:sourcearn" and all(str(value).startswith(alarms) for value in rendered):
                return True
    return False


def topic_policies(templates: Templates, topic: Node) -> list[Node]:
    found = []
    for policy_type, topics_property in TOPIC_POLICY_TYPES.items():
        for node in nodes_of_type(templates, policy_type):
            if topic in resolve(templates, node[0], properties(templates, node).get(topics_property)):
                found.append(node)
    return sorted(found)


def _key_of(templates: Templates, topic: Node) -> tuple[Node | None, str | None]:
    """The template key encrypting a topic, or why it cannot be found (None, None when unencrypted)."""
    key_id = properties(templates, topic).get("KmsMasterKeyId")
    if key_id is None:
        return None, None
    targets = resolve(templates, topic[0], key_id)
    for node in sorted(targets):
        if resource_type(templates, node) == KMS_ALIAS:
            targets |= resolve(templates, node[0], properties(templates, node).get("TargetKeyId"))
    keys = sorted(n for n in targets if resource_type(templates, n) == KMS_KEY)
    if keys:
        return keys[0], None
    if key_id == "alias/aws/sns":
        return None, "the AWS-managed key alias/aws/sns, whose policy CloudWatch can never use"
    return (
        None,
        f"key {json.dumps(key_id)}, which is not a key of this environment (its policy cannot be checked)",
    )


@listed
def alarm_topic_problems(templates: Templates, pseudo: Mapping[str, str]) -> Iterator[str]:
    """Check 3: every topic an alarm publishes to has a topic policy allowing CloudWatch (this account's alarms)
    ``sns:Publish``, ordered before the alarm; an encrypted topic's key lets CloudWatch use it."""
    checked_topics: set[Node] = set()
    for alarm in nodes_of_type(templates, *ALARM_TYPES):
        props = properties(templates, alarm)
        actions = [item for p in ALARM_ACTION_PROPERTIES for item in as_list(props.get(p))]
        for topic in resolve_to(templates, alarm[0], actions, TOPIC):
            policies = topic_policies(templates, topic)
            for policy in policies:
                if not ordered_before(templates, alarm, policy):
                    yield (
                        f"{name(alarm)}: the policy {name(policy)} of its topic {name(topic)} is not in its "
                        "dependency closure (the first notification may be refused)"
                    )
            if topic in checked_topics:
                continue
            checked_topics.add(topic)
            yield from _topic_problems(templates, topic, policies, pseudo)


def _topic_problems(
    templates: Templates, topic: Node, policies: list[Node], pseudo: Mapping[str, str]
) -> Iterator[str]:
    if not policies:
        yield f"{name(topic)}: alarms publish to it but no topic policy allows {CLOUDWATCH} sns:Publish"
    if len(policies) > 1:
        yield f"{name(topic)}: {len(policies)} topic policies ({names(policies)}); each replaces the other"
    for policy in policies:
        document = properties(templates, policy).get("PolicyDocument")
        allowed = allowing_statements(
            templates, policy[0], document, "sns:Publish", topic, CLOUDWATCH, pseudo
        )
        if not any(_scoped_to_account(s, pseudo) for s in allowed):
            effects = sorted({str(s.get("Effect")) for s in statements(document)})
            only_deny = (
                " it holds only Deny statements and replaces SNS's default policy, so"
                if effects == ["Deny"]
                else ""
            )
            yield (
                f"{name(policy)} (policy of {name(topic)}): no Allow statement for {CLOUDWATCH} sns:Publish on the "
                f"topic scoped to this account (aws:SourceAccount / aws:SourceArn);{only_deny} alarms cannot notify"
            )
    key, unknown = _key_of(templates, topic)
    if unknown:
        yield f"{name(topic)}: encrypted with {unknown}"
    if key is not None:
        key_policy = properties(templates, key).get("KeyPolicy")
        for action in KMS_ACTIONS_FOR_CLOUDWATCH:
            if not allowing_statements(templates, key[0], key_policy, action, None, CLOUDWATCH, pseudo):
                yield f"{name(key)} (key of {name(topic)}): its key policy does not allow {CLOUDWATCH} {action}"


# --- 4. log delivery -------------------------------------------------------------------------------------------


def log_resource_policies_allowing(templates: Templates, group: Node, service: str) -> list[Node]:
    """The ``AWS::Logs::ResourcePolicy`` resources letting ``service`` create streams and put events in ``group``."""
    found = []
    for node in nodes_of_type(templates, LOG_RESOURCE_POLICY):
        document = json_policy_document(properties(templates, node).get("PolicyDocument"))
        if all(
            allowing_statements(templates, node[0], document, a, group, service) for a in LOG_DELIVERY_ACTIONS
        ):
            found.append(node)
    return sorted(found)


@listed
def log_delivery_problems(templates: Templates) -> Iterator[str]:
    """Check 4: the permission every log writer needs is ordered before the writer.

    - an OpenSearch domain's log group: an ``AWS::Logs::ResourcePolicy`` allowing ``es.amazonaws.com``
      ``logs:PutLogEvents`` and ``logs:CreateLogStream`` on it, in the domain's closure;
    - a flow log delivering with a role: the role's policy granting ``logs:PutLogEvents`` on its group;
    - a function with ``LoggingConfig.LogGroup``: its role's policy granting ``logs:PutLogEvents`` on that group.
    """
    for domain in nodes_of_type(templates, DOMAIN):
        options = properties(templates, domain).get("LogPublishingOptions", {})
        for log_type, option in sorted(options.items()):
            if not isinstance(option, dict) or option.get("Enabled") is False:
                continue
            arn = option.get("CloudWatchLogsLogGroupArn")
            groups = resolve_to(templates, domain[0], arn, LOG_GROUP)
            if not groups:
                yield f"{name(domain)}: {log_type} log group {json.dumps(arn)} is not in the templates"
            for group in groups:
                policies = log_resource_policies_allowing(templates, group, OPENSEARCH)
                if not policies:
                    yield (
                        f"{name(domain)}: no {LOG_RESOURCE_POLICY} allows {OPENSEARCH} "
                        f"{' and '.join(LOG_DELIVERY_ACTIONS)} on its {log_type} group {name(group)}"
                    )
                elif not any(ordered_before(templates, domain, policy) for policy in policies):
                    yield (
                        f"{name(domain)}: the log resource policy {names(policies)} letting it write its {log_type} "
                        f"group {name(group)} is not in its dependency closure (domain creation races it)"
                    )
    for flow_log in nodes_of_type(templates, FLOW_LOG):
        props = properties(templates, flow_log)
        if "DeliverLogsPermissionArn" not in props:
            continue
        role = role_of(templates, flow_log, "DeliverLogsPermissionArn")
        if role is None:
            continue
        destination = [props.get("LogGroupName"), props.get("LogDestination")]
        targets: Sequence[Node | None] = resolve_to(templates, flow_log[0], destination, LOG_GROUP)
        for log_group in targets or [None]:
            why = "flow logs deliver as this role"
            yield from permission_order_problems(
                templates, flow_log, role, "logs:PutLogEvents", log_group, why
            )
    for function in nodes_of_type(templates, FUNCTION):
        group_value = properties(templates, function).get("LoggingConfig", {}).get("LogGroup")
        role = role_of(templates, function)
        if group_value is None or role is None:
            continue
        for group in resolve_to(templates, function[0], group_value, LOG_GROUP):
            why = "the function logs to this group"
            yield from permission_order_problems(templates, function, role, "logs:PutLogEvents", group, why)


# --- extra: what Lambda validates when it creates a function or an event source mapping ---------------------


@listed
def lambda_validation_problems(templates: Templates) -> Iterator[str]:
    """Lambda validates some of the execution role's permissions when it creates a function (ENI actions for a VPC
    function, ``sqs:SendMessage``/``sns:Publish`` on its dead-letter target) or a stream event source mapping
    (reading the stream, sending to the on-failure destination): the granting policies must come first."""
    for function in nodes_of_type(templates, FUNCTION):
        props = properties(templates, function)
        role = role_of(templates, function)
        if role is None:
            continue
        if "VpcConfig" in props:
            why = "Lambda checks it on create"
            yield from permission_order_problems(templates, function, role, ENI_ACTION, None, why)
        target_arn = props.get("DeadLetterConfig", {}).get("TargetArn")
        for target in resolve_to(templates, function[0], target_arn, *DEAD_LETTER_ACTIONS):
            action = DEAD_LETTER_ACTIONS[resource_type(templates, target) or ""]
            why = "Lambda checks its dead-letter target on create"
            yield from permission_order_problems(templates, function, role, action, target, why)
    for mapping in nodes_of_type(templates, EVENT_SOURCE_MAPPING):
        props = properties(templates, mapping)
        functions = resolve_to(templates, mapping[0], props.get("FunctionName"), FUNCTION)
        role = role_of(templates, functions[0]) if len(functions) == 1 else None
        if role is None:
            continue
        source = sorted(resolve(templates, mapping[0], props.get("EventSourceArn")))
        if any(resource_type(templates, n) == "AWS::DynamoDB::Table" for n in source):
            for action in ("dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"):
                yield from permission_order_problems(
                    templates, mapping, role, action, source[0], "Lambda checks stream access on create"
                )
        on_failure = props.get("DestinationConfig", {}).get("OnFailure", {}).get("Destination")
        for target in resolve_to(templates, mapping[0], on_failure, QUEUE):
            why = "Lambda checks the destination on create"
            yield from permission_order_problems(templates, mapping, role, "sqs:SendMessage", target, why)


# --- 5. deletion and replacement policies ------------------------------------------------------------------


def domain_foundations(templates: Templates) -> dict[Node, str]:
    """What retained VPC domains stand on: the network, each domain's security groups, its FGAC master role
    (when created in the templates) and the permission to deliver its logs; each with why."""
    found: dict[Node, str] = {
        node: "network of the domain" for node in nodes_of_type(templates, *DOMAIN_NETWORK_TYPES)
    }
    for domain in nodes_of_type(templates, DOMAIN):
        options = properties(templates, domain).get("LogPublishingOptions", {})
        arns = [
            option.get("CloudWatchLogsLogGroupArn") for option in options.values() if isinstance(option, dict)
        ]
        for group in resolve(templates, domain[0], arns):
            for policy in log_resource_policies_allowing(templates, group, OPENSEARCH):
                found[policy] = f"log delivery permission of {name(domain)}"
    for domain in nodes_of_type(templates, DOMAIN):
        props = properties(templates, domain)
        groups = props.get("VPCOptions", {}).get("SecurityGroupIds")
        for group in resolve_to(templates, domain[0], groups, SECURITY_GROUP):
            found[group] = f"security group of {name(domain)}"
        master = props.get("AdvancedSecurityOptions", {}).get("MasterUserOptions", {}).get("MasterUserARN")
        for role in resolve_to(templates, domain[0], master, ROLE):
            found[role] = f"FGAC master role of {name(domain)}"
    return found


@listed
def retention_problems(templates: Templates, retains_data: bool) -> Iterator[str]:
    """Check 5: every stateful resource states ``DeletionPolicy`` and ``UpdateReplacePolicy``; in a retaining
    environment both are ``Retain``, and so are the network, security groups and master role of the domain."""
    subjects = {node: "stateful resource" for node in nodes_of_type(templates, *STATEFUL_TYPES)}
    if retains_data:
        subjects.update(domain_foundations(templates))
    for node, why in sorted(subjects.items()):
        resource = resources(templates[node[0]])[node[1]]
        for policy, retaining in RETAINING_POLICIES.items():
            value = resource.get(policy)
            if retains_data and value not in retaining:
                yield f"{name(node)} ({resource['Type']}, {why}): {policy} is {value or 'unset'}, not Retain"
            elif value is None:
                yield f"{name(node)} ({resource['Type']}): no explicit {policy}"


def termination_protection(manifest: Mapping[str, Any], template_file: str) -> bool | None:
    """The ``terminationProtection`` of the cloud-assembly stack artifact deploying ``template_file``."""
    for artifact in manifest.get("artifacts", {}).values():
        artifact_properties = artifact.get("properties", {})
        if (
            artifact.get("type") == "aws:cloudformation:stack"
            and artifact_properties.get("templateFile") == template_file
        ):
            return bool(artifact_properties.get("terminationProtection", False))
    return None


# --- 6. cross-stack values -------------------------------------------------------------------------------------


def _intrinsic_uses(value: Any, function: str) -> int:
    if isinstance(value, dict):
        return sum((key == function) + _intrinsic_uses(item, function) for key, item in value.items())
    if isinstance(value, list):
        return sum(_intrinsic_uses(item, function) for item in value)
    return 0


@listed
def cross_stack_problems(
    templates: Templates, producer: str = "Stateful", consumer: str = "Stateless"
) -> Iterator[str]:
    """Check 6: the consumer imports nothing (no ``Fn::ImportValue``, no ``Fn::GetStackOutput``), the producer
    exports nothing, and every SSM-typed parameter of the consumer reads a parameter the producer writes."""
    for function in ("Fn::ImportValue", "Fn::GetStackOutput"):
        uses = _intrinsic_uses(templates[consumer], function)
        if uses:
            yield f"{consumer}: {uses} {function} (an export in use blocks every change to its value)"
    exports = sorted(n for n, output in templates[producer].get("Outputs", {}).items() if "Export" in output)
    if exports:
        yield f"{producer}: {len(exports)} outputs carry an Export: {', '.join(exports)}"
    written = {
        resource.get("Properties", {}).get("Name")
        for _, resource in of_type(templates[producer], SSM_PARAMETER)
    }
    for parameter_name, default in sorted(_ssm_parameter_defaults(templates[consumer]).items()):
        if parameter_name == CDK_BOOTSTRAP_PARAMETER:
            continue
        if default not in written:
            yield (
                f"{consumer}: SSM-typed parameter {parameter_name} reads {json.dumps(default)}, which no "
                f"{SSM_PARAMETER} of {producer} writes"
            )


# --- 7. engine upgrades ----------------------------------------------------------------------------------------


def engine_upgrade_problems(templates: Templates) -> list[str]:
    """Check 7: every OpenSearch domain upgrades its engine in place (``UpdatePolicy.EnableVersionUpgrade``), or
    an ``EngineVersion`` change replaces the domain (a new, empty domain; with Retain, a name clash)."""
    return [
        f"{name(domain)}: UpdatePolicy.EnableVersionUpgrade is not true"
        for domain in nodes_of_type(templates, DOMAIN)
        if resources(templates[domain[0]])[domain[1]].get("UpdatePolicy", {}).get("EnableVersionUpgrade")
        is not True
    ]
