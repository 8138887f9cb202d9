"""The one synth of a test session: every environment's cloud assembly, with what the tests need of the construct tree
computed beside it, so no pytest-xdist worker builds the app.

``python -m tests.support.assembly <dir>`` builds the app once (as `make synth` does, without the nag plugins, so a
finding fails one named test rather than the synth), synthesizes it into ``<dir>/cdk.out`` and writes
``<dir>/facts.json``: each cdk-nag rule pack's findings on each stack (``validate_scope``, the packs' own check), the
acknowledgments under each environment, and each stack's construct ids. The controller of a test session starts this
in the background before its workers start (tests/infra/conftest.py), holding ``<dir>/lock`` for it; every worker's
``synthesized`` fixture takes the lock, so it waits for that one synth, or runs it itself when nothing had started it
(a run without xdist). checkov and cfn-lint then run once over that assembly (tests/support/heavy_tools.py).

A successful synth is kept under ``.cache/assembly`` by the digest of everything it reads (`inputs_key`): the app's
sources and config, the CDK packages' versions, the Python and Node that run it. A later session whose inputs have
the same digest starts from a copy of it instead of synthesizing again; a change to any input is a new synth.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
VARIABLE = "REFDATA_TEST_ASSEMBLY"  # the session's folder, set by the controller for its workers
ENVIRONMENT = {"JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20", "CDK_VALIDATION": "false"}
CACHE = ROOT / ".cache" / "assembly"
KEPT = 2  # assemblies kept (the newest): the checkout's, and the one before a change
# What the synth reads, relative to the root: files, and folders read whole (byte code aside).
INPUTS = (
    "app.py",
    "cdk.json",
    "cdk.context.json",
    "requirements.lock",
    "package-lock.json",
    "infra",
    "lambdas",
    "ops",
    "tests/support/assembly.py",
)
PACKAGES = ("aws-cdk-lib", "constructs", "cdk-nag", "jsii", "cfn-lint")  # cfn-lint: config's instance types


def inputs_key(root: Path = ROOT) -> str:
    """The digest of everything the synth reads: each input file's path and content, the versions of the packages
    that build and check the app, the Python and the Node binary that run it, and the CDK and jsii variables of
    the environment it runs in."""
    digest = hashlib.sha256()
    for name in INPUTS:
        path = root / name
        files = sorted(path.rglob("*")) if path.is_dir() else [path]
        for file in files:
            if file.is_file() and "__pycache__" not in file.parts:
                digest.update(f"{file.relative_to(root)}\0".encode() + file.read_bytes() + b"\0")
    node = shutil.which("node")
    found = Path(os.path.realpath(node)) if node else None
    environ = {**os.environ, **ENVIRONMENT}
    described = {
        "packages": {package: metadata.version(package) for package in PACKAGES},
        "python": sys.version,
        "node": found and [str(found), found.stat().st_mtime_ns, found.stat().st_size],
        "environment": {k: v for k, v in sorted(environ.items()) if k.startswith(("CDK_", "JSII_"))},
    }
    digest.update(json.dumps(described).encode())
    return digest.hexdigest()[:32]


def restore(directory: Path, key: str, cache: Path = CACHE) -> bool:
    """Copy the assembly kept for ``key`` into ``directory`` (tests may write beside it; the kept one stays as
    synthesized); whether there was one."""
    kept = cache / key
    if not (kept / "facts.json").is_file():
        return False
    shutil.copytree(kept, directory, dirs_exist_ok=True)
    return True


def keep(directory: Path, key: str, root: Path = ROOT, cache: Path = CACHE) -> None:
    """Keep a successful synth under ``key``, unless an input changed while it ran (the digest no longer matches
    what was synthesized), and drop all but the newest `KEPT`."""
    if inputs_key(root) != key:
        return
    cache.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f"{key}.partial-", dir=cache))
    shutil.copytree(directory / "cdk.out", partial / "cdk.out")
    shutil.copy2(directory / "facts.json", partial / "facts.json")
    shutil.rmtree(cache / key, ignore_errors=True)
    try:
        partial.rename(cache / key)
        now = time.time_ns()  # the file system's clock may not tell two keeps apart
        os.utime(cache / key, ns=(now, now))
    except OSError:  # another session kept the same inputs' synth first
        shutil.rmtree(partial, ignore_errors=True)
    entries = sorted(
        (p for p in cache.iterdir() if ".partial-" not in p.name), key=lambda p: p.stat().st_mtime_ns
    )
    for old in entries[:-KEPT]:
        shutil.rmtree(old, ignore_errors=True)


def synthesize(directory: Path) -> None:
    """Synthesize every environment into ``directory/cdk.out`` and write ``directory/facts.json``."""
    os.environ.update(ENVIRONMENT)
    from aws_cdk import App, Stack

    from infra.app_builder import build_app, committed_context
    from infra.nag import RULE_PACKS
    from infra.report import acknowledgments

    app = App(context=committed_context(), outdir=str(directory / "cdk.out"))
    stages = build_app(app, nag=False)
    app.synth()
    facts: dict[str, Any] = {"environments": {}}
    for name, stage in stages.items():
        stacks = {}
        for child in stage.node.children:
            if not isinstance(child, Stack):
                continue
            nag = {}
            for pack in RULE_PACKS:
                result = pack().validate_scope(child)
                nag[pack.__name__] = {
                    "success": result.success,
                    "findings": [
                        f"{violation.rule_name} ({violation.severity}): "
                        + ", ".join(resource.construct_path for resource in violation.violating_resources)
                        for violation in result.violations
                    ],
                }
            stacks[child.node.id] = {
                "path": child.node.path,
                "account": child.account,
                "region": child.region,
                "templateFile": child.template_file,
                "children": {c.node.id: [g.node.id for g in c.node.children] for c in child.node.children},
                "nag": nag,
            }
        facts["environments"][name] = {
            "stacks": stacks,
            "acknowledgments": [list(found) for found in acknowledgments(stage)],
        }
    (directory / "facts.json").write_text(json.dumps(facts))


def ensure(directory: Path) -> dict[str, Any]:
    """The session's facts, synthesizing first unless another process did (or does: then this waits for it)."""
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / "lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        failure = directory / "failure.txt"
        if failure.exists():
            raise RuntimeError(f"the session's synth failed:\n{failure.read_text()}")
        if not (directory / "facts.json").exists():
            synthesize(directory)
    facts: dict[str, Any] = json.loads((directory / "facts.json").read_text())
    return facts


