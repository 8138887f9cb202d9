"""checkov over every synthesized template: no failed check, and every skip (checkov's resource metadata, infra/checkov.py)
says why. checkov runs from its own environment (.venv-checkov, `make test` installs it from requirements-checkov.lock)."""

from __future__ import annotations

import json

import pytest

from tests.infra.conftest import Synthesized
from tests.support.heavy_tools import CHECKOV, Result, templates_of


@pytest.fixture(scope="module")
def report(synthesized: Synthesized) -> Result:
    assert CHECKOV.executable.exists(), "checkov is not installed: run `make test` (it sets up .venv-checkov)"
    return synthesized.tools.result(CHECKOV)


def test_checkov_finds_nothing_in_any_template(report: Result, synthesized: Synthesized) -> None:
    assert sorted(report.verdicts) == templates_of(synthesized.outdir)
    assert all(verdict.passed > 0 for verdict in report.verdicts.values()), report.verdicts
    assert report.findings == []


def test_every_checkov_skip_says_why(report: Result, synthesized: Synthesized) -> None:
    assert sum(verdict.skipped for verdict in report.verdicts.values()) > 0, "no skip reached checkov"
    unexplained = [
        f"{skip['id']} {logical_id} ({template.name})"
        for template in sorted(synthesized.outdir.glob("assembly-*/*.template.json"))
        for logical_id, resource in json.loads(template.read_text())["Resources"].items()
        for skip in resource.get("Metadata", {}).get("checkov", {}).get("skip", [])
        if len(skip.get("comment", "")) < 20
    ]
    assert unexplained == []
