"""`python -m ops --local`: flags, JSON summaries, exit statuses, and the redrive pass-through."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from ops_harness import REGION, TABLE, ZONE, OpsEnv
from stream_sync import redrive

from infra.environments import environments
from ops import cli
from tests.support.aws import use_fake_aws

pytestmark = pytest.mark.integration


LOCAL = ["--local", "--table", TABLE, "--region", REGION]


def run(capsys: pytest.CaptureFixture[str], env: OpsEnv, *argv: str) -> tuple[int, dict[str, Any]]:
    status = cli.main([*argv, *LOCAL, "--endpoint", env.server.endpoint])
    return status, json.loads(capsys.readouterr().out.splitlines()[-1])


def test_reconcile_exits_1_on_differences_and_0_once_fixed(
    ops_env: OpsEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    ops_env.put(ZONE, "0000000001", name={"S": "not indexed yet"})

    found = run(capsys, ops_env, "reconcile", "--schema", "geozone")
    dry = run(capsys, ops_env, "reconcile", "--schema", "geozone", "--fix", "--dry-run")
    fixed = run(capsys, ops_env, "reconcile", "--schema", "geozone", "--fix")
    clean = run(capsys, ops_env, "reconcile", "--schema", "geozone")

    assert found[0] == 1 and found[1]["differences"] == {"missing": 1, "stale": 0, "deleted": 0}
    assert dry[0] == 1 and dry[1]["fix"] is None
    assert fixed[0] == 0 and fixed[1]["fix"] == {"repaired": 1}
    assert clean[0] == 0 and clean[1]["clean"] is True and clean[1]["status"] == "done"


def test_reindex_when_nothing_changed_reports_complete(
    ops_env: OpsEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    status, summary = run(capsys, ops_env, "reindex", "--schema", "productDate")

    assert status == 0 and summary["complete"] is True and summary["target"] == "productdate-v1"


def test_an_error_from_opensearch_is_a_json_line_and_exit_2(
    ops_env: OpsEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    ops_env.server.fail_next("index", 400, reason="no way", times=4)

    status, summary = run(capsys, ops_env, "reindex", "--schema", "geozone")

    assert status == 2 and "no way" in summary["error"]


@pytest.mark.parametrize("schema", ["thread", "nope"])
def test_only_indexable_schemas_are_accepted(schema: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["reconcile", "--local", "--schema", schema, "--table", TABLE])
    assert exit_info.value.code == 2
    assert schema in capsys.readouterr().err


def test_missing_settings_are_named(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("TABLE_NAME", "OPENSEARCH_ENDPOINT", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)

    assert cli.main(["reconcile", "--local", "--schema", "geozone"]) == 2
    assert "--endpoint, --region, --table required" in capsys.readouterr().out


def test_a_run_is_either_deployed_or_local(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["purge", "--env", "dev", "--local"])
    assert exit_info.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_redrive_is_the_stream_sync_redrive_with_settings_from_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    def fake_main(argv: list[str]) -> int:
        seen["argv"] = argv
        seen["env"] = {n: os.environ.get(n) for n in ("OPENSEARCH_ENDPOINT", "AWS_REGION", "DLQ_URL")}
        return 0

    monkeypatch.setattr(redrive, "main", fake_main)
    for name in ("OPENSEARCH_ENDPOINT", "AWS_REGION", "DLQ_URL", "GEOMETRY_BUCKET"):
        monkeypatch.setenv(name, "")  # restored after the test, like every variable the command sets

    flags = ["--endpoint", "https://search", "--region", "eu-west-1", "--table", "t", "--queue-url", "q"]
    status = cli.main(["redrive", "--local", *flags, "--dry-run"])

    assert status == 0
    assert seen["argv"] == ["--table", "t", "--queue-url", "q", "--dry-run"]
    assert seen["env"] == {"OPENSEARCH_ENDPOINT": "https://search", "AWS_REGION": "eu-west-1", "DLQ_URL": "q"}


def test_an_aws_error_is_a_json_line_and_exit_2(ops_env: OpsEnv, capsys: pytest.CaptureFixture[str]) -> None:
    where = ["--table", "nope", "--endpoint", ops_env.server.endpoint, "--region", REGION]

    status = cli.main(["reconcile", "--local", "--schema", "geozone", *where])

    assert status == 2
    assert "ResourceNotFoundException" in json.loads(capsys.readouterr().out)["error"]


ROOT = Path(__file__).resolve().parents[3]


def test_python_m_ops_works_from_the_repository_root_without_pythonpath() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    command = [sys.executable, "-m", "ops", "reindex", "--help"]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert f"one of {', '.join(sorted(environments()))}" in " ".join(done.stdout.split())


def test_a_deployed_run_uses_the_environments_region_unless_region_says_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_REGION", "eu-west-1")  # a laptop's default region is not the environment's
    for name, config in environments().items():
        for command in ("purge", "smoke"):  # smoke too: it took AWS_REGION over the configured region
            args = cli.build_parser().parse_args([command, "--env", name])
            assert cli.deployed_region(args) == config.region
            args = cli.build_parser().parse_args([command, "--env", name, "--region", "us-east-2"])
            assert cli.deployed_region(args) == "us-east-2"


def test_an_unknown_schema_gets_the_nearest_indexable_one_and_a_non_indexable_one_says_so(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from refdata.registry import REGISTRY

    indexable = ", ".join(sorted(name for name, schema in REGISTRY.items() if schema.indexable))
    for schema, said in (
        ("geozon", f"unknown schema 'geozon' (did you mean 'geozone'?); indexable: {indexable}"),
        ("counter", "schema 'counter' is not indexable (it is never in the search domain)"),
    ):
        with pytest.raises(SystemExit):
            cli.build_parser().parse_args(["reindex", "--env", "dev", "--schema", schema])
        assert said in capsys.readouterr().err


def test_a_failed_dry_run_says_it_was_one(ops_env: OpsEnv, capsys: pytest.CaptureFixture[str]) -> None:
    ops_env.server.fail_next("index", 400, reason="no way", times=4)

    status, summary = run(capsys, ops_env, "reindex", "--schema", "geozone", "--dry-run")

    assert status == 2 and summary["dryRun"] is True and "dry run: it changed nothing" in summary["note"]


def test_a_local_run_shows_its_progress(ops_env: OpsEnv, capsys: pytest.CaptureFixture[str]) -> None:
    for n in range(5):
        ops_env.put(ZONE, f"{n:04d}", name={"S": "zone"})

    where = [*LOCAL, "--endpoint", ops_env.server.endpoint]
    status = cli.main(["reconcile", "--schema", "geozone", *where, "--segments", "2"])

    err = capsys.readouterr().err.splitlines()
    assert status == 1
    assert err and err[-1].endswith("4/4 parts done"), err  # two segments and two slices


def test_lists_cut_at_max_listed_say_so(
    ops_env: OpsEnv, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ops import runs

    for n in range(4):
        ops_env.put(ZONE, f"{n:04d}", name={"S": "never indexed"})
    monkeypatch.setattr(runs, "MAX_LISTED", 2)
    status, summary = run(capsys, ops_env, "reconcile", "--schema", "geozone")

    assert status == 1 and len(summary["documentIds"]["missing"]) == 2
    assert summary["truncated"] == ["documentIds.missing: 2 of 4 listed (MAX_LISTED)"]


def test_the_role_a_deployed_run_assumes_is_renewed_before_it_expires(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A smoke run past its role session's hour signs with fresh keys, never expired ones: botocore renews the
    assumed credentials on its injected clock, 15 minutes before they expire, and only then. STS (moto's) issues
    them on the same clock, as both read the real one in a deployed run."""
    use_fake_aws(monkeypatch, REGION)
    now = [datetime.now(UTC)]
    monkeypatch.setattr("moto.sts.models.utcnow", lambda: now[0].replace(tzinfo=None))
    with mock_aws():
        base = boto3.Session(region_name=REGION)
        issued: dict[str, datetime] = {}  # access key -> when STS issued it (for an hour)
        base.events.register(
            "after-call.sts.AssumeRole",
            lambda parsed, **_: issued.setdefault(parsed["Credentials"]["AccessKeyId"], now[0]),
        )
        runner = cli.assumed_session(
            base,
            "arn:aws:iam::123456789012:role/refdata-smoke-runner",
            session_name="ops-smoke",
            clock=lambda: now[0],
        )
        sts = runner.client("sts")
        used = []
        for _ in range(
            int(timedelta(hours=3) / timedelta(minutes=5))
        ):  # a three-hour run, a call every 5 min
            sts.get_caller_identity()
            key = str(runner.get_credentials().access_key)
            assert now[0] - issued[key] <= timedelta(minutes=50), "signed with keys of less than 10 minutes"
            used.append(key)
            now[0] += timedelta(minutes=5)
        assert len(issued) == len(set(used)) <= 5, "renewed about once an hour, not on every call"


