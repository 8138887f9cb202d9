from pathlib import Path

from refdata.docs import main, render
from refdata.registry import REGISTRY

DOC = Path(__file__).parents[3] / "docs" / "data-model.md"


def test_committed_data_model_doc_is_up_to_date():
    assert DOC.read_text(encoding="utf-8") == render(), (
        "docs/data-model.md is stale: run `PYTHONPATH=lambdas python -m refdata.docs --write docs/data-model.md`"
    )


def test_table_has_one_row_per_schema():
    conventions = render().split("## Conventions", 1)[1].split("\n\n", 2)[1]
    rows = [line for line in conventions.splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == list(REGISTRY)


def test_the_command_prints_or_writes_the_document(tmp_path, capsys):
    assert main([]) == 0
    assert capsys.readouterr().out == render()
    target = tmp_path / "data-model.md"
    assert main(["--write", str(target)]) == 0
    assert target.read_text(encoding="utf-8") == render()
