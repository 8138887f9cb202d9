"""What the stateful stack publishes for application teams in every environment (infra/constructs/team_access.py):
the writer's policy over exactly the tables `SchemaTables` names, the geometry objects and the data key through
DynamoDB and S3; a policy per configured read role allowing exactly what the domain's access policy admits it to;
the outputs naming them and the key. (The install test runs docs/client.md's example holding exactly these.)"""

from __future__ import annotations

import json
from typing import Any

from infra.config import EnvironmentConfig
from tests.infra.conftest import read_roles
from tests.infra.templates_helpers import (
    ITEM_WRITES,
    MANAGED_POLICY,
    admitted,
    allow,
    data_key_arn,
    kms_via,
    permissions,
    quoted,
)
from tests.support.template import Template

KEY_ACTIONS_VIA_DYNAMODB = ("Decrypt", "Encrypt", "GenerateDataKey", "DescribeKey")


def output(stateful: Template, name: str) -> Any:
    return stateful.to_json()["Outputs"][name]["Value"]


def published(stateful: Template, reference: Any) -> dict[str, Any]:
    """The properties of the managed policy an output references (`{"Ref": <logical id>}`)."""
    return dict(stateful.find_resources(MANAGED_POLICY)[reference["Ref"]]["Properties"])


def joined_refs(value: Any) -> list[str]:
    """The logical ids a `Fn::Join`ed output references, in order."""
    _, parts = value["Fn::Join"]
    return [part["Ref"] for part in parts if isinstance(part, dict)]


def test_the_writer_may_write_items_of_every_table_schema_tables_names_their_geometries_and_use_the_key_through_them(
    stateful: Template, config: EnvironmentConfig
) -> None:
    writer = published(stateful, output(stateful, "WriterPolicyArn"))
    tables = sorted(set(joined_refs(output(stateful, "SchemaTables"))))
    assert len(tables) == len(config.source_tables)
    key = data_key_arn(stateful)
    geometry = stateful.to_json()["Outputs"]["GeometryBucketName"]["Value"]["Ref"]
    expected = (
        {grant for table in tables for grant in allow(ITEM_WRITES, {"Fn::GetAtt": [table, "Arn"]})}
        | allow(["s3:PutObject"], {"Fn::Join": ["", [{"Fn::GetAtt": [geometry, "Arn"]}, "/geometries/*"]]})
        | allow([f"kms:{action}" for action in KEY_ACTIONS_VIA_DYNAMODB], key, kms_via("dynamodb"))
        | allow(["kms:GenerateDataKey", "kms:Decrypt"], key, kms_via("s3"))
    )
    assert permissions(writer["PolicyDocument"]) == expected
    # published for teams to attach, attached to nothing
    assert not {"Roles", "Users", "Groups"} & set(writer)
    assert output(stateful, "DataKeyArn") == key


def test_each_read_role_has_a_published_policy_allowing_exactly_what_the_domain_admits_it_to(
    stateful: Template, config: EnvironmentConfig
) -> None:
    separator, parts = output(stateful, "ReaderPolicyArns")["Fn::Join"]
    text = separator.join(part if isinstance(part, str) else quoted(part) for part in parts)
    arns = {name: json.loads(reference.replace("'", '"')) for name, reference in json.loads(text).items()}
    assert sorted(arns) == sorted(role.name for role in config.search.read_roles)
    for role in read_roles(config):
        policy = published(stateful, arns[role.name])
        granted = permissions(policy["PolicyDocument"])
        for iam_role in role.iam_role_arns:
            assert granted and granted == admitted(stateful, iam_role), role.name
        assert not {"Roles", "Users", "Groups"} & set(policy)
