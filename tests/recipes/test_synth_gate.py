"""`make synth`, which CI and `make guard` run, fails on a cdk-nag finding, an error annotation and a missing context
value, and names each once; it passes otherwise, without the CDK CLI's "Supply a stack id" line (every recipe's
`make docs` runs it on a good change and checks that: tests/recipes/test_recipes.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from infra.environments import environments
from tests.recipes.scratch import Scratch

pytestmark = pytest.mark.recipe
STATELESS = "infra/stacks/stateless.py"
ANCHOR = "        super().__init__(scope, construct_id, **kwargs)  # type: ignore[arg-type]\n"
FIRST = next(iter(environments()))  # every environment gets the planted problem: the first one's is looked at
SSL = "The SQS queue does not require requests to use SSL."


def planted(tmp_path: Path, code: str) -> Scratch:
    scratch = Scratch.of_working_tree(tmp_path)
    scratch.edit(STATELESS, ANCHOR, ANCHOR + code)
    return scratch


def mentions(done: subprocess.CompletedProcess[str], *parts: str) -> list[str]:
    """The lines of everything `make synth` printed that mention each of ``parts``."""
    return [line for line in (done.stdout + done.stderr).splitlines() if all(part in line for part in parts)]


def test_a_cdk_nag_finding_fails_make_synth_and_is_named_once_with_its_fix(tmp_path: Path) -> None:
    scratch = planted(tmp_path, '        __import__("aws_cdk").aws_sqs.Queue(self, "Planted")\n')
    done = scratch.make("synth", check=False)
    assert done.returncode != 0
    path = f"{FIRST}/Stateless/Planted/Resource"
    # Once (the CLI printed each finding a second time, in a block of its own), with the project's fix.
    assert mentions(done, "AwsSolutions-SQS4", path) == [
        f"  cdk-nag finding AwsSolutions-SQS4 on {path}: {SSL}"
    ]
    assert mentions(done, path) == [line for line in mentions(done, path) if "cdk-nag finding" in line]
    assert len(mentions(done, SSL)) == len(environments())  # one line per environment's queue, nothing else
    assert "cdk-nag finding: fix the resource" in done.stderr and "infra.nag.acknowledge(" in done.stderr
    assert "Supply a stack id" not in done.stdout + done.stderr


def test_an_error_annotation_fails_make_synth_and_is_named_once(tmp_path: Path) -> None:
    scratch = planted(
        tmp_path, '        __import__("aws_cdk").Annotations.of(self).add_error("planted error")\n'
    )
    done = scratch.make("synth", check=False)
    assert done.returncode != 0
    assert mentions(done, "planted error", f"{FIRST}/Stateless") == [
        f"  error annotation Annotation::error-annotation on {FIRST}/Stateless: planted error"
    ]
    assert len(mentions(done, "planted error")) == len(environments())  # one line per environment's stack
    assert "Supply a stack id" not in done.stdout + done.stderr


def test_an_environment_without_zone_context_fails_make_synth_and_names_the_key(tmp_path: Path) -> None:
    scratch = Scratch.of_working_tree(tmp_path)
    context_file = scratch.root / "cdk.context.json"
    context = json.loads(context_file.read_text())
    removed = sorted(key for key in context if key.startswith("availability-zones:"))[-1]
    del context[removed]
    context_file.write_text(json.dumps(context, indent=2))
    done = scratch.make("synth", check=False)
    assert done.returncode != 0
    assert mentions(done, removed) == [
        f'  missing context {removed}: add it to cdk.context.json (README, "Add an environment"); synth never looks it up'
    ]
    assert "dummy1a" not in done.stdout
