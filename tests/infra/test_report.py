"""The synth gate (`python -m infra.report --check`, the end of `make synth`) says each problem once, with its fix, and
passes on what else the CDK CLI said, less the CLI's own report of the same problems and its "Supply a stack id"
line. The CLI's output here is as CDK CLI 2.1148's formatter writes it (captured from `make synth` with a planted
queue); tests/recipes/test_synth_gate.py runs the real CLI on planted problems."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from infra.report import HINTS, main

PATH, RULE = "dev/Stateless/Planted/Resource", "AwsSolutions-SQS4"
DESCRIPTION = "The SQS queue does not require requests to use SSL."
SUPPLY = "Supply a stack id (dev/Stateful, dev/Stateless) to display its template."
# The CLI reports a finding as a severity line, the construct and the acknowledgment id (grey: ANSI codes in a TTY).
CLI_FINDING = (
    f"\x1b[1mERROR\x1b[22m \x1b[1m{DESCRIPTION}\x1b[22m \x1b[90m(AwsSolutions)\x1b[39m\n"
    f"   {PATH} aws-cdk-lib.aws_sqs.CfnQueue\n"
    f"   \x1b[90mAcknowledge with 'AwsSolutions::{RULE}'\x1b[39m\n"
)


def assembly(
    tmp_path: Path, *, findings: tuple[tuple[str, str], ...] = (), missing: tuple[str, ...] = ()
) -> Path:
    """A cloud assembly of one stack with ``findings`` ((rule, construct path)) in its validation report and
    ``missing`` context keys."""
    out = tmp_path / "cdk.out"
    (out / "assembly-dev").mkdir(parents=True)
    (out / "manifest.json").write_text(json.dumps({"missing": [{"key": key} for key in missing]}))
    stack = {"displayName": "dev/Stateless", "properties": {"templateFile": "s.template.json"}}
    (out / "assembly-dev" / "manifest.json").write_text(json.dumps({"artifacts": {"devStateless": stack}}))
    (out / "assembly-dev" / "s.template.json").write_text(json.dumps({"Resources": {"Q": {}}}))
    if findings:
        violations = [
            {"ruleName": rule, "description": DESCRIPTION, "violatingConstructs": [{"constructPath": path}]}
            for rule, path in findings
        ]
        (out / "validation-report.json").write_text(
            json.dumps({"pluginReports": [{"violations": violations}]})
        )
    return out


def gate(out: Path, cli_output: str, status: int, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    log = out.parent / "synth.log"
    log.write_text(cli_output)
    code = main(["--check", str(out), "--cli-output", str(log), "--cli-status", str(status)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_a_planted_finding_is_said_once_with_its_fix_and_the_rest_of_the_cli_output_is_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = assembly(tmp_path, findings=((RULE, PATH),))
    cli = f"[Warning at /dev/Stateless] a warning the gate does not own\n{CLI_FINDING}Synthesis finished with errors\n"
    code, said = gate(out, cli, 1, capsys)
    assert code == 1
    assert [line for line in said.splitlines() if PATH in line] == [
        f"  cdk-nag finding {RULE} on {PATH}: {DESCRIPTION}"
    ]
    assert said.count(DESCRIPTION) == 1 and said.count(RULE) == 1
    assert f"cdk-nag finding: {HINTS['cdk-nag finding']}" in said.splitlines()
    assert "[Warning at /dev/Stateless] a warning the gate does not own" in said.splitlines()
    assert "Synthesis finished with errors" not in said and "Acknowledge with" not in said


def test_a_finding_the_gate_does_not_name_keeps_the_clis_report_of_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing real is hidden: a block of the CLI that no problem of the gate matches (another construct) stays,
    and so does the CLI's conclusion."""
    out = assembly(tmp_path, findings=((RULE, "dev/Stateless/Other/Resource"),))
    code, said = gate(out, f"{CLI_FINDING}Synthesis finished with errors\n", 1, capsys)
    assert code == 1
    assert f"   {PATH} aws-cdk-lib.aws_sqs.CfnQueue" in said.splitlines()
    assert f"Acknowledge with 'AwsSolutions::{RULE}'" in said and "Synthesis finished with errors" in said


def test_a_clean_synth_prints_each_stack_and_no_supply_a_stack_id_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = assembly(tmp_path)
    code, said = gate(out, f"Successfully synthesized to {out}\n{SUPPLY}\n", 0, capsys)
    assert code == 0
    assert "Supply a stack id" not in said
    assert f"Successfully synthesized to {out}" in said.splitlines()
    assert any(line.startswith("dev/Stateless") and "1 resources" in line for line in said.splitlines())
    # Only that exact line goes: a line that merely mentions it stays.
    code, said = gate(out, f"note: {SUPPLY}\n", 0, capsys)
    assert f"note: {SUPPLY}" in said.splitlines()


def test_missing_context_is_said_once_with_its_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = "availability-zones:account=333333333333:region=ca-central-1"
    out = assembly(tmp_path, missing=(key,))
    cli = (
        "Context lookups have been disabled. Make sure all necessary context is already in 'cdk.context.json' by "
        "running 'cdk synth' on a machine with sufficient AWS credentials and committing the result. Missing context "
        f"keys: '{key}'\n"
    )
    code, said = gate(out, cli, 1, capsys)
    assert code == 1
    assert said.count(key) == 1 and f"missing context {key}: add it to cdk.context.json" in said


def test_a_failed_synth_without_an_assembly_shows_everything_the_cli_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cli = "RuntimeError: planted crash\n.venv/bin/python app.py: Subprocess exited with error 1\n"
    code, said = gate(tmp_path / "cdk.out", cli, 1, capsys)
    assert code == 1
    assert said.splitlines() == cli.splitlines()


def test_a_config_error_is_the_one_line_a_failed_synth_shows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The app's one-line config error (infra.validation) is the whole answer: the CLI's "Subprocess exited" line
    after it says nothing more."""
    error = (
        "config error: infra/environments.py:106: prod.search.data_node_type: 'r7g.lage.search' is not ..."
    )
    cli = f"{error}\n.venv/bin/python app.py: Subprocess exited with error 2\n"
    code, said = gate(tmp_path / "cdk.out", cli, 2, capsys)
    assert code == 2
    assert said.splitlines() == [error]


def test_help_prints_every_mode_and_exits_0() -> None:
    """`python -m infra.report --help` answers with its usage, not "no templates found"."""
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-m", "infra.report", "--help"], cwd=root, capture_output=True, text=True
    )

    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.startswith("usage: python -m infra.report")
    for mode in ("--check", "--acknowledgments", "--deploy-target", "--cli-output", "--cli-status"):
        assert mode in done.stdout


def test_the_synth_gates_own_flags_go_with_check_only(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit:
        main(["cdk.out", "--cli-status", "1"])

    assert exit.value.code == 2
    assert "--cli-output and --cli-status go with --check" in capsys.readouterr().err


def test_one_line_per_stack_names_the_assembly_it_found_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(tmp_path)]) == 1
    assert capsys.readouterr().err == f"no templates found in {tmp_path}: run `make synth`\n"
