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


def sound_environment() -> dict[str, Any]:
    """A miniature of the platform with every deploy-graph property right: a stateful stack (key, network, domain
    with logs, flow log, the handler's role by fixed name, SSM parameters) and a stateless stack (a custom resource
    through a provider framework, an in-VPC handler, an encrypted alarm topic) reading it through SSM."""
    stateful = {
        "Resources": {
            "Key": retained(
                {
                    "Type": "AWS::KMS::Key",
                    "Properties": {
                        "KeyPolicy": document(
                            {
                                "Effect": "Allow",
                                "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:root"},
                                "Action": "kms:*",
                                "Resource": "*",
                            },
                            {
                                "Effect": "Allow",
                                "Principal": {"Service": "cloudwatch.amazonaws.com"},
                                "Action": ["kms:Decrypt", "kms:GenerateDataKey*"],
                                "Resource": "*",
                            },
                        )
                    },
                }
            ),
            "Vpc": retained({"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.0.0.0/16"}}),
            "Subnet": retained({"Type": "AWS::EC2::Subnet", "Properties": {"VpcId": ref("Vpc")}}),
            "RouteTable": retained({"Type": "AWS::EC2::RouteTable", "Properties": {"VpcId": ref("Vpc")}}),
            "Association": retained(
                {
                    "Type": "AWS::EC2::SubnetRouteTableAssociation",
                    "Properties": {"SubnetId": ref("Subnet"), "RouteTableId": ref("RouteTable")},
                }
            ),
            "DomainGroup": retained({"Type": "AWS::EC2::SecurityGroup", "Properties": {"VpcId": ref("Vpc")}}),
            "AdminRole": retained({"Type": "AWS::IAM::Role", "Properties": {"RoleName": "search-admin"}}),
            "HandlerRole": {"Type": "AWS::IAM::Role", "Properties": {"RoleName": "index-bootstrap"}},
            "AuditLogs": retained({"Type": "AWS::Logs::LogGroup", "Properties": {}}),
            "LogDelivery": retained(
                {
                    "Type": "AWS::Logs::ResourcePolicy",
                    "Properties": {
                        "PolicyName": "search-logs",
                        "PolicyDocument": {
                            "Fn::Join": [
                                "",
                                [
                                    '{"Statement":[{"Action":["logs:PutLogEvents","logs:CreateLogStream"],"Effect":"Allow",'
                                    '"Principal":{"Service":"es.amazonaws.com"},"Resource":"',
                                    arn("AuditLogs"),
                                    ':*"}],"Version":"2012-10-17"}',
                                ],
                            ]
                        },
                    },
                }
            ),
            "Domain": retained(
                {
                    "Type": "AWS::OpenSearchService::Domain",
                    "DependsOn": ["LogDelivery"],
                    "UpdatePolicy": {"EnableVersionUpgrade": True},
                    "Properties": {
                        "VPCOptions": {
                            "SecurityGroupIds": [{"Fn::GetAtt": ["DomainGroup", "GroupId"]}],
                            "SubnetIds": [ref("Subnet")],
                        },
                        "AdvancedSecurityOptions": {"MasterUserOptions": {"MasterUserARN": arn("AdminRole")}},
                        "LogPublishingOptions": {
                            "AUDIT_LOGS": {"CloudWatchLogsLogGroupArn": arn("AuditLogs"), "Enabled": True}
                        },
                    },
                }
            ),
            "FlowLogs": retained({"Type": "AWS::Logs::LogGroup", "Properties": {}}),
            "FlowLogRole": {"Type": "AWS::IAM::Role", "Properties": {}},
            "FlowLogPolicy": {
                "Type": "AWS::IAM::ManagedPolicy",
                "Properties": {
                    "Roles": [ref("FlowLogRole")],
                    "PolicyDocument": document(
                        allow(["logs:CreateLogStream", "logs:PutLogEvents"], arn("FlowLogs"))
                    ),
                },
            },
            "FlowLog": {
                "Type": "AWS::EC2::FlowLog",
                "DependsOn": ["FlowLogPolicy"],
                "Properties": {
                    "DeliverLogsPermissionArn": arn("FlowLogRole"),
                    "LogGroupName": ref("FlowLogs"),
                    "ResourceId": ref("Vpc"),
                },
            },
            "KeyArnParameter": {
                "Type": "AWS::SSM::Parameter",
                "Properties": {"Name": "/app/key-arn", "Type": "String", "Value": arn("Key")},
            },
            "DomainGroupParameter": {
                "Type": "AWS::SSM::Parameter",
                "Properties": {
                    "Name": "/app/domain-group",
                    "Type": "String",
                    "Value": {"Fn::GetAtt": ["DomainGroup", "GroupId"]},
                },
            },
        },
        "Outputs": {"DomainArn": {"Value": arn("Domain")}},
    }
    handler_role_arn = {
        "Fn::Join": [
            "",
            ["arn:", ref("AWS::Partition"), ":iam::", ref("AWS::AccountId"), ":role/index-bootstrap"],
        ]
    }
    stateless = {
        "Parameters": {
            "BootstrapVersion": {
                "Type": "AWS::SSM::Parameter::Value<String>",
                "Default": "/cdk-bootstrap/x/version",
            },
            "KeyArn": {"Type": "AWS::SSM::Parameter::Value<String>", "Default": "/app/key-arn"},
            "DomainGroupId": {"Type": "AWS::SSM::Parameter::Value<String>", "Default": "/app/domain-group"},
        },
        "Resources": {
            "HandlerGroup": {"Type": "AWS::EC2::SecurityGroup", "Properties": {}},
            "HandlerToDomain": {
                "Type": "AWS::EC2::SecurityGroupIngress",
                "Properties": {
                    "GroupId": ref("DomainGroupId"),
                    "SourceSecurityGroupId": {"Fn::GetAtt": ["HandlerGroup", "GroupId"]},
                    "IpProtocol": "tcp",
                    "FromPort": 443,
                    "ToPort": 443,
                },
            },
            "HandlerLogs": retained({"Type": "AWS::Logs::LogGroup", "Properties": {}}),
            "HandlerPolicy": {
                "Type": "AWS::IAM::ManagedPolicy",
                "Properties": {
                    "Roles": ["index-bootstrap"],
                    "PolicyDocument": document(
                        allow(["logs:CreateLogStream", "logs:PutLogEvents"], arn("HandlerLogs")),
                        allow(ENI_ACTIONS, "*"),
                    ),
                },
            },
            "Handler": {
                "Type": "AWS::Lambda::Function",
                "DependsOn": ["HandlerPolicy", "HandlerToDomain"],
                "Properties": {
                    "Role": handler_role_arn,
                    "VpcConfig": {"SecurityGroupIds": [{"Fn::GetAtt": ["HandlerGroup", "GroupId"]}]},
                    "LoggingConfig": {"LogGroup": ref("HandlerLogs")},
                },
            },
            "ProviderRole": {"Type": "AWS::IAM::Role", "Properties": {}},
            "ProviderPolicy": {
                "Type": "AWS::IAM::ManagedPolicy",
                "Properties": {
                    "Roles": [ref("ProviderRole")],
                    "PolicyDocument": document(
                        allow(
                            ["lambda:InvokeFunction", "lambda:GetFunction"],
                            [arn("Handler"), {"Fn::Join": ["", [arn("Handler"), ":*"]]}],
                        )
                    ),
                },
            },
            "Provider": {
                "Type": "AWS::Lambda::Function",
                "DependsOn": ["ProviderPolicy"],
                "Properties": {
                    "Role": arn("ProviderRole"),
                    "Environment": {"Variables": {"USER_ON_EVENT_FUNCTION_ARN": arn("Handler")}},
                },
            },
            "Bootstrap": {
                "Type": "Custom::Bootstrap",
                "Properties": {"ServiceToken": arn("Provider"), "Replicas": "1"},
            },
            "Topic": retained({"Type": "AWS::SNS::Topic", "Properties": {"KmsMasterKeyId": ref("KeyArn")}}),
            "TopicPolicy": {
                "Type": "AWS::SNS::TopicPolicy",
                "Properties": {
                    "Topics": [ref("Topic")],
                    "PolicyDocument": document(
                        {
                            "Effect": "Deny",
                            "Principal": "*",
                            "Action": "sns:Publish",
                            "Resource": ref("Topic"),
                            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                        },
                        {
                            "Effect": "Allow",
                            "Principal": {"Service": "cloudwatch.amazonaws.com"},
                            "Action": "sns:Publish",
                            "Resource": ref("Topic"),
                            "Condition": {"StringEquals": {"aws:SourceAccount": ref("AWS::AccountId")}},
                        },
                    ),
                },
            },
            "Alarm": {
                "Type": "AWS::CloudWatch::Alarm",
                "DependsOn": "TopicPolicy",
                "Properties": {"AlarmActions": [ref("Topic")], "OKActions": [ref("Topic")]},
            },
        },
    }
    return {"Stateful": stateful, "Stateless": stateless}


