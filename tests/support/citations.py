"""Sections cited by name, as the code and the docs cite them: `README, "Add a source table"`, `docs/sync.md,
*Heartbeat*`, `docs/operations.md "Scan or export"`. A citation holds if the file has a heading whose text is the
cited name or that name and a subtitle (`"Mapping change"` for "Mapping change: new version, backfill, alias swap"), or a
paragraph led by it in bold (`**Add a source table.**`), as the README's recipes are."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from tests.support.markdown import ROOT, Document, rendered

CITATION = re.compile(
    r"(?<![\w/.\"'-])(?P<file>README(?:\.md)?|docs/[\w./-]+\.md)(?![\"'])(?:,|:)?[ \t]*\n?[ \t#]*(?:section[ \t]+)?"
    r"(?:\"(?P<quoted>[A-Za-z`][^\"\n]{1,79})\"|“(?P<curly>[A-Za-z`][^”\n]{1,79})”"
    r"|(?<!\*)\*(?P<emphasis>[A-Za-z`][^*\n]{1,79})\*(?!\*))"
)
BOLD_LEAD = re.compile(r"^\s*(?:[-*]\s+|\d+\.\s+)?\*\*(?P<lead>[^*\n]+?)\*\*", re.MULTILINE)
# Where citations are written: the project's own text, not what it installs or generates from AWS.
SOURCES = ("app.py", "Makefile", "pyproject.toml", "README.md")
SOURCE_FOLDERS = ("infra", "lambdas", "ops", "bench", "tests", "docs", ".github", "release/client")
SUFFIXES = {".py", ".md", ".toml", ".yml", ".yaml", ".mjs", ".java"}
SKIPPED = ("__pycache__", "node_modules", ".venv")


@dataclass(frozen=True)
class Citation:
    where: str
    file: str
    title: str


def _normal(text: str) -> str:
    return " ".join(rendered(text).replace("`", "").lower().split()).rstrip(".:")


@cache
def _names(path: Path) -> tuple[str, ...]:
    document = Document.read(path)
    leads = [match.group("lead") for match in BOLD_LEAD.finditer(document.text)]
    return tuple(_normal(text) for text in [*(text for _, text in document.headings), *leads])


def sources() -> list[Path]:
    found = [ROOT / name for name in SOURCES]
    for folder in SOURCE_FOLDERS:
        found += [
            path
            for path in sorted((ROOT / folder).rglob("*"))
            if path.suffix in SUFFIXES and path.is_file() and not any(part in SKIPPED for part in path.parts)
        ]
    return found


def citations(path: Path) -> Iterator[Citation]:
    text = path.read_text(errors="replace")
    for match in CITATION.finditer(text):
        title = match.group("quoted") or match.group("curly") or match.group("emphasis")
        cited = "README.md" if match.group("file").startswith("README") else match.group("file")
        line = text.count("\n", 0, match.start()) + 1
        where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        yield Citation(f"{where}:{line}", cited, title)


def unresolved(found: Iterator[Citation], root: Path = ROOT) -> list[str]:
    """Each citation of a file (under ``root``) that does not exist or a section it does not have, as
    `file:line: what`."""
    problems = []
    for citation in found:
        target = root / citation.file
        if not target.is_file():
            problems.append(f"{citation.where}: cites {citation.file}, which does not exist")
            continue
        title = _normal(citation.title)
        if not any(name == title or name.startswith((f"{title}:", f"{title} (")) for name in _names(target)):
            problems.append(
                f"{citation.where}: cites {citation.file}, {citation.title!r}: {citation.file} has no heading or "
                "bold paragraph lead of that name"
            )
    return problems
