"""The smoke run's cleanup on the real engine: a search sees a write only after a refresh, so the cleanup refreshes
before it looks for its canary's documents and before it checks they are gone."""

from __future__ import annotations

import json
from urllib.parse import quote

import boto3
from ops_harness import REGION, TABLE, ZONE, OpsEnv

from ops import smoke


def test_a_canary_synced_a_moment_ago_is_deleted_and_reported_gone(ops_env: OpsEnv) -> None:
    ops_env.put_and_sync(ZONE, "canary", 900, name={"S": "a smoke canary"})
    # A second change, not yet searchable: a search still finds the first, whose sequence number no longer holds.
    update = json.dumps({"doc": {"name": "a smoke canary, version 2"}}).encode()
    changed = ops_env.transport.request(
        "POST", f"geozone-v1/_update/{quote(f'{ZONE}#canary', safe='')}", update
    )
    assert changed.status == 200, changed.body
    tools = smoke.Tools(table=boto3.resource("dynamodb", region_name=REGION).Table, lambda_=None, reader=None)  # type: ignore[arg-type]

    left = smoke.cleanup(ops_env.env(), tools, "geozone", TABLE, ZONE, "canary")

    assert left == []
    assert f"{ZONE}#canary" not in ops_env.documents("geozone-v1")