# --- a config mistake, and which environment it is in ---------------------------------------------------------


@pytest.fixture
def planted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[[str], int]:
    """``planted(env)``: the repository root's `ops` package (what `python -m ops` runs) hands the CLI the environments
    of a scratch copy of infra/environments.py whose ``env`` has a bad search domain name; returns that value's line."""
    import importlib.util

    from infra.validation import one_line, source_of
    from tests.support.config_copy import CONFIG, bad_domain_name, load

    monkeypatch.setattr(cli, "ENVIRONMENTS", cli.ENVIRONMENTS)  # the root package replaces it: restored after
    spec = importlib.util.spec_from_file_location("repository_root_ops", ROOT / "ops" / "__init__.py")
    assert spec is not None and spec.loader is not None
    root_ops = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(root_ops)
    assert cli.ENVIRONMENTS is root_ops._configured and root_ops.environments is environments

    def plant(env: str) -> int:
        text, value = bad_domain_name(CONFIG.read_text(), env)
        monkeypatch.setattr(root_ops, "environments", load(tmp_path, text).environments)
        # The scratch copy lives outside the repository: cite it relative to its own folder.
        monkeypatch.setattr(root_ops, "source_of", functools.partial(source_of, root=tmp_path))
        monkeypatch.setattr(root_ops, "one_line", functools.partial(one_line, root=tmp_path))
        return value.lineno

    return plant


