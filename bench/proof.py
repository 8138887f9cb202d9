"""The proof loop: what a change costs to prove on this machine. `make test` on a set-up checkout (warm: the type
checker's, the heavy tools' and the session synth's caches from an earlier run) and on a fresh clone of HEAD (no
cache), with the CPU it used; synth with PYTHONDONTWRITEBYTECODE=1 set (as in CI), against the same command with no
byte code to read (PYTHONPYCACHEPREFIX pointing at an empty folder: what every process paid before set-up compiled);
the IAM oracle's share of the warm run (its summary line: tests/support/iam_oracle.py); and the test nodes': each
kind's start time and CPU and its per-test wipe (tests/support/engine_node.py, secured_node.py), and the share of the
warm run's test time spent in the tests that use the `engine` fixture (pytest's durations, summed over the workers)."""

from __future__ import annotations

import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.support.engine_node import EngineNode

ROOT = Path(__file__).resolve().parent.parent
ROUNDS = 3
# make treats the set-up as done in a clone that shares this checkout's environments (as tests/recipes do).
MADE = ("-o", ".venv/.installed", "-o", ".venv-checkov/.installed", "-o", "node_modules/.installed")
# What the shared environments were installed from (the Makefile's prerequisites of their stamps).
SET_UP_LOCKS = ("requirements.lock", "requirements-uv.txt", "requirements-checkov.lock", "package-lock.json")
TARGETS = {
    "make test": 90.0,
    "make test (fresh clone)": 150.0,
    "make synth": 8.0,
    "cdk synth": 8.0,
    "app": 6.0,
}
ENGINE_STARTS = 3  # fresh nodes started one after the other: the first is the coldest (JVM, jars, page cache)
WIPES = 20
DURATION = re.compile(r"^\s*(?P<seconds>[\d.]+)s (?:setup|call|teardown)\s+(?P<test>.+?)\s*$", re.MULTILINE)
DURATIONS = "--durations=0 --durations-min=0"
# Lists every collected test's id, with whether it uses a search node, without starting one.
_COLLECT = """
import json, sys
import pytest

class Collect:
    def pytest_collection_finish(self, session):
        # Imported here, once pytest has put the project's pythonpath (pyproject: lambdas, .) on sys.path.
        from tests.support.engine_node import SESSION as ENGINE
        from tests.support.secured_node import SESSION as SECURED

        print(json.dumps({
            item.nodeid: bool((ENGINE.fixtures | SECURED.fixtures) & set(getattr(item, "fixturenames", ())))
            for item in session.items
        }))

plugins = ["-p", "no:tests.support.engine_node", "-p", "no:tests.support.secured_node"]
code = pytest.main(["--collect-only", "-q", "-n", "0", *plugins, *sys.argv[1:]], plugins=[Collect()])
sys.exit(code)
"""
ORACLE = re.compile(
    r"IAM oracle: (?P<decisions>\d+) decisions of the double \((?P<distinct>\d+) distinct\) put to iam-simulate as "
    r"they were made, (?P<cpu>[\d.]+) s of Node CPU over (?P<processes>\d+) process\(es\), (?P<seconds>[\d.]+) s "
    r"waited at the end"
)


def timed(command: Sequence[str], cwd: Path = ROOT, **environ: str) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of every process it started, its output) of one run; fails on a non-zero exit."""
    env = {
        **os.environ,
        "PYTHONDONTWRITEBYTECODE": "1",
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }
    env.pop("CI", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        list(command), cwd=cwd, env=env | environ, capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
        )
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done.stdout


def fresh_clone(directory: Path) -> Path:
    """A clone of HEAD that shares this checkout's environments (symlinks), as a set-up clone: its lock files carry the
    checkout's modification times, so every make in it (the nested `make client` of the install tests too, which no
    `-o` reaches) finds the set-up done. A clone's files are newer than the checkout's stamps, and `npm ci` through the
    symlink once emptied this checkout's node_modules in the middle of a run."""
    clone = directory / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    for lock in SET_UP_LOCKS:
        if (clone / lock).read_bytes() != (ROOT / lock).read_bytes():
            raise RuntimeError(
                f"{lock} differs from HEAD's: commit it (the clone shares this checkout's set-up)"
            )
        done = (ROOT / lock).stat()
        os.utime(clone / lock, ns=(done.st_atime_ns, done.st_mtime_ns))
    for shared in (".venv", ".venv-checkov", "node_modules"):
        (clone / shared).symlink_to(ROOT / shared)
    return clone


