"""A loopback domain read as dev's `public_search` read role, for the tests of the query helpers and the reader.

The domain front before the secured node (the real security plugin), set up by the real index bootstrap (templates, aliases, the read role with its document- and
field-level security); documents are written through the stream sync's own code (stream record -> document ->
bulk line); IAM decides each signed request with dev's synthesized domain access policy and, for the reader, the
identity policy docs/operations.md tells a reader to give its role (tests/support/iam.py), before FGAC.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from datetime import date, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

from boto3.dynamodb.types import TypeSerializer
from botocore.credentials import Credentials
from index_bootstrap.bootstrap import IndexBootstrap
from refdata.indexnames import read_alias
from refdata.keys import Value, build_pk
from refdata.registry import REGISTRY, Field, Kind, PartsSk, Schema, indexable_schemas
from refdata.transport import NDJSON_CONTENT_TYPE, OpenSearchTransport
from search.documents import build_document, encode_update, parse_change
from search.readers import read_role_definitions

from infra.environments import environments
from tests.lambdas.ops.workflows_harness import deployed_names, domain_access, template_policies
from tests.lambdas.stream_sync.stream_sync_fakes import record
from tests.support.iam import DomainAccess
from tests.support.opensearch_server import FineGrainedAccessControl, LoopbackOpenSearch
from tests.support.secured_node import SecuredNode

DEV = environments()["dev"]
ADMIN = DEV.role_arn(DEV.platform_role_name("search-admin"))
PUBLIC = next(role for role in DEV.search.read_roles if role.name == "public_search")
(READER,) = PUBLIC.iam_role_arns
ADMIN_KEY, READER_KEY = "AKIDADMIN", "AKIDREADER"
FGAC = FineGrainedAccessControl(ADMIN, {ADMIN_KEY: ADMIN, READER_KEY: READER})


def access() -> DomainAccess:
    """dev's access policy; the reader's identity policy allows GET and POST on its schemas' read aliases."""
    stateful, stateless = deployed_names(DEV)
    domain = domain_access(stateful, template_policies(stateful, stateless))
    aliases = [f"{domain.domain_arn}/{read_alias(schema)}/*" for schema in PUBLIC.schemas]
    documented = {"Effect": "Allow", "Action": ["es:ESHttpGet", "es:ESHttpPost"], "Resource": aliases}
    identities = {READER: [{"Statement": [documented]}]}
    return replace(domain, identity=lambda role: identities.get(role, []))


def signed(server: LoopbackOpenSearch, key: str) -> OpenSearchTransport:
    credentials = Credentials(key, "x")
    return OpenSearchTransport(server.endpoint, "ca-central-1", timeout_seconds=5, credentials=credentials)


def dynamodb_value(value: Any) -> Any:
    """Numbers as boto3 writes them (Decimal)."""
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, dict):
        return {k: dynamodb_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [dynamodb_value(v) for v in value]
    return value


def stream_record(item: Mapping[str, Any], seq: int, event: str = "INSERT") -> dict[str, Any]:
    """The stream record of a write (a REMOVE: a delete, its OldImage the item) of `item` (Python values)."""
    serialize = TypeSerializer().serialize
    image = {key: serialize(dynamodb_value(value)) for key, value in item.items() if key not in ("pk", "sk")}
    images = {"old": image} if event == "REMOVE" else {"new": image}
    # its creation time: a tombstone's deletedAt
    return record(event, item["sk"], seq, pk=item["pk"], created_at=1_764_531_000 + seq, **images)


@contextmanager
def read_domain(node: SecuredNode, records: Iterable[Mapping[str, Any]]) -> Iterator[LoopbackOpenSearch]:
    """The bootstrapped domain on the secured node (its security plugin decides what the reader sees) with
    `records` (stream records) synced into it and refreshed, as a reader waits for a write to be searchable."""
    with LoopbackOpenSearch(fgac=FGAC, access=access(), engine=node) as running:
        admin = signed(running, ADMIN_KEY)
        readers = read_role_definitions([(PUBLIC.name, PUBLIC.schemas, (READER,))])
        IndexBootstrap(admin, sleep=lambda _: None).run(
            [schema.name for schema in indexable_schemas()], replicas=0, read_roles=readers
        )
        lines = ""
        for record in records:
            change = parse_change(record)
            build_document(change, None)
            lines += encode_update(change)
        answer = admin.request("POST", "_bulk", lines.encode(), {"Content-Type": NDJSON_CONTENT_TYPE}).json()
        assert not answer["errors"], answer
        assert admin.request("POST", "_refresh").ok
        yield running


def sample_value(field: Field, n: int) -> Value:
    """A valid value of one key field, different for each `n`."""
    if field.kind is Kind.NUMBER:
        return n % int(10**field.width)
    if field.kind is Kind.DATE:
        return date(2026, 1, 1) + timedelta(days=n)
    if field.kind is Kind.UUID:
        return str(UUID(int=n))
    if field.kind is Kind.KEY:
        other = next(
            s for s in REGISTRY.values() if s.scope and Kind.KEY not in {f.kind for f in s.pk_fields}
        )
        return build_pk(other.name, {f.name: sample_value(f, n) for f in other.pk_fields})
    return f"c{n}"


def sample_key(schema: Schema, n: int) -> dict[str, Value]:
    """The values of a key of `schema` (pk and sk fields), one per `n`."""
    values: dict[str, Value] = {f.name: sample_value(f, n) for f in schema.pk_fields + schema.sk_fields}
    if isinstance(schema.sk, PartsSk):
        values.update(part="COMMENT", ts=n)
    return values
