"""The independent IAM oracle (tests/support/iam_oracle.py): it fails the run on a decision it does not confirm, it
refuses to be fooled by a request it cannot express, and the product never depends on it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from tests.support.iam import Request
from tests.support.iam_oracle import Answer, Recorder, ask, disagreement, simulation

ROOT = Path(__file__).resolve().parents[2]
ROLE = "arn:aws:iam::111111111111:role/caller"
OBJECT = "arn:aws:s3:::bucket/key"
PRODUCT = [
    "app.py",
    "cdk.json",
    "infra",
    "lambdas",
    "ops",
    "release",
    "requirements.txt",
    "requirements.lock",
]
ORACLE_NAMES = ("iam-simulate", "cloud-copilot", "iam_oracle", "iam_simulate")


def test_the_oracle_answers_a_batch_in_order() -> None:
    def get_object(*statements: dict[str, str]) -> dict[str, Any]:
        identity = [{"Statement": list(statements)}] if statements else []
        return simulation(identity, None, Request(ROLE, "s3:GetObject", OBJECT, {}))

    allowed = get_object({"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"})
    denied = get_object({"Effect": "Deny", "Action": "s3:*", "Resource": "*"})
    decisions = [a.decision for a in ask([allowed, denied, get_object(), allowed])]
    assert decisions == ["allow", "deny", "implicit", "allow"]


def test_a_refused_input_or_a_dropped_key_a_condition_reads_is_a_disagreement() -> None:
    """iam-simulate validates what it is given: an input it refuses, or a context key it drops as not applying to
    the action while a condition reads it, means the two did not judge the same request."""
    condition = {"StringEquals": {"s3:prefix": "runs/"}}
    reads_prefix = {
        "Statement": [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*", "Condition": condition}]
    }
    request = Request(ROLE, "s3:GetObject", OBJECT, {"s3:prefix": "runs/"})
    sim = simulation([reads_prefix], None, request)
    (answer,) = ask([sim])
    assert answer.ignored == ("s3:prefix",)
    assert "dropped context keys" in str(disagreement("allow", sim, answer))
    not_an_arn = simulation([], None, Request(ROLE, "sts:AssumeRole", "admin-role", {}))
    (refused,) = ask([not_an_arn])
    assert refused.decision is None and "refused" in str(disagreement("implicit", not_an_arn, refused))
    differ = disagreement("allow", sim, Answer("implicit", None, ()))
    assert differ == "the double decided allow, iam-simulate implicit"


def test_a_decision_the_oracle_does_not_confirm_fails_the_session(tmp_path: Path) -> None:
    """A double planted to allow everything: its one test passes, the session fails and names the decision."""
    (tmp_path / "test_planted.py").write_text(
        "from tests.support import iam\n"
        "def test_planted(monkeypatch):\n"
        "    monkeypatch.setattr(iam, '_evaluate', lambda *args: 'allow')\n"
        f"    request = iam.Request({ROLE!r}, 's3:GetObject', {OBJECT!r}, {{}})\n"
        "    assert iam.decide([], None, request) == 'allow'\n"
    )
    plugins = ("-p", "tests.support.iam_oracle", "-p", "no:cacheprovider")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", *plugins, "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 passed" in done.stdout
    assert f"{ROLE} s3:GetObject on {OBJECT}: the double decided allow, iam-simulate implicit" in done.stdout


def test_the_oracle_is_a_development_dependency_the_product_never_names() -> None:
    """iam-simulate is AGPL-3.0: tests run it as a separate process; nothing shipped names or imports it."""
    package = json.loads((ROOT / "package.json").read_text())
    assert "@cloud-copilot/iam-simulate" in package["devDependencies"]
    assert "@cloud-copilot/iam-simulate" not in package.get("dependencies", {})
    offenders = [
        str(path.relative_to(ROOT))
        for entry in PRODUCT
        for path in ([ROOT / entry] if (ROOT / entry).is_file() else sorted((ROOT / entry).rglob("*")))
        if path.is_file()
        and "__pycache__" not in path.parts
        and any(name in path.read_text(errors="ignore") for name in ORACLE_NAMES)
    ]
    assert not offenders


def test_decisions_made_by_many_threads_at_once_each_reach_one_oracle_once() -> None:
    """Decisions come from many threads at once (the domain front's, moto's, a distributed map's items), the same
    one often, the first ones before any oracle runs: each distinct decision is put to one oracle exactly once, in the
    order it answers. (Unlocked, the first threads started an oracle each and one's inputs went unanswered.)"""
    recorder = Recorder()
    allow = [{"Statement": [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}]}]
    together = threading.Barrier(8)

    def decide_many() -> None:
        together.wait()
        for n in range(100):
            recorder(allow, None, Request(ROLE, "s3:GetObject", f"{OBJECT}{n % 25}", {}), False, "allow")

    threads = [threading.Thread(target=decide_many) for _ in range(8)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # a thread switch at almost every bytecode: the interleavings a session meets
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)

    summary = recorder.check()

    assert (summary["decisions"], summary["distinct"], summary["disagreements"]) == (800, 25, [])
