"""refdata-client as a team installs it: the wheel's size, and what importing it costs a process, against importing
boto3 (the baseline: what any AWS client already pays) in the same fresh virtual environment."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNS = 15
IMPORTS = (
    ("Python alone", "pass"),
    (
        "the conventions (`refdata.registry`, `keys`, `checks`)",
        "import refdata.registry, refdata.keys, refdata.checks",
    ),
    ("the reader (`refdata.queries`, `reader`)", "import refdata.queries, refdata.reader"),
    (
        "the writer and the transport (`refdata.writer`, `transport`)",
        "import refdata.writer, refdata.transport",
    ),
    ("`import boto3` (baseline)", "import boto3"),
)


def _median_seconds(python: Path, statement: str) -> float:
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        subprocess.run([str(python), "-c", statement], check=True, cwd=python.parent)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def run() -> str:
    uv = Path(sys.executable).parent / "uv"
    with tempfile.TemporaryDirectory() as directory:
        dist, venv = Path(directory) / "dist", Path(directory) / "venv"
        subprocess.run(
            ["make", "-s", "client", f"CLIENT_DIST={dist}"], cwd=ROOT, check=True, capture_output=True
        )
        (wheel,) = dist.glob("*.whl")
        (sdist,) = dist.glob("*.tar.gz")
        subprocess.run(
            [str(uv), "venv", "--quiet", "--python", os.path.realpath(sys.executable), str(venv)], check=True
        )
        python = venv / "bin" / "python"
        install = [
            str(uv),
            "pip",
            "install",
            "--quiet",
            "--offline",
            "--compile-bytecode",
            "--python",
            str(python),
        ]
        subprocess.run(
            [*install, f"{wheel}[aws]", "--constraint", str(ROOT / "requirements.lock")], check=True
        )
        measured = [(what, _median_seconds(python, statement)) for what, statement in IMPORTS]
        wheel_kb, sdist_kb = wheel.stat().st_size / 1024, sdist.stat().st_size / 1024
    boto3 = measured[-1][1]
    rows = [f"| {what} | {seconds * 1000:.0f} | {seconds / boto3:.2f}× |" for what, seconds in measured]
    return "\n".join(
        [
            "## Client package",
            "",
            f"`make client`'s wheel is {wheel_kb:.0f} KB (sdist {sdist_kb:.0f} KB). Installed with its `aws` extra into"
            " a fresh virtual environment (byte-compiled), each line is a new process running only that import, the"
            f" median of {RUNS} runs, against `import boto3` in the same environment.",
            "",
            "| a process that imports | ms | ratio to boto3 |",
            "|---|---:|---:|",
            *rows,
            "",
            "The conventions and the reader import neither boto3 nor botocore; the writer imports boto3 only when it"
            " makes its own session, and the transport signs with botocore.",
            "",
        ]
    )
