"""Every command README.md and docs/ show for the project's own CLIs (`python -m ops ...`, `python -m infra.<module>
...`, with any interpreter, or `make ops ARGS="..."`) in a code block or inline code is one the command's own
argument parser accepts, placeholders filled from config (tests/support/shown_commands.py says what counts as a
command, a placeholder and a synopsis)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.markdown import ROOT, Document, documents
from tests.support.shown_commands import Shown, commands_in, refused


def shown(path: Path) -> list[Shown]:
    document = Document.read(path)
    return [one for code in document.code for one in commands_in(code.text, document.where(code.line))]


@pytest.mark.parametrize("path", documents(), ids=lambda path: str(path.relative_to(ROOT)))
def test_every_command_shown_is_one_its_parser_accepts(path: Path) -> None:
    problems = refused(shown(path))
    assert not problems, "commands their own parser refuses:\n" + "\n".join(problems)


def test_the_check_finds_runnable_ops_and_infra_commands_in_the_docs() -> None:
    """The extraction finds what the docs hold, so the check above cannot pass by finding nothing."""
    found = [one for path in documents() for one in shown(path)]
    runnable = {one.module for one in found if one.words and not one.synopsis}
    assert "ops" in runnable
    assert any(module.startswith("infra.") for module in runnable)
