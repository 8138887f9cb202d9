"""The README's routine-change recipes, as a person applies them: the hand edits of each, nothing else.

Each function edits a scratch copy (tests/recipes/scratch.py) the way README, "Routine changes", says, and returns
what it added, so the suite run there can be asked whether the new thing got the assertions its siblings get.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from infra.config import instance_type_problem, opensearch_instance_types, opensearch_warm_instance_types
from tests.recipes.scratch import Scratch

ENVIRONMENTS = "infra/environments.py"
REGISTRY = "lambdas/refdata/registry.py"
CONTEXT = "cdk.context.json"
PINS = "tests/infra/test_shipped_config.py"
VERSION = "lambdas/refdata/__init__.py"
RELEASE_FILES = {VERSION, "release/client/registry.json", "release/client/CHANGELOG.md"}


@dataclass(frozen=True)
class Added:
    """What a recipe added and an existing sibling of the same kind: ``environment``, ``schema``, ``table`` (as
    ``<env>/<construct id>``) or ``role`` (``<env>/<name>``)."""

    kind: str
    name: str
    sibling: str


def add_zones(scratch: Scratch, account: str, region: str) -> None:
    """The committed availability zones of a new account or region (README: as `aws ec2 describe-availability-zones`
    lists them, or a `npx cdk synth` with lookups writes them)."""
    path = scratch.root / CONTEXT
    context = json.loads(path.read_text())
    context[f"availability-zones:account={account}:region={region}"] = [
        f"{region}a",
        f"{region}b",
        f"{region}d",
    ]
    path.write_text(json.dumps(context, indent=2) + "\n")


def environment_block(text: str, name: str) -> str:
    """The ``EnvironmentConfig(...)`` call of environment ``name`` in infra/environments.py."""
    start = text.index(f'        EnvironmentConfig(\n            name="{name}",')
    end = text.index("\n        ),\n", start) + len("\n        ),\n")
    return text[start:end]


def add_environment(scratch: Scratch) -> list[Added]:
    """Add an environment: `staging`, a copy of `test` in its own account, delivered between test and prod."""
    text = (scratch.root / ENVIRONMENTS).read_text()
    block = environment_block(text, "test")
    staging = (
        block.replace('name="test"', 'name="staging"')
        .replace('account["test"]', 'account["staging"]')
        .replace('"refdata-test"', '"refdata-staging"')
        .replace('public_search(account["staging"], "test")', 'public_search(account["staging"], "staging")')
        .replace('cidr="10.41.0.0/16"', 'cidr="10.43.0.0/16"')
    )
    scratch.edit(ENVIRONMENTS, block, block + staging)
    scratch.edit(
        ENVIRONMENTS, '"prod": "333333333333"}', '"prod": "333333333333", "staging": "444444444444"}'
    )
    add_zones(scratch, "444444444444", "ca-central-1")
    return [Added("environment", "staging", "test")]


FACILITY = """    Schema(
        name="facility",
        scope=(Field("collectionId"),),
        sk=FieldsSk((Field("facilityId"),)),
        indexable=True,
        description="Facilities of a collection, by natural id.",
        example={"collectionId": "bcparks_1", "facilityId": "f1"},
        # No internal attribute: the rules over every schema hold for one that hides nothing from readers.
        attributes=(Attribute("name", AttributeKind.TEXT), Attribute("openedOn", AttributeKind.DATE)),
    ),
