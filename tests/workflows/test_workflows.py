"""The GitHub Actions workflows: actionlint (with ShellCheck on every ``run:`` script) finds nothing, and the deploy
chain keeps its promises: OIDC only, the role from config, prod behind its environment and only from main or a tag,
the tested assembly deployed as it is."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.environments import environments

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
BIN = Path(sys.executable).parent


def actionlint(workflows: Path) -> subprocess.CompletedProcess[str]:
    """actionlint over every workflow in ``workflows``, with the pinned ShellCheck on PATH."""
    files = sorted(str(path) for path in workflows.glob("*.y*ml"))
    assert files, f"no workflows in {workflows}"
    return subprocess.run(
        [str(BIN / "actionlint"), "-no-color", *files],
        cwd=ROOT,
        env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"},
        capture_output=True,
        text=True,
        check=False,
    )


def load(name: str) -> dict[str, Any]:
    workflow: dict[str, Any] = yaml.safe_load((WORKFLOWS / name).read_text())
    # YAML 1.1 reads the bare key `on` as True.
    workflow["on"] = workflow.pop(True, workflow.get("on"))
    return workflow


def run_scripts(job: dict[str, Any]) -> str:
    return "\n".join(step.get("run", "") for step in job["steps"])


def test_actionlint_and_shellcheck_find_nothing_in_the_workflows() -> None:
    result = actionlint(WORKFLOWS)
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_reports_a_planted_expression_error_and_a_shellcheck_finding(tmp_path: Path) -> None:
    (tmp_path / "bad.yml").write_text(
        "on: push\n"
        "jobs:\n"
        "  a:\n"
        "    runs-on: ubuntu-latest\n"
        "    steps:\n"
        "      - run: echo ${{ inputs.nothing }}\n"
        '      - run: if [ $UNQUOTED = x ]; then echo "same"; fi\n'
    )
    result = actionlint(tmp_path)
    assert result.returncode == 1
    assert "[expression]" in result.stdout and "SC2086" in result.stdout, result.stdout


def test_every_environment_is_delivered_in_order_and_prod_only_from_a_tag_or_main() -> None:
    jobs = load("deliver.yml")["jobs"]
    assert list(jobs) == list(environments())
    previous = None
    for name, job in jobs.items():
        assert job["uses"] == "./.github/workflows/deploy.yml"
        assert job["with"] == {"environment": name}
        assert job["permissions"] == {"contents": "read", "id-token": "write"}
        assert job.get("needs") == previous
        previous = name
    condition = jobs["prod"]["if"]
    assert "startsWith(github.ref, 'refs/tags/v')" in condition and "refs/heads/main" in condition


def test_deploy_assumes_the_configured_role_through_oidc_in_the_github_environment() -> None:
    workflow = load("deploy.yml")
    verify, deploy = workflow["jobs"]["verify"], workflow["jobs"]["deploy"]
    assert workflow["permissions"] == {"contents": "read"}
    assert "id-token" not in verify.get("permissions", {})
    assert deploy["permissions"] == {"contents": "read", "id-token": "write"}
    assert deploy["environment"] == "${{ inputs.environment }}"
    assert 'python -m infra.report --deploy-target "$ENVIRONMENT"' in run_scripts(verify)
    credentials = next(
        s for s in deploy["steps"] if s.get("uses", "").startswith("aws-actions/configure-aws")
    )
    assert credentials["with"]["role-to-assume"] == "${{ needs.verify.outputs.role_arn }}"
    assert credentials["with"]["aws-region"] == "${{ needs.verify.outputs.region }}"
    assert "aws-access-key-id" not in (WORKFLOWS / "deploy.yml").read_text()


def test_deploy_tests_once_and_deploys_that_assembly_after_showing_its_diff() -> None:
    jobs = load("deploy.yml")["jobs"]
    verify_runs, deploy_runs = run_scripts(jobs["verify"]), run_scripts(jobs["deploy"])
    for command in ("make test", "make synth", "make guard"):
        assert command in verify_runs
    assert "make" not in deploy_runs and "cdk synth" not in deploy_runs
    upload = next(
        s for s in jobs["verify"]["steps"] if s.get("uses", "").startswith("actions/upload-artifact")
    )
    download = next(
        s for s in jobs["deploy"]["steps"] if s.get("uses", "").startswith("actions/download-artifact")
    )
    assert upload["with"]["name"] == download["with"]["name"] and download["with"]["path"] == "cdk.out"
    diff = deploy_runs.index('npx cdk diff --app cdk.out "${ENVIRONMENT}/*"')
    assert "GITHUB_STEP_SUMMARY" in deploy_runs[diff:]
    assert diff < deploy_runs.index('npx cdk deploy --app cdk.out "${ENVIRONMENT}/*"')
    for job in jobs.values():
        checkout = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/checkout"))
        assert checkout["with"]["ref"] == "${{ github.sha }}"


@pytest.mark.parametrize("name", ["checks.yml", "deploy.yml"])
def test_the_guard_runs_before_anything_merges_or_deploys(name: str) -> None:
    jobs = load(name)["jobs"]
    assert any("make guard" in run_scripts(job) for job in jobs.values())
