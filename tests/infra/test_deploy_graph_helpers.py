"""The deploy-graph helpers on small hand-written templates: each check passes a sound environment and catches
the defect planted in a copy of it, so a green ``test_deploy_graph.py`` means something."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from tests.infra import deploy_graph as dg

ACCOUNT = "111111111111"
PSEUDO = {
    "AWS::AccountId": ACCOUNT,
    "AWS::Partition": "aws",
    "AWS::Region": "ca-central-1",
    "AWS::URLSuffix": "amazonaws.com",
}
ENI_ACTIONS = ["ec2:CreateNetworkInterface", "ec2:DescribeNetworkInterfaces", "ec2:DeleteNetworkInterface"]


def arn(logical_id: str) -> dict[str, Any]:
    return {"Fn::GetAtt": [logical_id, "Arn"]}


def ref(name: str) -> dict[str, str]:
    return {"Ref": name}


def allow(actions: list[str] | str, resource: Any, **extra: Any) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": actions, "Resource": resource, **extra}


def document(*statements: dict[str, Any]) -> dict[str, Any]:
    return {"Version": "2012-10-17", "Statement": list(statements)}


def retained(resource: dict[str, Any]) -> dict[str, Any]:
    return {**resource, "DeletionPolicy": "Retain", "UpdateReplacePolicy": "Retain"}


def resource(resource_type: str, depends_on: Any = None, **props: Any) -> dict[str, Any]:
    return {"Type": resource_type, "Properties": props} | ({"DependsOn": depends_on} if depends_on else {})


def managed_policy(roles: list[Any], *statements: dict[str, Any]) -> dict[str, Any]:
    return resource("AWS::IAM::ManagedPolicy", Roles=roles, PolicyDocument=document(*statements))


def service_allow(service: str, actions: list[str] | str, resource: Any, **extra: Any) -> dict[str, Any]:
    return allow(actions, resource, Principal={"Service": service}, **extra)


# The JSON text of the log resource policy up to its resource, which the template joins with the log group's ARN.
LOG_POLICY_HEAD = (
    '{"Statement":[{"Action":["logs:PutLogEvents","logs:CreateLogStream"],"Effect":"Allow",'
    '"Principal":{"Service":"es.amazonaws.com"},"Resource":"'
)


def sound_environment() -> dict[str, Any]:
    """A miniature of the platform with every deploy-graph property right: a stateful stack (key, network, domain
    with logs, flow log, the handler's role by fixed name, SSM parameters) and a stateless stack (a custom resource
    through a provider framework, an in-VPC handler, an encrypted alarm topic) reading it through SSM."""
    key_policy = document(
        allow("kms:*", "*", Principal={"AWS": f"arn:aws:iam::{ACCOUNT}:root"}),
        service_allow("cloudwatch.amazonaws.com", ["kms:Decrypt", "kms:GenerateDataKey*"], "*"),
    )
    log_policy = {"Fn::Join": ["", [LOG_POLICY_HEAD, arn("AuditLogs"), ':*"}],"Version":"2012-10-17"}']]}
    domain_group = {"Fn::GetAtt": ["DomainGroup", "GroupId"]}
    stateful = {
        "Resources": {
            "Key": retained(resource("AWS::KMS::Key", KeyPolicy=key_policy)),
            "Vpc": retained(resource("AWS::EC2::VPC", CidrBlock="10.0.0.0/16")),
            "Subnet": retained(resource("AWS::EC2::Subnet", VpcId=ref("Vpc"))),
            "RouteTable": retained(resource("AWS::EC2::RouteTable", VpcId=ref("Vpc"))),
            "Association": retained(
                resource(
                    "AWS::EC2::SubnetRouteTableAssociation",
                    SubnetId=ref("Subnet"),
                    RouteTableId=ref("RouteTable"),
                )
            ),
            "DomainGroup": retained(resource("AWS::EC2::SecurityGroup", VpcId=ref("Vpc"))),
            "AdminRole": retained(resource("AWS::IAM::Role", RoleName="search-admin")),
            "HandlerRole": resource("AWS::IAM::Role", RoleName="index-bootstrap"),
            "AuditLogs": retained(resource("AWS::Logs::LogGroup")),
            "LogDelivery": retained(
                resource("AWS::Logs::ResourcePolicy", PolicyName="search-logs", PolicyDocument=log_policy)
            ),
            "Domain": retained(
                resource(
                    "AWS::OpenSearchService::Domain",
                    ["LogDelivery"],
                    VPCOptions={"SecurityGroupIds": [domain_group], "SubnetIds": [ref("Subnet")]},
                    AdvancedSecurityOptions={"MasterUserOptions": {"MasterUserARN": arn("AdminRole")}},
                    LogPublishingOptions={
                        "AUDIT_LOGS": {"CloudWatchLogsLogGroupArn": arn("AuditLogs"), "Enabled": True}
                    },
                )
                | {"UpdatePolicy": {"EnableVersionUpgrade": True}}
            ),
            "FlowLogs": retained(resource("AWS::Logs::LogGroup")),
            "FlowLogRole": resource("AWS::IAM::Role"),
            "FlowLogPolicy": managed_policy(
                [ref("FlowLogRole")], allow(["logs:CreateLogStream", "logs:PutLogEvents"], arn("FlowLogs"))
            ),
            "FlowLog": resource(
                "AWS::EC2::FlowLog",
                ["FlowLogPolicy"],
                DeliverLogsPermissionArn=arn("FlowLogRole"),
                LogGroupName=ref("FlowLogs"),
                ResourceId=ref("Vpc"),
            ),
            "KeyArnParameter": resource(
                "AWS::SSM::Parameter", Name="/app/key-arn", Type="String", Value=arn("Key")
            ),
            "DomainGroupParameter": resource(
                "AWS::SSM::Parameter", Name="/app/domain-group", Type="String", Value=domain_group
            ),
        },
        "Outputs": {"DomainArn": {"Value": arn("Domain")}},
    }
    role_arn_parts = ["arn:", ref("AWS::Partition"), ":iam::", ref("AWS::AccountId"), ":role/index-bootstrap"]
    handler_role_arn = {"Fn::Join": ["", role_arn_parts]}
    handler_group = {"Fn::GetAtt": ["HandlerGroup", "GroupId"]}
    topic_policy = document(
        {
            "Effect": "Deny",
            "Principal": "*",
            "Action": "sns:Publish",
            "Resource": ref("Topic"),
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
        },
        service_allow(
            "cloudwatch.amazonaws.com",
            "sns:Publish",
            ref("Topic"),
            Condition={"StringEquals": {"aws:SourceAccount": ref("AWS::AccountId")}},
        ),
    )
    ssm_string = "AWS::SSM::Parameter::Value<String>"
    stateless = {
        "Parameters": {
            "BootstrapVersion": {"Type": ssm_string, "Default": "/cdk-bootstrap/x/version"},
            "KeyArn": {"Type": ssm_string, "Default": "/app/key-arn"},
            "DomainGroupId": {"Type": ssm_string, "Default": "/app/domain-group"},
        },
        "Resources": {
            "HandlerGroup": resource("AWS::EC2::SecurityGroup"),
            "HandlerToDomain": resource(
                "AWS::EC2::SecurityGroupIngress",
                GroupId=ref("DomainGroupId"),
                SourceSecurityGroupId=handler_group,
                IpProtocol="tcp",
                FromPort=443,
                ToPort=443,
            ),
            "HandlerLogs": retained(resource("AWS::Logs::LogGroup")),
            "HandlerPolicy": managed_policy(
                ["index-bootstrap"],
                allow(["logs:CreateLogStream", "logs:PutLogEvents"], arn("HandlerLogs")),
                allow(ENI_ACTIONS, "*"),
            ),
            "Handler": resource(
                "AWS::Lambda::Function",
                ["HandlerPolicy", "HandlerToDomain"],
                Role=handler_role_arn,
                VpcConfig={"SecurityGroupIds": [handler_group]},
                LoggingConfig={"LogGroup": ref("HandlerLogs")},
            ),
            "ProviderRole": resource("AWS::IAM::Role"),
            "ProviderPolicy": managed_policy(
                [ref("ProviderRole")],
                allow(
                    ["lambda:InvokeFunction", "lambda:GetFunction"],
                    [arn("Handler"), {"Fn::Join": ["", [arn("Handler"), ":*"]]}],
                ),
            ),
            "Provider": resource(
                "AWS::Lambda::Function",
                ["ProviderPolicy"],
                Role=arn("ProviderRole"),
                Environment={"Variables": {"USER_ON_EVENT_FUNCTION_ARN": arn("Handler")}},
            ),
            "Bootstrap": resource("Custom::Bootstrap", ServiceToken=arn("Provider"), Replicas="1"),
            "Topic": retained(resource("AWS::SNS::Topic", KmsMasterKeyId=ref("KeyArn"))),
            "TopicPolicy": resource(
                "AWS::SNS::TopicPolicy", Topics=[ref("Topic")], PolicyDocument=topic_policy
            ),
            "Alarm": resource(
                "AWS::CloudWatch::Alarm", "TopicPolicy", AlarmActions=[ref("Topic")], OKActions=[ref("Topic")]
            ),
        },
    }
    return {"Stateful": stateful, "Stateless": stateless}


DELETE = object()


def planted(*edits: tuple[str, Any]) -> dict[str, Any]:
    """A copy of the sound environment with each edit applied: a path ``<stack kind>/<logical id>/<key or list
    index>/...`` and the value to put there (``DELETE``: remove what is there)."""
    templates = copy.deepcopy(sound_environment())
    for path, value in edits:
        kind, *keys, last = path.split("/")
        node: Any = templates[kind]["Resources"]
        for key in keys:
            node = node[int(key) if isinstance(node, list) else key]
        at = int(last) if isinstance(node, list) else last
        if value is DELETE:
            del node[at]
        else:
            node[at] = value
    return templates


def only(problems: list[str], *fragments: str) -> None:
    assert len(problems) == 1, problems
    for fragment in fragments:
        assert fragment in problems[0], problems[0]


# --- the graph ------------------------------------------------------------------------------------------------


def test_dependencies_are_depends_on_and_every_reference_to_a_resource() -> None:
    template = {
        "Parameters": {"Param": {"Type": "String"}},
        "Resources": {
            "A": {"Type": "T", "DependsOn": "B", "Properties": {}},
            "B": {"Type": "T", "Properties": {"X": ref("C")}},
            "C": {"Type": "T", "Properties": {"X": {"Fn::GetAtt": "D.Arn"}}},
            "D": {"Type": "T", "Properties": {"X": ref("Param"), "Y": ref("AWS::Region")}},
            "E": {"Type": "T", "Properties": {"X": {"Fn::Sub": "${F.Arn}/${AWS::Region}/${!G}/${Param}"}}},
            "F": {"Type": "T", "Properties": {"X": arn("E")}},
            "G": {"Type": "T", "Properties": {}},
            "H": {
                "Type": "T",
                "Properties": {"X": {"Fn::Sub": ["${G}-${I}", {"G": "local", "I": ref("A")}]}},
            },
            "I": {"Type": "T", "Properties": {}},
        },
    }
    # Parameters and pseudo-parameters are not resources.
    assert dg.direct_dependencies(template, "D") == set()
    assert dg.dependency_closure(template, "A") == {"B", "C", "D"}
    assert dg.dependency_closure(template, "B") == {"C", "D"}
    # ${!G} is a literal; the cycle E → F → E ends.
    assert dg.dependency_closure(template, "E") == {"F"}
    # G and I are the Sub's own variables (not the resources G and I); the Ref in its mapping is an edge.
    assert dg.dependency_closure(template, "H") == {"A", "B", "C", "D"}
    assert dg.sub_names("${A}${B.Arn}${!C}${AWS::StackName}") == {"A", "B", "AWS::StackName"}


def test_resolve_follows_cross_stack_values_to_the_other_template() -> None:
    stateful = {
        "Resources": {
            "Key": {"Type": "AWS::KMS::Key"},
            "Group": {"Type": "AWS::EC2::SecurityGroup"},
            "Bucket": {"Type": "AWS::S3::Bucket"},
            "Role": {"Type": "AWS::IAM::Role", "Properties": {"RoleName": "fixed-name"}},
            "Parameter": {
                "Type": "AWS::SSM::Parameter",
                "Properties": {"Name": "/p/key", "Value": arn("Key")},
            },
        },
        "Outputs": {
            "Exported": {"Value": ref("Group"), "Export": {"Name": "Stateful:Group"}},
            "Plain": {"Value": ref("Bucket")},
        },
    }
    stateless = {
        "Parameters": {"KeyParam": {"Type": "AWS::SSM::Parameter::Value<String>", "Default": "/p/key"}},
        "Resources": {"Local": {"Type": "AWS::SNS::Topic"}},
    }
    templates: dict[str, Any] = {"Stateful": stateful, "Stateless": stateless}
    assert dg.resolve(templates, "Stateless", ref("KeyParam")) == {("Stateful", "Key")}
    assert dg.resolve(templates, "Stateless", {"Fn::ImportValue": "Stateful:Group"}) == {
        ("Stateful", "Group")
    }
    get_output = {"Fn::GetStackOutput": {"StackName": "env-Stateful", "OutputName": "Plain"}}
    assert dg.resolve(templates, "Stateless", get_output) == {("Stateful", "Bucket")}
    assert dg.resolve(templates, "Stateless", "fixed-name") == {("Stateful", "Role")}
    role_arn = {"Fn::Sub": "arn:${AWS::Partition}:iam::${AWS::AccountId}:role/fixed-name"}
    assert dg.resolve(templates, "Stateless", role_arn) == {("Stateful", "Role")}
    assert dg.resolve(templates, "Stateless", "arn:aws:iam::1:role/other-name") == set()
    assert dg.resolve(templates, "Stateless", {"Fn::Join": ["", [ref("Local"), ":*"]]}) == {
        ("Stateless", "Local")
    }
    assert dg.resolve(templates, "Stateless", ref("AWS::Region")) == set()


def test_json_policy_documents_keep_their_references() -> None:
    value = {"Fn::Join": ["", ['{"Statement":[{"Resource":["', arn("G"), '",  "', arn("G"), ':*"]}]}']]}
    parsed = dg.json_policy_document(value)
    assert parsed == {"Statement": [{"Resource": [arn("G"), {"Fn::Join": ["", [arn("G"), ":*"]]}]}]}
    assert dg.json_policy_document("not json") is None


def test_actions_cover_only_what_their_patterns_match() -> None:
    assert dg.action_covered({"Action": "kms:*"}, "kms:GenerateDataKey*")
    assert dg.action_covered({"Action": ["kms:GenerateDataKey*"]}, "kms:GenerateDataKey*")
    assert not dg.action_covered({"Action": ["kms:GenerateDataKey"]}, "kms:GenerateDataKey*")
    assert dg.action_covered({"Action": "LAMBDA:invokefunction"}, "lambda:InvokeFunction")
    assert not dg.action_covered({"Action": "lambda:InvokeFunction"}, "lambda:GetFunction")
    assert dg.action_covered({"NotAction": "iam:*"}, "lambda:GetFunction")
    assert not dg.action_covered({"NotAction": "lambda:*"}, "lambda:GetFunction")


def test_render_substitutes_pseudo_parameters_only() -> None:
    join = {"Fn::Join": [":", ["arn", ref("AWS::Partition"), "cloudwatch", ref("AWS::Region")]]}
    assert dg.render(join, PSEUDO) == "arn:aws:cloudwatch:ca-central-1"
    assert dg.render({"Fn::Sub": "${AWS::AccountId}:${!Literal}"}, PSEUDO) == f"{ACCOUNT}:${{Literal}}"
    assert dg.render({"Fn::Join": ["", [arn("X")]]}, PSEUDO) is None


# --- each check: sound passes, planted defect caught ----------------------------------------------------------


def alarm_topic_problems(templates: dict[str, Any]) -> list[str]:
    return dg.alarm_topic_problems(templates, PSEUDO)


ALL_CHECKS: list[Callable[[dict[str, Any]], list[str]]] = [
    dg.custom_resource_problems,
    dg.provider_framework_problems,
    alarm_topic_problems,
    dg.log_delivery_problems,
    dg.lambda_validation_problems,
    lambda t: dg.retention_problems(t, True),
    lambda t: dg.retention_problems(t, False),
    dg.cross_stack_problems,
    dg.engine_upgrade_problems,
]


@pytest.mark.parametrize("check", ALL_CHECKS)
def test_the_sound_environment_passes_every_check(check: Callable[[dict[str, Any]], list[str]]) -> None:
    assert check(sound_environment()) == []


TOPIC_ALLOW = "Stateless/TopicPolicy/Properties/PolicyDocument/Statement/1"
LOG_POLICY_PARTS = "Stateful/LogDelivery/Properties/PolicyDocument/Fn::Join/1"


# (check, the edits that plant the defect, fragments of the one problem the check must report)
ONE_DEFECT = {
    "1-security-group-rule-outside-the-custom-resource-closure": (
        dg.custom_resource_problems,
        [("Stateless/Handler/DependsOn", ["HandlerPolicy"])],
        [
            "Stateless/Bootstrap: Stateless/HandlerToDomain (AWS::EC2::SecurityGroupIngress",
            "rule of its security group Stateless/HandlerGroup, for Stateless/Handler",
        ],
    ),
    "2-provider-framework-without-get-function": (
        dg.provider_framework_problems,
        [("Stateless/ProviderPolicy/Properties/PolicyDocument/Statement/0/Action", "lambda:InvokeFunction")],
        [
            "Stateless/Provider: no policy of its role Stateless/ProviderRole allows lambda:GetFunction",
            "Stateless/Handler",
        ],
    ),
    "3-topic-policy-with-only-deny": (
        alarm_topic_problems,
        [(TOPIC_ALLOW, DELETE)],
        [
            "Stateless/TopicPolicy (policy of Stateless/Topic): no Allow statement for cloudwatch.amazonaws.com",
            "only Deny",
        ],
    ),
    **{
        f"3-cloudwatch-allowed-but-not-scoped-to-this-account-{n}": (
            alarm_topic_problems,
            [(f"{TOPIC_ALLOW}/Condition", condition)],
            ["scoped to this account"],
        )
        for n, condition in enumerate(
            [
                DELETE,
                {"StringEquals": {"aws:SourceAccount": "999999999999"}},
                {"ArnLike": {"aws:SourceArn": "arn:aws:cloudwatch:ca-central-1:999999999999:alarm:*"}},
                {"Bool": {"aws:SecureTransport": "true"}},
            ]
        )
    },
    "3-alarm-not-ordered-after-the-topic-policy": (
        alarm_topic_problems,
        [("Stateless/Alarm/DependsOn", DELETE)],
        [
            "Stateless/Alarm: the policy Stateless/TopicPolicy of its topic Stateless/Topic is not in its "
            "dependency closure"
        ],
    ),
    "3-key-policy-in-the-other-stack-without-generate-data-key": (
        alarm_topic_problems,
        [("Stateful/Key/Properties/KeyPolicy/Statement/1/Action", ["kms:Decrypt", "kms:GenerateDataKey"])],
        [
            "Stateful/Key (key of Stateless/Topic): its key policy does not allow cloudwatch.amazonaws.com "
            "kms:GenerateDataKey*"
        ],
    ),
    "3-aws-managed-key": (
        alarm_topic_problems,
        [("Stateless/Topic/Properties/KmsMasterKeyId", "alias/aws/sns")],
        ["alias/aws/sns"],
    ),
    "3-missing-topic-policy": (
        alarm_topic_problems,
        [("Stateless/TopicPolicy", DELETE), ("Stateless/Alarm/DependsOn", DELETE)],
        ["no topic policy allows"],
    ),
    "3-duplicate-topic-policies": (
        alarm_topic_problems,
        [
            ("Stateless/OtherPolicy", sound_environment()["Stateless"]["Resources"]["TopicPolicy"]),
            ("Stateless/Alarm/DependsOn", ["TopicPolicy", "OtherPolicy"]),
        ],
        ["2 topic policies"],
    ),
    "4-domain-not-ordered-after-its-log-resource-policy": (
        dg.log_delivery_problems,
        [("Stateful/Domain/DependsOn", DELETE)],
        [
            "Stateful/Domain: the log resource policy Stateful/LogDelivery letting it write its AUDIT_LOGS group "
            "Stateful/AuditLogs is not in its dependency closure"
        ],
    ),
    "4-log-resource-policy-for-another-service": (
        dg.log_delivery_problems,
        [
            (
                f"{LOG_POLICY_PARTS}/0",
                LOG_POLICY_HEAD.replace("es.amazonaws.com", "delivery.logs.amazonaws.com"),
            )
        ],
        ["no AWS::Logs::ResourcePolicy allows es.amazonaws.com"],
    ),
    "4-log-resource-policy-for-another-group": (
        dg.log_delivery_problems,
        [(f"{LOG_POLICY_PARTS}/1", arn("FlowLogs"))],
        ["Stateful/AuditLogs"],
    ),
    "4-flow-log-role-not-granted-its-group": (
        dg.log_delivery_problems,
        [("Stateful/FlowLogPolicy/Properties/PolicyDocument/Statement/0/Resource", arn("AuditLogs"))],
        ["no policy of its role Stateful/FlowLogRole allows"],
    ),
    "lambda-validation-of-eni-permissions-at-create": (
        dg.lambda_validation_problems,
        [("Stateless/Handler/DependsOn", ["HandlerToDomain"])],
        ["Stateless/Handler", "ec2:CreateNetworkInterface"],
    ),
    "5-retained-key-deleted": (
        lambda t: dg.retention_problems(t, True),
        [("Stateful/Key/DeletionPolicy", "Delete")],
        ["Stateful/Key", "DeletionPolicy is Delete"],
    ),
    "7-domain-without-in-place-engine-upgrades": (
        dg.engine_upgrade_problems,
        [("Stateful/Domain/UpdatePolicy", {"EnableVersionUpgrade": "false"})],
        ["Stateful/Domain: UpdatePolicy.EnableVersionUpgrade is not true"],
    ),
}


@pytest.mark.parametrize(("check", "edits", "fragments"), ONE_DEFECT.values(), ids=ONE_DEFECT)
def test_a_planted_defect_is_the_one_problem_its_check_reports(
    check: Callable[[dict[str, Any]], list[str]], edits: list[tuple[str, Any]], fragments: list[str]
) -> None:
    only(check(planted(*edits)), *fragments)


def test_1_handler_policy_and_vpc_endpoint_outside_the_custom_resource_closure() -> None:
    problems = dg.custom_resource_problems(
        planted(
            ("Stateless/Handler/DependsOn", ["HandlerToDomain"]),
            ("Stateless/LambdaEndpoint", {"Type": "AWS::EC2::VPCEndpoint", "Properties": {}}),
        )
    )
    assert len(problems) == 2, problems
    assert (
        "Stateless/HandlerPolicy (AWS::IAM::ManagedPolicy; policy of its role Stateful/HandlerRole"
        in problems[0]
    )
    assert "Stateless/LambdaEndpoint (AWS::EC2::VPCEndpoint; VPC endpoint of its network" in problems[1]


def test_1_what_lives_in_the_other_stack_is_ordered() -> None:
    moved = managed_policy(
        [ref("HandlerRole")],
        allow(["logs:CreateLogStream", "logs:PutLogEvents"], "*"),
        allow(ENI_ACTIONS, "*"),
    )
    templates = planted(
        ("Stateful/HandlerPolicy", moved),
        ("Stateless/HandlerPolicy", DELETE),
        ("Stateless/Handler/DependsOn", ["HandlerToDomain"]),
    )
    assert dg.attached_policies(templates, ("Stateful", "HandlerRole")) == [("Stateful", "HandlerPolicy")]
    assert dg.custom_resource_problems(templates) == []
    assert dg.lambda_validation_problems(templates) == []


def test_2_provider_framework_granted_on_another_function() -> None:
    templates = planted(
        ("Stateless/ProviderPolicy/Properties/PolicyDocument/Statement/0/Resource", arn("Provider"))
    )
    problems = dg.provider_framework_problems(templates)
    assert [p.split(" allows ")[1].split(" on ")[0] for p in problems] == list(
        dg.PROVIDER_USER_FUNCTION_ACTIONS
    )


def test_3_source_arn_of_this_accounts_alarms_is_scope_enough() -> None:
    alarms = {"Fn::Sub": "arn:${AWS::Partition}:cloudwatch:${AWS::Region}:${AWS::AccountId}:alarm:*"}
    templates = planted((f"{TOPIC_ALLOW}/Condition", {"ArnLike": {"aws:SourceArn": alarms}}))
    assert dg.alarm_topic_problems(templates, PSEUDO) == []


def test_4_flow_log_and_function_not_ordered_after_their_log_grants() -> None:
    templates = planted(
        ("Stateful/FlowLog/DependsOn", DELETE), ("Stateless/Handler/DependsOn", ["HandlerToDomain"])
    )
    problems = dg.log_delivery_problems(templates)
    assert len(problems) == 2, problems
    assert problems[0].startswith("Stateful/FlowLog: Stateful/FlowLogPolicy (allowing logs:PutLogEvents on")
    assert problems[1].startswith("Stateless/Handler: Stateless/HandlerPolicy (allowing logs:PutLogEvents on")


def test_5_retained_domain_foundations_and_unstated_policies() -> None:
    unstated = [
        f"Stateful/{i}/UpdateReplacePolicy" for i in ("Subnet", "DomainGroup", "AdminRole", "LogDelivery")
    ]
    templates = planted(*[(path, DELETE) for path in [*unstated, "Stateful/AuditLogs/DeletionPolicy"]])
    problems = dg.retention_problems(templates, retains_data=True)
    assert [p.split(" (")[0] for p in problems] == [
        "Stateful/AdminRole",
        "Stateful/AuditLogs",
        "Stateful/DomainGroup",
        "Stateful/LogDelivery",
        "Stateful/Subnet",
    ]
    assert "FGAC master role of Stateful/Domain): UpdateReplacePolicy is unset" in problems[0]
    # Where data is not retained, only the stateful types need a stated policy (Delete is fine).
    only(
        dg.retention_problems(templates, retains_data=False),
        "Stateful/AuditLogs",
        "no explicit DeletionPolicy",
    )
    assert dg.retention_problems(planted(("Stateful/Key/DeletionPolicy", "Delete")), retains_data=False) == []


def test_5_termination_protection_is_read_from_the_manifest() -> None:
    manifest = {
        "artifacts": {
            "envStateful": {
                "type": "aws:cloudformation:stack",
                "properties": {"templateFile": "a.json", "terminationProtection": True},
            },
            "envStateless": {"type": "aws:cloudformation:stack", "properties": {"templateFile": "b.json"}},
        }
    }
    assert dg.termination_protection(manifest, "a.json") is True
    assert dg.termination_protection(manifest, "b.json") is False
    assert dg.termination_protection(manifest, "c.json") is None


def test_6_imports_exports_and_unwritten_parameters() -> None:
    templates = planted()
    templates["Stateless"]["Resources"]["Topic"]["Properties"]["KmsMasterKeyId"] = {"Fn::ImportValue": "Key"}
    templates["Stateless"]["Resources"]["Alarm"]["Properties"]["Threshold"] = {
        "Fn::GetStackOutput": {"StackName": "s", "OutputName": "o"}
    }
    templates["Stateful"]["Outputs"]["DomainArn"]["Export"] = {"Name": "Key"}
    templates["Stateless"]["Parameters"]["Stray"] = {
        "Type": "AWS::SSM::Parameter::Value<String>",
        "Default": "/app/nobody-writes-this",
    }
    problems = dg.cross_stack_problems(templates)
    assert problems == [
        "Stateless: 1 Fn::ImportValue (an export in use blocks every change to its value)",
        "Stateless: 1 Fn::GetStackOutput (an export in use blocks every change to its value)",
        "Stateful: 1 outputs carry an Export: DomainArn",
        'Stateless: SSM-typed parameter Stray reads "/app/nobody-writes-this", which no AWS::SSM::Parameter of '
        "Stateful writes",
    ]
