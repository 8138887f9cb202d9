"""docs/architecture.md's diagram is the one the synthesized templates draw; how the drawing reads an assembly."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from infra import diagram
from infra.config import EnvironmentConfig
from tests.infra.conftest import Synthesized

ARCHITECTURE = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"


def test_the_architecture_page_shows_the_diagram_of_the_synthesized_production_templates(
    synthesized: Synthesized,
) -> None:
    drawn = diagram.drawn_environment()
    block = diagram.section(drawn, diagram.read_assembly(synthesized.outdir / f"assembly-{drawn}"))
    page = ARCHITECTURE.read_text()
    assert diagram.replace_block(page, block) == page, (
        "docs/architecture.md's diagram is stale: run `make docs`"
    )


def test_the_drawing_shows_every_construct_of_both_stacks(synthesized: Synthesized, env: str) -> None:
    stacks = diagram.read_assembly(synthesized.outdir / f"assembly-{env}")
    drawn = diagram.mermaid(env, stacks)
    assert [stack.name for stack in stacks] == ["Stateful", "Stateless"]
    for box in ("DataKey", "Table", "GeometryBucket", "Network", "SearchAccess", "Search", "AlarmTopic"):
        assert f"Stateful_{box}" in drawn
    for box in ("StreamSync", "IndexBootstrap", "Monitoring"):
        assert f"Stateless_{box}" in drawn
    assert 'Stateless_StreamSync -.->|"table-stream-arn"| Stateful_Table' in drawn


def test_each_table_is_drawn_with_the_streams_the_sync_and_the_ops_read(
    synthesized: Synthesized, config: EnvironmentConfig
) -> None:
    drawn = diagram.mermaid(
        config.name, diagram.read_assembly(synthesized.outdir / f"assembly-{config.name}")
    )
    mappings = len(config.source_tables)
    assert (
        "Lambda function · " + (f"{mappings} × " if mappings > 1 else "") + "event source mapping"
    ) in drawn
    for plan in config.source_tables:
        assert f'Stateful_{plan.construct_id}[("<b>{plan.construct_id}</b><br/>DynamoDB table' in drawn
        label = f"table-{plan.label.lower()}-stream-arn" if plan.label else "table-stream-arn"
        for reader in ("StreamSync", "Ops"):
            assert re.search(
                rf'Stateless_{reader} -\.->\|"[^"]*{label}[^"]*"\| Stateful_{plan.construct_id}\n', drawn
            ), f"no {label} arrow from {reader} to {plan.construct_id}"


# --- reading a hand-written assembly -------------------------------------------------------------------------


def write_assembly(directory: Path, stacks: dict[str, dict[str, Any]]) -> Path:
    """An assembly directory like ``cdk.out/assembly-<stage>``: per stack a template and its logical-id metadata
    (each resource's construct path, given under ``Path``)."""
    artifacts = {}
    for name, template in stacks.items():
        paths = {lid: resource.pop("Path") for lid, resource in template["Resources"].items()}
        (directory / f"{name}.template.json").write_text(json.dumps(template))
        metadata = {
            f"/stage/{name}/{path}": [{"type": "aws:cdk:logicalId", "data": lid}]
            for lid, path in paths.items()
        }
        (directory / f"{name}.metadata.json").write_text(json.dumps(metadata))
        artifacts[f"stage{name}"] = {
            "type": "aws:cloudformation:stack",
            "displayName": f"stage/{name}",
            "properties": {"templateFile": f"{name}.template.json"},
            "additionalMetadataFile": f"{name}.metadata.json",
        }
    artifacts["assets"] = {"type": "cdk:asset-manifest", "properties": {}}
    (directory / "manifest.json").write_text(json.dumps({"artifacts": artifacts}))
    return directory


def resource(path: str, resource_type: str, **properties: Any) -> dict[str, Any]:
    return {"Path": path, "Type": resource_type, "Properties": properties}


@pytest.fixture
def small(tmp_path: Path) -> list[diagram.StackTemplate]:
    producer = {
        "Resources": {
            "Key": resource("DataKey/Resource", "AWS::KMS::Key"),
            "Table": resource(
                "Table/Resource", "AWS::DynamoDB::Table", KMSKey={"Fn::GetAtt": ["Key", "Arn"]}
            ),
            "TablePolicy": resource(
                "Table/Policy/Resource", "AWS::IAM::ManagedPolicy", Resource={"Fn::Sub": "${Key.Arn}/*"}
            ),
            "Role": resource("Access/Role/Resource", "AWS::IAM::Role", RoleName="stage-sync"),
            "StreamParam": resource(
                "Handoff/stream/Resource",
                "AWS::SSM::Parameter",
                Name="/p/table-stream-arn",
                Value={"Fn::GetAtt": ["Table", "StreamArn"]},
            ),
        }
    }
    function_role = "arn:aws:iam::111111111111:role/stage-sync"
    consumer = {
        "Parameters": {
            "Stream": {"Type": "AWS::SSM::Parameter::Value<String>", "Default": "/p/table-stream-arn"},
            "Plain": {"Type": "String", "Default": "/p/table-stream-arn"},
        },
        "Resources": {
            "Function": resource("Sync/Function/Resource", "AWS::Lambda::Function", Role=function_role),
            "Mapping": resource(
                "Sync/Function/Mapping/Resource",
                "AWS::Lambda::EventSourceMapping",
                EventSourceArn={"Ref": "Stream"},
            ),
            "Queue": resource("Sync/Queue/Resource", "AWS::SQS::Queue"),
            "Alarm": resource(
                "Monitoring/Alarm/Resource",
                "AWS::CloudWatch::Alarm",
                Dimensions=[{"Value": {"Ref": "Queue"}}, {"Ref": "Plain"}],
            ),
        },
    }
    return diagram.read_assembly(write_assembly(tmp_path, {"Producer": producer, "Consumer": consumer}))


def test_resources_are_grouped_by_their_top_level_construct(small: list[diagram.StackTemplate]) -> None:
    producer, consumer = small
    assert producer.constructs == {
        "Key": "DataKey",
        "Table": "Table",
        "TablePolicy": "Table",
        "Role": "Access",
        "StreamParam": "Handoff",
    }
    assert set(consumer.constructs.values()) == {"Sync", "Monitoring"}


def test_boxes_list_their_resource_kinds_without_plumbing(small: list[diagram.StackTemplate]) -> None:
    drawn = diagram.mermaid("stage", small)
    assert 'Producer_Table[("<b>Table</b><br/>DynamoDB table")]' in drawn
    assert 'Consumer_Sync["<b>Sync</b><br/>Lambda function · event source mapping · SQS queue"]' in drawn
    assert "Handoff" not in drawn  # only SSM parameters: drawn as the arrows' labels


def test_arrows_follow_references_within_and_across_stacks(small: list[diagram.StackTemplate]) -> None:
    arrows = [line.strip() for line in diagram.mermaid("stage", small).splitlines() if "->" in line]
    assert arrows == [
        "Consumer_Monitoring --> Consumer_Sync",
        'Consumer_Sync -.->|"by name"| Producer_Access',
        'Consumer_Sync -.->|"table-stream-arn"| Producer_Table',
        "Producer_Table --> Producer_DataKey",
    ]


def test_drawing_is_deterministic(small: list[diagram.StackTemplate]) -> None:
    assert diagram.mermaid("stage", small) == diagram.mermaid("stage", list(small))


def test_handoff_labels_fold_numbered_parameters() -> None:
    assert diagram._handoff_label("/refdata/prod/stateful/isolated-subnet-3") == "isolated-subnet-N"
    assert diagram._handoff_label("/refdata/prod/stateful/vpc-id") == "vpc-id"


def test_block_is_replaced_between_its_markers_only() -> None:
    text = f"before\n{diagram.BEGIN}\nold\n{diagram.END}\nafter\n"
    assert diagram.replace_block(text, f"{diagram.BEGIN}\nnew\n{diagram.END}") == (
        f"before\n{diagram.BEGIN}\nnew\n{diagram.END}\nafter\n"
    )
    with pytest.raises(ValueError, match="markers"):
        diagram.replace_block("no markers here", "x")


def test_main_writes_the_block_into_the_file(
    small: list[diagram.StackTemplate], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(diagram, "synthesized_stage", lambda environment, outdir: small)
    target = tmp_path / "architecture.md"
    target.write_text(f"# Title\n{diagram.BEGIN}\n{diagram.END}\n")
    assert diagram.main(["--environment", "stage", "--write", str(target)]) == 0
    assert target.read_text() == f"# Title\n{diagram.section('stage', small)}\n"
