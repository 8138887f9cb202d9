"""Synth reports: one line per stack (``python -m infra.report [cdk.out]``; ``--help`` lists the modes), the synth gate (``python -m infra.report
--check cdk.out [--cli-output <what cdk synth printed> --cli-status <its status>]``: fails on any cdk-nag finding,
error annotation or missing context value and says each once, with its fix; `make synth` hands it the CLI's
output, which it passes on less the CLI's own report of the same problems), the cdk-nag acknowledgments with their
reasons (``python -m infra.report --acknowledgments``), and what the deploy workflow needs to know of one
environment (``python -m infra.report --deploy-target <env>``, as ``key=value`` lines for ``$GITHUB_OUTPUT``)."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Problem:
    """One thing that makes an assembly unfit to deploy: its line, and what identifies the CDK CLI's own report of it
    (the rule and construct path of a finding, the key of a missing context value)."""

    line: str
    kind: str  # "cdk-nag finding", "error annotation" or "missing context"
    rule: str = ""
    path: str = ""
    key: str = ""


# How to fix each kind of problem, said once under the problems of that kind.
HINTS = {
    "cdk-nag finding": "fix the resource; a finding that cannot be fixed is acknowledged with its reason on the "
    'construct that owns the resource: infra.nag.acknowledge(construct, "<why>", "<rule>") (docs/testing.md, "What make test checks")',
    "error annotation": "the app refuses the configuration or construct it names: fix what the message says",
}


def gate_problems(cloud_assembly: Path) -> list[Problem]:
    """What makes a synthesized assembly unfit to deploy: every cdk-nag finding and error annotation (the validation
    report the app writes) and every context value the app had to look up (which synth would otherwise fill with
    dummy values such as ``dummy1a`` zones)."""
    problems: list[Problem] = []
    report = cloud_assembly / "validation-report.json"
    if report.exists():
        for plugin in json.loads(report.read_text()).get("pluginReports", []):
            for violation in plugin.get("violations", []):
                rule = str(violation.get("ruleName"))
                kind = "error annotation" if rule.startswith("Annotation::") else "cdk-nag finding"
                for construct in violation.get("violatingConstructs", []):
                    path = str(construct.get("constructPath"))
                    line = f"{kind} {rule} on {path}: {violation.get('description', '').strip()}"
                    problems.append(Problem(line, kind, rule=rule, path=path))
    for manifest in sorted(cloud_assembly.glob("**/manifest.json")):
        for missing in json.loads(manifest.read_text()).get("missing", []):
            line = (
                f'missing context {missing["key"]}: add it to cdk.context.json (README, "Add an environment"); '
                "synth never looks it up"
            )
            if line not in [problem.line for problem in problems]:
                problems.append(Problem(line, "missing context", key=missing["key"]))
    return problems


def gate_failures(cloud_assembly: Path) -> list[str]:
    """One line per problem of ``gate_problems``."""
    return [problem.line for problem in gate_problems(cloud_assembly)]


# The CDK CLI's output around `cdk synth` (captured by `make synth`): what the gate says itself, or never needed.
ANSI = re.compile(r"\x1b\[[0-9;]*m")
SUPPLY_A_STACK_ID = re.compile(r"^Supply a stack id \(.*\) to display its template\.$")
CLI_FINDING = re.compile(r"^(ERROR|WARNING|WARN|INFO) .* \(\S+\)$")  # then its construct and rule, indented
CLI_CONCLUSION = "Synthesis finished with errors"
CLI_SUBPROCESS = re.compile(r"^.*: Subprocess exited with error \d+$")
CONFIG_ERROR = "config error: "  # infra.validation's one line: the app's whole answer
CLI_MISSING = re.compile(r"^Context lookups have been disabled\..* Missing context keys: '(.*)'$")


def _owned(block: list[str], problems: list[Problem]) -> bool:
    """Whether a finding block of the CLI reports one of ``problems`` (its construct path and rule)."""
    indented = [line.strip() for line in block[1:]]
    return any(
        problem.rule
        and any(line.split(" ")[0] == problem.path for line in indented)
        and any(line.startswith(("Acknowledge with", "Rule ")) and problem.rule in line for line in indented)
        for problem in problems
    )


def cli_lines(output: str, problems: list[Problem]) -> list[str]:
    """The CDK CLI's ``output`` less what the gate says itself (each finding the CLI reports again, its missing-context
    error, and its conclusion once every finding is the gate's), the "Supply a stack id" line, and its "Subprocess
    exited" line after the app's one-line config error; anything else it said is kept as it said it."""
    lines = output.splitlines()
    config_error = any(ANSI.sub("", line).startswith(CONFIG_ERROR) for line in lines)
    kept: list[str] = []
    dropped_all = True
    index = 0
    while index < len(lines):
        plain = ANSI.sub("", lines[index]).rstrip()
        if CLI_FINDING.match(plain):
            end = index + 1
            while end < len(lines) and ANSI.sub("", lines[end]).startswith("   "):
                end += 1
            block = [ANSI.sub("", line) for line in lines[index:end]]
            if _owned(block, problems):
                index = end + (end < len(lines) and not lines[end].strip())  # and the blank line after it
                continue
            dropped_all = False
            kept.extend(lines[index:end])
            index = end
            continue
        missing = CLI_MISSING.match(plain)
        keys = {problem.key for problem in problems if problem.key}
        if (
            SUPPLY_A_STACK_ID.match(plain)
            or (missing and set(missing[1].split(", ")) <= keys)
            or (config_error and CLI_SUBPROCESS.match(plain))
        ):
            index += 1
            continue
        kept.append(lines[index])
        index += 1
    if dropped_all and problems:
        kept = [line for line in kept if ANSI.sub("", line).strip() != CLI_CONCLUSION]
    while kept and not kept[-1].strip():
        kept.pop()
    return kept