"""


def add_schema(scratch: Scratch) -> list[Added]:
    """Add an indexable schema: one ``Schema(...)`` entry in the registry."""
    thread = '    Schema(\n        name="thread",'
    scratch.edit(REGISTRY, thread, FACILITY + thread)
    return [Added("schema", "facility", "productDate")]


def change_schema(scratch: Scratch) -> list[Added]:
    """Change a schema: declare a new attribute of geozone (a mapping change: the next deploy makes a new index
    version to reindex)."""
    old = '            Attribute("description", AttributeKind.TEXT),\n            Attribute("adminNotes", AttributeKind.TEXT, Visibility.INTERNAL, "staff notes, never published"),\n            Attribute("hidden", AttributeKind.BOOLEAN, description="true: not shown to read roles"),\n        ),\n        hidden_flag="hidden",\n    ),\n    Schema(\n        name="productDate",'
    scratch.edit(
        REGISTRY,
        old,
        old.replace(
            "        ),\n        hidden_flag",
            '            Attribute("season", AttributeKind.KEYWORD),\n        ),\n        hidden_flag',
            1,
        ),
    )
    return [Added("schema", "geozone", "productDate")]


def pin(scratch: Scratch) -> tuple[set[str], str]:
    """`make pins` after a table's recipe (README: after review, it pins the new table's logical ids): the files it
    changed (committed as a step of their own) and what it said."""
    done = scratch.make("pins")
    return scratch.changed(), done.stdout


def add_table(scratch: Scratch) -> list[Added]:
    """Add a source table: dev's product dates get a table of their own (dev's data is disposable, so the
    migration the guard reports is acknowledged rather than carried out). Its pins are `make pins`'s, not a hand
    edit (``pin``)."""
    scratch.edit(
        ENVIRONMENTS,
        'additional_tables=(SourceTable(name="Bookings", schemas=("booking",)),),',
        'additional_tables=(\n                SourceTable(name="Bookings", schemas=("booking",)),\n'
        '                SourceTable(name="Products", schemas=("productDate",)),\n            ),',
    )
    return [Added("table", "dev/TableProducts", "dev/TableBookings")]


def move_schema(scratch: Scratch) -> list[Added]:
    """Move a schema that holds items to its own table: prod's bookings (backed up, as production requires; dev's
    table of the same name is pinned already, so `make pins` leaves the pins unchanged)."""
    text = (scratch.root / ENVIRONMENTS).read_text()
    block = environment_block(text, "prod")
    moved = block.replace(
        "            production=True,\n",
        "            production=True,\n            additional_tables=(\n"
        '                SourceTable(\n                    name="Bookings",\n                    schemas=("booking",),\n'
        "                    settings=TableSettings(backup_enabled=True, backup_retention_days=35),\n"
        "                ),\n            ),\n",
    )
    scratch.edit(ENVIRONMENTS, block, moved)
    return [Added("table", "prod/TableBookings", "prod/Table")]


def add_read_role(scratch: Scratch) -> list[Added]:
    """Add a read role: a partner application reads prod's zones."""
    scratch.edit(
        ENVIRONMENTS,
        'read_roles=(public_search(account["prod"], "prod"),),',
        'read_roles=(\n                    public_search(account["prod"], "prod"),\n'
        '                    ReadRole(\n                        name="partner_search",\n'
        '                        schemas=("geozone",),\n'
        "                        iam_role_arns=(f\"arn:aws:iam::{account['prod']}:role/partner-app\",),\n"
        "                    ),\n                ),",
    )
    return [Added("role", "prod/partner_search", "prod/public_search")]


def change_account_and_region(scratch: Scratch) -> list[Added]:
    """Change an environment's account and region: test moves to its own account in ca-west-1, on instance types
    offered there (config refuses one that is not, naming the nearest that is)."""
    text = (scratch.root / ENVIRONMENTS).read_text()
    block = environment_block(text, "test")
    moved = block.replace("region=REGION,", 'region="ca-west-1",')
    offered = sorted(opensearch_instance_types()["ca-west-1"] - opensearch_warm_instance_types())
    for written in sorted(set(re.findall(r'_node_type="([^"]+)"', moved))):
        if instance_type_problem(written, "ca-west-1") is not None:
            nearest = difflib.get_close_matches(written, offered, n=1, cutoff=0)[0]
            moved = moved.replace(f'"{written}"', f'"{nearest}"')
    scratch.edit(ENVIRONMENTS, block, moved)
    scratch.edit(ENVIRONMENTS, '"test": "222222222222"', '"test": "555555555555"')
    add_zones(scratch, "555555555555", "ca-west-1")
    return [Added("environment", "test", "dev")]


def blocked(report: str, kind: str) -> list[str]:
    """The resources of the guard's BLOCKED findings of ``kind`` (not those a reviewed override allows already)."""
    section = report.split("\nBLOCKED (", 1)[1].split("\n\n", 1)[0] if "\nBLOCKED (" in report else ""
    return [line.split(f" ({kind}): ")[0].strip() for line in section.splitlines() if f" ({kind}): " in line]


def release_client(scratch: Scratch) -> str | None:
    """The refdata-client release a registry or table change needs (README: bump ``__version__`` as the check says,
    then `make client-release`): the version released, or None when the check passes as the tree is."""
    done = scratch.run([".venv/bin/python", "-m", "infra.client_version", "--check"], check=False)
    if done.returncode == 0:
        return None
    needed = re.search(r"→ at least (\d+\.\d+\.\d+)", done.stdout)
    current = re.search(r'^__version__ = "([^"]+)"$', (scratch.root / VERSION).read_text(), re.MULTILINE)
    assert needed and current, (
        f"the check failed without naming the version needed:\n{done.stdout}{done.stderr}"
    )
    scratch.edit(VERSION, current.group(0), f'__version__ = "{needed.group(1)}"')
    scratch.make("client-release")
    return needed.group(1)


