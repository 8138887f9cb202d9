"""Synth reports: one line per stack (``python -m infra.report [cdk.out]``), the synth gate
(``python -m infra.report --check cdk.out``: fails on any cdk-nag finding, error annotation or missing context value
and says which), the cdk-nag acknowledgments with their reasons (``python -m infra.report --acknowledgments``), and
what the deploy workflow needs to know of one environment (``python -m infra.report --deploy-target <env>``, as
``key=value`` lines for ``$GITHUB_OUTPUT``)."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from constructs import IConstruct

# The rule ids of the five packs of infra.nag.RULE_PACKS start with these (tests/infra/test_nag.py checks both agree).
PACK_PREFIXES = ("AwsSolutions", "Serverless", "NIST.800.53.R5", "HIPAA.Security", "PCI.DSS.321")


def stack_lines(cloud_assembly: Path) -> list[str]:
    lines = []
    for template in sorted(cloud_assembly.glob("assembly-*/*.template.json")):
        manifest = json.loads((template.parent / "manifest.json").read_text())
        name = next(
            artifact.get("displayName", key)
            for key, artifact in manifest["artifacts"].items()
            if artifact.get("properties", {}).get("templateFile") == template.name
        )
        resources = len(json.loads(template.read_text()).get("Resources", {}))
        lines.append(f"{name:<20} {resources:>4} resources  {template}")
    return lines


def acknowledgments(scope: IConstruct) -> list[tuple[str, str, str]]:
    """(construct path, rule id, reason) for every cdk-nag acknowledgment under ``scope``."""
    from aws_cdk import Validations

    found = []
    for construct in scope.node.find_all():
        for entry in construct.node.metadata:
            if entry.type != Validations.ACKNOWLEDGED_RULES_METADATA_KEY:
                continue
            for rule, reason in entry.data.items():
                rule_id = rule.removeprefix("Annotation::")
                if rule_id.startswith(PACK_PREFIXES):
                    found.append((construct.node.path, rule_id, reason))
    return found


def pack_of(rule_id: str) -> str:
    return next(prefix for prefix in PACK_PREFIXES if rule_id.startswith(prefix))


def _print_acknowledgments() -> None:
    from aws_cdk import App

    from infra.app_builder import build_app, committed_context

    app = App(context=committed_context())
    for name, stage in build_app(app, nag=False).items():
        found = acknowledgments(stage)
        counts = Counter(pack_of(rule) for _, rule, _ in found)
        print(
            f"## {name}: {len(found)} acknowledgments ({', '.join(f'{p} {counts[p]}' for p in PACK_PREFIXES)})"
        )
        for path, rule, reason in found:
            print(f"- {rule} on {path}: {reason}")


def deploy_target(name: str) -> list[str]:
    """``role_arn``, ``region`` and ``account`` of environment ``name`` from config, as ``key=value`` lines."""
    from infra.config import unknown_environment
    from infra.environments import environments

    known = environments()
    if name not in known:
        raise unknown_environment(name, known)
    config = known[name]
    return [f"role_arn={config.deploy_role_arn}", f"region={config.region}", f"account={config.account}"]


def gate_failures(cloud_assembly: Path) -> list[str]:
    """What makes a synthesized assembly unfit to deploy, one line each: every cdk-nag finding and error annotation
    (the validation report the CLI writes) and every context value the app had to look up (which synth would
    otherwise fill with dummy values such as ``dummy1a`` zones)."""
    failures = []
    report = cloud_assembly / "validation-report.json"
    if report.exists():
        for plugin in json.loads(report.read_text()).get("pluginReports", []):
            for violation in plugin.get("violations", []):
                for construct in violation.get("violatingConstructs", []):
                    failures.append(
                        f"{'error annotation' if str(violation.get('ruleName')).startswith('Annotation::') else 'cdk-nag finding'} "
                        f"{violation.get('ruleName')} on {construct.get('constructPath')}: "
                        f"{violation.get('description', '').strip()}"
                    )
    for manifest in sorted(cloud_assembly.glob("**/manifest.json")):
        for missing in json.loads(manifest.read_text()).get("missing", []):
            line = (
                f'missing context {missing["key"]}: add it to cdk.context.json (README, "Add an environment"); '
                "synth never looks it up"
            )
            if line not in failures:
                failures.append(line)
    return failures


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--deploy-target":
        print("\n".join(deploy_target(argv[1])))
        return 0
    if argv == ["--acknowledgments"]:
        _print_acknowledgments()
        return 0
    if argv[:1] == ["--check"]:
        assembly = Path(argv[1] if len(argv) > 1 else "cdk.out")
        failures = gate_failures(assembly)
        lines = stack_lines(assembly)
        if failures or not lines:
            print(f"synth gate: {len(failures)} problem(s) in {assembly}", file=sys.stderr)
            print(
                "\n".join(f"  {failure}" for failure in failures or ["no templates found"]), file=sys.stderr
            )
            return 1
        print("\n".join(lines))
        return 0
    lines = stack_lines(Path(argv[0] if argv else "cdk.out"))
    if not lines:
        print("no templates found: run `make synth`", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    from infra.validation import run

    run(lambda: main(sys.argv[1:]))
