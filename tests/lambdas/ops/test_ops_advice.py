"""`python -m ops` says what to do when it cannot run as invoked: an interpreter without the project's dependencies,
a run from lambdas/ (where the configured environments are not loaded), no AWS credentials or an expired sign-in."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from botocore.exceptions import ClientError, NoCredentialsError, TokenRetrievalError

from infra.environments import environments
from ops import cli

ROOT = Path(__file__).resolve().parents[3]
ANY_ENV = next(iter(environments()))


def without_site_packages(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """`python -m ops ...` by an interpreter that has none of the project's dependencies (`-S`: no site-packages)."""
    return python(cwd, "-S", "-m", "ops", *argv)


def python(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, *argv], cwd=cwd, env=env, capture_output=True, text=True)


@pytest.mark.parametrize("folder", [".", "lambdas"])
def test_the_wrong_interpreter_is_named_with_the_one_that_works(folder: str) -> None:
    done = without_site_packages(ROOT / folder, "smoke", "--env", ANY_ENV)

    assert done.returncode != 0
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr  # one line, no traceback
    assert "No module named" in lines[0] and sys.executable in lines[0]
    advice = f"run `make setup` in {ROOT}, then `.venv/bin/python -m ops ...` from the repository root"
    assert advice in lines[0]


def test_an_env_run_where_no_environments_are_loaded_says_to_run_from_the_root(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """From lambdas/, `python -m ops` is lambdas/ops itself: nothing hands it the configured environments."""
    monkeypatch.setattr(cli, "ENVIRONMENTS", None)

    status = cli.main(["smoke", "--env", ANY_ENV])

    error = json.loads(capsys.readouterr().out)["error"]
    assert status == cli.EXIT_STATUS["failed"]
    assert f"no configured environment {ANY_ENV!r} here" in error
    assert "`.venv/bin/python -m ops ...` from the repository root" in error
    assert "or name --region" in error


def test_the_same_run_from_lambdas_in_a_subprocess_says_so_too() -> None:
    done = python(ROOT / "lambdas", "-m", "ops", "smoke", "--env", ANY_ENV)

    assert done.returncode == cli.EXIT_STATUS["failed"]
    assert "from the repository root" in json.loads(done.stdout)["error"]


@pytest.fixture
def signed_out(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No credentials anywhere botocore looks: no AWS_* variables, empty config and credentials files, no IMDS."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    empty = tmp_path / "empty"
    empty.write_text("")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(empty))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(empty))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def test_a_deployed_run_without_credentials_says_how_to_sign_in(
    signed_out: None, capsys: pytest.CaptureFixture[str]
) -> None:
    status = cli.main(["smoke", "--env", ANY_ENV])

    out, err = capsys.readouterr()
    assert status == cli.EXIT_STATUS["failed"]
    assert json.loads(out)["error"].startswith("NoCredentialsError")  # the summary stays one JSON line
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "aws sso login --profile <profile>" in lines[0]
    assert "AWS_PROFILE=<profile>" in lines[0]


@pytest.mark.parametrize(
    "error",
    [
        NoCredentialsError(),
        TokenRetrievalError(provider="sso", error_msg="the SSO session has expired"),
        ClientError({"Error": {"Code": "ExpiredToken", "Message": "expired"}}, "DescribeStacks"),
        ClientError({"Error": {"Code": "InvalidClientTokenId", "Message": "no such key"}}, "DescribeStacks"),
    ],
    ids=type,
)
def test_what_counts_as_signed_out(error: Exception) -> None:
    assert cli.signed_out(error)


def test_an_aws_refusal_of_something_else_is_not_a_sign_in_problem() -> None:
    denied = ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, "StartExecution")
    assert not cli.signed_out(denied)
    assert not cli.signed_out(ValueError("bad"))


@pytest.mark.parametrize(
    ("name", "dependency"),
    [("botocore", True), ("boto3.session", True), ("infra.environmentz", False), ("refdata.keyz", False)],
)
def test_only_a_missing_dependency_is_blamed_on_the_interpreter(name: str, dependency: bool) -> None:
    """A missing module of the project's own is a mistake in the code: its traceback says more than advice."""
    from ops.advice import third_party

    assert third_party(ModuleNotFoundError(f"No module named {name!r}", name=name)) is dependency
