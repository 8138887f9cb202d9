"""Generated files say what was written (infra/files.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.files import write


def test_a_regeneration_says_what_it_wrote_and_what_it_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "generated.md"
    write(path, "one\n")
    write(path, "one\n")
    write(path, "two\n")
    assert capsys.readouterr().out.splitlines() == [f"wrote {path}", f"{path} unchanged", f"wrote {path}"]
    assert path.read_text() == "two\n"
