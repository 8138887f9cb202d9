"""The coverage report tests/recipes reads holds every test that asserted on a table or role, however many xdist
workers ran them (each worker used to write the file itself, and the last one to finish won)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.coverage import TARGET

ROOT = Path(__file__).resolve().parents[2]
TESTS = """
import os
from tests.support import coverage


def test_{n}():
    coverage.covers("role:env/{n}")
    coverage.covers("worker:" + os.environ["PYTEST_XDIST_WORKER"])
"""


def run_pytest(suite: Path, env: dict[str, str], *args: str) -> None:
    """A pytest session over ``suite`` with the coverage plugin, as tests/conftest.py loads it in the project."""
    plugins = ("-p", "tests.support.coverage", "-p", "no:cacheprovider")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *plugins, "-q", *args, "--rootdir", str(suite), str(suite)],
        cwd=suite,
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_report_merges_what_every_worker_covered(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    for n in range(8):
        (suite / f"test_{n}.py").write_text(TESTS.format(n=n))
    report = tmp_path / "coverage.json"
    run_pytest(suite, {**os.environ, TARGET: str(report)}, "-n", "2", "--dist", "loadfile")
    covered = json.loads(report.read_text())
    assert sorted(thing for thing in covered if thing.startswith("worker:")) == ["worker:gw0", "worker:gw1"]
    for n in range(8):
        assert covered[f"role:env/{n}"] == [f"test_{n}.py::test_{n}"]