def start_in_background(directory: Path, key: str) -> subprocess.Popen[bytes]:
    """Start the synth in a child process that holds the folder's lock until it is done (taken here first, so no
    worker can take it before the child has it); it keeps what it made under ``key``."""
    directory.mkdir(parents=True, exist_ok=True)
    lock = (directory / "lock").open("a")
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.support.assembly", str(directory), key],
            cwd=ROOT,
            env={**os.environ, **ENVIRONMENT},
            pass_fds=(lock.fileno(),),
            stdout=subprocess.DEVNULL,
            stderr=(directory / "synth.log").open("w"),
        )
    finally:
        lock.close()  # the child's copy of the descriptor keeps the lock until it exits


# The tests that read the session's synth: the template contracts, and the harnesses that stand the templates up in
# moto (tests/support/cfn.py).
READERS = tuple(ROOT / "tests" / folder for folder in ("infra", "integration", "lambdas/ops"))


def reads_the_synth(config: pytest.Config) -> bool:
    """Whether the session's arguments take in tests that read the synth (the suite, their folders, or a file or test
    in one)."""
    for arg in config.args or [str(ROOT / "tests")]:
        path = (Path(config.invocation_params.dir) / arg.split("::")[0]).resolve()
        for readers in READERS:
            if path == readers or readers in path.parents or path in readers.parents:
                return True
    return False


_background: list[tuple[subprocess.Popen[bytes], Path]] = []
_restored: list[Path] = []


def pytest_configure(config: pytest.Config) -> None:
    """In the controller (or a run without xdist), before any worker starts: start the session's synth, and tell
    the workers where it goes (they inherit the variable)."""
    if hasattr(config, "workerinput"):
        return
    # a session's own: never one inherited from a session that started this one
    os.environ.pop(VARIABLE, None)
    if config.option.collectonly or not reads_the_synth(config):
        return
    directory = Path(tempfile.mkdtemp(prefix="refdata-assembly-"))
    key = inputs_key()
    if restore(directory, key):
        _restored.append(directory)
    else:
        _background.append((start_in_background(directory, key), directory))
    os.environ[VARIABLE] = str(directory)


def pytest_unconfigure(config: pytest.Config) -> None:
    while _background:
        child, directory = _background.pop()
        if child.poll() is None:
            child.kill()
        child.wait()
        _restored.append(directory)
    while _restored:
        os.environ.pop(VARIABLE, None)
        shutil.rmtree(_restored.pop(), ignore_errors=True)


def main(argv: list[str]) -> None:
    directory, key = Path(argv[0]), argv[1]
    try:
        synthesize(directory)
    except BaseException:
        (directory / "failure.txt").write_text(traceback.format_exc())
        raise
    keep(directory, key)


if __name__ == "__main__":
    main(sys.argv[1:])
