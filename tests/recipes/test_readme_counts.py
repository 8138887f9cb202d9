"""README states every recipe's file count in the one sentence `make recipes` checks (fast: runs in `make test`)."""

from pathlib import Path

import pytest

from tests.recipes.recipes import RECIPES, TITLES, stated_files

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


@pytest.mark.parametrize("recipe", list(RECIPES))
def test_each_recipe_states_its_files_in_the_checked_form(recipe: str) -> None:
    counts = stated_files(README, recipe)
    assert 1 <= counts["by hand"] <= 2, counts  # a routine change is one or two hand-edited files


def test_every_recipe_has_its_readme_paragraph() -> None:
    assert TITLES.keys() == RECIPES.keys()
