"""Each README recipe, applied to a scratch copy, is at most two hand-edited files plus `make docs` (and a table's
`make pins`, and, when it changes what the registry promises, the refdata-client release the check asks for: a
version bump and `make client-release`), passes `make test`, and gives the new environment, schema, table or read
role the assertions its siblings get.

Slow (a synth per recipe, and the whole suite once over every recipe applied at once): `make recipes` runs these, and
so does CI (.ci/run).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra.environments import environments
from infra.pins import read
from tests.recipes.recipes import (
    PINS,
    RECIPES,
    RELEASE_FILES,
    Added,
    blocked,
    collected,
    count_tests,
    older_client_writes_on,
    pin,
    release_client,
    stated_files,
)
from tests.recipes.scratch import Scratch

README = Path(__file__).resolve().parents[2] / "README.md"

pytestmark = pytest.mark.recipe
TABLE, VAULT = "AWS::DynamoDB::Table", "AWS::Backup::BackupVault"
FIRST = next(iter(environments()))  # an environment every recipe keeps
OVERRIDE = """
[[override]]
resource = "{resource}"
change = "{change}"
reason = "reviewed: {why}"
"""


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
    docs = scratch.make("docs")
    # `make docs` ran the synth gate on a good change: it passes, naming each stack, without the CLI's "Supply a stack
    # id" line (tests/recipes/test_synth_gate.py plants what fails it).
    output = docs.stdout + docs.stderr
    assert "Supply a stack id" not in output and "Successfully synthesized to" in docs.stderr, output[-4000:]
    assert any(f"{FIRST}/Stateful" in line and "resources" in line for line in output.splitlines())
    regenerated = scratch.changed()
    behind = older_client_writes_on(scratch.root, added)  # `make docs` synthesized the changed tree
    report, ids = tmp_path / "coverage.json", list[str]()
    covered: dict[str, list[str]] | None = None
    if len(recipes) == 1:
        # Its suite run is the combined recipe's: the whole suite over this change and every other, with the same
        # coverage check of what it added or changed (a second run over this change alone would prove nothing more).
        ran = "its tests run in the combined recipe (the whole suite)"
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
    # A table's recipe moves items (one finding per moved schema); an account or region change is a new deployment
    # (one finding per moved environment, named for what it is, and none per subnet or table).
    migrations, moves = blocked(guard.stdout, "schema"), blocked(guard.stdout, "account and region")
    if any(thing.kind == "table" for thing in added):
        assert guard.returncode != 0 and migrations and "a data migration" in guard.stdout, guard.stdout
    if moves:
        assert (
            guard.returncode != 0 and "new deployment" in guard.stdout and "REPLACED" not in guard.stdout
        ), guard.stdout
    reviewed = [
        (finding, "migration", "items copied, index versioned and reindexed") for finding in migrations
    ]
    reviewed += [(move, "move", "deployed anew there, data moved, old retired") for move in moves]
    if reviewed:
        overrides = scratch.root / "release" / "guard-overrides.toml"
        overrides.write_text(
            overrides.read_text()
            + "".join(
                OVERRIDE.format(resource=what, change=change, why=why) for what, change, why in reviewed
            )
        )
        scratch.make("guard", "-o", "synth")
        measured["after review"] = len(scratch.changed())
        named = f" ({', '.join(moves)})" if moves else ""
        lines.append(
            f"  make guard after {len(migrations)} reviewed migration and {len(moves)} move overrides{named}: passed"
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


def test_every_routine_change_at_once_passes_the_whole_suite_and_each_gets_the_assertions_its_sibling_gets(
    tmp_path: Path,
) -> None:
    print("\n".join(apply_and_check(tmp_path, *RECIPES)))
