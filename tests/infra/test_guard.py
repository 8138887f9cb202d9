"""The destructive-change guard (infra/guard.py) over real synthesized templates.

"Before" is each environment as synthesized once per session; "after" is a copy with the edit CDK would emit for
the change named in each test (a domain rename goes through config and a real synth), so every finding below is
derived from cfn-lint's resource schemas, not from a list in the test.
"""

from __future__ import annotations

import copy
import json
import re
import shlex
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App

from infra import guard
from infra.app_builder import build_environment, committed_context
from infra.config import EnvironmentConfig, SourceTable
from infra.environments import environments
from infra.templates import Stack, load_assembly
from tests.infra.conftest import ENVIRONMENTS, Synthesized
from tests.support.shown_commands import commands_in, refused

# The guard's rules are read on real templates: one environment that deletes its data and one that retains it.
DISPOSABLE = next(name for name, config in environments().items() if not config.retains_data)
ROOT = Path(__file__).resolve().parents[2]
RETAINED = next(name for name, config in environments().items() if config.retains_data)

TABLE = "Table7ABB320E"
BUCKET = "GeometryBucket1F491C5F"
DOMAIN = "SearchC313AE8E"
TOPIC = "AlarmTopicB56431CA"


@pytest.fixture(scope="module")
def assembly(synthesized: Synthesized) -> dict[str, Stack]:
    return load_assembly(synthesized.outdir)


def synthesized_assembly(
    config: EnvironmentConfig, outdir: Path, context: dict[str, Any] | None = None
) -> dict[str, Stack]:
    """The assembly of ``config`` alone, synthesized into ``outdir``."""
    app = App(context=context or committed_context(), outdir=str(outdir))
    build_environment(app, config)
    app.synth()
    return load_assembly(outdir)


def environment(assembly: dict[str, Stack], name: str) -> dict[str, Stack]:
    return {k: v for k, v in assembly.items() if k.startswith(f"{name}/")}


def edited(assembly: dict[str, Stack], name: str, edit: Any) -> dict[str, Stack]:
    """The assembly with ``edit(resources)`` applied to a deep copy of stack ``name``'s resources."""
    template = copy.deepcopy(dict(assembly[name].template))
    edit(template["Resources"])
    return {**assembly, name: replace(assembly[name], template=template)}


def properties(resources: dict[str, Any], logical_id: str) -> dict[str, Any]:
    return resources[logical_id]["Properties"]  # type: ignore[no-any-return]


def compare_edited(assembly: dict[str, Stack], name: str, edit: Any) -> list[guard.Finding]:
    """The guard's findings for the assembly against itself with ``edit`` applied to stack ``name``."""
    return guard.compare(assembly, edited(assembly, name, edit))


def setting(logical_id: str, key: str, value: Any) -> Any:
    """An edit setting the property ``key`` of ``logical_id``."""
    return lambda resources: properties(resources, logical_id).__setitem__(key, value)


def only(findings: list[guard.Finding]) -> guard.Finding:
    assert len(findings) == 1, [f.resource for f in findings]
    return findings[0]


def test_unchanged_templates_pass_in_every_environment(assembly: dict[str, Stack]) -> None:
    assert {stack.environment for stack in assembly.values()} == set(ENVIRONMENTS)
    assert guard.compare(assembly, assembly) == []


def test_a_table_key_schema_change_replaces_the_table(assembly: dict[str, Stack]) -> None:
    swap_keys = setting(TABLE, "KeySchema", [{"AttributeName": "pk", "KeyType": "HASH"}])
    finding = only(compare_edited(assembly, f"{RETAINED}/Stateful", swap_keys))
    assert finding.resource == f"{RETAINED}/Stateful/{TABLE}"
    assert (finding.change, finding.certainty) == ("replace", "definite")
    assert any(
        d.startswith(
            "KeySchema changes (conditionally create-only: replaced when it cannot be updated in place)"
        )
        for d in finding.details
    )
    assert "UpdateReplacePolicy Retain: the old one stays, orphaned with its data" in finding.details[-1]