def synth_rows() -> list[str]:
    rows = []
    commands = {
        "app": (
            "`python app.py` (every environment, the five cdk-nag packs)",
            [".venv/bin/python", "app.py"],
        ),
        "cdk synth": ("`npx cdk synth dev/Stateful`", ["npx", "cdk", "synth", "--quiet", "dev/Stateful"]),
        "make synth": ("warm `make synth` (every stack, then the synth gate)", ["make", *MADE, "synth"]),
    }
    with tempfile.TemporaryDirectory() as empty:
        for key, (label, command) in commands.items():
            warm, cold = [], []
            for _ in range(ROUNDS):  # interleaved: both see the same load
                cold.append(timed(command, PYTHONPYCACHEPREFIX=empty)[0])
                warm.append(timed(command)[0])
            w, c = statistics.median(warm), statistics.median(cold)
            rows.append(
                f"| {label} | {w:.1f} | {c:.1f} | {w / c:.2f}× | ≤ {TARGETS[key]:g} s: "
                f"{'met' if w <= TARGETS[key] else '**missed**'} |"
            )
    return rows


def oracle_row(output: str) -> str:
    """The IAM oracle's line of a `make test` run: what it checked, its processes' CPU, and the wait for their last
    answers at the session's end (both summed over the processes)."""
    found = ORACLE.search(output)
    if not found:
        raise RuntimeError("`make test` printed no IAM oracle line")
    seconds, cpu, distinct = float(found["seconds"]), float(found["cpu"]), int(found["distinct"])
    return (
        f"| the IAM oracle in it: {found['decisions']} decisions of the IAM double ({distinct} distinct) put to "
        f"iam-simulate as they were made, in {found['processes']} processes, {distinct / cpu:.0f} cases per CPU "
        f"second; wall: the wait for the last answers at the session's end (both summed over the processes) | "
        f"{seconds:.1f} | {cpu:.1f} | | |"
    )


def engine_start_rows() -> list[str]:
    """Each node kind's start (a fresh JVM to ready, from its class archive: the first of ENGINE_STARTS one after
    the other, and the median of the rest; the JVM's own CPU to ready) and the wipe every test of it begins with, on
    a running node."""
    from tests.support.engine_node import EngineNode
    from tests.support.secured_node import SecuredNode

    rows, kept = [], ""
    for kind in (EngineNode, SecuredNode):
        starts, cpu, wipes = [], [], []
        for number in range(ENGINE_STARTS):
            started = time.perf_counter()
            node = kind().start().wait_ready()
            starts.append(time.perf_counter() - started)
            cpu.append(node.cpu_seconds())
            try:
                if number == ENGINE_STARTS - 1:
                    for _ in range(WIPES):
                        started = time.perf_counter()
                        node.wipe()
                        wipes.append(time.perf_counter() - started)
                    if kind is EngineNode:
                        kept = kept_row(node)
            finally:
                node.stop()
        rows += [
            f"| the {kind.launcher.name}: its node's start, a fresh JVM to ready (the first of {ENGINE_STARTS} one after "
            f"the other; the median of the others: {statistics.median(starts[1:]):.1f} s); CPU: the JVM's to "
            f"ready, median | {starts[0]:.1f} | {statistics.median(cpu):.1f} | | one per session, started as the "
            "session collects by the worker reserved for its tests |",
            f"| the {kind.launcher.name}: the wipe each of its tests begins with, on a running node (median of {WIPES}) | "
            f"{statistics.median(wipes):.2f} | | | |",
        ]
    return [*rows, kept]


