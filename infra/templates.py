"""Reading synthesized CloudFormation: the cloud assembly's stacks, the names an expression references, and which
resource types hold state. Shared by the destructive-change guard, the cost estimate and the deploy-graph checks."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PSEUDO_PARAMETERS = frozenset(
    {
        "AWS::AccountId",
        "AWS::NotificationARNs",
        "AWS::NoValue",
        "AWS::Partition",
        "AWS::Region",
        "AWS::StackId",
        "AWS::StackName",
        "AWS::URLSuffix",
    }
)

# Resources that hold data (or, for log groups, the record of what happened; for topics, the subscriptions people
# added; for queues, the messages that failed): their fate on delete and on replacement matters.
STATEFUL_TYPES = (
    "AWS::DynamoDB::Table",
    "AWS::DynamoDB::GlobalTable",
    "AWS::S3::Bucket",
    "AWS::KMS::Key",
    "AWS::OpenSearchService::Domain",
    "AWS::Logs::LogGroup",
    "AWS::Backup::BackupVault",
    "AWS::SQS::Queue",
    "AWS::SNS::Topic",
)
# What a VPC domain stands on, besides its security groups and master role.
DOMAIN_NETWORK_TYPES = (
    "AWS::EC2::VPC",
    "AWS::EC2::Subnet",
    "AWS::EC2::RouteTable",
    "AWS::EC2::SubnetRouteTableAssociation",
)
TABLE_TYPES = ("AWS::DynamoDB::Table", "AWS::DynamoDB::GlobalTable")


@dataclass(frozen=True)
class Stack:
    """One synthesized stack: its display name (``dev/Stateful``), template and deployment target."""

    name: str
    template: Mapping[str, Any]
    stack_name: str
    account: str
    region: str

    @property
    def resources(self) -> Mapping[str, Any]:
        return self.template.get("Resources", {})  # type: ignore[no-any-return]

    @property
    def environment(self) -> str:
        return self.name.split("/", 1)[0]

    def pseudo_parameters(self) -> dict[str, str]:
        """The pseudo-parameters known before deployment."""
        partition = (
            "aws-cn" if self.region.startswith("cn-") else "aws-us-gov" if "-gov-" in self.region else "aws"
        )
        return {
            "AWS::AccountId": self.account,
            "AWS::Region": self.region,
            "AWS::Partition": partition,
            "AWS::URLSuffix": "amazonaws.com.cn" if partition == "aws-cn" else "amazonaws.com",
            "AWS::StackName": self.stack_name,
        }


def load_assembly(cloud_assembly: Path) -> dict[str, Stack]:
    """Every CloudFormation stack of a cloud assembly (``cdk.out``, nested stage assemblies included), by name."""
    stacks = {}
    for manifest_path in sorted(cloud_assembly.glob("**/manifest.json")):
        manifest = json.loads(manifest_path.read_text())
        for key, artifact in manifest.get("artifacts", {}).items():
            if artifact.get("type") != "aws:cloudformation:stack":
                continue
            properties = artifact["properties"]
            _, account, region = re.fullmatch(r"(aws)://([^/]+)/([^/]+)", artifact["environment"]).groups()  # type: ignore[union-attr]
            name = artifact.get("displayName", key)
            stacks[name] = Stack(
                name=name,
                template=json.loads((manifest_path.parent / properties["templateFile"]).read_text()),
                stack_name=properties.get("stackName", key),
                account=account,
                region=region,
            )
    return stacks


def command_assembly(cloud_assembly: Path) -> dict[str, Stack]:
    """``load_assembly`` for a command line: exits, saying what to run, when there is nothing synthesized."""
    stacks = load_assembly(cloud_assembly)
    if not stacks:
        sys.exit(f"no stacks in {cloud_assembly}: run `make synth`")
    return stacks


SUB_VARIABLE = re.compile(r"\$\{([^}]+)\}")


def sub_names(string: str) -> set[str]:
    """The names a ``Fn::Sub`` string references: ``${X}`` and ``${X.Attr}`` give ``X``; ``${!X}`` is literal."""
    found = set()
    for variable in SUB_VARIABLE.findall(string):
        if variable.startswith("!"):
            continue
        found.add(variable if "::" in variable and "." not in variable else variable.split(".")[0])
    return found


def referenced_names(value: Any) -> set[str]:
    """Every name ``value`` references through ``Ref``, ``Fn::GetAtt`` or ``Fn::Sub`` (resources, parameters and
    pseudo-parameters alike; a ``Fn::Sub`` variable defined in its own mapping is not a reference)."""
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, item in node.items():
                if key == "Ref" and isinstance(item, str):
                    found.add(item)
                elif key == "Fn::GetAtt":
                    if isinstance(item, str):
                        found.add(item.split(".")[0])
                    elif isinstance(item, list) and item and isinstance(item[0], str):
                        found.add(item[0])
                        walk(item[1:])
                    else:
                        walk(item)
                elif key == "Fn::Sub":
                    if isinstance(item, str):
                        found.update(sub_names(item))
                    elif isinstance(item, list) and item:
                        local = set(item[1]) if len(item) > 1 and isinstance(item[1], dict) else set()
                        if isinstance(item[0], str):
                            found.update(sub_names(item[0]) - local)
                        walk(item[1:])
                else:
                    walk(item)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(value)
    return found


def domain_security_groups(resources: Mapping[str, Any]) -> set[str]:
    """Logical ids of the security groups the template's OpenSearch domains sit in (``VPCOptions``)."""
    found = set()
    for resource in resources.values():
        if resource.get("Type") == "AWS::OpenSearchService::Domain":
            groups = resource.get("Properties", {}).get("VPCOptions", {}).get("SecurityGroupIds")
            found |= {
                name
                for name in referenced_names(groups)
                if resources.get(name, {}).get("Type") == "AWS::EC2::SecurityGroup"
            }
    return found
