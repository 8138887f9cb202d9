"""checkov over every synthesized template: no failed check, and every skip (checkov's resource metadata, infra/checkov.py)
says why. checkov runs from its own environment (.venv-checkov, `make test` installs it from requirements-checkov.lock)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.infra.conftest import Synthesized
from tests.support.heavy_tools import CHECKOV


@pytest.fixture(scope="module")
def report(synthesized: Synthesized) -> list[dict[str, Any]]:
    assert Path(CHECKOV.command[0]).exists(), (
        "checkov is not installed: run `make test` (it sets up .venv-checkov)"
    )
    done = synthesized.tools.result(CHECKOV)
    found = json.loads(done.stdout)
    return found if isinstance(found, list) else [found]


def test_checkov_finds_nothing_in_any_template(report: list[dict[str, Any]]) -> None:
    failed = [
        f"{check['check_id']} {check['resource']} ({check['file_path']})"
        for result in report
        for check in result["results"].get("failed_checks", [])
    ]
    assert sum(result["summary"]["passed"] for result in report) > 0
    assert failed == []


def test_every_checkov_skip_says_why(report: list[dict[str, Any]], synthesized: Synthesized) -> None:
    assert sum(result["summary"]["skipped"] for result in report) > 0, "no skip reached checkov"
    unexplained = [
        f"{skip['id']} {logical_id} ({template.name})"
        for template in sorted(synthesized.outdir.glob("assembly-*/*.template.json"))
        for logical_id, resource in json.loads(template.read_text())["Resources"].items()
        for skip in resource.get("Metadata", {}).get("checkov", {}).get("skip", [])
        if len(skip.get("comment", "")) < 20
    ]
    assert unexplained == []
