"""`--dist loadgroup` keeps each group in the worker reserved for it (tests/support/node_groups.py), in a real
two-worker session."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.support.node_groups import HERE_KEY, reservations, runs_here

ROOT = Path(__file__).resolve().parents[2]

SUITE = """
import os, pytest

def ran(name):
    with open(os.environ["RAN"], "a") as out:
        out.write(f"{name} {os.environ['PYTEST_XDIST_WORKER']}\\n")

@pytest.mark.parametrize("n", range(8))
@pytest.mark.xdist_group("engine")
def test_engine(n):
    ran("engine")

@pytest.mark.parametrize("n", range(6))
@pytest.mark.xdist_group("secured")
def test_secured(n):
    ran("secured")

@pytest.mark.parametrize("n", range(20))
def test_other(n):
    ran("other")
"""


def two_worker_session(directory: Path, modules: dict[str, str]) -> dict[str, set[str]]:
    """Run the test modules `modules` (file name -> source) in a real two-worker `--dist loadgroup` session with this
    plugin; each line they write to $RAN ("<name> <worker>") read back as name -> the workers it was written in."""
    (directory / "conftest.py").write_text('pytest_plugins = ("tests.support.node_groups",)\n')
    (directory / "pytest.ini").write_text("[pytest]\n")
    for name, source in modules.items():
        (directory / name).write_text(source)
    ran = directory / "ran.txt"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup"],
        cwd=directory,
        env={**os.environ, "PYTHONPATH": str(ROOT), "RAN": str(ran)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    workers: dict[str, set[str]] = {}
    for line in ran.read_text().splitlines():
        name, worker = line.split()
        workers.setdefault(name, set()).add(worker)
    return workers


def test_each_group_runs_in_the_one_worker_reserved_for_it(tmp_path: Path) -> None:
    """pytest-xdist's own loadgroup spread a group's tests over both workers under pytest 9.2 (its group suffix no
    longer reaches the test's id), and each worker started both nodes."""
    workers = two_worker_session(tmp_path, {"test_suite.py": SUITE})
    assert workers["engine"] == {"gw0"} and workers["secured"] == {"gw1"}, workers  # as `reservations` says
    assert workers["other"] == {"gw0", "gw1"}, workers


def test_the_biggest_group_goes_to_the_first_worker_and_on_around() -> None:
    grouped = {"a": "secured", "b": "engine", "c": "engine", "d": "other", "e": "tie"}
    assert reservations(grouped, 2) == {"engine": "gw0", "other": "gw1", "secured": "gw0", "tie": "gw1"}
    assert reservations(grouped, 1) == dict.fromkeys(["engine", "other", "secured", "tie"], "gw0")


def test_only_a_grouped_runs_worker_knows_which_nodes_it_will_need() -> None:
    config = SimpleNamespace(stash=pytest.Stash())
    assert runs_here(config, "engine") is None  # no plan: the process starts the nodes its collection uses
    config.stash[HERE_KEY] = frozenset({"engine"})
    assert runs_here(config, "engine") is True and runs_here(config, "secured") is False


MODULE = """
import os, pytest

@pytest.fixture(scope="module")
def built():
    with open(os.environ["RAN"], "a") as out:
        out.write(f"{__name__} {os.environ['PYTEST_XDIST_WORKER']}\\n")

@pytest.mark.parametrize("n", range(12))
def test_uses_the_module_fixture(built, n):
    pass
"""


def test_a_modules_tests_run_in_one_worker_until_no_other_module_is_left(tmp_path: Path) -> None:
    """A module's fixtures are built in each worker that runs some of its tests. Handed out one test after the other,
    both workers drew from the same module and built its fixtures twice; now a worker goes on with its module or takes
    one the other is not running, and only the last module left may be shared."""
    workers = two_worker_session(tmp_path, {f"test_{name}.py": MODULE for name in "abcdef"})
    assert len(workers) == 6 and set().union(*workers.values()) == {"gw0", "gw1"}, workers
    assert sum(len(ran_in) > 1 for ran_in in workers.values()) <= 1, workers
