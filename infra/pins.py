"""A new source table's pinned logical ids, written by a command: `make pins` (``python -m infra.pins``).

tests/infra/test_shipped_config.py pins the logical id of every stateful resource, and tests/infra/test_logical_ids.py
holds every environment to them. A source table added to config (README, "Add a source table") needs pins of its
own in ``PINNED_ADDITIONAL_TABLES``: its table, and the backup vault its settings create once they turn backups on.
This command builds each environment's stateful stack in-process (no CDK CLI, no synth to disk), with every
additional table's backups turned on so that the vault a later settings change creates is pinned from the start,
reads the logical ids of the stateful resources under each additional table's construct, and adds those not
pinned yet to the pins module in place (``wrote ...`` or ``... unchanged``).

It never changes or drops a pin. When a table already pinned has other ids now (its construct moved or renamed a
child), CloudFormation would replace that resource with an empty one: the command refuses, names each, and writes
nothing, and the pin test keeps failing until the change is undone (or reviewed as a migration).
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from infra.files import write
from infra.validation import ROOT

if TYPE_CHECKING:
    from infra.config import EnvironmentConfig

PINS = ROOT / "tests" / "infra" / "test_shipped_config.py"
NAME = "PINNED_ADDITIONAL_TABLES"
# The pins of what every environment has and of the main table's vault: their resource types are what the pin test
# calls stateful.
TYPED = ("PINNED", "PINNED_WITH_BACKUP")
VAULT = "Vault"  # the child of a table's construct that a backed-up table's vault lives under
LINE_LENGTH = 110  # ruff's (pyproject.toml): what the module is formatted to

# Construct id of a table -> (logical id -> type of its resources outside the vault, the same of its vault's).
Pins = dict[str, tuple[dict[str, str], dict[str, str]]]


class Refused(Exception):
    """Writing the pins would change or drop a pin; the message names each."""


def _assignments(tree: ast.Module) -> dict[str, ast.expr]:
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            found[node.targets[0].id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            found[node.target.id] = node.value
    return found


def read(text: str) -> tuple[set[str], Pins]:
    """The stateful resource types and the additional tables' pins of the pins module ``text``."""
    values = _assignments(ast.parse(text))
    types = {kind for name in TYPED for kind in ast.literal_eval(values[name]).values()}
    pins: Pins = ast.literal_eval(values[NAME])
    return types | {kind for parts in pins.values() for part in parts for kind in part.values()}, pins


def _quoted(ids: dict[str, str]) -> list[str]:
    return [f"{json.dumps(logical_id)}: {json.dumps(kind)}" for logical_id, kind in ids.items()]


def _dict(ids: dict[str, str], indent: int) -> str:
    """``ids`` as ruff formats a dict whose opening brace is at column ``indent`` (followed by a comma)."""
    one_line = "{" + ", ".join(_quoted(ids)) + "}"
    if indent + len(one_line) + 1 <= LINE_LENGTH:
        return one_line
    return "{\n" + "".join(f"{' ' * (indent + 4)}{item},\n" for item in _quoted(ids)) + " " * indent + "}"


def _entry(construct_id: str, table: dict[str, str], vault: dict[str, str]) -> str:
    return (
        f"    {json.dumps(construct_id)}: (\n        {_dict(table, 8)},\n        {_dict(vault, 8)},\n    ),\n"
    )


def _described(ids: dict[str, str]) -> str:
    return ", ".join(f"{logical_id} ({kind})" for logical_id, kind in ids.items()) or "nothing"


