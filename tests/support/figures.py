"""Measured figures in what people read (README.md, docs/, `make help`) and where each comes from.

The rule the docs follow: a measured figure, that is a duration stated as a measurement ("about 13 min", "takes
7.2 s", "took 90 s", "~4 s") or a count of tests ("2,748 tests"), stands only

- inside what a generator writes (a `make docs`/`make bench`/`make cost` block, or a file such a tool writes whole,
  docs/benchmarks.md among them), or
- in a paragraph that refers to docs/benchmarks.md, where that same figure is written as a table cell or with the
  same unit (so `make bench` rewrites it and a test can compare them, as tests/infra/test_generated.py does for the
  README's synth and test times).

A duration that is configuration or an AWS limit ("retries for 6 hours", "every minute", "the 120 s timeout") is not
a measurement and is not checked.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support.markdown import ROOT, Document

BENCHMARKS = ROOT / "docs" / "benchmarks.md"
REFERENCE = "benchmarks.md"
NUMBER = r"\d+(?:,\d{3})*(?:\.\d+)?"
UNITS = {
    "ms": r"ms",
    "s": r"s|secs?|seconds?",
    "min": r"min|mins|minutes?",
    "h": r"h|hrs?|hours?",
    "tests": r"tests|test cases",
}
DURATION = re.compile(
    rf"(?P<figure>(?P<number>{NUMBER})(?:\s?[-–]\s?(?P<upper>{NUMBER}))?)\s?"
    rf"(?P<unit>{'|'.join(pattern for unit, pattern in UNITS.items() if unit != 'tests')})\b"
)
# What makes a duration a measurement: it is said to be taken, or approximate.
MEASURED = re.compile(
    r"(?:\b(?:about|around|roughly|approximately|nearly|almost|takes?|took|taking|measured(?: at)?|in under)|~|≈)\s*$",
    re.IGNORECASE,
)
TESTS = re.compile(rf"(?P<figure>(?P<number>{NUMBER}))\s+(?:{UNITS['tests']})\b")
MAKE_HELP = re.compile(r"^(?P<target>[a-z-]+):.*?## (?P<help>.*)$", re.MULTILINE)


@dataclass(frozen=True)
class Figure:
    where: str
    said: str
    numbers: tuple[str, ...]
    unit: str  # a key of UNITS
    referenced: bool


def _unit(written: str) -> str:
    return next(key for key, pattern in UNITS.items() if re.fullmatch(pattern, written))


def measured(text: str) -> Iterator[tuple[int, str, tuple[str, ...], str]]:
    """(offset, what is said, its numbers, their unit) for each measured figure in ``text``."""
    for match in DURATION.finditer(text):
        before = text[max(0, match.start() - 24) : match.start()]
        cue = MEASURED.search(before)
        if cue:
            numbers = tuple(n for n in (match.group("number"), match.group("upper")) if n)
            said = " ".join((before[cue.start() :] + match.group(0)).split())
            yield match.start(), said, numbers, _unit(match.group("unit"))
    for match in TESTS.finditer(text):
        yield match.start(), match.group(0), (match.group("number"),), "tests"


def figures(document: Document) -> Iterator[Figure]:
    """The measured figures of ``document`` outside what a generator writes, each with whether its paragraph
    refers to docs/benchmarks.md."""
    generated = document.generated_lines
    for paragraph in document.paragraphs:
        referenced = REFERENCE in paragraph.text
        for offset, said, numbers, unit in measured(paragraph.text):
            line = paragraph.line + paragraph.text.count("\n", 0, offset)
            if line not in generated:
                yield Figure(document.where(line), said, numbers, unit, referenced)


def make_help_figures(makefile: Path) -> Iterator[Figure]:
    """The measured figures of each target's `## ` help text (what `make help` prints)."""
    text = makefile.read_text()
    for match in MAKE_HELP.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        help_text = match.group("help")
        where = f"{Document(makefile, text).where(line)} (make help, {match.group('target')})"
        for _, said, numbers, unit in measured(help_text):
            yield Figure(where, said, numbers, unit, REFERENCE in help_text)


def written_in(number: str, unit: str, text: str) -> bool:
    """Whether ``text`` (docs/benchmarks.md) states ``number`` as a table cell (its unit in the column's heading) or
    followed by the same unit."""
    exact = rf"(?<![\d.,]){re.escape(number)}(?![\d]|[.,]\d)"
    return bool(re.search(rf"\|\s*{exact}\s*\|", text) or re.search(rf"{exact}\s?(?:{UNITS[unit]})\b", text))


def unsourced(found: Iterator[Figure], benchmarks: str) -> list[str]:
    """Each figure that breaks the rule, as `file:line: what is wrong`."""
    problems = []
    for figure in found:
        if not figure.referenced:
            problems.append(
                f"{figure.where}: {figure.said!r} reads as a measured figure, and no benchmark or tool computes it: "
                "state it beside a reference to docs/benchmarks.md where `make bench` wrote it, or in a generated "
                "block; if it follows from configuration, state it exactly, without 'about' or '~', and name the "
                "setting; else drop it"
            )
        elif missing := [n for n in figure.numbers if not written_in(n, figure.unit, benchmarks)]:
            problems.append(
                f"{figure.where}: {figure.said!r} stands beside a reference to docs/benchmarks.md, which does not "
                f"state {' or '.join(missing)} ({figure.unit}): state the figure `make bench` wrote there"
            )
    return problems
