"""The app: every environment's two stacks, each in its own account and region, synthesized deterministically."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from aws_cdk import App

from infra.app_builder import build_app, committed_context
from infra.config import ConfigError, EnvironmentConfig
from infra.environments import environments
from infra.report import deploy_target, stack_lines
from tests.infra.conftest import ENVIRONMENTS, STACK_KINDS, Synthesized
from tests.support.retention import removal_policies


def stack_manifests(outdir: Path, env: str) -> dict[str, dict]:
    """The stack artifacts of one environment's nested cloud assembly, by display name."""
    manifest = json.loads((outdir / f"assembly-{env}" / "manifest.json").read_text())
    return {
        artifact["displayName"]: {"id": artifact_id, **artifact}
        for artifact_id, artifact in manifest["artifacts"].items()
        if artifact["type"] == "aws:cloudformation:stack"
    }


def test_app_has_exactly_the_configured_environments(synthesized: Synthesized) -> None:
    assert synthesized.environments == ENVIRONMENTS


def test_every_environment_has_a_stateful_and_a_stateless_stack(synthesized: Synthesized, env: str) -> None:
    assert sorted(synthesized.stacks(env)) == sorted(STACK_KINDS)
    assert sorted(stack_manifests(synthesized.outdir, env)) == sorted(f"{env}/{kind}" for kind in STACK_KINDS)


@pytest.mark.parametrize("kind", STACK_KINDS)
def test_stack_deploys_to_its_environment_account_and_region(
    synthesized: Synthesized, config: EnvironmentConfig, kind: str
) -> None:
    stack = synthesized.stack(config.name, kind)
    assert (stack["account"], stack["region"]) == (config.account, config.region)
    artifact = stack_manifests(synthesized.outdir, config.name)[f"{config.name}/{kind}"]
    assert artifact["environment"] == f"aws://{config.account}/{config.region}"


def test_stateless_stack_deploys_after_the_stateful_stack(synthesized: Synthesized, env: str) -> None:
    artifacts = stack_manifests(synthesized.outdir, env)
    stateful_id = artifacts[f"{env}/Stateful"]["id"]
    assert stateful_id in artifacts[f"{env}/Stateless"].get("dependencies", [])
    stateless_id = artifacts[f"{env}/Stateless"]["id"]
    assert stateless_id not in artifacts[f"{env}/Stateful"].get("dependencies", [])


@pytest.mark.parametrize("kind", STACK_KINDS)
def test_what_an_environment_keeps_is_kept_except_by_the_rollback_of_its_first_create(
    synthesized: Synthesized, config: EnvironmentConfig, kind: str
) -> None:
    """Where data is retained, every resource either stack keeps (the stateful stack's all; the stateless stack's
    log groups and queues) is RetainExceptOnCreate, and Retain on replacement: a failed first create's rollback
    removes it, so the retry finds no orphan with its name. What the stateless stack does not keep (state machines,
    the bootstrap's custom resource) is deleted; where data is not retained, nothing is kept."""
    resources = synthesized.template_json(config.name, kind)["Resources"]
    stated = {
        logical_id: (resource["DeletionPolicy"], resource.get("UpdateReplacePolicy"))
        for logical_id, resource in resources.items()
        if "DeletionPolicy" in resource
    }
    kept = {
        logical_id: policies for logical_id, policies in stated.items() if policies != ("Delete", "Delete")
    }
    if not config.retains_data:
        assert kept == {}
        return
    assert kept, f"{config.name}/{kind} keeps nothing"
    assert kept == {logical_id: removal_policies(config) for logical_id in kept}
    if kind == "Stateful":
        assert kept == stated, "the stateful stack deletes nothing"


def test_stack_descriptions_name_the_environment(synthesized: Synthesized, env: str) -> None:
    for kind in STACK_KINDS:
        assert f"({env})" in synthesized.template_json(env, kind)["Description"]


def test_account_context_overrides_one_environment() -> None:
    overridden = ENVIRONMENTS[-1]
    app = App(context={**committed_context(), f"account.{overridden}": "444444444444"})
    stages = build_app(app, nag=False)
    accounts = {
        name: {stage.node.find_child(kind).account for kind in STACK_KINDS}  # type: ignore[attr-defined]
        for name, stage in stages.items()
    }
    configured = {name: {config.account} for name, config in environments().items()}
    assert accounts == configured | {overridden: {"444444444444"}}


def test_an_account_override_for_an_unknown_environment_names_the_nearest() -> None:
    app = App(context={**committed_context(), f"account.{ENVIRONMENTS[0]}x": "444444444444"})
    with pytest.raises(
        ConfigError,
        match=rf"^account\.{ENVIRONMENTS[0]}x: unknown environment \(did you mean '{ENVIRONMENTS[0]}'\?\)",
    ):
        build_app(app, nag=False)


def test_synth_is_deterministic(synthesized: Synthesized, tmp_path: Path) -> None:
    second = tmp_path / "cdk.out"
    app = App(context=committed_context(), outdir=str(second))
    build_app(app, nag=False)
    app.synth()
    first_templates = sorted(
        path.relative_to(synthesized.outdir) for path in synthesized.outdir.glob("assembly-*/*.template.json")
    )
    second_templates = sorted(path.relative_to(second) for path in second.glob("assembly-*/*.template.json"))
    assert first_templates == second_templates
    assert len(first_templates) == len(ENVIRONMENTS) * len(STACK_KINDS)
    differing = [
        str(relative)
        for relative in first_templates
        if (synthesized.outdir / relative).read_bytes() != (second / relative).read_bytes()
    ]
    assert differing == []


def test_report_prints_one_line_per_stack_with_resource_count_and_path(synthesized: Synthesized) -> None:
    lines = stack_lines(synthesized.outdir)
    assert len(lines) == len(ENVIRONMENTS) * len(STACK_KINDS)
    expected = {
        f"{env}/{kind}": (
            len(synthesized.template_json(env, kind)["Resources"]),
            str(synthesized.template_path(env, kind)),
        )
        for env in ENVIRONMENTS
        for kind in STACK_KINDS
    }
    reported = {}
    for line in lines:
        name, count, unit, path = line.split(maxsplit=3)
        assert unit == "resources"
        reported[name] = (int(count), path)
    assert reported == expected


def test_report_finds_nothing_in_an_empty_directory(tmp_path: Path) -> None:
    assert stack_lines(tmp_path) == []


def test_deploy_target_gives_the_workflow_the_configured_role_and_region(config: EnvironmentConfig) -> None:
    assert deploy_target(config.name) == [
        f"role_arn={config.deploy_role_arn}",
        f"region={config.region}",
        f"account={config.account}",
    ]


def test_the_infra_commands_import_the_config_without_pythonpath() -> None:
    """`python -m infra.report --deploy-target` (the deploy workflow), `infra.cost`, `infra.guard` run from the
    repository root without PYTHONPATH, and the config imports the schema registry from lambdas/."""
    environ = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    root = Path(__file__).resolve().parents[2]
    imported = subprocess.run(
        [sys.executable, "-c", "import infra.config"], cwd=root, env=environ, capture_output=True, text=True
    )
    assert imported.returncode == 0, imported.stderr


def test_deploy_target_of_an_unknown_environment_names_the_nearest_and_the_known_ones() -> None:
    misspelt = f"{ENVIRONMENTS[0]}x"
    known = re.escape(str(sorted(ENVIRONMENTS)))
    with pytest.raises(
        ConfigError,
        match=rf"^{misspelt}: unknown environment \(did you mean '{ENVIRONMENTS[0]}'\?\); known: {known}$",
    ):
        deploy_target(misspelt)