def test_a_bucket_renamed_by_its_construct_id_is_deleted(assembly: dict[str, Stack]) -> None:
    def rename(resources: dict[str, Any]) -> None:
        resources["GeometriesBucketC0FFEE00"] = resources.pop(BUCKET)

    finding = only(compare_edited(assembly, "test/Stateful", rename))
    assert (finding.resource, finding.change) == ("test/Stateful/GeometryBucket1F491C5F", "delete")
    assert "a renamed construct id is a delete plus a create" in finding.details[-1]


def test_a_bucket_given_a_physical_name_is_replaced(assembly: dict[str, Stack]) -> None:
    name_it = setting(BUCKET, "BucketName", "refdata-geometries")
    finding = only(compare_edited(assembly, f"{DISPOSABLE}/Stateful", name_it))
    assert finding.resource == f"{DISPOSABLE}/Stateful/{BUCKET}"
    assert (finding.change, finding.certainty) == ("replace", "definite")
    assert 'BucketName changes (create-only): (absent) -> "refdata-geometries"' in finding.details[0]
    assert "UpdateReplacePolicy Delete: the old one is deleted with its data" in finding.details[-1]


def test_a_domain_renamed_in_config_is_replaced(assembly: dict[str, Stack], tmp_path: Path) -> None:
    dev = environments()[DISPOSABLE]
    renamed_domain = f"{dev.search.domain_name[:24]}-two"
    renamed = synthesized_assembly(
        replace(dev, search=replace(dev.search, domain_name=renamed_domain)), tmp_path
    )

    findings = guard.compare(environment(assembly, DISPOSABLE), renamed)
    by_id = {f.logical_id: f for f in findings}
    assert {f.change for f in findings} == {"replace"} and {f.certainty for f in findings} == {"definite"}
    assert (
        by_id.pop(DOMAIN).details[0]
        == f'DomainName changes (create-only): "{dev.search.domain_name}" -> "{renamed_domain}"'
    )
    # The domain's security group describes the domain by name, and a description is create-only too.
    ((group, finding),) = by_id.items()
    assert (
        group.startswith("SearchSecurityGroup")
        and finding.why == "security group of the search domain REPLACED"
    )
    assert finding.details[0].startswith("GroupDescription changes (create-only)")
    assert (
        finding.details[-1] == "UpdateReplacePolicy Delete: the old one is deleted; a new one takes its place"
    )


def test_two_gsi_changes_in_one_deployment_are_refused_and_one_is_not(assembly: dict[str, Stack]) -> None:
    def add(*names: str) -> Any:
        def edit(resources: dict[str, Any]) -> None:
            for name in names:
                properties(resources, TABLE)["GlobalSecondaryIndexes"].append(
                    {
                        "IndexName": name,
                        "KeySchema": [{"AttributeName": "sk", "KeyType": "HASH"}],
                        "Projection": {"ProjectionType": "KEYS_ONLY"},
                    }
                )

        return edit

    assert compare_edited(assembly, f"{DISPOSABLE}/Stateful", add("inverted")) == []
    finding = only(compare_edited(assembly, f"{DISPOSABLE}/Stateful", add("inverted", "bySk")))
    assert (finding.resource, finding.change) == (f"{DISPOSABLE}/Stateful/{TABLE}", "gsi")
    assert finding.details[:2] == ('creates index "inverted"', 'creates index "bySk"')


def test_changing_one_gsi_key_counts_as_a_delete_and_a_create(assembly: dict[str, Stack]) -> None:
    def rekey(resources: dict[str, Any]) -> None:
        properties(resources, TABLE)["GlobalSecondaryIndexes"][0]["KeySchema"][0]["AttributeName"] = "gid"

    finding = only(compare_edited(assembly, f"{DISPOSABLE}/Stateful", rekey))
    assert finding.change == "gsi" and len(finding.details) == 3
    assert finding.details[0].startswith('deletes index "globalId" (KeySchema cannot change in place)')


