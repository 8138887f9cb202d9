"""A section cited by name in the project's code or docs (`README, "Add a source table"`, `docs/sync.md, *Heartbeat*`)
is one the cited file has (tests/support/citations.py says what counts)."""

from __future__ import annotations

from tests.support.citations import citations, sources, unresolved


def test_every_section_cited_by_name_exists() -> None:
    problems = unresolved(citation for path in sources() for citation in citations(path))
    assert not problems, "citations of sections that do not exist:\n" + "\n".join(problems)


def test_the_check_finds_citations_at_all() -> None:
    assert sum(1 for path in sources() for _ in citations(path)) >= 10
