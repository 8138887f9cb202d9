"""Harness for the ops tools: a moto table and bucket, the loopback OpenSearch server set up by the real
index bootstrap, helpers that play the stream sync's part (scripted upserts with real sequence numbers), and the
operations run as `--local` runs them. The fixtures that build it are in conftest.py."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import boto3
from index_bootstrap import bootstrap
from index_bootstrap.bootstrap import IndexBootstrap
from ops.index import IndexClient
from ops.purge import Purge
from ops.reconcile import Reconcile
from ops.reindex import Reindex
from ops.runs import MemoryRunStore, Run
from ops.table import Item, TablePage, scan_pages
from refdata import indexnames
from refdata.registry import REGISTRY, indexable_schemas
from refdata.transport import NDJSON_CONTENT_TYPE, OpenSearchTransport
from search import indices
from search.documents import encode_json, engine_document, item_from_dynamodb
from stream_sync.aws import build_ports
from stream_sync.config import Settings
from stream_sync.sync import Ports
from stream_sync.tables import SchemaTables

from ops import workflow
from tests.support.aws import create_bucket, single_table
from tests.support.opensearch_server import LoopbackOpenSearch

REGION = "ca-central-1"
TABLE = "refdata"
BUCKET = "geometry-bucket"
ADMIN_ROLE_ARN = "arn:aws:iam::123456789012:role/refdata-search-admin"
ADMIN_KEY = "AKIDADMIN"
MIN_AGE = 24 * 3600 + 21600 + 14 * 24 * 3600  # stream retention + max record age + DLQ retention
ZONE = "geozone::bcparks_1"
PRODUCT = "productDate::bcparks_1::dayuse::1"
ZONES = 20


def changed_mappings(schema: str) -> dict[str, Any]:
    """A mapping change for geozone only (a new keyword field), with its new fingerprint."""
    body = indices.index_mappings(schema)
    if schema == "geozone":
        body["properties"]["zoneCode"] = {"type": "keyword"}
        body["_meta"][indices.FINGERPRINT_META_KEY] = indices.mapping_fingerprint(body)
    return body


def seq(number: int) -> str:
    return str(number).zfill(40)


class DynamoProxy:
    """The moto client, except that `scan` can answer a snapshot taken earlier (a change made after the table
    was read) and `get_item` can run a hook first (a change landing just before a re-read)."""

    def __init__(
        self,
        real: Any,
        *,
        snapshot: list[Item] | None = None,
        before_get_item: Callable[[Item], None] | None = None,
    ) -> None:
        self._real, self._snapshot, self._before_get_item = real, snapshot, before_get_item

    def scan(self, **request: Any) -> dict[str, Any]:
        if self._snapshot is None:
            return dict(self._real.scan(**request))
        prefix = request["ExpressionAttributeValues"][":prefix"]["S"]
        items = [item for item in self._snapshot if item["pk"]["S"].startswith(prefix)]
        return {"Items": items, "ScannedCount": len(self._snapshot), "Count": len(items)}

    def get_item(self, **request: Any) -> dict[str, Any]:
        if self._before_get_item is not None:
            self._before_get_item(request["Key"])
        return dict(self._real.get_item(**request))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


@dataclass
class OpsEnv:
    server: LoopbackOpenSearch
    dynamodb: Any = field(default_factory=lambda: boto3.client("dynamodb", region_name=REGION))
    page_items: int = 7  # small scan pages, so paging is exercised
    region: str = REGION  # the domain's: requests are signed for it

    def __post_init__(self) -> None:
        # The credentials of now (the admin role's), not of the first request: a test may change the environment's.
        credentials = boto3.Session().get_credentials()
        self.transport = OpenSearchTransport(
            self.server.endpoint, self.region, timeout_seconds=5, credentials=credentials
        )
        self.client = IndexClient(self.transport, sleep=lambda seconds: None)
        self.settings = Settings(
            opensearch_endpoint=self.server.endpoint,
            region=self.region,
            dlq_url="",
            geometry_bucket=BUCKET,
            request_timeout_seconds=10.0,  # never reached on loopback, however loaded the machine
            max_attempts=2,
            retry_base_seconds=0.001,
            retry_max_seconds=0.002,
            deadline_margin_seconds=0.0,
        )
        self.ports: Ports = build_ports(self.settings)
        self.ports.sleep = lambda seconds: None
        self.now = 1_800_000_000.0  # the operations' clock (the purge's bound), moved by tests

    def env(self, **overrides: Any) -> workflow.Env:
        values: dict[str, Any] = {
            "client": self.client,
            "settings": self.settings,
            "ports": lambda: self.ports,
            "dynamodb": self.dynamodb,
            "tables": SchemaTables.single(TABLE),
            "scan_page_items": self.page_items,
            "tombstone_min_age_seconds": MIN_AGE,
            "now": lambda: self.now,
        }
        return workflow.Env(**(values | overrides))

    def create_table(self) -> None:
        self.dynamodb.create_table(**single_table(TABLE))
        create_bucket(REGION, BUCKET)

    def put_geometry(self, key: str, geometry: dict[str, Any]) -> str:
        boto3.client("s3", region_name=REGION).put_object(
            Bucket=BUCKET, Key=key, Body=json.dumps(geometry).encode()
        )
        return f"s3://{BUCKET}/{key}"

    def make_geozone_v2(self, monkeypatch: Any) -> None:
        """v1 in use and in sync with the table for two schemas; then a deployment creates geozone-v2."""
        for i in range(ZONES):
            self.put_and_sync(ZONE, f"{i:010d}", 100 + i, name={"S": f"zone {i}"}, area={"N": f"{i}.5"})
        for day in ("2025-12-30", "2025-12-31"):
            self.put_and_sync(PRODUCT, f"1#{day}", 200, price={"N": "12"})
        monkeypatch.setattr(bootstrap, "index_mappings", changed_mappings)
        outcomes = {outcome.schema: outcome.action for outcome in self.bootstrap()}
        unchanged = {schema.name: "unchanged" for schema in indexable_schemas()}
        assert outcomes == unchanged | {"geozone": "created_new_version"}
        assert self.aliases("geozone-v2") == {}

    def bootstrapped(self) -> None:
        """The domain as a deployment's bootstrap sets it up (kept from the test before when it can be)."""
        self.server.engine.prepared("OpsEnv.bootstrap", self.bootstrap)

    def bootstrap(self) -> list[bootstrap.SchemaOutcome]:
        return IndexBootstrap(self.transport, sleep=lambda seconds: None).run(
            [schema.name for schema in indexable_schemas()], replicas=0
        )

    # --- DynamoDB ------------------------------------------------------------------------------------
    def put(self, pk: str, sk: str, **attributes: Any) -> Item:
        item = {"pk": {"S": pk}, "sk": {"S": sk}, **attributes}
        self.dynamodb.put_item(TableName=TABLE, Item=item)
        return item

    def delete(self, pk: str, sk: str) -> None:
        self.dynamodb.delete_item(TableName=TABLE, Key={"pk": {"S": pk}, "sk": {"S": sk}})

    def scan(self, schema: str) -> Iterable[TablePage]:
        return scan_pages(self.dynamodb, TABLE, REGISTRY[schema], page_items=self.page_items)

    def snapshot(self) -> list[Item]:
        """Every item, as a scan now would read them."""
        return list(self.dynamodb.scan(TableName=TABLE, ConsistentRead=True)["Items"])

    # --- the stream sync's part ----------------------------------------------------------------------
    def stream_apply(
        self, item: Item | None, pk: str, sk: str, sequence: str, *, deleted_at: int = 1_700_000_000
    ) -> str:
        """What the sync does for one stream record: a scripted upsert through the write alias."""
        schema = pk.split("::", 1)[0]
        doc: dict[str, Any] = {"pk": pk, "sk": sk, "schema": schema, "deletedAt": deleted_at}
        if item is not None:
            doc = json.loads(encode_json(engine_document(item_from_dynamodb(item)))) | {"schema": schema}
        params = {"seq": sequence, "tombstone": item is None, "doc": doc}
        script = {"id": indices.APPLY_SCRIPT_ID, "params": params}
        lines = [
            {"update": {"_index": indexnames.write_alias(schema), "_id": f"{pk}#{sk}"}},
            {"scripted_upsert": True, "upsert": {}, "script": script},
        ]
        body = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
        # The test makes the change visible to searches at once (a refresh), as it could on a domain; the sync does
        # not refresh.
        path = "_bulk?refresh=true"
        response = self.transport.request("POST", path, body, {"Content-Type": NDJSON_CONTENT_TYPE})
        (entry,) = response.json()["items"]
        assert entry["update"]["status"] < 300, entry
        return str(entry["update"]["result"])

    def put_and_sync(self, pk: str, sk: str, sequence: int, **attributes: Any) -> Item:
        item = self.put(pk, sk, **attributes)
        self.stream_apply(item, pk, sk, seq(sequence))
        return item

    # --- inspection ----------------------------------------------------------------------------------
    def documents(self, index: str) -> dict[str, dict[str, Any]]:
        return self.server.documents(index)

    def aliases(self, index: str) -> dict[str, dict[str, Any]]:
        return self.server.aliases_of(index)

    def expected(self, schema: str) -> dict[str, dict[str, Any]]:
        """The live documents DynamoDB implies for `schema`, without the ordering field."""
        found = {}
        for page in self.scan(schema):
            for item in page.items:
                doc = json.loads(encode_json(engine_document(item_from_dynamodb(item))))
                found[f"{doc['pk']}#{doc['sk']}"] = doc | {"schema": schema, "tombstone": False}
        return found

    def visible(self, index: str) -> dict[str, dict[str, Any]]:
        return {
            doc_id: {k: v for k, v in source.items() if k != "stream_seq"}
            for doc_id, source in self.documents(index).items()
            if not source.get("tombstone")
        }

    # --- the tools, as `--local` runs them --------------------------------------------------------------
    def run(self, operation: workflow.Operation, request: dict[str, Any], **options: Any) -> dict[str, Any]:
        segments = options.pop("segments", 1)
        run = Run(MemoryRunStore(), operation.name, options.pop("run_id", f"{operation.name}-test"))
        env = self.env(segments=segments, **options)
        return workflow.run_local(operation, env, run, request, concurrency=segments)

    def reindex(self, schema: str, **options: Any) -> dict[str, Any]:
        request = {"schema": schema, "dryRun": options.pop("dry_run", False)}
        request["maxRejected"] = options.pop("max_rejected", 0)
        return self.run(Reindex(), request, **options)

    def reconcile(self, schema: str, *, fix: bool = False, **options: Any) -> dict[str, Any]:
        return self.run(Reconcile(), {"schema": schema, "fix": fix}, **options)

    def purge(self, **options: Any) -> dict[str, Any]:
        return self.run(Purge(), {"dryRun": options.pop("dry_run", False)}, **options)