def test_throughput_changes_on_every_gsi_pass(assembly: dict[str, Stack]) -> None:
    def scale(resources: dict[str, Any]) -> None:
        for index in properties(resources, TABLE)["GlobalSecondaryIndexes"]:
            index["ProvisionedThroughput"] = {"ReadCapacityUnits": 50, "WriteCapacityUnits": 50}

    assert compare_edited(assembly, "test/Stateful", scale) == []


def test_deleting_a_stateful_resource_or_its_stack_is_refused(assembly: dict[str, Stack]) -> None:
    def drop_topic(resources: dict[str, Any]) -> None:
        del resources[TOPIC]

    finding = only(compare_edited(assembly, f"{RETAINED}/Stateful", drop_topic))
    assert (finding.resource, finding.change) == (f"{RETAINED}/Stateful/{TOPIC}", "delete")
    assert finding.details[0].startswith(
        "DeletionPolicy RetainExceptOnCreate: the old one stays, orphaned with its data"
    )

    without_stack = {k: v for k, v in assembly.items() if k != f"{DISPOSABLE}/Stateful"}
    deleted = guard.compare(assembly, without_stack)
    assert {f.logical_id for f in deleted} >= {TABLE, BUCKET, DOMAIN, TOPIC}
    assert {f.change for f in deleted} == {"delete"}


def test_replacing_the_vpc_replaces_the_subnets_and_route_tables_that_reference_it(
    assembly: dict[str, Stack],
) -> None:
    stateful = assembly["test/Stateful"]
    vpc = next(i for i, r in stateful.resources.items() if r["Type"] == "AWS::EC2::VPC")

    findings = compare_edited(assembly, "test/Stateful", setting(vpc, "CidrBlock", "10.99.0.0/16"))
    replaced = {stateful.resources[f.logical_id]["Type"] for f in findings if f.change == "replace"}
    assert replaced >= {
        "AWS::EC2::VPC",
        "AWS::EC2::Subnet",
        "AWS::EC2::RouteTable",
        "AWS::EC2::SecurityGroup",
    }
    assert {f.certainty for f in findings} == {"definite"}


def test_a_replaced_key_replaces_the_domain_it_encrypts(assembly: dict[str, Stack]) -> None:
    def rename_key(resources: dict[str, Any]) -> None:
        resources["DataKeyRenamed0000"] = resources.pop("DataKey5CEB6F76")
        text = json.dumps(resources).replace('"DataKey5CEB6F76"', '"DataKeyRenamed0000"')
        resources.clear()
        resources.update(json.loads(text))

    findings = compare_edited(assembly, f"{DISPOSABLE}/Stateful", rename_key)
    by_id = {f.logical_id: f for f in findings}
    assert by_id["DataKey5CEB6F76"].change == "delete"
    assert by_id[DOMAIN].change == "replace" and by_id[DOMAIN].certainty == "definite"
    assert any("EncryptionAtRestOptions/KmsKeyId" in d for d in by_id[DOMAIN].details)


def test_intrinsics_that_resolve_to_the_same_value_pass_and_unresolvable_ones_that_differ_are_possible(
    assembly: dict[str, Stack],
) -> None:
    stateless = assembly[f"{DISPOSABLE}/Stateless"]
    group = next(i for i, r in stateless.resources.items() if r["Type"] == "AWS::Logs::LogGroup")

    def named(value: Any) -> dict[str, Stack]:
        return edited(assembly, f"{DISPOSABLE}/Stateless", setting(group, "LogGroupName", value))

    literal = named("/refdata/111111111111/sync")
    joined = named({"Fn::Join": ["", ["/refdata/", {"Ref": "AWS::AccountId"}, "/sync"]]})
    imported = named({"Fn::ImportValue": "sync-log-group"})
    assert guard.compare(literal, joined) == []
    finding = only(guard.compare(literal, imported))
    assert (finding.change, finding.certainty) == ("replace", "possible")
    assert "possibly: the value is only known at deploy time" in finding.details[0]
    assert finding.why.startswith("stateful resource possibly REPLACED")


