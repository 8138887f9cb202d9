"""The heartbeat end to end, for every configured source table: the item each table's schedule puts (the
synthesized input's item, `infra.constructs.heartbeat.heartbeat_item`) is written to moto, read back through
moto's DynamoDB Streams API, handled as its event source mapping delivers it, indexed on the loopback server, and
the handler's EMF line carries `HeartbeatLagSeconds` with the environment and the table; a read role never sees
the heartbeat's document, whichever index name it asks."""

from __future__ import annotations

import json
import time
from urllib.parse import quote

import pytest
from refdata.reserved import HEARTBEAT_AT
from sync_harness import ADMIN_KEY, READ_ROLES, READER_KEY, Pipeline, signed_as

from infra.constructs.heartbeat import SCHEDULED_TIME, heartbeat_item
from infra.environments import environments

pytestmark = pytest.mark.integration

CASES = [
    (config.name, plan.construct_id, plan.indexable_schemas[0])
    for config in environments().values()
    for plan in config.source_tables
]


@pytest.mark.parametrize(("environment", "table", "schema"), CASES)
def test_a_heartbeat_through_the_stream_emits_its_lag_with_the_environment_and_table_and_stays_hidden(
    fgac_pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch, environment: str, table: str, schema: str
) -> None:
    pipeline = fgac_pipeline  # document-level security hides it: the security plugin decides
    monkeypatch.setenv("ENVIRONMENT_NAME", environment)
    item = json.loads(
        json.dumps(heartbeat_item(schema)).replace(
            SCHEDULED_TIME, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        )
    )
    pk, sk = item["pk"]["S"], item["sk"]["S"]
    holder = pipeline.table_of(pk)  # the harness's table holding the schema, as config assigns it
    pipeline.dynamodb.put_item(TableName=holder, Item=item)
    records = pipeline.read_stream(holder)
    assert [r["dynamodb"]["Keys"]["pk"]["S"] for r in records] == [pk]

    invocation = pipeline.invoke(records)

    assert invocation.fates == {records[0]["eventID"]: "indexed"}
    (lag,) = [line for line in invocation.lines if "HeartbeatLagSeconds" in line]
    assert lag["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["Environment", "Table"]]
    assert (lag["Environment"], lag["Table"]) == (environment, holder)
    assert 0 <= lag["HeartbeatLagSeconds"] < 60
    assert lag["HeartbeatLagSeconds"] == pytest.approx(
        lag["_aws"]["Timestamp"] / 1000 - records[0]["dynamodb"]["ApproximateCreationDateTime"], abs=0.01
    )

    # A second write (the next heartbeat) is a change again: another record, another lag.
    item[HEARTBEAT_AT] = {"S": "2030-01-01T00:00:00Z"}
    pipeline.dynamodb.put_item(TableName=holder, Item=item)
    assert len(pipeline.read_stream(holder)) == 1

    admin, reader = signed_as(pipeline.server, ADMIN_KEY), signed_as(pipeline.server, READER_KEY)
    query = json.dumps({"query": {"term": {"pk": pk}}}).encode()
    assert admin.request("POST", f"{schema.lower()}/_refresh").status == 200  # searchable, as a reader waits
    assert admin.request("POST", f"{schema.lower()}/_search", query).json()["hits"]["total"]["value"] == 1
    reads = schema.lower() in json.dumps(READ_ROLES["public_search"]["role"]["index_permissions"])
    for name in (schema.lower(), f"{schema.lower()}-v1", f"{schema.lower()}-v*"):
        answer = reader.request("POST", f"{name}/_search", query)
        if reads:  # the document is there, and document-level security hides it
            assert answer.status == 200 and answer.json()["hits"]["hits"] == [], name
        else:
            assert answer.status == 403, name
    got = reader.request("GET", f"{schema.lower()}-v1/_doc/{quote(f'{pk}#{sk}', safe='')}")
    assert got.status == (404 if reads else 403)
