"""Harness for the ops tools: a moto table and bucket, the loopback OpenSearch server set up by the real
index bootstrap, and helpers that play the stream sync's part (scripted upserts with real sequence numbers).
The fixtures that build it are in conftest.py."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import boto3
from datamodel.registry import REGISTRY, indexable_schemas
from index_bootstrap import bootstrap
from index_bootstrap.bootstrap import IndexBootstrap
from ops.index import IndexClient
from ops.reconcile import ReconcileReport, reconcile
from ops.reindex import ReindexReport, reindex
from ops.table import Item, scan_pages
from search import indices
from search.documents import encode_json, engine_document, item_from_dynamodb
from search.transport import NDJSON_CONTENT_TYPE, OpenSearchTransport
from stream_sync.aws import build_ports
from stream_sync.config import Settings
from stream_sync.redrive import item_reader
from stream_sync.sync import Ports

from tests.support.aws import single_table
from tests.support.opensearch_server import FineGrainedAccessControl, LoopbackOpenSearch

REGION = "ca-central-1"
TABLE = "refdata"
BUCKET = "geometry-bucket"
ADMIN_ROLE_ARN = "arn:aws:iam::123456789012:role/refdata-search-admin"
ADMIN_KEY = "AKIDADMIN"
FGAC = FineGrainedAccessControl(ADMIN_ROLE_ARN, {ADMIN_KEY: ADMIN_ROLE_ARN})
ZONE = "geozone::bcparks_1"
PRODUCT = "productDate::bcparks_1::dayuse::1"


def seq(number: int) -> str:
    return str(number).zfill(40)


@dataclass
class OpsEnv:
    server: LoopbackOpenSearch
    dynamodb: Any = field(default_factory=lambda: boto3.client("dynamodb", region_name=REGION))
    page_items: int = 7  # small scan pages, so paging is exercised

    def __post_init__(self) -> None:
        self.transport = OpenSearchTransport(self.server.endpoint, REGION, timeout_seconds=5)
        self.client = IndexClient(self.transport, sleep=lambda seconds: None)
        self.settings = Settings(
            opensearch_endpoint=self.server.endpoint,
            region=REGION,
            dlq_url="",
            geometry_bucket=BUCKET,
            request_timeout_seconds=2.0,
            max_attempts=2,
            retry_base_seconds=0.001,
            retry_max_seconds=0.002,
            deadline_margin_seconds=0.0,
        )
        self.ports: Ports = build_ports(self.settings)
        self.ports.sleep = lambda seconds: None

    def create_table(self) -> None:
        self.dynamodb.create_table(**single_table(TABLE))
        boto3.client("s3", region_name=REGION).create_bucket(
            Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION}
        )

    def put_geometry(self, key: str, geometry: dict[str, Any]) -> str:
        boto3.client("s3", region_name=REGION).put_object(
            Bucket=BUCKET, Key=key, Body=json.dumps(geometry).encode()
        )
        return f"s3://{BUCKET}/{key}"

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

    def scan(self, schema: str) -> Callable[[], Iterable[list[Item]]]:
        return lambda: scan_pages(self.dynamodb, TABLE, REGISTRY[schema], page_items=self.page_items)

    def get_item(self) -> Callable[[Item], Item | None]:
        return item_reader(self.dynamodb, TABLE)

    # --- the stream sync's part ----------------------------------------------------------------------
    def stream_apply(self, item: Item | None, pk: str, sk: str, sequence: str) -> str:
        """What the sync does for one stream record: a scripted upsert through the write alias."""
        schema = pk.split("::", 1)[0]
        doc = {"pk": pk, "sk": sk, "schema": schema}
        if item is not None:
            doc = json.loads(encode_json(engine_document(item_from_dynamodb(item)))) | {"schema": schema}
        params = {"seq": sequence, "tombstone": item is None, "doc": doc}
        lines = [
            {"update": {"_index": indices.write_alias(schema), "_id": f"{pk}#{sk}"}},
            {
                "scripted_upsert": True,
                "upsert": {},
                "script": {"id": indices.APPLY_SCRIPT_ID, "params": params},
            },
        ]
        body = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
        response = self.transport.request("POST", "_bulk", body, {"Content-Type": NDJSON_CONTENT_TYPE})
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
        for page in self.scan(schema)():
            for item in page:
                doc = json.loads(encode_json(engine_document(item_from_dynamodb(item))))
                found[f"{doc['pk']}#{doc['sk']}"] = doc | {"schema": schema, "tombstone": False}
        return found

    def visible(self, index: str) -> dict[str, dict[str, Any]]:
        return {
            doc_id: {k: v for k, v in source.items() if k != "stream_seq"}
            for doc_id, source in self.documents(index).items()
            if not source.get("tombstone")
        }

    # --- the tools -----------------------------------------------------------------------------------
    def reindex(self, schema: str, **options: Any) -> ReindexReport:
        return reindex(
            schema,
            client=options.pop("client", self.client),
            scan=options.pop("scan", self.scan(schema)),
            settings=self.settings,
            ports=self.ports,
            **options,
        )

    def reconcile(self, schema: str, *, fix: bool = False, **options: Any) -> ReconcileReport:
        return reconcile(
            schema,
            client=self.client,
            scan=options.pop("scan", self.scan(schema)),
            get_item=options.pop("get_item", self.get_item()),
            settings=self.settings,
            ports=self.ports,
            fix=fix,
        )
