"""`make pins` (infra/pins.py): pins a new source table's logical ids in the pins module, in place, and never changes
or drops a pin (a changed id is what the pin test, tests/infra/test_logical_ids.py, exists to catch)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from aws_cdk import App
from aws_cdk.assertions import Template
from refdata.registry import REGISTRY

from infra import pins
from infra.app_builder import build_environment, committed_context
from infra.config import EnvironmentConfig, SourceTable, TableSettings, data_schemas
from infra.pins import PINS, Refused, discover, read, update, write_pins
from tests.infra.conftest import base_config

TABLE, VAULT = "AWS::DynamoDB::Table", "AWS::Backup::BackupVault"
# A table no configuration has, as the command finds it: its table and the vault its backups create.
PLANTED = {"TablePlanted": ({"TablePlanted0123ABCD": TABLE}, {"TablePlantedVault4567CDEF": VAULT})}


def pinned_now() -> pins.Pins:
    return read(PINS.read_text())[1]


def ruff_formatted(path: Path) -> subprocess.CompletedProcess[str]:
    ruff, config = Path(sys.executable).parent / "ruff", PINS.parents[2] / "pyproject.toml"
    command = [str(ruff), "format", "--check", "--diff", "--config", str(config), str(path)]
    return subprocess.run(command, capture_output=True, text=True)


def test_a_new_table_gets_exactly_its_ids_and_a_second_run_says_unchanged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = tmp_path / "pins.py"
    module.write_text(PINS.read_text())
    found = {**pinned_now(), **PLANTED}  # every pinned table as it is, and a new one

    write_pins(module, found)
    said = capsys.readouterr().out
    assert read(module.read_text())[1] == pinned_now() | PLANTED
    assert said.splitlines() == [
        "pinned TablePlanted: TablePlanted0123ABCD (AWS::DynamoDB::Table), TablePlantedVault4567CDEF "
        "(AWS::Backup::BackupVault)",
        f"wrote {module}",
    ]
    assert ruff_formatted(module).returncode == 0, ruff_formatted(module).stdout

    write_pins(module, found)
    assert capsys.readouterr().out.splitlines() == [f"{module} unchanged"]


def test_only_added_lines_differ_and_the_rest_of_the_module_is_byte_for_byte_the_same() -> None:
    before = PINS.read_text()
    after, _ = update(before, PLANTED)
    removed = [line for line in before.splitlines() if line not in after.splitlines()]
    new = [line for line in after.splitlines() if line not in before.splitlines()]
    assert removed == []
    assert new == [
        '    "TablePlanted": (',
        '        {"TablePlanted0123ABCD": "AWS::DynamoDB::Table"},',
        '        {"TablePlantedVault4567CDEF": "AWS::Backup::BackupVault"},',
    ]


def test_a_pinned_table_whose_id_changed_is_refused_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = tmp_path / "pins.py"
    module.write_text(update(PINS.read_text(), PLANTED)[0])
    before = module.read_text()
    moved = {"TablePlanted": ({"TablePlantedFFFF0000": TABLE}, PLANTED["TablePlanted"][1])}

    with pytest.raises(Refused) as refused:
        write_pins(module, moved)
    assert module.read_text() == before
    assert (
        "TablePlanted: pinned TablePlanted0123ABCD (AWS::DynamoDB::Table) is not what the stack has now"
        in str(refused.value)
    )
    assert "TablePlantedFFFF0000 (AWS::DynamoDB::Table) instead" in str(refused.value)
    assert capsys.readouterr().out == ""

    # A pinned resource the stack no longer has at all (its vault gone) is refused too: dropping it is not the
    # command's to do.
    with pytest.raises(Refused, match=r"pinned TablePlantedVault4567CDEF \(AWS::Backup::BackupVault\)"):
        update(before, {"TablePlanted": (PLANTED["TablePlanted"][0], {})})


def test_a_table_pinned_without_its_vault_gets_the_vault_beside_its_pin() -> None:
    table = PLANTED["TablePlanted"][0]
    without = update(PINS.read_text(), {"TablePlanted": (table, {})})[0]
    with_vault, added = update(without, PLANTED)
    assert read(with_vault)[1] == pinned_now() | PLANTED
    assert added == [
        "pinned TablePlanted: TablePlantedVault4567CDEF (AWS::Backup::BackupVault) (beside its pins)"
    ]
    assert with_vault == update(PINS.read_text(), PLANTED)[0]


def test_an_empty_pins_dict_and_a_long_dict_are_written_as_ruff_formats_them(tmp_path: Path) -> None:
    module = tmp_path / "pins.py"
    module.write_text(
        'PINNED = {"Table7ABB320E": "AWS::DynamoDB::Table"}\nPINNED_WITH_BACKUP = {}\nPINNED_ADDITIONAL_TABLES = {}\n'
    )
    long = {f"TableAVeryLongNameForATable{n}0123ABCD": TABLE for n in range(3)}
    found = {"TableAVeryLongNameForATable": (long, {})}
    text, _ = update(module.read_text(), found)
    module.write_text(text)
    assert read(text)[1] == found
    assert ruff_formatted(module).returncode == 0, ruff_formatted(module).stdout


def planted_config(*, backup: bool) -> EnvironmentConfig:
    """``base_config()`` with a source table ``Planted``: claiming an indexable schema the main table can spare, or,
    where it has only one left, the schemas of the first additional table, which it replaces."""
    base = base_config()
    claimed = {schema for table in base.additional_tables for schema in table.schemas}
    free = [schema for schema in data_schemas() if schema not in claimed and REGISTRY[schema].indexable]
    settings = TableSettings(backup_enabled=backup)
    if len(free) >= 2:
        tables = (*base.additional_tables, SourceTable(name="Planted", schemas=(free[0],), settings=settings))
    else:
        first, *rest = base.additional_tables
        tables = (replace(first, name="Planted", settings=settings), *rest)
    return replace(base, additional_tables=tables)


def test_the_command_finds_a_planted_tables_ids_as_a_synth_with_its_backups_on_has_them() -> None:
    """Over whatever config holds: a table added to the first environment (backups off, as a new table often is)
    is found with the ids its table and, once its backups are on, its vault get in the synthesized template."""
    stateful_types = read(PINS.read_text())[0]
    found = discover([planted_config(backup=False)], stateful_types)

    stage = build_environment(App(context=committed_context()), planted_config(backup=True))
    resources = Template.from_stack(stage.node.find_child("Stateful")).to_json()["Resources"]  # type: ignore[arg-type]
    table, vault = found["TablePlanted"]
    assert table | vault == {
        logical_id: resource["Type"]
        for logical_id, resource in resources.items()
        if logical_id.startswith("TablePlanted") and resource["Type"] in stateful_types
    }
    assert list(table.values()) == [TABLE] and list(vault.values()) == [VAULT]
    assert next(iter(vault)).startswith("TablePlantedVault")
    # What the pins module holds already is found as it is pinned: the command adds the planted table alone.
    text, added = update(PINS.read_text(), found)
    assert [line.split(":")[0] for line in added] == ["pinned TablePlanted"]
    assert read(text)[1] == pinned_now() | {"TablePlanted": (table, vault)}
