"""The Python set-up of a fresh clone: installing requirements.lock into an empty virtual environment with an empty
download cache, with uv (what ``make setup`` does) against pip (what it did before, the baseline)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements.lock"


def _timed(command: list[str], **environ: str) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, env={**os.environ, **environ})
    return time.perf_counter() - start


def _pip(directory: Path) -> float:
    venv = directory / "pip-venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    command = [str(venv / "bin/python"), "-m", "pip", "install", "--no-cache-dir", "--quiet"]
    command += ["--disable-pip-version-check", "--require-hashes", "--no-deps", "-r", str(LOCK)]
    return _timed(command, PIP_CONFIG_FILE=os.devnull)


def _uv(directory: Path) -> float:
    uv = Path(sys.executable).parent / "uv"
    venv = directory / "uv-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    command = [str(uv), "pip", "sync", "--quiet", "--python", str(venv / "bin/python"), "--require-hashes"]
    return _timed([*command, str(LOCK)], UV_CACHE_DIR=str(directory / "uv-cache"))


def run() -> str:
    with tempfile.TemporaryDirectory() as directory:
        pip = _pip(Path(directory))
        uv = _uv(Path(directory))
    packages = sum(1 for line in LOCK.read_text().splitlines() if "==" in line and not line.startswith("#"))
    return "\n".join(
        [
            "## Set-up",
            "",
            f"requirements.lock ({packages} packages, hash-checked) into an empty virtual environment, download cache"
            " empty, one run each (dominated by downloads from PyPI).",
            "",
            "| installer | s | ratio |",
            "|---|---:|---:|",
            f"| pip (baseline; `make setup` before issue 15) | {pip:.1f} | 1.00× |",
            f"| uv (`make setup`) | {uv:.1f} | {uv / pip:.2f}× |",
            "",
            "A fresh clone's first `make synth` (set-up, then synth of every environment with the five cdk-nag packs),"
            " measured by hand on 2026-12-01 with `time make synth` on a clean clone: 113.8 s before (pip, 200 lines"
            " of pip warnings about the lock's machine-local index lines), 29.2 s after (uv, 17 lines of output,"
            " with other work loading the machine: load average 5-7).",
            "",
        ]
    )
