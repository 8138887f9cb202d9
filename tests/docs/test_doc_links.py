"""Every relative link in README.md and docs/ names a file that exists and, with an anchor, a heading (GitHub's slug,
a repeated heading's `-1`, `-2`, ...) or an explicit `<a id>`/`<a name>` that file has; a code file's anchor is a
line it has (tests/support/markdown.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.markdown import ROOT, Document, broken_links, documents


@pytest.mark.parametrize("path", documents(), ids=lambda path: str(path.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(path: Path) -> None:
    problems = broken_links(Document.read(path))
    assert not problems, "broken links:\n" + "\n".join(problems)


def test_the_check_reads_links_and_anchors_at_all() -> None:
    """The parser finds what the docs hold: links to other files with anchors, and headings to anchor to."""
    read = [Document.read(path) for path in documents()]
    assert any("#" in link.target and not link.target.startswith("#") for doc in read for link in doc.links)
    assert all(doc.anchors for doc in read)