def _rendered(value: object) -> str:
    """A JSON output as `describe-stacks` would show it, each table reference standing for its table's name."""
    if isinstance(value, str):
        return value
    assert isinstance(value, dict) and "Fn::Join" in value, value
    separator, parts = value["Fn::Join"]
    return str(separator).join(part if isinstance(part, str) else str(part["Ref"]) for part in parts)


def older_client_writes_on(root: Path, added: list[Added]) -> str | None:
    """The refdata-client of the tree before the change (the one this process imports: the release before the
    recipe's) against each environment's new `SchemaTables` output (`root`'s synthesized assembly): it keeps every
    schema it knows, sets the added ones apart, and refuses a write to one of them saying to upgrade, by its version.
    None when the change adds no schema."""
    from refdata import __version__
    from refdata.registry import REGISTRY as KNOWN
    from refdata.writer import ClientTooOldError, Tables

    new = {thing.name for thing in added if thing.kind == "schema" and thing.name not in KNOWN}
    if not new:
        return None
    outputs = [
        json.loads(template.read_text()).get("Outputs", {}).get("SchemaTables")
        for template in sorted(root.glob("cdk.out/assembly-*/*.template.json"))
    ]
    found = [_rendered(output["Value"]) for output in outputs if output]
    assert found, f"no SchemaTables output under {root / 'cdk.out'}"
    for text in found:
        tables = Tables.parse(text)
        assert tables.newer == new and set(tables.holders) == set(json.loads(text)) - new, text
        for name in new:
            try:
                tables.table_for(name)
            except ClientTooOldError as error:
                assert "upgrade refdata-client" in str(error) and __version__ in str(error), error
            else:
                raise AssertionError(f"refdata-client {__version__} gave {name!r} a table")
    return (
        f"  refdata-client {__version__} (before the change) on {len(found)} new SchemaTables outputs: keeps the "
        f"schemas it knows; a write to {', '.join(sorted(new))} says to upgrade"
    )


# Each recipe's section in README, "Routine changes" (a `###` heading), and the one sentence there that counts its
# files:
# `Files: <n> by hand[, +<n> by `make pins`][, +<n> after review][, +<n> for the release]`.
TITLES = {
    "add an environment": "Add an environment",
    "add a schema": "Add a schema",
    "change a schema": "Change a schema",
    "add a source table": "Add a source table",
    "move a schema to its own table": "Move a schema that holds items to its own table",
    "add a read role": "Add a read role",
    "change an account and a region": "Change an environment's account or region",
}
FILES = re.compile(
    r"Files: (\d+) by hand((?:, \+\d+ (?:by `make pins`|after review|for the release)[^,.]*)*)"
)
EXTRA = re.compile(r"\+(\d+) (by `make pins`|after review|for the release)")


def stated_files(readme: str, recipe: str) -> dict[str, int]:
    """How many files README says `recipe` takes: by hand, by `make pins`, after review, for the release."""
    body = readme.index(f"\n### {TITLES[recipe]}\n") + len(f"\n### {TITLES[recipe]}\n")
    following = re.search(r"^#{1,6} ", readme[body:], re.MULTILINE)
    section = readme[body : body + following.start()] if following else readme[body:]
    (found,) = FILES.findall(" ".join(section.split()))
    counts = {"by hand": int(found[0]), "by `make pins`": 0, "after review": 0, "for the release": 0}
    counts.update({what: int(number) for number, what in EXTRA.findall(found[1])})
    return counts


RECIPES = {
    "add an environment": add_environment,
    "add a schema": add_schema,
    "change a schema": change_schema,
    "add a source table": add_table,
    "move a schema to its own table": move_schema,
    "add a read role": add_read_role,
    "change an account and a region": change_account_and_region,
}


def collected(scratch: Scratch) -> list[str]:
    """The ids of every test ``make test`` collects in the copy."""
    done = scratch.run([".venv/bin/python", "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"])
    return [line for line in done.stdout.splitlines() if "::" in line]


def count_tests(ids: list[str], name: str) -> int:
    """How many collected tests are parametrized with ``name`` (an environment's or a schema's)."""
    token = re.compile(rf"(^|[-\[]){re.escape(name)}($|[-\]])")
    return sum(1 for test in ids if "[" in test and token.search(test[test.index("[") :]))
