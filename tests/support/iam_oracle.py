"""An independent check of the IAM double (tests/support/iam.py): the same decisions put to `@cloud-copilot/iam-simulate`.

`simulation` turns one decision's inputs (identity policies, the resource, trust or key policy, the request) into
iam-simulate's input; an `Oracle` is one Node process (tests/support/iam_simulate.mjs) that answers each input as it is
put, and `ask` puts a batch to one. iam-simulate is AGPL-3.0: a test-only npm dev dependency run as a separate
process, never shipped with or imported by the product.

Also a pytest plugin (tests/conftest.py loads it): every decision `iam.decide` makes during the session is put to one
oracle per process as it is made (once per distinct input), so iam-simulate works while the tests run and the
session's end waits only for the last answers; each pytest-xdist worker checks its own and hands the controller what
disagreed. Any disagreement fails the run.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support import iam

SCRIPT = Path(__file__).with_name("iam_simulate.mjs")
RESULTS = {"Allowed": "allow", "ExplicitlyDenied": "deny", "ImplicitlyDenied": "implicit"}
OUTPUT_KEY = "iam_oracle"


def _statements(document: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    statements = document.get("Statement", []) if document else []
    return list(statements) if isinstance(statements, list) else [statements]


def _policy(document: Mapping[str, Any] | None) -> dict[str, Any]:
    """A policy as IAM stores it: the double reads a missing Version or an empty document as no statements."""
    return {"Version": "2012-10-17", "Statement": _statements(document)}


def _condition_keys(documents: Iterable[Mapping[str, Any] | None]) -> set[str]:
    return {
        key.lower()
        for document in documents
        for statement in _statements(document)
        for keys in (statement.get("Condition") or {}).values()
        for key in keys
    }


def _context_value(value: Any) -> str | list[str]:
    return [str(one) for one in value] if isinstance(value, list) else str(value)


def simulation(
    identity: Sequence[Mapping[str, Any]],
    resource_policy: Mapping[str, Any] | None,
    request: iam.Request,
    *,
    resource_policy_required: bool = False,
) -> dict[str, Any]:
    """iam-simulate's input for the decision `iam.decide(identity, resource_policy, request, ...)` makes.

    The caller is the assumed-role session when the request names one, else the role (or service principal). A
    role's trust policy and a KMS key policy are the resource policy iam-simulate applies to `sts:AssumeRole` and
    KMS actions by their services' own rules, which is what `resource_policy_required` stands for in the double;
    the double reads an unknown trust policy as one that admits no one, so it goes as a policy with no statement."""
    service = request.action.split(":", 1)[0].lower()
    if resource_policy_required and service not in ("sts", "kms"):
        raise AssertionError(
            f"a required resource policy on {request.action} has no counterpart in iam-simulate"
        )
    resource_account = request.resource_account or request.account
    body: dict[str, Any] = {
        "request": {
            "principal": request.session or request.principal,
            "action": request.action,
            "resource": {"resource": request.resource, "accountId": resource_account},
            "contextVariables": {
                key: _context_value(value) for key, value in request.context.items() if value is not None
            },
        },
        "identityPolicies": [
            {"name": f"identity-{index}", "policy": _policy(document)}
            for index, document in enumerate(identity)
        ],
        "serviceControlPolicies": [],
        "resourceControlPolicies": [],
    }
    if resource_policy is not None or resource_policy_required:
        body["resourcePolicy"] = _policy(resource_policy)
    return body


@dataclass(frozen=True)
class Answer:
    decision: str | None  # "allow", "deny", "implicit"; None when iam-simulate refused the input
    errors: Any
    ignored: tuple[str, ...]  # context keys iam-simulate dropped as not applying to the action


class Oracle:
    """One Node process running iam-simulate: each input `put` is answered as it arrives (one JSON line in, one
    out); `answers` ends its input and returns every answer, in order, with the process's own CPU."""

    def __init__(self) -> None:
        # Files, not pipes: nothing has to read the answers while the tests run. `answers` closes them.
        self._out = tempfile.TemporaryFile()  # noqa: SIM115
        self._err = tempfile.TemporaryFile()  # noqa: SIM115
        self._process = subprocess.Popen(
            ["node", str(SCRIPT)], stdin=subprocess.PIPE, stdout=self._out, stderr=self._err
        )
        self.put_count = 0

    def put(self, simulation_json: str) -> None:
        assert self._process.stdin is not None
        self._process.stdin.write(simulation_json.encode() + b"\n")
        self._process.stdin.flush()
        self.put_count += 1

    def answers(self, timeout: float = 600) -> tuple[list[Answer], float]:
        """Every answer in the order put, and the seconds of CPU the process used (`os.wait4` reaps it for its own
        resource usage, which `Popen.wait` does not give)."""
        assert self._process.stdin is not None
        self._process.stdin.close()
        reaped: list[tuple[int, int, Any]] = []
        waiter = threading.Thread(target=lambda: reaped.append(os.wait4(self._process.pid, 0)), daemon=True)
        waiter.start()
        waiter.join(timeout)
        if not reaped:
            self._process.kill()
            waiter.join()
            raise AssertionError(f"iam-simulate gave no answer within {timeout:.0f} s")
        ((_, status, usage),) = reaped
        self._process.returncode = os.waitstatus_to_exitcode(status)
        with self._out, self._err:
            self._err.seek(0)
            if self._process.returncode != 0:
                failure = self._err.read().decode()[-2000:]
                raise AssertionError(f"iam-simulate failed ({self._process.returncode}): {failure}")
            self._out.seek(0)
            answers = [json.loads(line) for line in self._out.read().splitlines()]
        if len(answers) != self.put_count:
            raise AssertionError(f"iam-simulate answered {len(answers)} of {self.put_count} inputs")
        parsed = [
            Answer(RESULTS.get(str(one["result"])), one["errors"], tuple(one["ignoredContextKeys"]))
            for one in answers
        ]
        return parsed, usage.ru_utime + usage.ru_stime


