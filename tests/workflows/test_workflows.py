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

from infra import generated
from infra.environments import environments

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
BIN = Path(sys.executable).parent
RELEASED = "released"


def actionlint(workflows: Path) -> subprocess.CompletedProcess[str]:
    """actionlint over every workflow in ``workflows``, with the pinned ShellCheck on PATH."""
    files = sorted(str(path) for path in workflows.glob("*.y*ml"))
    assert files, f"no workflows in {workflows}"
    path = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    command = [str(BIN / "actionlint"), "-no-color", *files]
    return subprocess.run(command, cwd=ROOT, env=path, capture_output=True, text=True, check=False)


def load(name: str) -> dict[str, Any]:
    workflow: dict[str, Any] = yaml.safe_load((WORKFLOWS / name).read_text())
    # YAML 1.1 reads the bare key `on` as True.
    workflow["on"] = workflow.pop(True, workflow.get("on"))
    return workflow


def run_scripts(job: dict[str, Any]) -> str:
    return "\n".join(step.get("run", "") for step in job["steps"])


def using(job: dict[str, Any], action: str) -> list[dict[str, Any]]:
    """The job's steps that use `action` (any version)."""
    return [step for step in job["steps"] if str(step.get("uses", "")).startswith(action)]


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


def test_every_environment_is_delivered_in_order_and_production_only_on_a_release() -> None:
    jobs = load("deliver.yml")["jobs"]
    configs = environments()
    assert [name for name in jobs if name != RELEASED] == list(configs)
    previous = None
    for name, config in configs.items():
        job = jobs[name]
        assert job["uses"] == "./.github/workflows/deploy.yml"
        assert job["with"] == {"environment": name, "production": config.production}
        assert job["permissions"] == {"contents": "read", "id-token": "write"}
        assert job.get("needs") == previous
        previous = name
        if config.production:
            assert "startsWith(github.ref, 'refs/tags/v')" in job["if"] and "refs/heads/main" in job["if"]
        else:
            assert "if" not in job, f"{name} is not production: every push to main deploys it"


def release_path(workflow_name: str) -> list[tuple[str, dict[str, Any]]]:
    """(where, concurrency block) of every concurrency group a release run enters: the workflow's own, and each
    job's on the way to a production environment, through the reusable workflows they call."""
    workflow = load(workflow_name)
    found = [(workflow_name, workflow["concurrency"])] if "concurrency" in workflow else []
    for name, job in workflow["jobs"].items():
        if "concurrency" in job:
            found.append((f"{workflow_name} {name}", job["concurrency"]))
        if job.get("uses", "").startswith("./.github/workflows/"):
            found += release_path(job["uses"].removeprefix("./.github/workflows/"))
    return found


def test_no_release_job_can_be_cancelled_while_it_waits_for_a_later_push() -> None:
    """GitHub cancels a *pending* job or run of a concurrency group when another one queues (unless the group
    queues, `queue: max`): a release's dev deploy waiting behind a push's would be cancelled by the next push, and
    with it everything after it, prod included. Every group a release enters must queue or be the release's own."""
    path = release_path("deliver.yml")
    assert any("deploy" in where for where, _ in path), "the deploy jobs serialize per environment"
    cancellable = [
        (where, block)
        for where, block in path
        if block.get("queue") != "max" or block.get("cancel-in-progress") not in (False, None)
    ]
    assert cancellable == []


def test_a_release_that_does_not_reach_production_fails_the_run() -> None:
    jobs = load("deliver.yml")["jobs"]
    production = [name for name, config in environments().items() if config.production]
    released = jobs[RELEASED]
    assert released["needs"] == production
    assert released["if"].startswith("always() && (") and "refs/tags/v" in released["if"]
    script = run_scripts(released)
    assert "${{ toJSON(needs) }}" in str(released["steps"]) and '"success"' in script and "exit 1" in script


def test_the_generated_deliver_workflow_is_current() -> None:
    assert (WORKFLOWS / "deliver.yml").read_text() == generated.deliver_workflow(environments()), (
        "stale: run `make docs`"
    )


def test_deploy_assumes_the_configured_role_through_oidc_in_the_github_environment() -> None:
    workflow = load("deploy.yml")
    verify, deploy = workflow["jobs"]["verify"], workflow["jobs"]["deploy"]
    assert workflow["permissions"] == {"contents": "read"}
    assert "id-token" not in verify.get("permissions", {})
    assert deploy["permissions"] == {"contents": "read", "id-token": "write"}
    assert deploy["environment"] == "${{ inputs.environment }}"
    assert 'python -m infra.report --deploy-target "$ENVIRONMENT"' in run_scripts(verify)
    (credentials,) = using(deploy, "aws-actions/configure-aws")
    assert credentials["with"]["role-to-assume"] == "${{ needs.verify.outputs.role_arn }}"
    assert credentials["with"]["aws-region"] == "${{ needs.verify.outputs.region }}"
    assert "aws-access-key-id" not in (WORKFLOWS / "deploy.yml").read_text()


