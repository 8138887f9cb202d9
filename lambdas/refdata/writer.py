"""The one way application code writes items: checked before the call, created conditionally, numbered by the
atomic counter where the schema says so, the geometry offloaded when the item would pass the size limit, and sent
to the table that holds the item's schema.

    writer = Writer(Tables.parse(schema_tables), bucket=geometry_bucket, session=boto3.Session())
    zone = writer.create("geozone", {"collectionId": "bcparks_1"}, {"name": "Garibaldi", "geometry": polygon})
    writer.update(zone["pk"], zone["sk"], {"description": "..."})
    writer.delete(zone["pk"], zone["sk"])

The key comes from the schema (`refdata.registry`): a counter sort key is taken from the partition's counter (never
given), a UUID field left out is a fresh UUID, a sharded pk gets its shard from the sharding attribute. A create
never overwrites an item (another writer's or its own retry's: `ItemExistsError`), gives a globalId schema's item
its globalId, and refuses what `refdata.checks` refuses. Replacing an item whole keeps its globalId; an update sets
attributes of an existing item; a delete removes an existing one. Needs boto3 (the `aws` extra).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from refdata import globalid, offload
from refdata.checks import (
    GEOMETRY,
    STORED_PLATFORM_ATTRIBUTES,
    WRITABLE_PLATFORM_ATTRIBUTES,
    WriteError,
    check_attributes,
    check_indexable,
    check_key,
)
from refdata.counters import next_key
from refdata.keys import build_pk, build_sk
from refdata.registry import COUNTER, REGISTRY, CounterSk, Kind, get_schema, schema_of_pk
from refdata.sharding import sharded_pk

# Geometries are offloaded when the inline item would pass this many bytes: a margin below DynamoDB's 400 KB, since
# its sizing rule for numbers is approximate (refdata.item_size).
OFFLOAD_ABOVE_BYTES: Final = 300 * 1024


@dataclass(frozen=True)
class Tables:
    """Which table holds each schema, `{schema: table name}`: the environment's stateful stack outputs it as
    `SchemaTables` (`Tables.parse`). A schema no table holds is refused before any call."""

    holders: Mapping[str, str]

    def __post_init__(self) -> None:
        for name, table in self.holders.items():
            if get_schema(name).name == COUNTER:
                raise WriteError("Tables: counters live beside the partitions they number, in every table")
            if not isinstance(table, str) or not table:
                raise WriteError(f"Tables[{name!r}]: a table name is a non-empty string, got {table!r}")

    @classmethod
    def parse(cls, text: str) -> Tables:
        """The stack output `SchemaTables` (JSON)."""
        try:
            holders = json.loads(text)
        except ValueError as error:
            raise WriteError(f"SchemaTables is not JSON: {error}") from None
        if not isinstance(holders, dict):
            raise WriteError(f"SchemaTables must be a JSON object of schema to table name, got {text[:80]!r}")
        return cls(holders)

    @classmethod
    def of(cls, main: str, others: Mapping[str, Sequence[str]] | None = None) -> Tables:
        """`main` holds every data schema that no table in `others` (table name -> its schemas) claims."""
        holders = {name: main for name in REGISTRY if name != COUNTER}
        claimed: dict[str, str] = {}
        for table, schemas in (others or {}).items():
            for name in schemas:
                get_schema(name)
                if name in claimed:
                    raise WriteError(f"Tables: schema {name!r} is held by {claimed[name]!r} and {table!r}")
                claimed[name] = holders[name] = table
        return cls(holders)

    def table_for(self, schema_name: str) -> str:
        """The table holding `schema_name`'s items."""
        get_schema(schema_name)
        if schema_name not in self.holders:
            raise WriteError(
                f"no table holds schema {schema_name!r} here (Tables holds {sorted(self.holders)})"
            )
        return self.holders[schema_name]


