"""A heavy tool checks each template once: an unchanged template's verdict is read from the cache wherever its assembly
was written, a changed one (or a changed configuration or pin) is checked again alone, a failed run is never stored,
and two runs at once share one. The real tools' output is split into the verdict of the template it is about."""

from __future__ import annotations

import json
import subprocess
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.support.heavy_tools import CFN_LINT, CHECKOV, ToolFailed, Verdict, key, run

CLEAN = '{"Resources": {"Queue": {"Type": "AWS::SQS::Queue", "Properties": {}}}}'
INVALID = '{"Resources": {"Queue": {"Type": "AWS::SQS::Queue", "Properties": {"Bogus": 1}}}}'


class FakeLint:
    """A stand-in for subprocess.run that answers as cfn-lint does (--format json): a match on every template that
    holds "Bogus", exit 2 if any; or exits ``crash`` (a failed run) with nothing on stdout. Counts its calls."""

    def __init__(self, gate: threading.Event | None = None, crash: int | None = None) -> None:
        self.calls: list[list[str]] = []
        self.gate = gate
        self.crash = crash

    def __call__(self, argv: list[str], *, cwd: Path, **_: Any) -> subprocess.CompletedProcess[str]:
        self.calls.append(argv)
        if self.gate is not None:
            assert self.gate.wait(30)
        if self.crash is not None:
            return subprocess.CompletedProcess(argv, self.crash, stdout="", stderr="Traceback: it broke")
        templates = [part for part in argv if part.endswith(".template.json")]
        matches = [
            {
                "Filename": name,
                "Location": {"Path": ["Resources", "Queue", "Properties", "Bogus"]},
                "Message": "Additional properties are not allowed ('Bogus' was unexpected)",
                "Rule": {"Id": "E3002"},
            }
            for name in templates
            if "Bogus" in (cwd / name).read_text()
        ]
        return subprocess.CompletedProcess(argv, 2 if matches else 0, stdout=json.dumps(matches), stderr="")

    def checked(self) -> list[list[str]]:
        """The templates each call was given."""
        return [[part for part in call if part.endswith(".template.json")] for call in self.calls]


def assembly(root: Path, a: str = CLEAN, b: str = CLEAN) -> Path:
    for env, content in (("a", a), ("b", b)):
        (root / f"assembly-{env}").mkdir(parents=True, exist_ok=True)
        (root / f"assembly-{env}" / "Stack.template.json").write_text(content)
    return root


A, B = "assembly-a/Stack.template.json", "assembly-b/Stack.template.json"
FINDING = (
    "E3002 Resources/Queue/Properties/Bogus: Additional properties are not allowed ('Bogus' was unexpected)"
)


def test_unchanged_templates_are_answered_from_the_cache_wherever_the_assembly_was_written(
    tmp_path: Path,
) -> None:
    runner, cache = FakeLint(), tmp_path / "cache"
    first = run(CFN_LINT, assembly(tmp_path / "checkout"), cache=cache, runner=runner)
    again = run(CFN_LINT, assembly(tmp_path / "scratch"), cache=cache, runner=runner)
    assert runner.checked() == [[A, B]] and first.checked == (A, B) and again.checked == ()
    assert first.verdicts == again.verdicts == {A: Verdict(()), B: Verdict(())}


def test_a_checkout_and_its_scratch_copy_key_a_template_alike(tmp_path: Path) -> None:
    """A recipe's scratch copy runs the tools from its own paths (tests/recipes/scratch.py): nothing in the key may
    say where the checkout is, only what the files hold."""
    keys = []
    for checkout in (tmp_path / "checkout", tmp_path / "scratch"):
        checkout.mkdir()
        (checkout / ".cfnlintrc.yaml").write_text("ignore_checks: [W3005]\n")
        (checkout / "requirements.lock").write_text("cfn-lint==1.0\n")
        tool = replace(
            CFN_LINT,
            executable=checkout / ".venv" / "bin" / "cfn-lint",
            config=("--config-file", checkout / ".cfnlintrc.yaml"),
            lock=checkout / "requirements.lock",
        )
        keys.append(key(tool, assembly(checkout / "cdk.out"), A))
    assert keys[0] == keys[1]


