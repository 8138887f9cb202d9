"""A scratch copy of the working tree to apply a change to, and the commands people run there.

The copy holds every file git would (tracked and untracked, not ignored), shares the set-up (.venv, .venv-checkov,
node_modules and the test engine's .cache/engine: symlinks, never re-installed) and the heavy tools' verdicts
(.cache/tools, keyed by each template's content: a template the change left as it was is not checked again), and is a
git repository of its own, so what a change touched is ``git status``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support import heavy_tools

ROOT = Path(__file__).resolve().parents[2]
# make treats the set-up as done: the copy's files are newer than the shared .venv's stamp.
SHARED = (".venv", ".venv-checkov", "node_modules", ".cache/engine")
MAKE = [
    "make",
    "--no-print-directory",
    *(part for shared in SHARED for part in ("-o", f"{shared}/.installed")),
]
TOOLS_CACHE = heavy_tools.CACHE.relative_to(ROOT)
GIT = {"GIT_AUTHOR_NAME": "recipe", "GIT_AUTHOR_EMAIL": "recipe@example.invalid"}
GIT |= {"GIT_COMMITTER_NAME": "recipe", "GIT_COMMITTER_EMAIL": "recipe@example.invalid"}


@dataclass
class Scratch:
    root: Path

    @classmethod
    def of_working_tree(cls, directory: Path) -> Scratch:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        ).stdout.decode()
        root = directory / "repo"
        for name in filter(None, listed.split("\0")):
            source = ROOT / name
            if source.is_file():
                (root / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, root / name)
        (root / ".cache").mkdir(exist_ok=True)
        (ROOT / TOOLS_CACHE).mkdir(parents=True, exist_ok=True)
        for shared in (*SHARED, TOOLS_CACHE):
            (root / shared).symlink_to(ROOT / shared)
        if (ROOT / ".mypy_cache").is_dir():  # a warm type-check cache, as a developer's tree has
            copy_type_check_cache(ROOT / ".mypy_cache", root / ".mypy_cache")
        scratch = cls(root)
        scratch.run(["git", "init", "-q", "-b", "main"])
        scratch.run(
            ["git", "commit", "-q", "--allow-empty", "-m", "the project's first commit, before any baseline"]
        )
        scratch.run(["git", "add", "-A"])
        scratch.run(["git", "commit", "-q", "-m", "before the change"])
        return scratch

    def run(
        self, command: list[str], *, check: bool = True, **environ: str
    ) -> subprocess.CompletedProcess[str]:
        env = {key: value for key, value in os.environ.items() if key not in {"CI", "PYTEST_CURRENT_TEST"}}
        started = time.monotonic()
        done = subprocess.run(
            command, cwd=self.root, env=env | GIT | environ, capture_output=True, text=True, timeout=1800
        )
        if command[0] == "make":  # where a recipe's time goes, in `make recipes`' report (-rP)
            print(f"  {' '.join(command[len(MAKE) :])}: {time.monotonic() - started:.0f} s")
        if check and done.returncode != 0:
            raise AssertionError(
                f"`{' '.join(command)}` failed ({done.returncode}):\n{failure_report(done.stdout)}\n{done.stderr[-4000:]}"
            )
        return done

    def make(
        self, target: str, *options: str, check: bool = True, **environ: str
    ) -> subprocess.CompletedProcess[str]:
        return self.run([*MAKE, *options, target], check=check, **environ)

    def changed(self) -> set[str]:
        """Files that differ from the commit (edited, added or deleted), and commits them."""
        status = self.run(["git", "status", "--porcelain", "--untracked-files=all"]).stdout
        self.run(["git", "add", "-A"])
        self.run(["git", "commit", "-q", "--allow-empty", "-m", "a step"])
        return {line[3:] for line in status.splitlines()}

    def edit(self, relative: str, old: str, new: str) -> None:
        path = self.root / relative
        text = path.read_text()
        assert text.count(old) == 1, f"{relative}: expected one {old!r}"
        path.write_text(text.replace(old, new))


def copy_type_check_cache(source: Path, target: Path) -> None:
    """mypy's cache, less the SQLite journals of a type check running now (`make test` runs mypy beside pytest):
    they come and go as it writes (a copy that met one vanishing failed), and the database without them is the last
    complete one."""
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("*.db-wal", "*.db-shm", "*.db-journal"))


def failure_report(stdout: str, limit: int = 20_000) -> str:
    """What a failed command printed: a pytest run's errors and failures sections on (the tracebacks, which the
    end of a long output would cut), else the output's end."""
    sections = [i for i in (stdout.find("= ERRORS ="), stdout.find("= FAILURES =")) if i != -1]
    start = stdout.rfind("\n", 0, min(sections)) + 1 if sections else max(0, len(stdout) - limit)
    return stdout[start : start + limit]