class Writer:
    """Writes application items of any registered data schema to the table that holds it."""

    def __init__(
        self,
        tables: Tables,
        *,
        bucket: str | None = None,
        offload_above: int = OFFLOAD_ABOVE_BYTES,
        session: Any = None,
    ) -> None:
        if session is None:
            import boto3

            session = boto3.Session()
        self.tables = tables
        self.session = session
        self.bucket = bucket
        self.offload_above = offload_above
        self._dynamodb = session.resource("dynamodb")
        self._s3 = session.client("s3") if bucket else None

    def _table(self, pk: str) -> Any:
        return self._dynamodb.Table(self.tables.table_for(schema_of_pk(pk).name))

    def new_key(
        self, schema_name: str, key: Mapping[str, object], attributes: Mapping[str, Any]
    ) -> tuple[str, str]:
        """(pk, sk) of a new item: counter sort keys from the partition's counter, missing UUID fields fresh."""
        schema = get_schema(schema_name)
        values = dict(key)
        for key_field in schema.pk_fields + schema.sk_fields:
            if key_field.kind is Kind.UUID and key_field.name not in values:
                values[key_field.name] = str(uuid.uuid4())
        if schema.sharding is not None:
            return sharded_pk(schema_name, {**attributes, **values}), build_sk(schema_name, values)
        if isinstance(schema.sk, CounterSk):
            if schema.sk.field_name in values:
                raise WriteError(
                    f"{schema_name}: {schema.sk.field_name!r} comes from the counter, not the caller"
                )
            table = self._dynamodb.Table(self.tables.table_for(schema_name))
            return next_key(table, schema_name, values)
        return build_pk(schema_name, values), build_sk(schema_name, values)

    def create(
        self, schema_name: str, key: Mapping[str, object], attributes: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Create a new item of `schema_name` from its key field values and attributes; returns what was stored."""
        check_attributes(schema_name, attributes, allowed=WRITABLE_PLATFORM_ATTRIBUTES - {"pk", "sk"})
        pk, sk = self.new_key(schema_name, key, attributes)
        return self.create_item({**attributes, "pk": pk, "sk": sk})

    def create_item(self, item: Mapping[str, Any]) -> dict[str, Any]:
        """Create an item whose pk and sk are given (never overwriting)."""
        schema = check_key(item)
        pk = str(item["pk"])
        check_attributes(pk, item, allowed=WRITABLE_PLATFORM_ATTRIBUTES)
        check_indexable(pk, schema, item)
        return self._write(item, create=True)

    def replace(self, item: Mapping[str, Any]) -> dict[str, Any]:
        """Replace an existing item whole (a globalId schema's item must carry its stored globalId)."""
        schema = check_key(item)
        pk = str(item["pk"])
        check_attributes(pk, item, allowed=WRITABLE_PLATFORM_ATTRIBUTES | STORED_PLATFORM_ATTRIBUTES)
        check_indexable(pk, schema, item)
        return self._write(item, create=False)

    def update(self, pk: str, sk: str, changes: Mapping[str, Any]) -> dict[str, Any]:
        """Set attributes of an existing item (its geometry changes by `replace`, which offloads it)."""
        schema = check_key({"pk": pk, "sk": sk})
        check_attributes(pk, changes, allowed=WRITABLE_PLATFORM_ATTRIBUTES - {"pk", "sk", GEOMETRY})
        check_indexable(pk, schema, changes)
        return globalid.update_attributes(self._table(pk), pk, sk, changes)

    def delete(self, pk: str, sk: str) -> None:
        """Delete an existing item; `KeyError` when there is none."""
        check_key({"pk": pk, "sk": sk})
        try:
            self._table(pk).delete_item(Key={"pk": pk, "sk": sk}, ConditionExpression="attribute_exists(pk)")
        except Exception as error:
            if globalid.is_conditional_failure(error):
                raise KeyError(f"no item {pk!r} {sk!r}") from error
            raise

    def _write(self, item: Mapping[str, Any], *, create: bool) -> dict[str, Any]:
        table = self._table(str(item["pk"]))
        if GEOMETRY not in item:
            return globalid.create_item(table, item) if create else globalid.replace_item(table, item)
        if self._s3 is None or self.bucket is None:
            raise WriteError(f"{item['pk']!r}: an item with a geometry needs the writer's bucket")
        return offload.write_item(
            table, self._s3, self.bucket, item, threshold=self.offload_above, create=create
        )