def test_a_changed_template_is_checked_again_alone(tmp_path: Path) -> None:
    runner, cache = FakeLint(), tmp_path / "cache"
    run(CFN_LINT, assembly(tmp_path / "checkout"), cache=cache, runner=runner)
    changed = run(CFN_LINT, assembly(tmp_path / "scratch", b=INVALID), cache=cache, runner=runner)
    assert runner.checked() == [[A, B], [B]] and changed.checked == (B,)
    assert changed.verdicts == {A: Verdict(()), B: Verdict((FINDING,))}
    assert changed.findings == [f"{B}: {FINDING}"]


def test_a_template_with_findings_is_reused_with_its_findings(tmp_path: Path) -> None:
    runner, cache = FakeLint(), tmp_path / "cache"
    first = run(CFN_LINT, assembly(tmp_path / "one", a=INVALID), cache=cache, runner=runner)
    again = run(CFN_LINT, assembly(tmp_path / "two", a=INVALID), cache=cache, runner=runner)
    assert len(runner.calls) == 1 and again.checked == ()
    assert first.findings == again.findings == [f"{A}: {FINDING}"]


def test_a_changed_configuration_or_pin_checks_every_template_again(tmp_path: Path) -> None:
    runner, cache = FakeLint(), tmp_path / "cache"
    config, lock = tmp_path / "config.yaml", tmp_path / "tool.lock"
    config.write_text("ignore_checks: []\n")
    lock.write_text("cfn-lint==1.0\n")
    tool = replace(CFN_LINT, config=("--config-file", config), lock=lock)
    run(tool, assembly(tmp_path / "one"), cache=cache, runner=runner)
    config.write_text("ignore_checks: [W3005]\n")
    run(tool, assembly(tmp_path / "one"), cache=cache, runner=runner)
    lock.write_text("cfn-lint==1.1\n")
    run(tool, assembly(tmp_path / "one"), cache=cache, runner=runner)
    assert runner.checked() == [[A, B]] * 3


@pytest.mark.parametrize("code", [1, -9])
def test_a_failed_run_raises_and_is_never_stored(tmp_path: Path, code: int) -> None:
    """cfn-lint exits 1 when it cannot run, and a process killed under load has a negative code: neither is a verdict
    (the run once stored as an empty pass by any code would answer every later session)."""
    cache = tmp_path / "cache"
    with pytest.raises(ToolFailed, match=f"exited {code}"):
        run(CFN_LINT, assembly(tmp_path / "one", b=INVALID), cache=cache, runner=FakeLint(crash=code))
    runner = FakeLint()
    after = run(CFN_LINT, assembly(tmp_path / "one", b=INVALID), cache=cache, runner=runner)
    assert runner.checked() == [[A, B]] and after.findings == [f"{B}: {FINDING}"]


def test_a_report_that_leaves_a_template_out_is_a_failed_run(tmp_path: Path) -> None:
    """checkov exits 0 over a file it cannot read and says nothing about it: that template has no verdict."""
    report = {"check_type": "cloudformation", "results": {"passed_checks": [{"file_abs_path": A}]}}

    def silent_on_b(argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(argv, 0, stdout=json.dumps(report), stderr="")

    cache = tmp_path / "cache"
    with pytest.raises(ToolFailed, match=f"said nothing about {B}"):
        run(CHECKOV, assembly(tmp_path / "one"), cache=cache, runner=silent_on_b)
    assert list(cache.glob("*.json")) == []


def test_two_runs_at_once_share_one(tmp_path: Path) -> None:
    gate = threading.Event()
    runner, cache, results = FakeLint(gate), tmp_path / "cache", []
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
    assert len(runner.calls) == 1 and sorted(r.checked for r in results) == [(), (A, B)]


def test_the_real_tools_findings_land_on_the_template_they_are_about(tmp_path: Path) -> None:
    """One run of each real tool over two templates, each with a finding of its own kind (their output formats, not
    a reading of them)."""
    unencrypted, encrypted = CLEAN, CLEAN.replace("{}", '{"KmsMasterKeyId": "alias/aws/sqs"}')
    invalid = encrypted.replace('"KmsMasterKeyId"', '"Bogus": 1, "KmsMasterKeyId"')
    checked = assembly(tmp_path / "one", a=unencrypted, b=invalid)
    lint = run(CFN_LINT, checked, cache=tmp_path / "cache")
    assert lint.verdicts[A] == Verdict(()) and [f.split()[0] for f in lint.verdicts[B].findings] == ["E3002"]
    scan = run(CHECKOV, checked, cache=tmp_path / "cache")
    assert [f.split()[0] for f in scan.verdicts[A].findings] == ["CKV_AWS_27"]
    assert scan.verdicts[B].findings == () and scan.verdicts[B].passed > 0