def check(assembly: Path, cli_output: Path | None = None, cli_status: int = 0) -> int:
    """The synth gate: what the CLI said that the gate does not say itself, then each problem once and how to fix
    it (stderr, status 1), or one line per stack (stdout)."""
    problems = gate_problems(assembly) if (assembly / "manifest.json").exists() else []
    said = cli_lines(cli_output.read_text(), problems) if cli_output and cli_output.exists() else []
    if said:
        print("\n".join(said), file=sys.stderr)
    if cli_status and not problems:  # the CLI failed on something the gate does not name: what it said is why
        return cli_status
    lines = stack_lines(assembly)
    if problems or not lines:
        print(f"synth gate: {len(problems)} problem(s) in {assembly}", file=sys.stderr)
        print(
            "\n".join(f"  {problem.line}" for problem in problems) or "  no templates found", file=sys.stderr
        )
        for kind in dict.fromkeys(problem.kind for problem in problems):
            if kind in HINTS:
                print(f"{kind}: {HINTS[kind]}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m infra.report",
        description="Synth reports: one line per stack of the cloud assembly (the default), the synth gate, the cdk-nag "
        "acknowledgments, or one environment's deploy target.",
    )
    parser.add_argument(
        "assembly",
        nargs="?",
        type=Path,
        default=Path("cdk.out"),
        help="the synthesized cloud assembly (cdk.out)",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--check",
        action="store_true",
        help="the synth gate: fail on any cdk-nag finding, error annotation or missing context value, each named "
        "once with its fix",
    )
    mode.add_argument(
        "--acknowledgments", action="store_true", help="list the cdk-nag acknowledgments with their reasons"
    )
    mode.add_argument(
        "--deploy-target",
        metavar="ENV",
        help="what the deploy workflow needs to know of this environment, as key=value lines for $GITHUB_OUTPUT",
    )
    parser.add_argument("--cli-output", type=Path, help="(--check) what `cdk synth` printed (make synth)")
    parser.add_argument("--cli-status", type=int, default=0, help="(--check) its exit status")
    return parser


def main(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.check and (args.cli_output is not None or args.cli_status):
        parser.error("--cli-output and --cli-status go with --check")
    if args.deploy_target is not None:
        print("\n".join(deploy_target(args.deploy_target)))
        return 0
    if args.acknowledgments:
        _print_acknowledgments()
        return 0
    if args.check:
        return check(args.assembly, args.cli_output, args.cli_status)
    lines = stack_lines(args.assembly)
    if not lines:
        print(f"no templates found in {args.assembly}: run `make synth`", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    from infra.validation import run

    run(lambda: main(sys.argv[1:]))