def kept_row(node: EngineNode) -> str:
    """The index bootstrap a harness's fixture runs before a test (on a wiped node), against what
    `EngineNode.prepared` does instead after a test with the same set-up that wrote a document mapping a new field:
    documents deleted, that index made again."""
    from botocore.credentials import Credentials
    from index_bootstrap.bootstrap import IndexBootstrap
    from refdata.indexnames import write_alias
    from refdata.registry import indexable_schemas
    from refdata.transport import OpenSearchTransport

    transport = OpenSearchTransport(
        node.endpoint, "ca-central-1", timeout_seconds=60, credentials=Credentials("bench", "bench")
    )
    schemas = [schema.name for schema in indexable_schemas()]

    def build() -> None:
        IndexBootstrap(transport, sleep=lambda seconds: None).run(schemas, replicas=0)

    builds, restores = [], []
    for _ in range(WIPES):
        node.wipe()
        started = time.perf_counter()
        build()
        builds.append(time.perf_counter() - started)
    node.prepared("bench", build)
    for number in range(WIPES):
        written = node.request("PUT", f"/{write_alias(schemas[0])}/_doc/{number}", {f"added{number}": number})
        assert written.status == 201, written.body
        started = time.perf_counter()
        assert node.prepared("bench", build) is False, "the set-up was not kept"
        restores.append(time.perf_counter() - started)
    transport.close()
    build_s, restore_s = statistics.median(builds), statistics.median(restores)
    return (
        f"| a harness's set-up before each test on the test engine, as `prepared` keeps it (documents deleted, the "
        f"index a test remapped made again), median of {WIPES}; baseline: the index bootstrap on a wiped node, "
        f"{build_s:.2f} s | {restore_s:.2f} | | | {restore_s / build_s:.2f}× the bootstrap |"
    )


def engine_tests(paths: Sequence[str] = ("tests",)) -> dict[str, bool]:
    """Every test's id under ``paths``, and whether it uses either node kind's fixtures."""
    done = subprocess.run(
        [sys.executable, "-c", _COLLECT, *paths], cwd=ROOT, capture_output=True, text=True, check=True
    )
    tests: dict[str, bool] = json.loads(
        next(line for line in done.stdout.splitlines() if line.startswith("{"))
    )
    return tests


def engine_share_row(output: str, tests: dict[str, bool]) -> str:
    """The node tests' share of a run's test time: the durations pytest printed (setup, call, teardown)."""
    seconds: dict[str, float] = {}
    for found in DURATION.finditer(output):
        seconds[found["test"]] = seconds.get(found["test"], 0.0) + float(found["seconds"])
    if not seconds:
        raise RuntimeError("`make test` printed no durations")
    engine = sum(value for test, value in seconds.items() if tests.get(test))
    total = sum(seconds.values())
    count = sum(tests.values())
    return (
        f"| the search nodes' tests in it: the {count} of {len(tests):,} tests that use a node's fixture, "
        f"{engine / total:.0%} of the test time (setup, call and teardown summed over the workers: "
        f"{engine:.0f} of {total:.0f} s) | | | | |"
    )


def run() -> str:
    subprocess.run(["make", *MADE, "test"], cwd=ROOT, capture_output=True, check=True)  # warms the caches
    warm_wall, warm_cpu, warm_output = timed(["make", *MADE, "test"], PYTEST_ADDOPTS=DURATIONS)
    with tempfile.TemporaryDirectory() as directory:
        clone = fresh_clone(Path(directory))
        fresh_wall, fresh_cpu, _ = timed(["make", *MADE, "test"], cwd=clone)
    synth = synth_rows()
    tests = [
        ("make test", "`make test` on a set-up checkout", warm_wall, warm_cpu),
        ("make test (fresh clone)", "`make test` on a fresh clone (empty caches)", fresh_wall, fresh_cpu),
    ]
    return "\n".join(
        [
            "## Proof loop",
            "",
            f"Two cores. `make test` runs lint, the type check and every test (pytest with one worker per core); CPU is user + sys "
            f"of every process it started, so CPU/wall is the cores kept busy on average. Synth figures are the "
            f"median of {ROUNDS} interleaved runs with PYTHONDONTWRITEBYTECODE=1; the baseline reads no byte code "
            "(an empty PYTHONPYCACHEPREFIX), as every process did before set-up compiled what it installs.",
            "",
            "| step | wall s | CPU s | cores used | target |",
            "|---|---:|---:|---:|---|",
            *(
                f"| {label} | {wall:.0f} | {cpu:.0f} | {cpu / wall:.2f} | ≤ {TARGETS[key]:g} s: "
                f"{'met' if wall <= TARGETS[key] else '**missed**'} ({wall / TARGETS[key]:.2f}× the target) |"
                for key, label, wall, cpu in tests
            ),
            oracle_row(warm_output),
            *engine_start_rows(),
            engine_share_row(warm_output, engine_tests()),
            "",
            "| command | with byte code s | without (baseline) s | ratio | target |",
            "|---|---:|---:|---:|---|",
            *synth,
            "",
        ]
    )
