"""A heavy tool runs once per set of templates: a later run over the same content reads the cache, a changed
template, configuration or pin runs it again, and two runs at once share one."""

from __future__ import annotations

import subprocess
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

from tests.support.heavy_tools import CFN_LINT, run


class Counting:
    """A stand-in for subprocess.run that counts its calls and answers with the templates it was given."""

    def __init__(self, gate: threading.Event | None = None) -> None:
        self.calls: list[list[str]] = []
        self.gate = gate

    def __call__(self, argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        self.calls.append(argv)
        if self.gate is not None:
            assert self.gate.wait(30)
        return subprocess.CompletedProcess(argv, 2, stdout=" ".join(argv[-2:]), stderr="")


def assembly(root: Path, content: str = "{}") -> Path:
    for env in ("a", "b"):
        (root / f"assembly-{env}").mkdir(parents=True, exist_ok=True)
        (root / f"assembly-{env}" / "Stack.template.json").write_text(content)
    return root


def test_the_same_templates_are_answered_from_the_cache_wherever_they_were_written(tmp_path: Path) -> None:
    runner, cache = Counting(), tmp_path / "cache"
    first = run(CFN_LINT, assembly(tmp_path / "one"), cache=cache, runner=runner)
    again = run(CFN_LINT, assembly(tmp_path / "two"), cache=cache, runner=runner)
    assert len(runner.calls) == 1 and not first.cached and again.cached
    assert (
        (first.returncode, first.stdout)
        == (again.returncode, again.stdout)
        == (
            2,
            "assembly-a/Stack.template.json assembly-b/Stack.template.json",
        )
    )


def test_a_changed_template_configuration_or_pin_runs_the_tool_again(tmp_path: Path) -> None:
    runner, cache = Counting(), tmp_path / "cache"
    run(CFN_LINT, assembly(tmp_path / "one"), cache=cache, runner=runner)
    run(CFN_LINT, assembly(tmp_path / "two", '{"Resources": {}}'), cache=cache, runner=runner)
    config = tmp_path / "config.yaml"
    config.write_text("ignore_checks: []\n")
    other = replace(CFN_LINT, decided_by=(config,))
    run(other, assembly(tmp_path / "one"), cache=cache, runner=runner)
    config.write_text("ignore_checks: [W3005]\n")
    run(other, assembly(tmp_path / "one"), cache=cache, runner=runner)
    assert len(runner.calls) == 4


def test_two_runs_at_once_share_one(tmp_path: Path) -> None:
    gate = threading.Event()
    runner, cache, results = Counting(gate), tmp_path / "cache", []
    # Written once, before the threads: each thread rewriting the same files raced with the other's key (a template
    # read while being rewritten is empty, so its key differed and the tool ran twice: seen once in CI).
    shared = assembly(tmp_path / "one")
    threads = [
        threading.Thread(target=lambda: results.append(run(CFN_LINT, shared, cache=cache, runner=runner)))
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    gate.set()
    for thread in threads:
        thread.join(30)
    assert len(runner.calls) == 1 and sorted(r.cached for r in results) == [False, True]
