"""A scratch copy shares the set-up and the heavy tools' cache with the checkout and tracks none of it: its own git
history holds the project's files only (a tracked `.venv` symlink came along into every clone made of the copy)."""

from __future__ import annotations

from pathlib import Path

from tests.recipes.scratch import ROOT, SHARED, TOOLS_CACHE, Scratch, copy_type_check_cache


def test_a_scratch_copy_shares_the_set_up_and_tracks_none_of_it(tmp_path: Path) -> None:
    scratch = Scratch.of_working_tree(tmp_path)
    shared = [*SHARED, str(TOOLS_CACHE)]
    assert {name: (scratch.root / name).resolve() for name in shared} == {
        name: (ROOT / name).resolve() for name in shared
    }
    assert scratch.run(["git", "ls-files", "--", *shared]).stdout == ""


def test_the_type_check_cache_is_copied_without_the_journals_a_running_check_writes(tmp_path: Path) -> None:
    source = tmp_path / "cache" / "3.11"
    source.mkdir(parents=True)
    for name in (
        "cache.9.db",
        "cache.9.db-wal",
        "cache.9.db-shm",
        "cache.12.db-journal",
        "@plugins_snapshot.json",
    ):
        (source / name).write_text(name)
    copy_type_check_cache(tmp_path / "cache", tmp_path / "copy")
    copied = sorted(path.name for path in (tmp_path / "copy" / "3.11").iterdir())
    assert copied == ["@plugins_snapshot.json", "cache.9.db"]