def test_stateless_changes_pass(assembly: dict[str, Stack]) -> None:
    stateless = assembly[f"{RETAINED}/Stateless"]
    function = next(i for i, r in stateless.resources.items() if r["Type"] == "AWS::Lambda::Function")
    alarm = next(i for i, r in stateless.resources.items() if r["Type"] == "AWS::CloudWatch::Alarm")

    def change(resources: dict[str, Any]) -> None:
        properties(resources, function)["MemorySize"] = 2048
        resources["AnotherAlarm0000"] = copy.deepcopy(resources[alarm])
        del resources[alarm]

    assert compare_edited(assembly, f"{RETAINED}/Stateless", change) == []


def write_overrides(path: Path, *entries: dict[str, str]) -> Path:
    lines = [guard.OVERRIDES_HEADER]
    for entry in entries:
        lines.append("[[override]]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in entry.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_reviewed_override_lets_the_named_change_through_and_only_it(
    assembly: dict[str, Stack], tmp_path: Path
) -> None:
    name_it = setting(BUCKET, "BucketName", "refdata-geometries")
    findings = compare_edited(assembly, f"{DISPOSABLE}/Stateful", name_it)
    reason = "dev data is disposable; agreed in review"
    right = write_overrides(
        tmp_path / "right.toml", {"resource": f"*/Stateful/{BUCKET}", "change": "replace", "reason": reason}
    )
    wrong = write_overrides(
        tmp_path / "wrong.toml",
        {"resource": f"{DISPOSABLE}/Stateful/{BUCKET}", "change": "delete", "reason": reason},
    )

    text, passed = guard.report(findings, guard.load_overrides(right), "a test")
    assert passed and "allowed by a reviewed override (1)" in text and reason in text
    text, passed = guard.report(findings, guard.load_overrides(wrong), "a test")
    assert not passed and "BLOCKED (1)" in text and "match no change" in text


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"resource": TABLE, "change": "replace", "reason": "a good reason here"}, "override[0].resource"),
        (
            {"resource": f"{DISPOSABLE}/Stateful/{TABLE}", "change": "rename", "reason": "a good reason"},
            "override[0].change",
        ),
        (
            {"resource": f"{DISPOSABLE}/Stateful/{TABLE}", "change": "replace", "reason": "ok"},
            "override[0].reason",
        ),
    ],
)
def test_an_invalid_override_names_its_field(tmp_path: Path, entry: dict[str, str], message: str) -> None:
    with pytest.raises(guard.GuardError, match=rf"override.toml: {re.escape(message)}: "):
        guard.load_overrides(write_overrides(tmp_path / "override.toml", entry))


def test_the_command_writes_a_baseline_then_blocks_a_destructive_change_with_a_readable_report(
    synthesized: Synthesized, tmp_path: Path
) -> None:
    entry = {"resource": "x/Stateful/Old", "change": "delete", "reason": "for the last release"}
    baseline, overrides = tmp_path / "baseline", write_overrides(tmp_path / "overrides.toml", entry)
    options = ["--baseline", str(baseline), "--overrides", str(overrides)]
    assert guard.main([str(synthesized.outdir), "--write-baseline", *options]) == 0
    assert overrides.read_text() == guard.OVERRIDES_HEADER
    assert guard.main([str(synthesized.outdir), *options]) == 0

    template_path = baseline / RETAINED / "Stateful.template.json"
    template = json.loads(template_path.read_text())
    template["Resources"][TABLE]["Properties"]["KeySchema"][0]["AttributeName"] = "id"
    template_path.write_text(json.dumps(template))
    summary = tmp_path / "summary.md"
    assert guard.main([str(synthesized.outdir), *options, "--summary", str(summary)]) == 1
    assert "## Destructive-change guard: FAILED" in summary.read_text()
    assert (
        f"{RETAINED}/Stateful/{TABLE} (AWS::DynamoDB::Table): stateful resource REPLACED"
        in summary.read_text()
    )


