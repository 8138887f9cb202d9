"""refdata-client versions (infra/client_version.py): each classification rule over registries built here, the
check and the release on temporary files, and the committed record against this tree.

Every registry below is built from schemas declared in this file (``build_registry``), never from the shipped
names, so a schema added, changed or removed in lambdas/refdata/registry.py changes none of these tests; only
``test_the_committed_release_records_this_tree`` reads the shipped registry, and it fails until that change is
released.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from refdata import __version__
from refdata.registry import (
    Attribute,
    AttributeKind,
    CounterSk,
    Field,
    FieldsSk,
    FixedSk,
    Kind,
    PartsSk,
    Schema,
    Sharding,
    Visibility,
    build_registry,
)

from infra import client_version as cv
from infra.environments import environments
from infra.validation import ConfigError

ZONE = Schema(
    name="zone",
    scope=(Field("collectionId"),),
    sk=CounterSk(),
    indexable=True,
    description="zones",
    example={"collectionId": "c1", "seq": 1},
    attributes=(
        Attribute("name", AttributeKind.TEXT),
        Attribute("notes", AttributeKind.TEXT, Visibility.INTERNAL),
        Attribute("hidden", AttributeKind.BOOLEAN),
    ),
    hidden_flag="hidden",
)
STAY = Schema(
    name="stay",
    scope=(Field("collectionId"),),
    sk=FieldsSk((Field("day", Kind.DATE), Field("stayId", Kind.UUID))),
    indexable=True,
    sharding=Sharding(attribute="stayId", shards=4),
    attributes=(Attribute("day", AttributeKind.DATE),),
)
NOTE = Schema(name="note", scope=(Field("collectionId"), Field("noteId")), sk=PartsSk(), indexable=False)
TABLES = {"one": {"zone": "Table", "stay": "TableStays", "note": "Table"}, "two": {"zone": "Table"}}


def surface_of(*schemas: Schema, tables: Mapping[str, Mapping[str, str]] = TABLES) -> dict[str, Any]:
    return cv.surface(build_registry(schemas), tables)


BASE = surface_of(ZONE, STAY, NOTE)


def with_attributes(schema: Schema, *attributes: Attribute, hidden_flag: str | None = None) -> Schema:
    return replace(schema, attributes=attributes, hidden_flag=hidden_flag)


def zone_attribute(name: str, change: Callable[[Attribute], Attribute | None]) -> Schema:
    """ZONE with its attribute ``name`` changed (or removed: ``change`` returns None)."""
    kept = [change(a) if a.name == name else a for a in ZONE.attributes]
    return replace(ZONE, attributes=tuple(a for a in kept if a is not None))


MOVED = {"one": {"zone": "Table", "stay": "Table", "note": "Table"}, "two": {"zone": "Table"}}


def case(
    name: str,
    level: str,
    *lines: str,
    zone: Schema = ZONE,
    stay: Schema = STAY,
    note: Schema | None = NOTE,
    extra: tuple[Schema, ...] = (),
    tables: Mapping[str, Mapping[str, str]] = TABLES,
) -> Any:
    """A classification case: the registry after (BASE's schemas, changed or removed, plus ``extra``) and the
    tables after, the level and a fragment of each change line."""
    schemas = tuple(schema for schema in (zone, stay, note, *extra) if schema is not None)
    return pytest.param(schemas, tables, level, list(lines), id=name)


CASES = [
    case("nothing changes", "patch"),
    case(
        "descriptions and examples are no promise",
        "patch",
        zone=replace(ZONE, description="other", example={"collectionId": "x", "seq": 2}),
    ),
    case("a schema removed", "major", "schema 'note' removed", note=None),
    case("a schema added", "minor", "schema 'memo' added", extra=(replace(NOTE, name="memo"),)),
    case(
        "an attribute removed",
        "major",
        "schema 'zone': attribute 'name' removed",
        zone=zone_attribute("name", lambda a: None),
    ),
    case(
        "an attribute added",
        "minor",
        "schema 'zone': attribute 'season' added (keyword, public)",
        zone=replace(ZONE, attributes=(*ZONE.attributes, Attribute("season", AttributeKind.KEYWORD))),
    ),
    case(
        "an attribute retyped",
        "major",
        "schema 'zone': attribute 'name' changes kind from text to keyword",
        zone=zone_attribute("name", lambda a: replace(a, kind=AttributeKind.KEYWORD)),
    ),
    case(
        "an attribute made internal",
        "major",
        "schema 'zone': attribute 'name' made internal (readers lose it)",
        zone=zone_attribute("name", lambda a: replace(a, visibility=Visibility.INTERNAL)),
    ),
    case(
        "an attribute made public",
        "minor",
        "schema 'zone': attribute 'notes' made public",
        zone=zone_attribute("notes", lambda a: replace(a, visibility=Visibility.PUBLIC)),
    ),
    case(
        "a scope field added",
        "major",
        "schema 'zone': pk pattern changes from zone::<collectionId> to zone::<collectionId>::<region>",
        zone=replace(ZONE, scope=(Field("collectionId"), Field("region"))),
    ),
    case(
        "a scope field's kind",
        "major",
        "schema 'note': pk pattern changes",
        note=replace(NOTE, scope=(Field("collectionId"), Field("noteId", Kind.UUID))),
    ),
    case(
        "a number field's width",
        "major",
        "schema 'zone': sk changes from counter <seq:0000000000> to counter <seq:000000000000>",
        zone=replace(ZONE, sk=CounterSk(width=12)),
    ),
    case(
        "the sk strategy",
        "major",
        "schema 'zone': sk changes from counter",
        zone=replace(ZONE, sk=FieldsSk((Field("zoneId"),))),
    ),
    case(
        "the sk fields",
        "major",
        "schema 'stay': sk changes from fields <day:YYYY-MM-DD>::<stayId:uuid> to fields",
        stay=replace(STAY, sk=FieldsSk((Field("day", Kind.DATE), Field("stayId")))),
    ),
    case(
        "a fixed sk's value",
        "major",
        "schema 'note': sk changes from parts",
        note=replace(NOTE, sk=FixedSk("one")),
    ),
    case(
        "the shard count",
        "major",
        "schema 'stay': write sharding changes from sha256(stayId) mod 4 to sha256(stayId) mod 8",
        stay=replace(STAY, sharding=Sharding(attribute="stayId", shards=8)),
    ),
    case(
        "sharding dropped",
        "major",
        "schema 'stay': write sharding changes from sha256(stayId) mod 4 to none",
        stay=replace(STAY, sharding=None),
    ),
    case(
        "indexing turned off",
        "major",
        "schema 'stay': no longer indexable",
        "schema 'stay': attribute 'day' removed",
        stay=replace(STAY, indexable=False, attributes=()),
    ),
    case("indexing turned on", "minor", "schema 'note': now indexable", note=replace(NOTE, indexable=True)),
    case(
        "globalId turned on",
        "major",
        "schema 'stay': globalId lookup turned on",
        stay=replace(STAY, global_id=True),
    ),
    case(
        "a hidden flag dropped",
        "major",
        "schema 'zone': hidden_flag changes from 'hidden' to None",
        zone=with_attributes(ZONE, *ZONE.attributes),
    ),
    case(
        "free attributes refused",
        "major",
        "schema 'stay': no longer takes free attributes",
        stay=replace(STAY, free_attributes=False),
    ),
    case(
        "a schema moves table in an environment",
        "major",
        "environment 'one': schema 'stay' moves from table TableStays to Table",
        tables=MOVED,
    ),
    case(
        "an environment added needs no release",
        "patch",
        "environment 'three' added",
        tables={**TABLES, "three": {"zone": "Table"}},
    ),
    case(
        "a major change outweighs a minor one",
        "major",
        "schema 'memo' added",
        "schema 'zone': attribute 'name' removed",
        zone=zone_attribute("name", lambda a: None),
        extra=(replace(NOTE, name="memo"),),
    ),
]


@pytest.mark.parametrize(("schemas", "tables", "expected", "lines"), CASES)
def test_each_change_is_classified_by_what_it_breaks(
    schemas: tuple[Schema, ...], tables: Mapping[str, Mapping[str, str]], expected: str, lines: list[str]
) -> None:
    changes = cv.classify(BASE, surface_of(*schemas, tables=tables))
    assert cv.level(changes) == expected
    assert len(changes) == len(lines), changes
    for fragment in lines:
        assert any(fragment in change.text for change in changes), (fragment, changes)


def test_the_surface_is_json_and_deterministic() -> None:
    shuffled = surface_of(
        NOTE, STAY, ZONE, tables={"two": {"zone": "Table"}, "one": dict(reversed(TABLES["one"].items()))}
    )
    assert json.dumps(shuffled) == json.dumps(BASE)
    assert json.loads(json.dumps(BASE)) == BASE
    stay = BASE["schemas"]["stay"]
    assert stay["pk"]["sharding"] == {"attribute": "stayId", "shards": 4}
    assert stay["pk"]["scope"] == [{"name": "collectionId", "kind": "text", "width": 0}]
    assert [f["kind"] for f in stay["sk"]["fields"]] == ["date", "uuid"]
    assert BASE["schemas"]["zone"]["attributes"]["notes"] == {"kind": "text", "visibility": "internal"}
    assert (BASE["schemas"]["zone"]["hiddenFlag"], BASE["schemas"]["stay"]["globalId"]) == ("hidden", False)
    assert BASE["environments"]["one"]["stay"] == "TableStays"


def test_free_attributes_allowed_again_is_minor_and_a_record_from_before_the_flag_reads_as_free() -> None:
    strict = surface_of(ZONE, replace(STAY, free_attributes=False), NOTE)
    changes = cv.classify(strict, BASE)
    assert [(c.level, c.text) for c in changes] == [
        ("minor", "schema 'stay': takes free attributes (undeclared names are indexed dynamically)")
    ]
    before_the_flag = json.loads(json.dumps(BASE))
    for schema in before_the_flag["schemas"].values():
        del schema["freeAttributes"]
    assert cv.classify(before_the_flag, BASE) == []


@pytest.mark.parametrize(
    ("released", "needed", "lowest"),
    [((1, 4, 2), "major", (2, 0, 0)), ((1, 4, 2), "minor", (1, 5, 0)), ((1, 4, 2), "patch", (1, 4, 2))],
)
def test_the_lowest_version_a_change_may_ship_as(
    released: cv.Version, needed: cv.Level, lowest: cv.Version
) -> None:
    assert cv.required(released, needed) == lowest


RECORD = {"version": "1.2.0", "surface": BASE}
BREAKING = surface_of(zone_attribute("name", lambda a: None), STAY, NOTE)
ADDING = surface_of(ZONE, STAY, NOTE, replace(NOTE, name="memo"))


def test_a_breaking_change_with_a_minor_bump_fails_and_says_the_version_it_needs() -> None:
    verdict = cv.check(RECORD, "1.3.0", BREAKING)
    assert not verdict.passed and not verdict.releasable
    assert "  breaking: schema 'zone': attribute 'name' removed" in verdict.lines
    assert "needs a major release: version 1.3.0 → at least 2.0.0" in verdict.lines
    assert any("make client-release" in line for line in verdict.lines)


def test_a_retyped_attribute_without_a_bump_fails() -> None:
    retyped = surface_of(zone_attribute("name", lambda a: replace(a, kind=AttributeKind.DATE)), STAY, NOTE)
    verdict = cv.check(RECORD, "1.2.0", retyped)
    assert not verdict.passed
    assert "needs a major release: version 1.2.0 → at least 2.0.0" in verdict.lines


def test_a_minor_change_with_a_minor_bump_is_released_and_then_passes() -> None:
    verdict = cv.check(RECORD, "1.3.0", ADDING)
    assert not verdict.passed and verdict.releasable
    assert verdict.lines[-1].startswith("run `make client-release`")
    assert cv.check({"version": "1.3.0", "surface": ADDING}, "1.3.0", ADDING).passed
    assert cv.check(RECORD, "2.0.0", ADDING).releasable  # more than needed is allowed


def test_a_minor_change_without_a_bump_fails() -> None:
    verdict = cv.check(RECORD, "1.2.0", ADDING)
    assert not verdict.passed
    assert "needs a minor release: version 1.2.0 → at least 1.3.0" in verdict.lines


def test_a_version_below_the_release_fails() -> None:
    verdict = cv.check(RECORD, "1.1.9", BASE)
    assert not verdict.passed and not verdict.releasable
    assert "below the last release's 1.2.0" in verdict.lines[0]


def test_an_unchanged_registry_passes_and_a_bump_alone_must_be_released() -> None:
    assert cv.check(RECORD, "1.2.0", BASE).passed
    bumped = cv.check(RECORD, "1.2.1", BASE)
    assert not bumped.passed and bumped.releasable and "1.2.1 is not recorded" in bumped.lines[0]


def test_a_version_that_is_no_version_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"'1\.3' is not a version MAJOR\.MINOR\.PATCH"):
        cv.check(RECORD, "1.3", BASE)


def test_the_first_release_and_the_next_write_the_record_and_the_changelog(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record, changelog = tmp_path / "client" / "registry.json", tmp_path / "client" / "CHANGELOG.md"
    assert cv.execute(record, changelog, "1.0.0", BASE) == 1
    assert "no refdata-client release is recorded yet" in capsys.readouterr().out
    assert cv.execute(record, changelog, "1.0.0", BASE, release=True) == 0
    assert json.loads(record.read_text()) == {"version": "1.0.0", "surface": BASE}
    assert changelog.read_text().endswith("## 1.0.0\n\nFirst release.\n")
    assert cv.execute(record, changelog, "1.0.0", BASE) == 0

    assert cv.execute(record, changelog, "1.0.0", BREAKING, release=True) == 1  # no bump: nothing written
    assert cv.execute(record, changelog, "2.0.0", BREAKING, release=True, date="2030-01-02") == 0
    assert json.loads(record.read_text()) == {"version": "2.0.0", "surface": BREAKING}
    text = changelog.read_text()
    assert text.startswith(cv.CHANGELOG_HEADER)
    assert (
        "## 2.0.0 (2030-01-02)\n\n### Breaking\n\n- schema 'zone': attribute 'name' removed\n\n## 1.0.0\n\nFirst release.\n"
        in text
    )
    assert cv.execute(record, changelog, "2.0.0", BREAKING) == 0
    assert cv.execute(record, changelog, "2.0.0", BREAKING, release=True) == 0  # recorded already: unchanged
    assert changelog.read_text() == text
    out = capsys.readouterr().out
    assert f"wrote {record}" in out and "release 2.0.0 is recorded already" in out


def test_a_changelog_entry_groups_its_changes_by_the_release_they_need() -> None:
    changes = cv.classify(
        BASE,
        surface_of(
            zone_attribute("name", lambda a: None),
            STAY,
            replace(NOTE, indexable=True),
            tables={**TABLES, "three": {}},
        ),
    )
    assert cv.entry("3.0.0", changes) == (
        "## 3.0.0\n\n"
        "### Breaking\n\n- schema 'zone': attribute 'name' removed\n\n"
        "### Added\n\n- schema 'note': now indexable (searchable)\n\n"
        "### Other\n\n- environment 'three' added\n"
    )
    assert cv.entry("3.0.1", []) == "## 3.0.1\n\nNo change to what the registry promises.\n"


def test_the_routing_names_the_table_config_puts_each_schema_in() -> None:
    for name, config in environments().items():
        held = cv.routing({name: config})[name]
        for plan in config.source_tables:
            assert {schema for schema, table in held.items() if table == plan.construct_id} == set(
                plan.schemas
            )


def test_the_committed_release_records_this_tree() -> None:
    """A registry (or table) change fails here until it is released: the check's message says what to bump."""
    verdict = cv.check(cv.load_record(cv.RECORD), __version__, cv.current_surface())
    assert verdict.passed, "\n".join(
        [
            *verdict.lines,
            "(a change to what lambdas/refdata/registry.py or the environments' tables promise is a refdata-client "
            "release: bump __version__ as above, then run `make client-release` and commit the three files)",
        ]
    )
