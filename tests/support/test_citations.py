"""Citations of sections by name (tests/support/citations.py): found in prose and code, held by a heading or a bold
paragraph lead, a stale one named with file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.citations import Citation, citations, unresolved


def test_citations_are_found_in_each_written_form(tmp_path: Path) -> None:
    source = tmp_path / "source.py"
    source.write_text(
        '# see README, "Add a source table"; docs/sync.md, *Heartbeat*\n'
        '"""Read docs/operations.md "Scan or export" first."""\n'
        "(docs/operations.md,\n  *Mapping change*)\n"
        'paths = ["README.md", "docs/sync.md"]\n'
    )
    assert [(c.where, c.file, c.title) for c in citations(source)] == [
        (f"{source}:1", "README.md", "Add a source table"),
        (f"{source}:1", "docs/sync.md", "Heartbeat"),
        (f"{source}:2", "docs/operations.md", "Scan or export"),
        (f"{source}:3", "docs/operations.md", "Mapping change"),
    ]


@pytest.mark.parametrize(
    ("file", "title", "holds"),
    [
        ("README.md", "Routine changes", True),
        ("README.md", "routine changes", True),
        ("README.md", "Add a source table", True),  # a bold paragraph lead
        ("README.md", "Mapping change", True),  # the start of a heading
        ("README.md", "Routine", False),
        ("README.md", "Add a table", False),
        ("docs/nowhere.md", "Routine changes", False),
    ],
)
def test_a_citation_holds_when_the_file_has_the_section(
    tmp_path: Path, file: str, title: str, holds: bool
) -> None:
    (tmp_path / "README.md").write_text(
        "# Title\n\n## Routine changes\n\n**Add a source table.** Add it.\n\n### Mapping change: new version\n"
    )
    problems = unresolved(iter([Citation("src.py:3", file, title)]), root=tmp_path)
    assert (problems == []) is holds, problems
    if not holds:
        assert problems[0].startswith(f"src.py:3: cites {file}")