def git(*arguments: str) -> str:
    return subprocess.run(["git", *arguments], capture_output=True, text=True, check=True).stdout.strip()


def test_the_baseline_is_read_as_committed_at_a_revision() -> None:
    with pytest.raises(guard.GuardError, match="is not a commit of this clone"):
        guard.load_baseline_at("0" * 40, guard.BASELINE)
    if git("rev-parse", "--is-shallow-repository") == "true":
        pytest.skip("a shallow clone has no first commit")
    assert guard.load_baseline_at(git("rev-list", "--max-parents=0", "HEAD"), guard.BASELINE) is None
    if git("status", "--porcelain", "--", str(guard.BASELINE)) == "":
        committed = guard.load_baseline_at("HEAD", guard.BASELINE)
        assert committed == guard.load_baseline(guard.BASELINE)


def migration(assembly: dict[str, Stack], outdir: Path) -> tuple[str, list[guard.Finding]]:
    """A schema of the retained environment's main table moved to a table of its own, and the migration findings."""
    config = environments()[RETAINED]
    main = config.source_tables[0]
    schema = next(name for name in main.indexable_schemas if name != main.indexable_schemas[0])
    backed_up = replace(main.settings, backup_enabled=True)
    moved = replace(
        config,
        additional_tables=(
            *config.additional_tables,
            SourceTable(name="Moved", schemas=(schema,), settings=backed_up),
        ),
    )
    after = synthesized_assembly(moved, outdir)
    findings = [
        f
        for f in guard.compare({k: v for k, v in assembly.items() if k in after}, after)
        if f.change == "migration"
    ]
    return schema, findings


def test_a_schema_moved_to_a_table_of_its_own_is_reported_as_a_migration(
    assembly: dict[str, Stack], tmp_path: Path
) -> None:
    schema, findings = migration(assembly, tmp_path)
    assert [(f.resource, f.why) for f in findings] == [
        (
            f"{RETAINED}/Stateless/{schema}",
            f"schema {schema!r} MOVES from table-stream-arn to table-moved-stream-arn: a data migration",
        )
    ]
    text, passed = guard.report(findings, [], "the baseline")
    assert not passed and 'change = "migration"' in text
    assert f"reindex --env {RETAINED} --schema {schema}" in advice_that_runs(text)[0]
    override = guard.Override(
        f"{RETAINED}/Stateless/{schema}", "migration", "items copied and reindexed, agreed"
    )
    assert guard.report(findings, [override], "the baseline")[1]