def test_deploy_tests_once_and_deploys_that_assembly_after_showing_its_diff() -> None:
    jobs = load("deploy.yml")["jobs"]
    verify_runs, deploy_runs = run_scripts(jobs["verify"]), run_scripts(jobs["deploy"])
    for command in ("make test", "make synth", "make guard"):
        assert command in verify_runs
    assert "make" not in deploy_runs and "cdk synth" not in deploy_runs
    (upload,) = using(jobs["verify"], "actions/upload-artifact")
    (download,) = using(jobs["deploy"], "actions/download-artifact")
    assert upload["with"]["name"] == download["with"]["name"] and download["with"]["path"] == "cdk.out"
    diff = deploy_runs.index('npx cdk diff --app cdk.out "${ENVIRONMENT}/*"')
    assert "GITHUB_STEP_SUMMARY" in deploy_runs[diff:]
    assert diff < deploy_runs.index('npx cdk deploy --app cdk.out "${ENVIRONMENT}/*"')
    for job in jobs.values():
        assert using(job, "actions/checkout")[0]["with"]["ref"] == "${{ github.sha }}"


@pytest.mark.parametrize("name", ["checks.yml", "deploy.yml"])
def test_the_guard_runs_before_anything_merges_or_deploys(name: str) -> None:
    jobs = load(name)["jobs"]
    assert any("make guard" in run_scripts(job) for job in jobs.values())


def test_deploy_proves_the_environment_with_a_smoke_run_after_cdk_deploy_and_fails_on_its_verdict() -> None:
    deploy = load("deploy.yml")["jobs"]["deploy"]
    names = [step.get("name", "") for step in deploy["steps"]]
    runs = [step.get("run", "") for step in deploy["steps"]]
    deployed = next(
        i for i, run in enumerate(runs) if 'npx cdk deploy --app cdk.out "${ENVIRONMENT}/*"' in run
    )
    (smoke,) = [i for i, run in enumerate(runs) if "python -m ops smoke" in run]
    # Right after the deploy (and the Python it needs), before the job, and with it the promotion, ends.
    assert smoke == deployed + 2 == len(runs) - 1, names
    assert deploy["steps"][deployed + 1]["uses"].startswith("actions/setup-python")
    script = runs[smoke]
    assert '--env "$ENVIRONMENT"' in script and '--assume-role "$role"' in script
    assert "c.role_arn(c.smoke_runner_role_name)" in script  # the role the stack creates for it, from config
    assert 'exit "$status"' in script.splitlines()[-1]  # a failed verdict fails the job
    assert "--require-hashes" in script and "GITHUB_STEP_SUMMARY" in script


# --- the deploy job's recovery step, executed against a fake `aws` ----------------------------------------------------

FAKE_AWS = r"""#!/usr/bin/env bash
echo "$*" >> "$AWS_CALLS"
case "$1 $2" in
  "sts assume-role") [ "$ASSUME" = ok ] && echo "AKID SECRET TOKEN" && exit 0; echo "AccessDenied" >&2; exit 254 ;;
  "sts get-caller-identity") echo "999999999999" ;;
  "cloudformation describe-stacks")
    [ "$STACK_STATUS" = NONE ] && { echo "An error occurred (ValidationError): Stack with id x does not exist" >&2; exit 254; }
    [ "$STACK_STATUS" = DENIED ] && { echo "An error occurred (AccessDenied): not authorized" >&2; exit 254; }
    echo "$STACK_STATUS" ;;
  *) ;;
esac
"""


def recovery_step(
    tmp_path: Path, status: str, assume: str = "ok"
) -> tuple[subprocess.CompletedProcess[str], str]:
    steps = load("deploy.yml")["jobs"]["deploy"]["steps"]
    (step,) = [s for s in steps if "first create rolled back" in s.get("name", "")]
    assert step["env"]["ACCOUNT"] == "${{ needs.verify.outputs.account }}"
    fake = tmp_path / "bin" / "aws"
    fake.parent.mkdir()
    fake.write_text(FAKE_AWS)
    fake.chmod(0o755)
    calls = tmp_path / "calls"
    calls.touch()
    environment = {
        "PATH": f"{fake.parent}{os.pathsep}{os.environ['PATH']}",
        "ENVIRONMENT": "prod",
        "ACCOUNT": "333333333333",
        "AWS_REGION": "ca-central-1",
        "GITHUB_RUN_ID": "7",
        "AWS_CALLS": str(calls),
        "STACK_STATUS": status,
        "ASSUME": assume,
    }
    # GitHub runs a `run:` script with `bash --noprofile --norc -eo pipefail {0}`.
    bash = ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]]
    done = subprocess.run(bash, env=environment, capture_output=True, text=True, check=False)
    return done, calls.read_text()


