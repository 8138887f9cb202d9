"""checkov and cfn-lint over one cloud assembly: each tool's verdict on each template, kept under .cache/tools keyed by
what decides it (the template's name and content, the tool's options, its configuration file and the lock that pins
its version), and run in the background from the moment the assembly exists.

A template whose key has a stored verdict is not checked again, wherever the assembly was written: the checkout and
the recipes' scratch copies (tests/recipes/scratch.py) share .cache/tools, so a change to one environment reruns the
tools over that environment's templates only. The templates left to check go to one run of the tool (its start-up
costs about as much as one template), whose output is split into one verdict per template. Only a verdict is stored:
a run that exits with a code the tool does not give for a verdict, prints output that does not parse, or says nothing
about a template it was given, is a failed run. It raises, stores nothing, and the next session runs the tool again.
Two pytest-xdist workers that synthesize the same templates share one run: the first takes the templates' locks and
runs the tool, the other waits, then reads the verdicts.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "tools"


class ToolFailed(Exception):
    """The tool ran but gave no verdict on every template it was given (nothing of that run is stored)."""


@dataclass(frozen=True)
class Verdict:
    """What the tool found in one template: each finding on a line of its own, and how many checks passed and were
    skipped (checkov's; cfn-lint counts neither)."""

    findings: tuple[str, ...]
    passed: int = 0
    skipped: int = 0


def checkov_verdicts(returncode: int, stdout: str, assembly: Path, given: list[str]) -> dict[str, Verdict]:
    """checkov's JSON report split by the file each check names. Exit 0 (nothing failed) and 1 (a check failed) are
    its verdicts, but it also exits 1 when it crashes, and it passes over a file it cannot read without a word: the
    report must parse and name every template."""
    if returncode not in (0, 1):
        raise ToolFailed(f"checkov exited {returncode}")
    try:
        parsed = json.loads(stdout)
    except json.JSONDecodeError as error:
        raise ToolFailed(f"checkov printed no JSON report ({error})") from None
    named = {(assembly / name).resolve(): name for name in given}
    found: dict[str, dict[str, Any]] = {}

    def entry(file: str) -> dict[str, Any]:
        # paths as checkov was given them: relative to the assembly
        name = named.get((assembly / file).resolve())
        if name is None:
            raise ToolFailed(f"checkov reported on a file it was not given: {file}")
        return found.setdefault(name, {"findings": [], "passed": 0, "skipped": 0})

    for report in parsed if isinstance(parsed, list) else [parsed]:
        if not isinstance(report, dict) or "results" not in report:
            raise ToolFailed(f"checkov printed no results: {str(report)[:300]}")
        results = report["results"]
        for check in results.get("failed_checks", []):
            entry(check["file_abs_path"])["findings"].append(
                f"{check['check_id']} {check['resource']}: {check['check_name']}"
            )
        for kind in ("passed", "skipped"):
            for check in results.get(f"{kind}_checks", []):
                entry(check["file_abs_path"])[kind] += 1
        for file in results.get("parsing_errors", []):
            entry(file)["findings"].append("parsing error: checkov could not read the template")
    silent = sorted(set(given) - set(found))
    if silent:
        raise ToolFailed(f"checkov said nothing about {', '.join(silent)}")
    return {name: Verdict(tuple(v["findings"]), v["passed"], v["skipped"]) for name, v in found.items()}


def cfn_lint_verdicts(returncode: int, stdout: str, assembly: Path, given: list[str]) -> dict[str, Verdict]:
    """cfn-lint's JSON matches split by file. Its verdicts exit 0 or with the bits 2 (error), 4 (warning) and 8
    (informational) of what it matched; any other code (1: it could not run) is a failed run, and so is a match on no
    template it was given (a configuration error, E0003)."""
    if returncode & ~0b1110:
        raise ToolFailed(f"cfn-lint exited {returncode}")
    try:
        matches = json.loads(stdout) if stdout.strip() else []
    except json.JSONDecodeError as error:
        raise ToolFailed(f"cfn-lint printed no JSON matches ({error})") from None
    if not isinstance(matches, list) or (returncode and not matches):
        raise ToolFailed(f"cfn-lint exited {returncode} and printed {str(matches)[:300]}")
    named = {(assembly / name).resolve(): name for name in given}
    findings: dict[str, list[str]] = {name: [] for name in given}
    for match in matches:
        name = named.get((assembly / match["Filename"]).resolve()) if match["Filename"] else None
        if name is None:
            raise ToolFailed(f"cfn-lint matched outside the templates it was given: {match['Message']}")
        path = "/".join(str(part) for part in match["Location"]["Path"] or ())
        findings[name].append(f"{match['Rule']['Id']} {path}: {match['Message']}")
    return {name: Verdict(tuple(found)) for name, found in findings.items()}


@dataclass(frozen=True)
class Tool:
    name: str
    executable: Path
    options: tuple[str, ...]  # every option but the configuration file's; each template's path follows
    per_template: tuple[str, ...]  # options repeated before each template's path ("-f" for checkov)
    config: tuple[str, Path] | None  # the option naming the configuration file, and the file
    lock: Path  # the lock that pins the tool's version
    verdicts: Callable[[int, str, Path, list[str]], dict[str, Verdict]]

    def argv(self, templates: list[str]) -> list[str]:
        configured = (self.config[0], str(self.config[1])) if self.config else ()
        named = (part for name in templates for part in (*self.per_template, name))
        return [str(self.executable), *self.options, *configured, *named]


CHECKOV = Tool(
    name="checkov",
    executable=ROOT / ".venv-checkov" / "bin" / "checkov",
    options=("--framework", "cloudformation", "--compact", "-o", "json", "--skip-download"),
    per_template=("-f",),
    config=None,
    lock=ROOT / "requirements-checkov.lock",
    verdicts=checkov_verdicts,
)
CFN_LINT = Tool(
    name="cfn-lint",
    executable=Path(sys.executable).parent / "cfn-lint",
    options=("--format", "json"),
    per_template=(),
    config=("--config-file", ROOT / ".cfnlintrc.yaml"),
    lock=ROOT / "requirements.lock",
    verdicts=cfn_lint_verdicts,
)
TOOLS = (CHECKOV, CFN_LINT)


def templates_of(assembly: Path) -> list[str]:
    """Every template of the assembly, relative to it, sorted."""
    return sorted(str(path.relative_to(assembly)) for path in assembly.glob("assembly-*/*.template.json"))


def key(tool: Tool, assembly: Path, template: str) -> str:
    """What decides the tool's verdict on one template, and nothing that says where the checkout is: the options, the
    configuration file's content, the pinning lock's, the template's name in the assembly and its content."""
    digest = hashlib.sha256(json.dumps([tool.name, tool.options, tool.per_template]).encode())
    for decides in (*((tool.config[1],) if tool.config else ()), tool.lock):
        digest.update(decides.name.encode() + b"\0" + decides.read_bytes() + b"\0")
    digest.update(template.encode() + b"\0" + (assembly / template).read_bytes())
    return digest.hexdigest()[:32]


def stored(path: Path) -> Verdict | None:
    """The verdict kept at ``path``, or None when there is none (or what is there is not a whole one)."""
    try:
        kept = json.loads(path.read_text())
        return Verdict(tuple(kept["findings"]), kept["passed"], kept["skipped"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


@contextlib.contextmanager
def locked(paths: list[Path]) -> Iterator[None]:
    """Every one of ``paths``'s locks, taken in a fixed order (two runs over overlapping templates never deadlock)."""
    with contextlib.ExitStack() as stack:
        for path in sorted(paths):
            handle = stack.enter_context(path.with_suffix(".lock").open("w"))
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield


@dataclass(frozen=True)
class Result:
    verdicts: dict[str, Verdict]  # by template, relative to the assembly
    checked: tuple[str, ...]  # the templates this run gave to the tool (the others' verdicts were stored)

    @property
    def findings(self) -> list[str]:
        return [
            f"{name}: {finding}" for name, verdict in self.verdicts.items() for finding in verdict.findings
        ]


def run(
    tool: Tool, assembly: Path, *, cache: Path = CACHE, runner: Callable[..., Any] | None = None
) -> Result:
    """The tool's verdict on every template of ``assembly``: stored ones read, the rest from one run of the tool."""
    templates = templates_of(assembly)
    assert templates, f"no templates in {assembly}"
    cache.mkdir(parents=True, exist_ok=True)
    paths = {name: cache / f"{tool.name}-{key(tool, assembly, name)}.json" for name in templates}
    with locked([paths[name] for name in templates]):
        verdicts = {name: stored(paths[name]) for name in templates}
        missing = [name for name, verdict in verdicts.items() if verdict is None]
        if missing:
            done = (runner or subprocess.run)(
                tool.argv(missing), cwd=assembly, capture_output=True, text=True, timeout=900, check=False
            )
            try:
                fresh = tool.verdicts(done.returncode, done.stdout, assembly, missing)
            except ToolFailed as error:
                raise ToolFailed(
                    f"{tool.name} over {', '.join(missing)}: {error}\n{done.stderr[-3000:]}"
                ) from None
            for name in missing:
                verdicts[name] = fresh[name]
                partial = paths[name].with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
                partial.write_text(json.dumps(vars(fresh[name])))
                partial.replace(paths[name])
    return Result({name: verdict for name, verdict in verdicts.items() if verdict}, tuple(missing))


class Background:
    """Every tool started over one assembly in threads of this process; ``result`` waits for one."""

    def __init__(self, assembly: Path) -> None:
        self._results: dict[str, Result | BaseException] = {}
        self._threads = {t.name: threading.Thread(target=self._run, args=(t, assembly)) for t in TOOLS}
        for thread in self._threads.values():
            thread.start()

    def _run(self, tool: Tool, assembly: Path) -> None:
        try:
            self._results[tool.name] = run(tool, assembly)
        except BaseException as error:  # handed to the test that asks for this tool's result
            self._results[tool.name] = error

    def result(self, tool: Tool) -> Result:
        self._threads[tool.name].join()
        found = self._results[tool.name]
        if isinstance(found, BaseException):
            raise found
        return found
