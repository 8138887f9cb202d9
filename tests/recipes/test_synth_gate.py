"""`make synth`, which CI and `make guard` run, fails on a cdk-nag finding, an error annotation and a missing context
value, and names each; it passes otherwise (every recipe's `make docs` runs it on a good change)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.recipes.scratch import Scratch

pytestmark = pytest.mark.recipe
STATELESS = "infra/stacks/stateless.py"
ANCHOR = "        super().__init__(scope, construct_id, **kwargs)  # type: ignore[arg-type]\n"


def planted(tmp_path: Path, code: str) -> Scratch:
    scratch = Scratch.of_working_tree(tmp_path)
    scratch.edit(STATELESS, ANCHOR, ANCHOR + code)
    return scratch


def test_a_cdk_nag_finding_fails_make_synth_and_is_named(tmp_path: Path) -> None:
    scratch = planted(tmp_path, '        __import__("aws_cdk").aws_sqs.Queue(self, "Planted")\n')
    done = scratch.make("synth", check=False)
    assert done.returncode != 0
    assert (
        "cdk-nag finding AwsSolutions-SQS4 on " in done.stderr
        and "/Stateless/Planted/Resource" in done.stderr
    )


def test_an_error_annotation_fails_make_synth_and_is_named(tmp_path: Path) -> None:
    scratch = planted(
        tmp_path, '        __import__("aws_cdk").Annotations.of(self).add_error("planted error")\n'
    )
    done = scratch.make("synth", check=False)
    assert done.returncode != 0
    assert (
        "error annotation Annotation::error-annotation on " in done.stderr and "planted error" in done.stderr
    )


def test_an_environment_without_zone_context_fails_make_synth_and_names_the_key(tmp_path: Path) -> None:
    scratch = Scratch.of_working_tree(tmp_path)
    context_file = scratch.root / "cdk.context.json"
    context = json.loads(context_file.read_text())
    removed = sorted(key for key in context if key.startswith("availability-zones:"))[-1]
    del context[removed]
    context_file.write_text(json.dumps(context, indent=2))
    done = scratch.make("synth", check=False)
    assert done.returncode != 0
    assert f"missing context {removed}: add it to cdk.context.json" in done.stderr
    assert "dummy1a" not in done.stdout
