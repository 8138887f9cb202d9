"""Synth reports: one line per stack (``python -m infra.report [cdk.out]``), the cdk-nag acknowledgments
with their reasons (``python -m infra.report --acknowledgments``), and what the deploy workflow needs to know of
one environment (``python -m infra.report --deploy-target <env>``, as ``key=value`` lines for ``$GITHUB_OUTPUT``)."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from aws_cdk import App, Validations
from constructs import IConstruct

from infra.nag import RULE_PACKS

PACK_PREFIXES = ("AwsSolutions", "Serverless", "NIST.800.53.R5", "HIPAA.Security", "PCI.DSS.321")
assert len(PACK_PREFIXES) == len(RULE_PACKS)


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
    from infra.config import ConfigError
    from infra.environments import environments

    known = environments()
    if name not in known:
        raise ConfigError(f"{name}: unknown environment; known: {sorted(known)}")
    config = known[name]
    return [f"role_arn={config.deploy_role_arn}", f"region={config.region}", f"account={config.account}"]


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--deploy-target":
        from infra.config import ConfigError

        try:
            print("\n".join(deploy_target(sys.argv[2])))
        except ConfigError as error:
            sys.exit(str(error))
        sys.exit(0)
    if sys.argv[1:] == ["--acknowledgments"]:
        _print_acknowledgments()
        sys.exit(0)
    lines = stack_lines(Path(sys.argv[1] if len(sys.argv) > 1 else "cdk.out"))
    if not lines:
        sys.exit("no templates found: run `make synth`")
    print("\n".join(lines))