def planted(change: Callable[[dict[str, Any], dict[str, Any]], None]) -> dict[str, Any]:
    """A copy of the sound environment with ``change(stateful_resources, stateless_resources)`` applied."""
    templates = copy.deepcopy(sound_environment())
    change(templates["Stateful"]["Resources"], templates["Stateless"]["Resources"])
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

ALL_CHECKS: list[Callable[[dict[str, Any]], list[str]]] = [
    dg.custom_resource_problems,
    dg.provider_framework_problems,
    lambda t: dg.alarm_topic_problems(t, PSEUDO),
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


def test_1_security_group_rule_outside_the_custom_resource_closure() -> None:
    def defect(_: dict[str, Any], stateless: dict[str, Any]) -> None:
        stateless["Handler"]["DependsOn"] = ["HandlerPolicy"]

    only(
        dg.custom_resource_problems(planted(defect)),
        "Stateless/Bootstrap: Stateless/HandlerToDomain (AWS::EC2::SecurityGroupIngress",
        "rule of its security group Stateless/HandlerGroup, for Stateless/Handler",
    )


def test_1_handler_policy_and_vpc_endpoint_outside_the_custom_resource_closure() -> None:
    def defect(_: dict[str, Any], stateless: dict[str, Any]) -> None:
        stateless["Handler"]["DependsOn"] = ["HandlerToDomain"]
        stateless["LambdaEndpoint"] = {"Type": "AWS::EC2::VPCEndpoint", "Properties": {}}

    problems = dg.custom_resource_problems(planted(defect))
    assert len(problems) == 2, problems
    assert (
        "Stateless/HandlerPolicy (AWS::IAM::ManagedPolicy; policy of its role Stateful/HandlerRole"
        in problems[0]
    )
    assert "Stateless/LambdaEndpoint (AWS::EC2::VPCEndpoint; VPC endpoint of its network" in problems[1]


def test_1_what_lives_in_the_other_stack_is_ordered() -> None:
    def moved(stateful: dict[str, Any], stateless: dict[str, Any]) -> None:
        stateful["HandlerPolicy"] = stateless.pop("HandlerPolicy")
        stateful["HandlerPolicy"]["Properties"]["Roles"] = [ref("HandlerRole")]
        stateful["HandlerPolicy"]["Properties"]["PolicyDocument"]["Statement"][0]["Resource"] = "*"
        stateless["Handler"]["DependsOn"] = ["HandlerToDomain"]

    templates = planted(moved)
    assert dg.attached_policies(templates, ("Stateful", "HandlerRole")) == [("Stateful", "HandlerPolicy")]
    assert dg.custom_resource_problems(templates) == []
    assert dg.lambda_validation_problems(templates) == []


def test_2_provider_framework_without_get_function() -> None:
    def defect(_: dict[str, Any], stateless: dict[str, Any]) -> None:
        stateless["ProviderPolicy"]["Properties"]["PolicyDocument"]["Statement"][0]["Action"] = (
            "lambda:InvokeFunction"
        )

    only(
        dg.provider_framework_problems(planted(defect)),
        "Stateless/Provider: no policy of its role Stateless/ProviderRole allows lambda:GetFunction",
        "Stateless/Handler",
    )


def test_2_provider_framework_granted_on_another_function() -> None:
    def defect(_: dict[str, Any], stateless: dict[str, Any]) -> None:
        stateless["ProviderPolicy"]["Properties"]["PolicyDocument"]["Statement"][0]["Resource"] = arn(
            "Provider"
        )

    problems = dg.provider_framework_problems(planted(defect))
    assert [p.split(" allows ")[1].split(" on ")[0] for p in problems] == list(
        dg.PROVIDER_USER_FUNCTION_ACTIONS
    )


def test_3_topic_policy_with_only_deny() -> None:
    def defect(_: dict[str, Any], stateless: dict[str, Any]) -> None:
        del stateless["TopicPolicy"]["Properties"]["PolicyDocument"]["Statement"][1]

    only(
        dg.alarm_topic_problems(planted(defect), PSEUDO),
        "Stateless/TopicPolicy (policy of Stateless/Topic): no Allow statement for cloudwatch.amazonaws.com",
        "only Deny",
    )


@pytest.mark.parametrize(
    "condition",
    [
        None,
        {"StringEquals": {"aws:SourceAccount": "999999999999"}},
        {"ArnLike": {"aws:SourceArn": "arn:aws:cloudwatch:ca-central-1:999999999999:alarm:*"}},
        {"Bool": {"aws:SecureTransport": "true"}},
    ],
)
def test_3_cloudwatch_allowed_but_not_scoped_to_this_account(condition: Any) -> None:
    def defect(_: dict[str, Any], stateless: dict[str, Any]) -> None:
        statement = stateless["TopicPolicy"]["Properties"]["PolicyDocument"]["Statement"][1]
        statement.pop("Condition")
        if condition:
            statement["Condition"] = condition

    only(dg.alarm_topic_problems(planted(defect), PSEUDO), "scoped to this account")


def test_3_source_arn_of_this_accounts_alarms_is_scope_enough() -> None:
    alarms = {"Fn::Sub": "arn:${AWS::Partition}:cloudwatch:${AWS::Region}:${AWS::AccountId}:alarm:*"}

    def scoped(_: dict[str, Any], stateless: dict[str, Any]) -> None:
        statement = stateless["TopicPolicy"]["Properties"]["PolicyDocument"]["Statement"][1]
        statement["Condition"] = {"ArnLike": {"aws:SourceArn": alarms}}

    assert dg.alarm_topic_problems(planted(scoped), PSEUDO) == []


def test_3_alarm_not_ordered_after_the_topic_policy() -> None:
    def defect(_: dict[str, Any], stateless: dict[str, Any]) -> None:
        del stateless["Alarm"]["DependsOn"]

    only(
        dg.alarm_topic_problems(planted(defect), PSEUDO),
        "Stateless/Alarm: the policy Stateless/TopicPolicy of its topic Stateless/Topic is not in its dependency closure",
    )


def test_3_key_policy_in_the_other_stack_without_generate_data_key() -> None:
    def defect(stateful: dict[str, Any], _: dict[str, Any]) -> None:
        stateful["Key"]["Properties"]["KeyPolicy"]["Statement"][1]["Action"] = [
            "kms:Decrypt",
            "kms:GenerateDataKey",
        ]

    only(
        dg.alarm_topic_problems(planted(defect), PSEUDO),
        "Stateful/Key (key of Stateless/Topic): its key policy does not allow cloudwatch.amazonaws.com "
        "kms:GenerateDataKey*",
    )


def test_3_aws_managed_key_and_missing_or_duplicate_topic_policies() -> None:
    def managed_key(_: dict[str, Any], stateless: dict[str, Any]) -> None:
        stateless["Topic"]["Properties"]["KmsMasterKeyId"] = "alias/aws/sns"

    only(dg.alarm_topic_problems(planted(managed_key), PSEUDO), "alias/aws/sns")

    def no_policy(_: dict[str, Any], stateless: dict[str, Any]) -> None:
        del stateless["TopicPolicy"], stateless["Alarm"]["DependsOn"]

    only(dg.alarm_topic_problems(planted(no_policy), PSEUDO), "no topic policy allows")

    def two_policies(_: dict[str, Any], stateless: dict[str, Any]) -> None:
        stateless["OtherPolicy"] = copy.deepcopy(stateless["TopicPolicy"])
        stateless["Alarm"]["DependsOn"] = ["TopicPolicy", "OtherPolicy"]

    only(dg.alarm_topic_problems(planted(two_policies), PSEUDO), "2 topic policies")


def test_4_domain_not_ordered_after_its_log_resource_policy() -> None:
    def defect(stateful: dict[str, Any], _: dict[str, Any]) -> None:
        del stateful["Domain"]["DependsOn"]

    only(
        dg.log_delivery_problems(planted(defect)),
        "Stateful/Domain: the log resource policy Stateful/LogDelivery letting it write its AUDIT_LOGS group "
        "Stateful/AuditLogs is not in its dependency closure",
    )


def test_4_log_resource_policy_for_another_service_or_group() -> None:
    def other_service(stateful: dict[str, Any], _: dict[str, Any]) -> None:
        parts = stateful["LogDelivery"]["Properties"]["PolicyDocument"]["Fn::Join"][1]
        parts[0] = parts[0].replace("es.amazonaws.com", "delivery.logs.amazonaws.com")

    only(
        dg.log_delivery_problems(planted(other_service)),
        "no AWS::Logs::ResourcePolicy allows es.amazonaws.com",
    )

    def other_group(stateful: dict[str, Any], _: dict[str, Any]) -> None:
        stateful["LogDelivery"]["Properties"]["PolicyDocument"]["Fn::Join"][1][1] = arn("FlowLogs")

    only(dg.log_delivery_problems(planted(other_group)), "Stateful/AuditLogs")


def test_4_flow_log_and_function_not_ordered_after_their_log_grants() -> None:
    def defect(stateful: dict[str, Any], stateless: dict[str, Any]) -> None:
        del stateful["FlowLog"]["DependsOn"]
        stateless["Handler"]["DependsOn"] = ["HandlerToDomain"]

    problems = dg.log_delivery_problems(planted(defect))
    assert len(problems) == 2, problems
    assert problems[0].startswith("Stateful/FlowLog: Stateful/FlowLogPolicy (allowing logs:PutLogEvents on")
    assert problems[1].startswith("Stateless/Handler: Stateless/HandlerPolicy (allowing logs:PutLogEvents on")

    def no_grant(stateful: dict[str, Any], _: dict[str, Any]) -> None:
        stateful["FlowLogPolicy"]["Properties"]["PolicyDocument"]["Statement"][0]["Resource"] = arn(
            "AuditLogs"
        )

    only(dg.log_delivery_problems(planted(no_grant)), "no policy of its role Stateful/FlowLogRole allows")


def test_lambda_validation_of_eni_permissions_at_create() -> None:
    def defect(_: dict[str, Any], stateless: dict[str, Any]) -> None:
        stateless["Handler"]["DependsOn"] = ["HandlerToDomain"]

    only(dg.lambda_validation_problems(planted(defect)), "Stateless/Handler", "ec2:CreateNetworkInterface")


def test_5_retained_domain_foundations_and_unstated_policies() -> None:
    def defect(stateful: dict[str, Any], _: dict[str, Any]) -> None:
        for logical_id in ("Subnet", "DomainGroup", "AdminRole", "LogDelivery"):
            del stateful[logical_id]["UpdateReplacePolicy"]
        del stateful["AuditLogs"]["DeletionPolicy"]

    problems = dg.retention_problems(planted(defect), retains_data=True)
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
        dg.retention_problems(planted(defect), retains_data=False),
        "Stateful/AuditLogs",
        "no explicit DeletionPolicy",
    )

    def deleted(stateful: dict[str, Any], _: dict[str, Any]) -> None:
        stateful["Key"]["DeletionPolicy"] = "Delete"

    only(
        dg.retention_problems(planted(deleted), retains_data=True), "Stateful/Key", "DeletionPolicy is Delete"
    )
    assert dg.retention_problems(planted(deleted), retains_data=False) == []


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
    templates = planted(lambda stateful, stateless: None)
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


def test_7_domain_without_in_place_engine_upgrades() -> None:
    def defect(stateful: dict[str, Any], _: dict[str, Any]) -> None:
        stateful["Domain"]["UpdatePolicy"] = {"EnableVersionUpgrade": "false"}

    only(
        dg.engine_upgrade_problems(planted(defect)),
        "Stateful/Domain: UpdatePolicy.EnableVersionUpgrade is not true",
    )
