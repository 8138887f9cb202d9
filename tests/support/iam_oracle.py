"""An independent check of the IAM double (tests/support/iam.py): the same decisions put to `@cloud-copilot/iam-simulate`.

`simulation` turns one decision's inputs (identity policies, the resource, trust or key policy, the request) into
iam-simulate's input; `ask` puts a batch of them to one Node process (tests/support/iam_simulate.mjs) and reads the
answers back. iam-simulate is AGPL-3.0: a test-only npm dev dependency run as a separate process, never shipped with
or imported by the product.

Also a pytest plugin (tests/conftest.py loads it): every decision `iam.decide` makes during the session is recorded
(once per distinct input) and, at the session's end, put to the oracle in one batch per process (each pytest-xdist
worker checks its own and hands the controller what disagreed). Any disagreement fails the run.
"""

from __future__ import annotations

import json
import resource
import subprocess
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
    if not document:
        return []
    statements = document.get("Statement", [])
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
    caller = request.session or request.principal
    resource_account = request.resource_account or request.account
    body: dict[str, Any] = {
        "request": {
            "principal": caller,
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


def ask(simulations: Sequence[Mapping[str, Any]]) -> list[Answer]:
    """iam-simulate's decisions on `simulations`, in order, from one Node process."""
    if not simulations:
        return []
    done = subprocess.run(
        ["node", str(SCRIPT)],
        input=json.dumps(list(simulations)).encode(),
        capture_output=True,
        check=False,
        timeout=600,
    )
    if done.returncode != 0:
        raise AssertionError(f"iam-simulate failed ({done.returncode}): {done.stderr.decode()[-2000:]}")
    answers = json.loads(done.stdout)
    return [
        Answer(RESULTS.get(str(one["result"])), one["errors"], tuple(one["ignoredContextKeys"]))
        for one in answers
    ]


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
    """The distinct decisions `iam.decide` made in this process: their iam-simulate input and the double's answer.
    Inputs are serialized when decided (tests change policies afterwards)."""

    def __init__(self) -> None:
        self.decisions: dict[str, str] = {}
        self.count = 0

    def __call__(
        self,
        identity: Sequence[Mapping[str, Any]],
        resource_policy: Mapping[str, Any] | None,
        request: iam.Request,
        required: bool,
        decision: str,
    ) -> None:
        self.count += 1
        sim = simulation(identity, resource_policy, request, resource_policy_required=required)
        self.decisions[json.dumps(sim, sort_keys=True, default=str)] = decision

    def check(self) -> dict[str, Any]:
        """Put every distinct decision to iam-simulate in one batch: counts, seconds, and what disagreed."""
        started, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        simulations = [json.loads(text) for text in self.decisions]
        try:
            answers = ask(simulations)
        except (AssertionError, OSError, ValueError, subprocess.TimeoutExpired) as error:
            answers, problems = [], [f"iam-simulate did not run (`make setup` installs it): {error}"]
        else:
            problems = [
                f"{describe(sim)}: {why}"
                for sim, expected, answer in zip(simulations, self.decisions.values(), answers, strict=True)
                if (why := disagreement(expected, sim, answer))
            ]
        after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the Node process is the only child that ran
        return {
            "decisions": self.count,
            "distinct": len(simulations),
            "seconds": time.perf_counter() - started,
            "node_cpu": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
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
    decisions = sum(s["decisions"] for s in SUMMARIES)
    distinct = sum(s["distinct"] for s in SUMMARIES)
    seconds = sum(s["seconds"] for s in SUMMARIES)
    cpu = sum(s["node_cpu"] for s in SUMMARIES)
    problems = [problem for s in SUMMARIES for problem in s["disagreements"]]
    terminalreporter.write_line(
        f"IAM oracle: {decisions} decisions of the double ({distinct} distinct) put to iam-simulate in "
        f"{seconds:.2f} s ({cpu:.2f} s of Node CPU) over {len(SUMMARIES)} process(es); "
        f"{len(problems)} not confirmed",
        red=bool(problems),
    )
    for problem in problems:
        terminalreporter.write_line(f"  {problem}", red=True)
