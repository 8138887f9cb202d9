"""checkov and cfn-lint over one cloud assembly: each runs once per set of templates, in the background from the moment
the assembly exists, and its result is kept under .cache/tools keyed by what decides it (the templates' names and
content, the tool's command line, its configuration file and the lock that pins its version).

A session whose templates are unchanged since an earlier one reads the earlier result instead of running the tool
again (checkov takes about 30 s of CPU, cfn-lint about 10 s). Two pytest-xdist workers that synthesize the same
templates share one run: the first takes the key's file lock and runs the tool, the other waits for its result. A
fresh clone has no cache and runs both.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "tools"


@dataclass(frozen=True)
class Tool:
    name: str
    command: tuple[str, ...]  # the executable and its options; each template's path follows
    per_template: tuple[str, ...]  # options repeated before each template's path ("-f" for checkov)
    decided_by: tuple[
        Path, ...
    ]  # files whose content decides the result besides the templates (config, lock)


@dataclass(frozen=True)
class Result:
    returncode: int
    stdout: str
    stderr: str
    cached: bool


CHECKOV = Tool(
    name="checkov",
    command=(
        str(ROOT / ".venv-checkov" / "bin" / "checkov"),
        *("--framework", "cloudformation", "--quiet", "--compact", "-o", "json", "--skip-download"),
    ),
    per_template=("-f",),
    decided_by=(ROOT / "requirements-checkov.lock",),
)
CFN_LINT = Tool(
    name="cfn-lint",
    command=(str(Path(sys.executable).parent / "cfn-lint"), "--config-file", str(ROOT / ".cfnlintrc.yaml")),
    per_template=(),
    decided_by=(ROOT / ".cfnlintrc.yaml", ROOT / "requirements.lock"),
)
TOOLS = (CHECKOV, CFN_LINT)


def templates_of(assembly: Path) -> list[str]:
    """Every template of the assembly, relative to it (sorted: the key and the tool's output do not depend on where
    the assembly was written)."""
    return sorted(str(path.relative_to(assembly)) for path in assembly.glob("assembly-*/*.template.json"))


def key(tool: Tool, assembly: Path, templates: list[str]) -> str:
    digest = hashlib.sha256(json.dumps([tool.command, tool.per_template]).encode())
    for path in tool.decided_by:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    for name in templates:
        digest.update(name.encode() + b"\0" + (assembly / name).read_bytes() + b"\0")
    return digest.hexdigest()[:32]


def run(
    tool: Tool, assembly: Path, *, cache: Path = CACHE, runner: Callable[..., Any] | None = None
) -> Result:
    """The tool's result over every template of ``assembly``: from the cache, or run once (under the key's lock)."""
    templates = templates_of(assembly)
    assert templates, f"no templates in {assembly}"
    cache.mkdir(parents=True, exist_ok=True)
    stored = cache / f"{tool.name}-{key(tool, assembly, templates)}.json"
    with (cache / f"{stored.stem}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stored.exists():
            return Result(**json.loads(stored.read_text()), cached=True)
        argv = [*tool.command, *(part for name in templates for part in (*tool.per_template, name))]
        done = (runner or subprocess.run)(
            argv, cwd=assembly, capture_output=True, text=True, timeout=900, check=False
        )
        partial = stored.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(
            json.dumps({"returncode": done.returncode, "stdout": done.stdout, "stderr": done.stderr})
        )
        partial.replace(stored)
        return Result(done.returncode, done.stdout, done.stderr, cached=False)


class Background:
    """Every tool started over one assembly in threads of this process; ``result`` waits for one."""

    def __init__(self, assembly: Path) -> None:
        self._results: dict[str, Result | BaseException] = {}
        self._threads = {
            tool.name: threading.Thread(target=self._run, args=(tool, assembly)) for tool in TOOLS
        }
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