def update(text: str, found: Pins) -> tuple[str, list[str]]:
    """The pins module ``text`` with every id of ``found`` pinned, and one line per table whose pins it adds.

    Adds a table not pinned yet, and an id a pinned table lacks (its vault, when it was pinned without one); raises
    ``Refused`` when a pinned id is not among the ids ``found`` has for its table (a changed id, or a resource gone).
    """
    source = text.encode()
    line_starts = [0]
    for line in source.splitlines(keepends=True):
        line_starts.append(line_starts[-1] + len(line))

    def offset(line: int, column: int) -> int:  # ast positions: 1-based lines, UTF-8 byte columns
        return line_starts[line - 1] + column

    node = _assignments(ast.parse(text)).get(NAME)
    if not isinstance(node, ast.Dict):
        raise Refused(f"no `{NAME} = {{...}}` dict in the pins module")
    pinned: Pins = ast.literal_eval(node)
    entries = {ast.literal_eval(key): value for key, value in zip(node.keys, node.values, strict=True) if key}
    refusals, added, edits, new = [], [], [], []  # edits: (start, end, replacement) byte ranges
    for construct_id, parts in found.items():
        if construct_id not in pinned:
            new.append(_entry(construct_id, *parts))
            added.append(f"pinned {construct_id}: {_described(parts[0] | parts[1])}")
            continue
        entry = entries[construct_id]
        for index, (have, now) in enumerate(zip(pinned[construct_id], parts, strict=True)):
            changed = {i: kind for i, kind in have.items() if now.get(i) != kind}
            if changed:
                refusals.append(
                    f"{construct_id}: pinned {_described(changed)} is not what the stack has now "
                    f"({_described({i: k for i, k in now.items() if i not in have})} instead)"
                )
                continue
            more = {i: kind for i, kind in now.items() if i not in have}
            if more:
                assert isinstance(entry, ast.Tuple) and entry.lineno != entry.end_lineno
                part = entry.elts[index]
                assert part.end_lineno is not None and part.end_col_offset is not None
                edits.append(
                    (
                        offset(part.lineno, part.col_offset),
                        offset(part.end_lineno, part.end_col_offset),
                        _dict(have | more, part.col_offset).encode(),
                    )
                )
                added.append(f"pinned {construct_id}: {_described(more)} (beside its pins)")
    if refusals:
        raise Refused(
            "refusing to change pinned logical ids: CloudFormation would replace each of these resources with an "
            "empty one. Undo the change that moved them (a construct id is the resource's identity), or review it "
            "as a migration; never edit a pin to make the pin test pass.\n"
            + "\n".join(f"  {line}" for line in refusals)
        )
    if new:
        assert node.end_lineno is not None and node.end_col_offset is not None
        close = offset(node.end_lineno, node.end_col_offset) - 1  # the dict's closing brace
        if not node.keys:
            edits.append(
                (offset(node.lineno, node.col_offset), close + 1, ("{\n" + "".join(new) + "}").encode())
            )
        elif source[line_starts[node.end_lineno - 1] : close].strip():
            raise Refused(f"`{NAME}`: its closing brace is not on a line of its own (run `make fmt` first)")
        else:
            start = line_starts[node.end_lineno - 1]
            edits.append((start, start, "".join(new).encode()))
    for start, end, replacement in sorted(edits, reverse=True):
        source = source[:start] + replacement + source[end:]
    return source.decode(), added


def discover(configs: Iterable[EnvironmentConfig], stateful_types: set[str]) -> Pins:
    """Each additional table's stateful resources (of ``stateful_types``) in the stateful stacks of ``configs``, with
    its backups turned on: construct id -> (logical id -> type outside its vault, the same of its vault)."""
    from aws_cdk import App, CfnResource, Environment, Stage

    from infra.app_builder import committed_context
    from infra.stacks.stateful import StatefulStack

    app = App(context=committed_context())
    found: Pins = {}
    for config in configs:
        backed_up = tuple(
            replace(table, settings=replace(table.settings, backup_enabled=True))
            for table in config.additional_tables
        )
        stage = Stage(app, config.name, env=Environment(account=config.account, region=config.region))
        stack = StatefulStack(stage, "Stateful", config=replace(config, additional_tables=backed_up))
        for table in backed_up:
            construct = stack.node.find_child(table.construct_id)
            vault = construct.node.try_find_child(VAULT)
            parts: tuple[dict[str, str], dict[str, str]] = ({}, {})
            for child in construct.node.find_all():
                if isinstance(child, CfnResource) and child.cfn_resource_type in stateful_types:
                    in_vault = vault is not None and f"{child.node.path}/".startswith(f"{vault.node.path}/")
                    parts[in_vault][stack.resolve(child.logical_id)] = child.cfn_resource_type
            if found.setdefault(table.construct_id, parts) != parts:
                raise Refused(
                    f"{table.construct_id} has other logical ids in {config.name} than in another environment: "
                    f"{parts} against {found[table.construct_id]}"
                )
    return found


def write_pins(path: Path, found: Pins) -> None:
    """Pin ``found`` in the pins module at ``path``: says what it added, then ``wrote`` or ``unchanged``."""
    text, added = update(path.read_text(), found)
    for line in added:
        print(line)
    write(path, text)


def build_parser() -> argparse.ArgumentParser:
    return argparse.ArgumentParser(
        prog="python -m infra.pins",
        description="make pins: pin the logical ids of new source tables in tests/infra/test_shipped_config.py "
        "(adds pins only; a pinned id that changed is refused and named)",
    )


def main(argv: list[str]) -> int:
    build_parser().parse_args(argv)
    from infra.environments import environments

    stateful_types, _ = read(PINS.read_text())
    try:
        write_pins(PINS, discover(environments().values(), stateful_types))
    except Refused as refused:
        print(refused, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    from infra.validation import run

    run(lambda: main(sys.argv[1:]))
