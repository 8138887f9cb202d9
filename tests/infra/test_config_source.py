"""A config error cites the line where the value it names is written: in the environment's call, in a helper, in a
module constant, at an entry of ``EXAMPLE_ACCOUNTS``; never at an entry a command-line account id replaced.

Each case plants a mistake in a scratch copy of infra/environments.py, found through the copy's syntax tree (so it
follows whatever the file configures), builds the environments from the copy and reads the line the error cites.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

from infra.config import ConfigError
from infra.environments import environments
from infra.validation import one_line, source_of
from tests.support.config_copy import (
    CONFIG,
    bad_domain_name,
    environment_call,
    keyword,
    load,
    module_assignment,
    replaced,
    search_call,
)


@dataclass(frozen=True)
class Cited:
    line: int
    environment: str | None
    message: str


def built(directory: Path, text: str, accounts: dict[str, str] | None = None) -> Cited:
    """The error building the environments of ``text`` (a copy of infra/environments.py) raises, as cited."""
    module = load(directory, text)
    with pytest.raises(ConfigError) as raised:
        module.environments(accounts)
    error = raised.value
    location = source_of(error, error.__traceback__, directory)
    assert location is not None
    assert (
        one_line(error, error.__traceback__, directory)
        == f"config error: environments.py:{location.line}: {error}"
    )
    return Cited(location.line, location.environment, str(error))


@pytest.fixture
def source() -> tuple[str, ast.Module]:
    text = CONFIG.read_text()
    return text, ast.parse(text)


@pytest.fixture(params=list(environments()))
def env(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_a_value_in_an_environments_call_is_cited_at_its_own_line(
    tmp_path: Path, source: tuple[str, ast.Module], env: str
) -> None:
    planted, value = bad_domain_name(source[0], env)
    cited = built(tmp_path, planted)
    assert cited == Cited(value.lineno, env, cited.message)
    assert cited.message.startswith(f"{env}.search.domain_name: 'Bad_Name' ")


def test_a_keyword_a_record_does_not_have_is_cited_at_its_own_line(
    tmp_path: Path, source: tuple[str, ast.Module], env: str
) -> None:
    text, tree = source
    domain = keyword(search_call(tree, env), "domain_name")
    assert domain is not None
    planted = replaced(text, domain, "domain_nam=" + ast.get_source_segment(text, domain.value))  # type: ignore[operator]
    cited = built(tmp_path, planted)
    assert cited == Cited(
        domain.lineno, env, "SearchSettings: unknown field 'domain_nam' (did you mean 'domain_name'?)"
    )


def test_a_value_written_in_a_helper_is_cited_in_the_helper_and_belongs_to_no_one_environment(
    tmp_path: Path, source: tuple[str, ast.Module]
) -> None:
    """A helper every environment calls: the first environment built reports it, but it is not that one's own."""
    text, tree = source
    returned = [
        node.value
        for helper in tree.body
        if isinstance(helper, ast.FunctionDef)
        for node in helper.body
        if isinstance(node, ast.Return)
        and isinstance(node.value, ast.Call)
        and keyword(node.value, "schemas")
    ]
    if not returned:
        pytest.skip("no helper returns a record with schemas")
    schemas = keyword(returned[0], "schemas")  # type: ignore[arg-type]
    assert schemas is not None and isinstance(schemas.value, ast.Tuple) and schemas.value.elts
    first = schemas.value.elts[0]
    assert isinstance(first, ast.Constant)
    cited = built(tmp_path, replaced(text, first, repr(first.value + "x")))
    assert (cited.line, cited.environment) == (first.lineno, None)
    assert f"schemas[0]: {first.value + 'x'!r} is not one of" in cited.message


def test_an_example_account_is_cited_at_its_own_entry(
    tmp_path: Path, source: tuple[str, ast.Module], env: str
) -> None:
    text, tree = source
    assigned = module_assignment(tree, "EXAMPLE_ACCOUNTS")
    assert assigned is not None
    accounts = ast.literal_eval(assigned.value) | {env: "12345"}
    # One entry a line, so the entry's line is not the assignment's.
    planted = replaced(
        text, assigned.value, "{\n" + "".join(f"    {k!r}: {v!r},\n" for k, v in accounts.items()) + "}"
    )
    entry = next(n for n, line in enumerate(planted.splitlines(), 1) if f"{env!r}: '12345'" in line)
    assert entry != assigned.lineno
    cited = built(tmp_path, planted)
    assert cited == Cited(entry, env, f"{env}.account: '12345' is not a 12-digit AWS account id")


def test_an_account_given_on_the_command_line_is_cited_where_the_environment_takes_it_not_at_the_example(
    tmp_path: Path, source: tuple[str, ast.Module], env: str
) -> None:
    text, tree = source
    account = keyword(environment_call(tree, env), "account")
    assert account is not None
    cited = built(tmp_path, text, {env: "12345"})
    assert cited == Cited(
        account.value.lineno, env, f"{env}.account: '12345' is not a 12-digit AWS account id"
    )


def test_a_module_constant_every_environment_uses_is_cited_and_belongs_to_no_one_environment(
    tmp_path: Path, source: tuple[str, ast.Module]
) -> None:
    text, tree = source
    first = next(iter(environments()))
    region = keyword(environment_call(tree, first), "region")
    assert region is not None
    if not isinstance(region.value, ast.Name) or module_assignment(tree, region.value.id) is None:
        pytest.skip(f"{first}'s region is not a module constant")
    assigned = module_assignment(tree, region.value.id)
    assert assigned is not None
    cited = built(tmp_path, replaced(text, assigned.value, '"ca-centrl-1"'))
    assert (cited.line, cited.environment) == (assigned.value.lineno, None)
    assert cited.message.startswith(f"{first}.region: 'ca-centrl-1' is not an AWS region")


def test_a_second_environment_of_one_name_is_cited_at_its_name(
    tmp_path: Path, source: tuple[str, ast.Module]
) -> None:
    text, tree = source
    first, second, *_ = environments()
    name = keyword(environment_call(tree, second), "name")
    assert name is not None
    cited = built(tmp_path, replaced(text, name.value, repr(first)))
    assert cited == Cited(name.value.lineno, first, f"{first}.name: is the name of another environment too")