def other_than(env: str) -> str:
    return next(name for name in environments() if name != env)


@pytest.mark.parametrize("broken", list(environments()))
def test_a_mistake_in_another_environment_says_it_is_there_not_in_the_one_asked_for(
    planted: Callable[[str], int], capsys: pytest.CaptureFixture[str], broken: str
) -> None:
    line = planted(broken)
    asked = other_than(broken)
    assert cli.main(["purge", "--env", asked, "--dry-run"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"config error: environments.py:{line}: {broken}.search.domain_name: 'Bad_Name' ")
    assert err.endswith(
        f" [in environment {broken!r}, not {asked!r} (the one you asked for): every environment is checked before "
        "any command runs; fix it, or set that edit aside, first]\n"
    )
    assert err.count("\n") == 1


def test_a_mistake_in_the_environment_asked_for_is_just_the_mistake(
    planted: Callable[[str], int], capsys: pytest.CaptureFixture[str]
) -> None:
    for env in environments():
        line = planted(env)
        assert cli.main(["purge", f"--env={env}", "--dry-run"]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"config error: environments.py:{line}: {env}.search.domain_name: ")
        assert "[in environment" not in err and err.count("\n") == 1


def test_a_mistake_the_environments_share_names_no_environment() -> None:
    shared = cli.ConfigUnusable("config error: infra/environments.py:24: dev.region: ...", None)
    assert shared.answer("prod") == str(shared)


@pytest.mark.parametrize(
    ("arguments", "asked"),
    [
        (["purge", "--env", "prod"], "prod"),
        (["purge", "--env=prod", "--dry-run"], "prod"),
        (["purge", "--en", "prod"], "prod"),
        (["purge", "--local"], None),
        (["purge", "--env"], None),
    ],
)
def test_the_environment_asked_for_is_read_as_argparse_reads_it(
    arguments: list[str], asked: str | None
) -> None:
    assert cli.asked_environment(arguments) == asked
