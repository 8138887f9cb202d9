"""The "add a schema" recipe's check that a client one release behind writes on (`older_client_writes_on`), run
fast on this tree's synthesized outputs with a schema the platform added and this client does not know."""

from __future__ import annotations

import json
from pathlib import Path

from tests.recipes.recipes import Added, older_client_writes_on
from tests.support.cfn import synthesized


def platform_one_schema_ahead(root: Path, added: str) -> None:
    """Every environment's stateful template as the next release synthesizes it: `SchemaTables` names `added`."""
    for environment, stacks in synthesized().items():
        template = json.loads(json.dumps(stacks["Stateful"]))
        _, parts = template["Outputs"]["SchemaTables"]["Value"]["Fn::Join"]
        assert parts[0].startswith("{")
        parts[0] = f'{{"{added}":"{environment}-added-table",' + parts[0][1:]
        target = root / "cdk.out" / f"assembly-{environment}" / "stateful.template.json"
        target.parent.mkdir(parents=True)
        target.write_text(json.dumps(template))


def test_a_client_one_release_behind_keeps_its_schemas_and_says_to_upgrade_for_the_added_one(tmp_path: Path):
    platform_one_schema_ahead(tmp_path, "addedLater")
    said = older_client_writes_on(tmp_path, [Added("schema", "addedLater", "geozone")])
    assert said is not None and "a write to addedLater says to upgrade" in said
    assert older_client_writes_on(tmp_path, [Added("schema", "geozone", "productDate")]) is None
