"""Each README recipe, applied to a scratch copy, is at most two hand-edited files plus `make docs` (and a table's
`make pins`, and, when it changes what the registry promises, the refdata-client release the check asks for: a
version bump and `make client-release`), passes `make test`, and gives the new environment, schema, table or read
role the assertions its siblings get.

Slow (a synth per recipe; the tests a change parametrizes, or, for the four additions applied at once, the whole suite):
`make recipes` runs these, and so does CI (.ci/run).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra.pins import read
from tests.recipes.recipes import (
    PINS,
    RECIPES,
    RELEASE_FILES,
    Added,
    add_environment,
    add_read_role,
    add_schema,
    add_table,
    collected,
    count_tests,
    older_client_writes_on,
    pin,
    release_client,
    selection,
    stated_files,
)
from tests.recipes.scratch import Scratch

README = Path(__file__).resolve().parents[2] / "README.md"

pytestmark = pytest.mark.recipe
TABLE, VAULT = "AWS::DynamoDB::Table", "AWS::Backup::BackupVault"
OVERRIDE = """
[[override]]
resource = "{resource}"
change = "{change}"
reason = "reviewed: {why}"
"""


# The additions the combined recipe applies at once and proves with the whole suite.
COMBINED = tuple(
    recipe
    for recipe, apply in RECIPES.items()
    if apply in (add_environment, add_schema, add_table, add_read_role)
)


def coverage(
    scratch: Scratch, added: Added, ids: list[str], covered: dict[str, list[str]]
) -> tuple[int, int]:
    """(tests that assert on the new thing, tests that assert on its sibling)."""
    if added.kind == "environment":
        return count_tests(ids, added.name), count_tests(ids, added.sibling)
    if added.kind == "schema":
        # Schema-level contracts iterate the registry inside each test (no per-schema ids, for any schema): count
        # the synthesized templates that carry the schema (its stream-filter prefix, its bootstrap entry), which
        # those contracts assert on, and whether the data-model doc describes it.
        def carried(name: str) -> int:
            templates = (scratch.root / "cdk.out").glob("assembly-*/*.template.json")
            doc = (scratch.root / "docs" / "data-model.md").read_text()
            return sum(f"{name}::" in path.read_text() for path in templates) + (f"`{name}`" in doc)

        return carried(added.name), carried(added.sibling)
    return len(covered.get(f"{added.kind}:{added.name}", [])), len(
        covered.get(f"{added.kind}:{added.sibling}", [])
    )


def apply_and_check(tmp_path: Path, *recipes: str) -> list[str]:
    scratch = Scratch.of_working_tree(tmp_path)
    added = [thing for recipe in recipes for thing in RECIPES[recipe](scratch)]
    hand_edited = scratch.changed()
    pinned_line, pinned = "", set()
    if any(thing.kind == "table" for thing in added):
        # README, "Add a source table": after review, `make pins` pins the new table's ids (not a hand edit).
        before = read((scratch.root / PINS).read_text())[1]
        pinned, said = pin(scratch)
        after = read((scratch.root / PINS).read_text())[1]
        tables = [
            t.name.split("/")[1] for t in added if t.kind == "table" and t.name.split("/")[1] not in before
        ]
        assert pinned == ({PINS} if tables else set()), said
        assert after == before | {table: after[table] for table in tables}, said  # it only adds
        for table in tables:
            assert [list(part.values()) for part in after[table]] == [[TABLE], [VAULT]], said
            assert f"pinned {table}: " in said, said
        pinned_line = f"`make pins` {f'wrote {PINS}' if pinned else 'left the pins unchanged'}; "
    version = release_client(scratch)
    released = scratch.changed()
    if version is not None:
        assert released == RELEASE_FILES, released
    scratch.make("docs")
    regenerated = scratch.changed()
    behind = older_client_writes_on(scratch.root, added)  # `make docs` synthesized the changed tree
    report, ids = tmp_path / "coverage.json", list[str]()
    covered: dict[str, list[str]] | None = None
    if len(recipes) == 1 and recipes[0] in COMBINED:
        # Its suite run is the combined recipe's: the whole suite over this change and the other additions, with the
        # same coverage check of what it added (a second run over this change alone would prove nothing more). No
        # collection either: the ids serve the selection and the coverage check of a suite run.
        ran = "its tests run in the combined recipe (the whole suite)"
    elif len(recipes) == 1:  # one change: the tests it parametrizes and every contract over the templates
        ids = collected(scratch)
        chosen = selection(ids, added)
        (tmp_path / "selection.txt").write_text("\n".join(chosen) + "\n")
        scratch.make("test", REFDATA_COVERAGE_FILE=str(report), PYTEST_ARGS=f"@{tmp_path / 'selection.txt'}")
        ran = f"make test passed over {len(chosen)} paths and ids (tests/infra and what the change parametrizes)"
    else:  # every change at once: the whole suite, so a change that breaks an unrelated test fails here
        ids = collected(scratch)
        scratch.make("test", REFDATA_COVERAGE_FILE=str(report))
        ran = "make test passed (the whole suite)"
    if report.exists():
        covered = json.loads(report.read_text())
    lines = [
        f"{' + '.join(recipes)}: {len(hand_edited)} hand-edited ({', '.join(sorted(hand_edited))}); "
        f"{pinned_line}{f'refdata-client release {version}: {len(released)} files; ' if version else 'no refdata-client release; '}"
        f"`make docs` regenerated {len(regenerated)} ({', '.join(sorted(regenerated)) or 'nothing'}); {ran}"
    ]
    if behind:
        lines.append(behind)
    for thing in added if covered is not None else ():
        new, sibling = coverage(scratch, thing, ids, covered)
        lines.append(f"  {thing.kind} {thing.name}: {new} tests; its sibling {thing.sibling}: {sibling}")
        assert new >= 0.9 * sibling > 0, lines[-1]
    measured = {
        "by hand": len(hand_edited),
        "by `make pins`": len(pinned) if pinned_line else 0,
        "for the release": len(released) if version else 0,
        "after review": 0,
    }
    # `make docs` synthesized this very tree (its synth gate passed): the guard reads that assembly.
    guard = scratch.make("guard", "-o", "synth", check=False)
    lines.append(f"  make guard: {'passed' if guard.returncode == 0 else 'BLOCKED'}")
    if any(thing.kind == "table" for thing in added):
        assert guard.returncode != 0 and "MOVES from" in guard.stdout and "a data migration" in guard.stdout
        for finding in [
            line.split(" (schema)")[0].strip() for line in guard.stdout.splitlines() if " (schema): " in line
        ]:
            overrides = scratch.root / "release" / "guard-overrides.toml"
            overrides.write_text(
                overrides.read_text()
                + OVERRIDE.format(
                    resource=finding, change="migration", why="items copied, index versioned and reindexed"
                )
            )
        scratch.make("guard", "-o", "synth")
        measured["after review"] = len(scratch.changed())
        lines.append("  make guard after the reviewed migration override: passed")
    moves = [
        line.split(" (account and region)")[0].strip()
        for line in guard.stdout.splitlines()
        if " (account and region): " in line
    ]
    if moves:
        # One finding per moved environment, named for what it is, and none per subnet or table.
        assert guard.returncode != 0 and "new deployment" in guard.stdout and "REPLACED" not in guard.stdout
        overrides = scratch.root / "release" / "guard-overrides.toml"
        for move in moves:
            overrides.write_text(
                overrides.read_text()
                + OVERRIDE.format(
                    resource=move, change="move", why="deployed anew there, data moved, old retired"
                )
            )
        scratch.make("guard", "-o", "synth")
        measured["after review"] = len(scratch.changed())
        lines.append(
            f"  make guard after one reviewed move override per environment ({', '.join(moves)}): passed"
        )
    if len(recipes) == 1:
        # What the README says the recipe takes is what it took.
        assert stated_files(README.read_text(), recipes[0]) == measured, f"{lines[0]}\nmeasured {measured}"
    return lines


@pytest.mark.parametrize("recipe", list(RECIPES))
def test_a_routine_change_is_two_files_and_make_docs_and_the_suite_follows_it(
    tmp_path: Path, recipe: str
) -> None:
    lines = apply_and_check(tmp_path, recipe)
    print("\n".join(lines))
    # What the registry promises changes with a schema, or with the table holding one: a refdata-client release.
    promises = recipe in (
        "add a schema",
        "change a schema",
        "add a source table",
        "move a schema to its own table",
    )
    assert ("no refdata-client release" not in lines[0]) == promises, lines[0]
    if recipe == "change an account and a region":
        assert "make guard: BLOCKED" in lines[-2], (
            "an account or region move is a new deployment: the guard blocks it"
        )
        assert "test/Environment/location" in lines[-1] and lines[-1].endswith("passed")
    elif recipe in ("add an environment", "add a schema", "change a schema", "add a read role"):
        assert lines[-1].endswith("passed")


def test_an_extra_environment_schema_table_and_read_role_get_the_assertions_their_siblings_get(
    tmp_path: Path,
) -> None:
    print("\n".join(apply_and_check(tmp_path, *COMBINED)))
