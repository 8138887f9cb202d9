"""A scratch copy shares the set-up and the heavy tools' cache with the checkout and tracks none of it: its own git
history holds the project's files only (a tracked `.venv` symlink came along into every clone made of the copy)."""

from __future__ import annotations

from pathlib import Path

from tests.recipes.scratch import ROOT, SHARED, TOOLS_CACHE, Scratch


def test_a_scratch_copy_shares_the_set_up_and_tracks_none_of_it(tmp_path: Path) -> None:
    scratch = Scratch.of_working_tree(tmp_path)
    shared = [*SHARED, str(TOOLS_CACHE)]
    assert {name: (scratch.root / name).resolve() for name in shared} == {
        name: (ROOT / name).resolve() for name in shared
    }
    assert scratch.run(["git", "ls-files", "--", *shared]).stdout == ""
