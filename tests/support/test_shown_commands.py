"""What the docs' command check finds and how it judges it: a planted `python -m ops reindex --schema x` is refused
with its place and the parser's own words; documented forms (any interpreter, `make ops ARGS=...`, placeholders,
shell variables, synopses) are read as the tests/support/shown_commands.py docstring says."""

from __future__ import annotations

import pytest

from infra.environments import environments
from tests.support.shown_commands import commands_in, refusal, refused

ENV = next(iter(environments()))


def judged(text: str) -> list[str | None]:
    return [refusal(one) for one in commands_in(text, "doc.md:7")]


def test_a_planted_reindex_without_env_is_refused_with_where_and_why() -> None:
    [problem] = refused(list(commands_in("python -m ops reindex --schema x", "docs/planted.md:12")))
    said = "docs/planted.md:12: `python -m ops reindex --schema x`: python -m ops reindex: error: "
    assert problem.startswith(said), problem


def test_a_reindex_without_env_is_refused_for_want_of_env() -> None:
    [said] = judged("python -m ops reindex --schema <schema>")
    assert said == "python -m ops reindex: error: one of the arguments --env --local is required"


@pytest.mark.parametrize(
    "text",
    [
        ".venv/bin/python -m ops reindex --env <env> --schema <schema>",
        'AWS_PROFILE=<profile> python3.11 -m ops smoke --env "$ENV" --assume-role <the role\'s ARN>',
        f"python -m ops purge --env={ENV} --dry-run",
        'make ops ARGS="reconcile --env <env> --schema <schema> --fix"',
        "python -m ops smoke --env <env> | tee smoke.json",
        "python -m ops reindex --local --schema <schema> --segments N  # inside the VPC",
        "python -m ops redrive --local --queue-url <url> --max-messages 10",
        "python -m infra.report --deploy-target <env>",
        "python -m infra.cost --writes-per-month 5000000",
        "python -m ops --help",
    ],
)
def test_documented_forms_are_accepted(text: str) -> None:
    assert judged(text) == [None]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('make ops ARGS="smoke"', "the following arguments are required: --env"),
        ("python -m ops smoke --env", "argument --env: expected one argument"),
        ("python -m ops smoke --env prodd", "invalid choice: 'prodd'"),
        ("python -m infra.cost --writes 5 --nope", "unrecognized arguments: --nope"),
        ("python -m infra.config --x", "infra.config has no build_parser()"),
        (f"python -m ops reindex --env {ENV} --schema x", "unknown schema 'x'"),  # the CLI's own check
    ],
)
def test_what_a_parser_refuses_is_named_in_its_own_words(text: str, said: str) -> None:
    [refused_with] = judged(text)
    assert refused_with is not None and said in refused_with


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("python -m ops reindex | reconcile | redrive | purge | smoke", None),
        ("python -m ops <command> --env <env> [--schema S]", None),
        ("python -m ops … --env <env>", None),
        ('python -m ops "$OP" --env "$ENV" --resume "$RUN"', None),
        ("python -m ops <command> --envv <env>", "unrecognized option --envv"),
        ("python -m ops reindx | purge --env <env>", "no subcommand 'reindx'"),
        ("python -m ops smoke --env <env> [--fix]", "unrecognized option --fix"),
    ],
)
def test_a_synopsis_has_its_names_checked(text: str, said: str | None) -> None:
    [shown] = commands_in(text, "doc.md:1")
    assert shown.synopsis
    refused_with = refusal(shown)
    assert refused_with == said if said is None else (refused_with is not None and said in refused_with)


def test_a_program_named_without_arguments_is_not_a_command() -> None:
    assert judged("`python -m ops` from the repository root, and `python -m infra.generated`") == [None, None]


def test_commands_end_at_a_backtick_and_each_is_found() -> None:
    line = f"reindex: `python -m ops reindex --env {ENV} --schema x`; `python -m ops purge --env {ENV}`"
    found = [one.text for one in commands_in(line, "report:1")]
    assert found == [f"python -m ops reindex --env {ENV} --schema x", f"python -m ops purge --env {ENV}"]