@pytest.mark.parametrize("status", ["NONE", "CREATE_COMPLETE", "UPDATE_COMPLETE"])
def test_the_recovery_step_leaves_a_healthy_or_missing_stack_alone(tmp_path: Path, status: str) -> None:
    done, calls = recovery_step(tmp_path, status)
    assert done.returncode == 0, done.stderr
    assert "delete-stack" not in calls
    # the environment's account from config, never the OIDC caller's
    assert "cdk-hnb659fds-deploy-role-333333333333-ca-central-1" in calls
    assert "get-caller-identity" not in calls


def test_the_recovery_step_deletes_a_rolled_back_first_create_so_the_deploy_creates_it_again(
    tmp_path: Path,
) -> None:
    done, calls = recovery_step(tmp_path, "ROLLBACK_COMPLETE")
    assert done.returncode == 0, done.stderr
    assert calls.splitlines()[-3:] == [
        "cloudformation update-termination-protection --no-enable-termination-protection --stack-name prod-Stateful",
        "cloudformation delete-stack --stack-name prod-Stateful",
        "cloudformation wait stack-delete-complete --stack-name prod-Stateful",
    ]


@pytest.mark.parametrize("status", ["ROLLBACK_FAILED", "DELETE_FAILED", "UPDATE_ROLLBACK_FAILED"])
def test_the_recovery_step_stops_on_a_failed_rollback_and_names_the_runbook_never_deleting(
    tmp_path: Path, status: str
) -> None:
    done, calls = recovery_step(tmp_path, status)
    assert done.returncode != 0
    assert f"::error title=prod-Stateful is {status}::" in done.stdout
    assert "docs/runbook.md#a-stack-whose-rollback-failed" in done.stdout
    assert "delete-stack" not in calls


@pytest.mark.parametrize(("status", "assume"), [("NONE", "denied"), ("DENIED", "ok")])
def test_the_recovery_step_fails_with_one_clear_error_when_it_cannot_assume_the_role_or_read_the_stack(
    tmp_path: Path, status: str, assume: str
) -> None:
    done, calls = recovery_step(tmp_path, status, assume)
    assert done.returncode != 0
    (error,) = [line for line in done.stdout.splitlines() if line.startswith("::error")]
    assert (
        "Cannot assume the CDK deploy role" if assume == "denied" else "Cannot read prod-Stateful"
    ) in error
    assert "delete-stack" not in calls


def test_the_deploy_jobs_credentials_last_the_job_and_the_job_covers_a_first_deploy_and_the_smoke_run() -> (
    None
):
    """A first deploy (docs/deploy.md's budget: up to 60 minutes for the stateful stack and 10 for the stateless one)
    plus the smoke run at worst (each worker step within one invocation, WORKER_TIMEOUT) must fit the job, and the
    credentials the CLI and the smoke run assume their roles from must last the job: GitHub's default is one hour."""
    import math
    import re

    from refdata.registry import REGISTRY

    from infra.constructs.ops_workflows import WORKER_TIMEOUT

    deploy = load("deploy.yml")["jobs"]["deploy"]
    job_seconds = int(deploy["timeout-minutes"]) * 60
    guide = (ROOT / "docs" / "deploy.md").read_text()
    budget = re.search(r"budget (\d+)–(\d+) minutes for a first stateful stack, about (\d+)–(\d+)", guide)
    assert budget, "docs/deploy.md states the first deploy's budget"
    # The smoke run at worst: prepare, each round of parts (max_concurrency at once), finish, a worker timeout each.
    indexable = len([schema for schema in REGISTRY.values() if schema.indexable])
    smoke_seconds = max(
        (2 + math.ceil(indexable / config.ops.max_concurrency)) * WORKER_TIMEOUT.to_seconds()
        for config in environments().values()
    )
    set_up_seconds = 15 * 60  # checkout, the CLI, the assembly, Python for the smoke run
    assert job_seconds >= (int(budget[2]) + int(budget[4])) * 60 + smoke_seconds + set_up_seconds
    credentials = using(deploy, "aws-actions/configure-aws")
    assert credentials
    for step in credentials:
        duration = int(step["with"]["role-duration-seconds"])
        assert job_seconds <= duration <= 43200
        assert f"--max-session-duration {duration}" in guide  # the role must allow what the job asks for


@pytest.mark.parametrize("name", sorted(path.name for path in WORKFLOWS.glob("*.yml")))
def test_every_workflow_states_its_token_permissions(name: str) -> None:
    """GitHub's default token may write to the repository; each workflow says what it needs instead."""
    workflow = load(name)
    assert "permissions" in workflow, f"{name} has no top-level permissions"
    assert "write-all" not in str(workflow["permissions"])
