"""Every command-line module of infra/ builds its parser in `build_parser()` (tests/docs parses the commands the docs
show with it) and answers `--help` with its usage, exit status 0."""

from __future__ import annotations

import contextlib
import importlib
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLIS = sorted(
    f"infra.{path.stem}"
    for path in (ROOT / "infra").glob("*.py")
    if re.search(r'^if __name__ == "__main__":', path.read_text(), re.MULTILINE)
)


def test_the_command_line_modules_are_found() -> None:
    assert "infra.report" in CLIS and "infra.guard" in CLIS


@pytest.mark.parametrize("module", CLIS)
def test_each_cli_builds_its_parser_and_answers_help(module: str) -> None:
    parser = importlib.import_module(module).build_parser()
    printed = io.StringIO()

    with pytest.raises(SystemExit) as exit, contextlib.redirect_stdout(printed):
        parser.parse_args(["--help"])

    assert exit.value.code == 0
    assert printed.getvalue().startswith(f"usage: python -m {module}")