def test_the_migration_advice_runs_as_written_and_cites_a_readme_heading(
    assembly: dict[str, Stack], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command the guard prints is one the ops CLI accepts, for the finding's environment and schema, and the
    README section it cites exists."""
    from ops import cli

    schema, findings = migration(assembly, tmp_path)
    advice = " ".join(findings[0].details)
    (command,) = re.findall(r"`([^`]*-m ops [^`]*)`", advice)
    started: list[Any] = []
    monkeypatch.setattr(cli, "ENVIRONMENTS", environments)
    monkeypatch.setattr(cli, "run_deployed", lambda args: (started.append(args), ({}, 0))[1])
    words = shlex.split(command)
    assert cli.main(words[words.index("ops") + 1 :]) == 0, command
    assert [(args.command, args.env, args.schema.name) for args in started] == [("reindex", RETAINED, schema)]
    (heading,) = re.findall(r'\(README, "([^"]+)"\)', advice)
    assert f"\n### {heading}\n" in (ROOT / "README.md").read_text(), heading


@pytest.mark.parametrize(
    ("moved", "words"),
    [
        ({"account": "222222222222"}, "account 222222222222 in ca-central-1"),
        ({"region": "ca-west-1"}, "account 111111111111 in ca-west-1"),
    ],
)
def test_an_account_or_region_move_is_one_finding_named_a_new_deployment_until_one_override_allows_it(
    assembly: dict[str, Stack], tmp_path: Path, moved: dict[str, str], words: str
) -> None:
    dev = environments()[DISPOSABLE]
    zones = [f"ca-west-1{zone}" for zone in "abc"]
    context = {**committed_context(), f"availability-zones:account={dev.account}:region=ca-west-1": zones}
    after = synthesized_assembly(replace(dev, **moved), tmp_path / "cdk.out", context)
    finding = only(guard.compare(environment(assembly, DISPOSABLE), after))

    assert (finding.resource, finding.change) == (f"{DISPOSABLE}/Environment/location", "move")
    assert words in finding.why and "new deployment" in finding.why and "stay where they are" in finding.why
    assert any("retire the old location" in step for step in finding.details)
    text, passed = guard.report([finding], [], "the baseline")
    assert not passed and text.splitlines()[-1].startswith("Verdict: BLOCKED (1 change")
    entry = {
        "resource": f"{DISPOSABLE}/Environment/location",
        "change": "move",
        "reason": "dev moves, data reloaded",
    }
    reviewed = guard.load_overrides(write_overrides(tmp_path / "overrides.toml", entry))
    text, passed = guard.report([finding], reviewed, "the baseline")
    assert passed and text.splitlines()[-1] == "Verdict: passed (1 change(s) allowed by reviewed overrides)"


def advice_that_runs(text: str) -> list[str]:
    """The ops commands in a guard report, each accepted by the ops CLI's own parser."""
    shown = [
        one
        for number, line in enumerate(text.splitlines(), 1)
        for one in commands_in(line, f"report:{number}")
    ]
    assert not refused(shown), refused(shown)
    assert all(one.words and not one.synopsis for one in shown), [one.text for one in shown]
    return [one.text for one in shown]


def streams(schemas: list[str], stream: str, account: str, region: str, name: str) -> Stack:
    """A stateless stack whose event source mappings admit each schema from the named table stream."""
    resources = {}
    for i, schema in enumerate(sorted(schemas)):
        pattern = json.dumps({"dynamodb": {"Keys": {"pk": {"S": [{"prefix": f"{schema}::"}]}}}})
        properties = {
            "EventSourceArn": {"Ref": "Stream0"},
            "FilterCriteria": {"Filters": [{"Pattern": pattern}]},
        }
        resources[f"Mapping{i}"] = {"Type": "AWS::Lambda::EventSourceMapping", "Properties": properties}
    template = {"Parameters": {"Stream0": {"Default": f"/refdata/stateful/{stream}"}}, "Resources": resources}
    return Stack(name, template, name.replace("/", "-"), account, region)


def test_every_command_the_guard_prints_is_one_the_ops_cli_accepts() -> None:
    """The migration and the move findings tell the operator to reindex: with the environment filled in, as the
    ops CLI requires (`--env`), for every indexable schema of every environment."""
    from refdata.registry import REGISTRY

    indexable = sorted(name for name, schema in REGISTRY.items() if schema.indexable)
    for environment, config in environments().items():
        name = f"{environment}/Stateless"
        before, after = (
            {name: streams(indexable, stream, config.account, config.region, name)}
            for stream in ("table-stream-arn", "table-moved-stream-arn")
        )
        moved = {name: replace(before[name], account="000000000000")}
        for findings in (guard.compare(before, after), guard.compare(before, moved)):
            assert findings
            commands = advice_that_runs(guard.report(findings, [], "the baseline")[0])
            assert {
                f"{guard.OPS} reindex --env {environment} --schema {schema}" for schema in indexable
            } <= set(commands)