def ask(simulations: Sequence[Mapping[str, Any]]) -> list[Answer]:
    """iam-simulate's decisions on `simulations`, in order, from one Node process."""
    if not simulations:
        return []
    oracle = Oracle()
    for sim in simulations:
        oracle.put(json.dumps(sim))
    return oracle.answers()[0]


def disagreement(expected: str, sim: Mapping[str, Any], answer: Answer) -> str | None:
    """Why iam-simulate's answer does not confirm the double's decision `expected`, or None when it does. A context
    key iam-simulate dropped counts only when a policy's condition reads it (then the two judged different
    requests)."""
    if answer.decision is None:
        return f"iam-simulate refused the input: {json.dumps(answer.errors)[:600]}"
    documents = [p["policy"] for p in sim["identityPolicies"]] + [sim.get("resourcePolicy")]
    dropped = sorted(set(key.lower() for key in answer.ignored) & _condition_keys(documents))
    if dropped:
        return f"iam-simulate dropped context keys a condition reads: {dropped}"
    if answer.decision != expected:
        return f"the double decided {expected}, iam-simulate {answer.decision}"
    return None


def describe(sim: Mapping[str, Any]) -> str:
    request = sim["request"]
    return f"{request['principal']} {request['action']} on {request['resource']['resource']}"


# --- every decision of the session --------------------------------------------------------------------------------


class Recorder:
    """The distinct decisions `iam.decide` made in this process, each put to the oracle as it is made (inputs are
    serialized when decided: tests change policies afterwards), with the double's answer. Decisions come from many
    threads at once (the domain front's, moto's, a distributed map's items), often the same one: each distinct input
    is recorded and put exactly once, in the order of `decisions`, which is the order the oracle answers in."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.decisions: dict[str, str] = {}
        self.count = 0
        self.oracle: Oracle | None = None
        self.problem: str | None = None  # why the oracle could not be asked

    def __call__(
        self,
        identity: Sequence[Mapping[str, Any]],
        resource_policy: Mapping[str, Any] | None,
        request: iam.Request,
        required: bool,
        decision: str,
    ) -> None:
        sim = simulation(identity, resource_policy, request, resource_policy_required=required)
        text = json.dumps(sim, sort_keys=True, default=str)
        with self._lock:
            self.count += 1
            if text in self.decisions:
                return
            self.decisions[text] = decision
            if self.problem is None:
                try:
                    self.oracle = self.oracle or Oracle()
                    self.oracle.put(text)
                except OSError as error:
                    self.problem = f"iam-simulate did not run (`make setup` installs it): {error}"

    def check(self) -> dict[str, Any]:
        """The oracle's answers to every distinct decision: counts, the seconds waited for the last of them, the
        oracle's CPU, and what disagreed."""
        started, cpu = time.perf_counter(), 0.0
        simulations = [json.loads(text) for text in self.decisions]
        problems = [self.problem] if self.problem else []
        if self.oracle is not None and not problems:
            try:
                answers, cpu = self.oracle.answers()
            except (AssertionError, OSError, ValueError) as error:
                problems = [f"iam-simulate did not run (`make setup` installs it): {error}"]
            else:
                problems = [
                    f"{describe(sim)}: {why}"
                    for sim, want, answer in zip(simulations, self.decisions.values(), answers, strict=True)
                    if (why := disagreement(want, sim, answer))
                ]
        return {
            "decisions": self.count,
            "distinct": len(simulations),
            "seconds": time.perf_counter() - started,
            "node_cpu": cpu,
            "disagreements": problems,
        }


RECORDER = Recorder()
SUMMARIES: list[dict[str, Any]] = []


def pytest_configure(config: pytest.Config) -> None:
    iam.DECISION_OBSERVERS.append(RECORDER)


def pytest_unconfigure(config: pytest.Config) -> None:
    if RECORDER in iam.DECISION_OBSERVERS:
        iam.DECISION_OBSERVERS.remove(RECORDER)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """An xdist worker finished: fold in what its decisions came to (runs in the controller)."""
    summary = getattr(node, "workeroutput", {}).get(OUTPUT_KEY)
    if summary:
        SUMMARIES.append(summary)


def pytest_sessionfinish(session: pytest.Session) -> None:
    if RECORDER.decisions:
        SUMMARIES.append(RECORDER.check())
    workeroutput: dict[str, Any] | None = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: the controller reports and fails the run
        if SUMMARIES:
            workeroutput[OUTPUT_KEY] = SUMMARIES[-1]
        return
    if any(summary["disagreements"] for summary in SUMMARIES):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not SUMMARIES:
        return
    decisions, distinct, seconds, cpu = (
        sum(s[name] for s in SUMMARIES) for name in ("decisions", "distinct", "seconds", "node_cpu")
    )
    problems = [problem for s in SUMMARIES for problem in s["disagreements"]]
    terminalreporter.write_line(
        f"IAM oracle: {decisions} decisions of the double ({distinct} distinct) put to iam-simulate as they were "
        f"made, {cpu:.2f} s of Node CPU over {len(SUMMARIES)} process(es), {seconds:.2f} s waited at the end; "
        f"{len(problems)} not confirmed",
        red=bool(problems),
    )
    for problem in problems:
        terminalreporter.write_line(f"  {problem}", red=True)
