"""Synth time of every environment (``python app.py``) against a one-resource app on the same machine."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROUNDS = 7


def _seconds(script: str) -> float:
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20", "CDK_VALIDATION": "false"}
    env.pop("CDK_CONTEXT_JSON", None)
    start = time.perf_counter()
    subprocess.run([sys.executable, script], cwd=ROOT, env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def resources() -> int:
    """Resources in every environment's templates (a fresh synth into a temporary folder)."""
    import json
    import tempfile

    with tempfile.TemporaryDirectory() as outdir:
        env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20", "CDK_VALIDATION": "false"}
        env.pop("CDK_CONTEXT_JSON", None)
        env["CDK_OUTDIR"] = outdir
        subprocess.run([sys.executable, "app.py"], cwd=ROOT, env=env, check=True, capture_output=True)
        return sum(
            len(json.loads(template.read_text()).get("Resources", {}))
            for template in Path(outdir).glob("assembly-*/*.template.json")
        )


def run() -> str:
    app, baseline = [], []
    for _ in range(ROUNDS):  # interleaved so both see the same machine load
        baseline.append(_seconds("bench/one_resource_app.py"))
        app.append(_seconds("app.py"))
    app_s, base_s = statistics.median(app), statistics.median(baseline)
    return "\n".join(
        [
            "## Synth",
            "",
            f"Median of {ROUNDS} interleaved runs of each command (a fresh process each: jsii start-up included). "
            "`python app.py` builds dev, test and prod (6 stacks) and runs the five cdk-nag packs at synth.",
            "",
            "| command | median s | ratio |",
            "|---|---:|---:|",
            f"| one-stack app with a single resource (baseline) | {base_s:.2f} | 1.00× |",
            f"| `python app.py` (every environment) | {app_s:.2f} | {app_s / base_s:.2f}× |",
            "",
            f"Target: at most 4× the baseline: {'met' if app_s / base_s <= 4 else '**missed**'}. The app has grown "
            f"to {resources()} resources over its six stacks (alarms, ops workflows, a second table in dev); "
            "building the constructs through jsii, not cdk-nag, takes most of the time.",
            "",
        ]
    )
