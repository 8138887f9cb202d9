"""Smoke run benchmark: the wall time of `python -m ops smoke --env` against the loopback stack, beside the time one
ordinary change takes through the same pipeline in the same run. `run()` returns a Markdown section for
docs/benchmarks.md.

The stack is the smoke test's (tests/lambdas/ops/smoke_harness.py): the real CLI starts the synthesized smoke
workflow on moto's Step Functions, whose Task states invoke the real ops worker in-process; moto tables with
streams as each environment's config lays them out; a stand-in for Lambda's event source mapping poller, driven by
whoever waits (the smoke run's waits are on the harness's virtual clock), invoking the real stream sync; the domain
front (SigV4, the access policy, a fixed latency added to every request) before a real OpenSearch node with its
security plugin (tests/support/secured_node.py). The figures show the run's own overhead over the pipeline's, not a
real environment's timings.
"""

from __future__ import annotations

import contextlib
import io
import json
import statistics
import sys
import time
from typing import Any

from bench.sync import LAMBDAS, ROOT

REPEATS = 3
SCENARIOS = (("loopback as fast as it answers", 0.0), ("20 ms per OpenSearch request", 0.02))


def _one_change(stack: Any) -> float:
    """Seconds from an ordinary item's put to the read alias returning it: one change through the pipeline."""
    from refdata.indexnames import read_alias
    from refdata.registry import indexable_schemas

    schema = indexable_schemas()[0].name
    pk, sk = f"{schema}::bench", f"{time.time_ns() % 10**10:010d}"
    query = json.dumps({"query": {"bool": {"filter": [{"term": {"pk": pk}}, {"term": {"sk": sk}}]}}})
    started = time.perf_counter()
    stack.dynamodb.put_item(TableName=stack.tables[schema], Item={"pk": {"S": pk}, "sk": {"S": sk}})
    while not stack.admin_request("POST", f"{read_alias(schema)}/_search", json.loads(query))["hits"]["hits"]:
        stack.poller.poll_all()  # Lambda's poller is driven by whoever waits (smoke_harness.py: virtual time)
    return time.perf_counter() - started


def _smoke(stack: Any) -> tuple[float, dict[str, Any]]:
    from ops import cli

    out, err = io.StringIO(), io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli.main(["smoke", "--env", stack.config.name, "--region", "ca-central-1"])
    wall = time.perf_counter() - started
    summary = json.loads(out.getvalue().strip().splitlines()[-1])
    assert status == 0 and summary["verdict"] == "pass", summary.get("verdict")
    return wall, summary


def measure(latency: float) -> list[dict[str, Any]]:
    from infra.environments import environments
    from tests.support.secured_node import SecuredNode

    node = SecuredNode().start().wait_ready()  # one real node (the security plugin on) for every environment
    try:
        rows = []
        for config in environments().values():
            node.wipe()
            rows.append(_measured(config, node, latency))
        return rows
    finally:
        node.stop()


def _measured(config: Any, node: Any, latency: float) -> dict[str, Any]:
    import pytest
    from smoke_harness import smoke_stack

    monkeypatch = pytest.MonkeyPatch()
    try:
        with smoke_stack(config, monkeypatch, node, wait_seconds=30, latency_seconds=latency) as stack:
            _one_change(stack)  # warm-up: imports, connections, the first mapping poll
            _smoke(stack)  # and the first workflow: moto's Step Functions interpreter, the worker's imports
            changes = [_one_change(stack) for _ in range(REPEATS)]
            runs = [_smoke(stack) for _ in range(REPEATS)]
    finally:
        monkeypatch.undo()
    steps: dict[str, list[float]] = {}
    for _, summary in runs:
        for target in summary["targets"]:
            for step, seconds in target["steps"].items():
                steps.setdefault(step, []).append(seconds)
    return {
        "environment": config.name,
        "canaries": len(runs[0][1]["targets"]),
        "tables": len(config.source_tables),
        "parallel": config.ops.max_concurrency,
        "wall": statistics.median(wall for wall, _ in runs),
        "run": statistics.median(summary["wallSeconds"] for _, summary in runs),
        "change": statistics.median(changes),
        "steps": {step: statistics.median(values) for step, values in steps.items()},
    }


def run() -> str:
    for path in (str(LAMBDAS), str(ROOT), str(ROOT / "tests" / "lambdas" / "ops")):
        if path not in sys.path:
            sys.path.insert(0, path)
    from ops.smoke import STEPS

    sections = []
    for name, latency in SCENARIOS:
        rows = measure(latency)
        lines = [
            f"*{name}*:",
            "",
            "| environment | canaries (tables) | parts at once | smoke run, wall (CLI) | of which the workflow "
            "(prepare → finish) | one change through the pipeline (baseline) | ratio | "
            + " | ".join(STEPS)
            + " |",
            "|---|---:|---:|---:|---:|---:|---:|" + "---:|" * len(STEPS),
        ]
        for row in rows:
            steps = " | ".join(f"{row['steps'].get(step, 0):.2f} s" for step in STEPS)
            lines.append(
                f"| {row['environment']} | {row['canaries']} ({row['tables']}) | {row['parallel']} | "
                f"{row['wall']:.2f} s | {row['run']:.2f} s | {row['change'] * 1000:.0f} ms | "
                f"{row['wall'] / row['change']:.0f}× | {steps} |"
            )
        sections.append("\n".join(lines))
    body = "\n\n".join(sections)
    return f"""## Smoke run

The post-deploy smoke run (`.venv/bin/python -m ops smoke --env <env>`, docs/operations.md) end to end: the CLI starts the
smoke workflow and follows it to its verdict; the workflow writes, updates and deletes one canary per indexable
schema (parts in parallel, at most the environment's `ops.max_concurrency` at once), waiting each time for the
index, checks each read role's view twice, cleans up and sweeps. The stack is the smoke test's, in this process:
moto (DynamoDB with streams, Step Functions executing the synthesized definition, Lambda, S3, SQS, STS), a stand-in
for Lambda's event source mapping poller driven by whoever waits, the real ops worker and stream sync, and the domain
front before a real OpenSearch node with its security plugin. The baseline, measured in the same run on the same
stack: one ordinary item's put until the read alias returns it, which on a real node includes the index's own refresh
(every second, on the real clock: the smoke run refreshes on its virtual one). Median of {REPEATS} runs per environment after a
warm-up run; the ratio is the CLI's wall time over the baseline. The steps' times are on the harness's virtual clock
(each poll of the smoke run advances it 0.5 s, whatever the machine's speed): they count polls, not seconds. On a
real environment the smoke run polls every second and each wait is bounded by 120 s (the first, for a new mapping,
goes on in the workflow until its start-up budget after it was modified, `ops.smoke_startup_minutes`), so a passing
run there takes a few seconds per step, and a failing one at most one wait longer.

{body}

The run's cost over one change is the workflow's (Step Functions states, the worker's steps, the run records in S3,
the CLI following them) and its three waits per canary, each about one change long, plus the reader checks (one
assumed role each), the cleanup and the sweep. The heartbeat's monthly cost per environment is in
[cost.md](cost.md#the-heartbeat) (`make cost`).
"""


if __name__ == "__main__":
    print(run())
