"""A measured figure (a time stated as measured, a count of tests) in README.md, docs/ or `make help` stands only in
what a generator writes, or beside a reference to docs/benchmarks.md that states the same figure
(tests/support/figures.py states the rule)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.figures import BENCHMARKS, figures, make_help_figures, unsourced
from tests.support.markdown import ROOT, Document, documents


@pytest.mark.parametrize("path", documents(), ids=lambda path: str(path.relative_to(ROOT)))
def test_every_measured_figure_comes_from_a_benchmark_or_a_generator(path: Path) -> None:
    problems = unsourced(figures(Document.read(path)), BENCHMARKS.read_text())
    assert not problems, "figures nothing computes:\n" + "\n".join(problems)


def test_make_help_states_only_figures_make_bench_measured() -> None:
    problems = unsourced(make_help_figures(ROOT / "Makefile"), BENCHMARKS.read_text())
    assert not problems, "figures nothing computes:\n" + "\n".join(problems)
