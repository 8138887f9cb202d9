"""The measured-figures rule (tests/support/figures.py): a time stated as measured or a count of tests stands only in
a generated region or beside a reference to docs/benchmarks.md that states it; configuration and limits are no
measurements."""

from __future__ import annotations

from pathlib import Path

from tests.support.figures import figures, make_help_figures, unsourced
from tests.support.markdown import Document

BENCHMARKS = (
    "| step | wall s |\n|---|---:|\n| `make test` | 90 |\n\nThe suite: 2,748 tests. Recipes took 12.5 min.\n"
)


def problems(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "doc.md"
    path.write_text(text)
    return unsourced(figures(Document.read(path)), BENCHMARKS)


def test_a_measured_time_nothing_computes_is_named_with_its_line(tmp_path: Path) -> None:
    found = problems(tmp_path, "# Doc\n\n`make recipes` proves them\n(about 13 min).\n")
    said = f"{tmp_path / 'doc.md'}:4: 'about 13 min' reads as a measured figure"
    assert len(found) == 1 and found[0].startswith(said), found


def test_a_count_of_tests_is_a_measured_figure(tmp_path: Path) -> None:
    assert len(problems(tmp_path, "The suite has 2,650 tests.\n")) == 1


def test_configuration_and_limits_are_not_measurements(tmp_path: Path) -> None:
    text = "Retries for 6 hours, polls every 5 minutes, within the 120 s timeout; a 15-minute limit.\n"
    assert problems(tmp_path, text) == []


def test_a_figure_beside_the_benchmarks_reference_must_be_the_one_written_there(tmp_path: Path) -> None:
    text = (
        "`make test` takes 90 s ([docs/benchmarks.md](docs/benchmarks.md)) over 2,748 tests.\n\n"
        "`make recipes` took 12.5 min (docs/benchmarks.md).\n\n"
        "`make soak` takes about 40 min (docs/benchmarks.md).\n"
    )
    found = problems(tmp_path, text)
    assert len(found) == 1 and ":5: 'about 40 min' stands beside a reference" in found[0]


def test_figures_in_generated_regions_are_the_generators(tmp_path: Path) -> None:
    text = "<!-- cost-table:begin (make cost) -->\nthe estimate took about 3 s\n<!-- cost-table:end -->\n"
    assert problems(tmp_path, text) == []


def test_make_help_texts_are_read_too(tmp_path: Path) -> None:
    makefile = tmp_path / "Makefile"
    makefile.write_text(
        "recipes: setup ## prove the recipes (about 13 min)\n"
        "test: setup ## run every test (about 90 s: docs/benchmarks.md)\n"
        "\t# a comment taking about 4 s is no help text\n"
    )
    found = unsourced(make_help_figures(makefile), BENCHMARKS)
    said = "Makefile:1 (make help, recipes): 'about 13 min' reads as a measured figure"
    assert len(found) == 1 and said in found[0], found
