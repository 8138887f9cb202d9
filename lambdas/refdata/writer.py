"""The one way application code writes items: checked before any call, created conditionally, numbered by the
atomic counter where the schema says so, the geometry offloaded when the item would pass the size limit, and sent
to the table that holds the item's schema.

    writer = Writer(Tables.parse(schema_tables), bucket=geometry_bucket, session=boto3.Session())
    zone = writer.create("geozone", {"collectionId": "bcparks_1"}, {"name": "Garibaldi", "geometry": polygon})
    writer.update(zone["pk"], zone["sk"], {"description": "..."})
    writer.delete(zone["pk"], zone["sk"])

The key comes from the schema (`refdata.registry`): a counter sort key is taken from the partition's counter (never
given), a UUID field left out is a fresh UUID, a sharded pk gets its shard from the sharding attribute. A create
never overwrites another's item (`ItemExistsError`), and a put the SDK retried after its lost answer is recognised as
its own write; it gives a globalId schema's item its globalId. Every refusal comes before any call and is a
`WriteError` (the conventions' own errors are its cause): keys, the platform's attributes, values, size, what search
could never index (a value its attribute's mapped type cannot parse, a name a schema without free attributes does not
declare), and schemas this client does not know yet (`ClientTooOldError`). Replacing an item whole keeps its
globalId; an update sets attributes of an existing item and a delete removes an existing one (`ItemNotFoundError`
when there is none); a table SchemaTables names that does not exist is a `TableNotFoundError` naming it. Every error
here derives from `refdata.exceptions.RefdataError`. Needs boto3 (the `aws` extra).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Final

from refdata import __version__, globalid, offload
from refdata.checks import (
    GEOMETRY,
    STORED_PLATFORM_ATTRIBUTES,
    WRITABLE_PLATFORM_ATTRIBUTES,
    WriteError,
    check_attributes,
    check_indexable,
    check_key,
)
from refdata.counters import next_value
from refdata.exceptions import ItemNotFoundError, TableNotFoundError
from refdata.geometry import GeometryError
from refdata.globalid import error_code
from refdata.item_size import ItemSizeError, check_item
from refdata.keys import build_pk, build_sk
from refdata.registry import (
    COUNTER,
    REGISTRY,
    SEPARATOR,
    CounterSk,
    KeyConventionError,
    Kind,
    Schema,
    get_schema,
    schema_of_pk,
)
from refdata.sharding import sharded_pk

# Geometries are offloaded when the inline item would pass this many bytes: a margin below DynamoDB's 400 KB, since
# its sizing rule for numbers is approximate (refdata.item_size).
OFFLOAD_ABOVE_BYTES: Final = 300 * 1024
# What the conventions raise for an item they refuse; the writer refuses it as a WriteError caused by one of them.
CONVENTION_ERRORS: Final = (KeyConventionError, ItemSizeError, GeometryError, globalid.GlobalIdError)


class ClientTooOldError(WriteError):
    """A write to a schema the platform has (its `SchemaTables` names it) that this client's registry does not
    declare yet: a newer refdata-client knows its keys."""


@contextmanager
def refusing(what: str) -> Iterator[None]:
    """Checks before any call: what the conventions refuse becomes a WriteError naming `what` (the cause kept)."""
    try:
        yield
    except WriteError:
        raise
    except CONVENTION_ERRORS as error:
        raise WriteError(f"{what}: {error}") from error


@dataclass(frozen=True)
class Tables:
    """Which table holds each schema, `{schema: table name}`: the environment's stateful stack outputs it as
    `SchemaTables` (`Tables.parse`). A schema no table holds is refused before any call. `newer` are the schemas the
    platform routes that this client does not know (added after its release): they are kept apart, so the client
    keeps writing every schema it knows, and a write to one of them says to upgrade."""

    holders: Mapping[str, str]
    newer: frozenset[str] = field(default=frozenset())

    def __post_init__(self) -> None:
        for name, table in self.holders.items():
            if get_schema(name).name == COUNTER:
                raise WriteError("Tables: counters live beside the partitions they number, in every table")
            if not isinstance(table, str) or not table:
                raise WriteError(f"Tables[{name!r}]: a table name is a non-empty string, got {table!r}")

    @classmethod
    def parse(cls, text: str) -> Tables:
        """The stack output `SchemaTables` (JSON): the schemas this client knows, and apart those it does not."""
        try:
            holders = json.loads(text)
        except ValueError as error:
            raise WriteError(f"SchemaTables is not JSON: {error}") from None
        if not isinstance(holders, dict):
            raise WriteError(f"SchemaTables must be a JSON object of schema to table name, got {text[:80]!r}")
        for name, table in holders.items():
            if not isinstance(table, str) or not table:
                raise WriteError(f"SchemaTables[{name!r}]: a table name is a non-empty string, got {table!r}")
        known = {name: table for name, table in holders.items() if name in REGISTRY}
        return cls(known, frozenset(holders) - frozenset(known))

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
        if schema_name in self.newer:
            raise ClientTooOldError(
                f"schema {schema_name!r} is newer than refdata-client {__version__}: the platform's SchemaTables "
                f"names it, this client's registry does not; upgrade refdata-client to a release after "
                f"{__version__} that declares it"
            )
        with refusing(f"schema {schema_name!r}"):
            get_schema(schema_name)
        if schema_name not in self.holders:
            raise WriteError(
                f"no table holds schema {schema_name!r} here (Tables holds {sorted(self.holders)})"
            )
        return self.holders[schema_name]


@dataclass(frozen=True)
class Prepared:
    """An item checked and ready to send: what to store, the geometry bytes to upload first, a replacement's
    condition (None for a create)."""

    item: dict[str, Any]
    upload: bytes | None = None
    condition: Mapping[str, Any] | None = None


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

    @contextmanager
    def _table(self, pk: str) -> Iterator[Any]:
        """The table holding `pk`'s schema, for the calls made in the block: a table the account and region do not
        have is a TableNotFoundError naming it (botocore says only "Requested resource not found")."""
        schema = schema_of_pk(pk).name
        name = self.tables.table_for(schema)
        try:
            yield self._dynamodb.Table(name)
        except Exception as error:
            if error_code(error) == "ResourceNotFoundException":
                raise TableNotFoundError(name, schema) from error
            raise

    def create(
        self, schema_name: str, key: Mapping[str, object], attributes: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Create a new item of `schema_name` from its key field values and attributes; returns what was stored.

        A counter sort key is numbered only once everything else about the item has passed its checks; a number
        is never used twice (an increment the SDK retried after its lost answer skips one)."""
        with refusing(schema_name):
            self.tables.table_for(schema_name)
            check_attributes(schema_name, attributes, allowed=WRITABLE_PLATFORM_ATTRIBUTES - {"pk", "sk"})
            schema = get_schema(schema_name)
            values = dict(key)
            for key_field in schema.pk_fields + schema.sk_fields:
                if key_field.kind is Kind.UUID and key_field.name not in values:
                    values[key_field.name] = str(uuid.uuid4())
            counter_field = None
            if schema.sharding is not None:
                pk = sharded_pk(schema_name, {**attributes, **values})
            else:
                pk = build_pk(schema_name, values)
                if isinstance(schema.sk, CounterSk):
                    counter_field = schema.sk.field_name
                    if counter_field in values:
                        raise WriteError(
                            f"{schema_name}: {counter_field!r} comes from the counter, not the caller"
                        )
                    values[counter_field] = 0  # checked at its width; the counter gives the number
            prepared = self._prepare(
                {**attributes, "pk": pk, "sk": build_sk(schema_name, values)}, create=True
            )
        if counter_field is not None:
            with self._table(pk) as table:
                number = next_value(table, pk)
            prepared = replace(
                prepared,
                item={**prepared.item, "sk": build_sk(schema_name, {**values, counter_field: number})},
            )
        return self._send(prepared)

    def create_item(self, item: Mapping[str, Any]) -> dict[str, Any]:
        """Create an item whose pk and sk are given (never overwriting)."""
        return self._send(self._prepare(item, create=True))

    def replace(self, item: Mapping[str, Any]) -> dict[str, Any]:
        """Replace an existing item whole (a globalId schema's item must carry its stored globalId)."""
        return self._send(self._prepare(item, create=False))

    def update(self, pk: str, sk: str, changes: Mapping[str, Any]) -> dict[str, Any]:
        """Set attributes of an existing item (its geometry changes by `replace`, which offloads it)."""
        with refusing(repr(pk)):
            schema = self._check_key({"pk": pk, "sk": sk})
            check_attributes(pk, changes, allowed=WRITABLE_PLATFORM_ATTRIBUTES - {"pk", "sk", GEOMETRY})
            check_indexable(pk, schema, changes)
            globalid.check_update(pk, sk, changes)
            check_item({**changes, "pk": pk, "sk": sk})  # the values DynamoDB stores (no floats)
        with self._table(pk) as table:
            return globalid.update_attributes(table, pk, sk, changes)

    def delete(self, pk: str, sk: str) -> None:
        """Delete an existing item; `ItemNotFoundError` (a `KeyError`) when there is none."""
        with refusing(repr(pk)):
            self._check_key({"pk": pk, "sk": sk})
        with self._table(pk) as table:
            try:
                table.delete_item(Key={"pk": pk, "sk": sk}, ConditionExpression="attribute_exists(pk)")
            except Exception as error:
                if globalid.is_conditional_failure(error):
                    raise ItemNotFoundError(f"no item {pk!r} {sk!r}") from error
                raise

    def _check_key(self, item: Mapping[str, Any]) -> Schema:
        """The item's schema (`check_key`); a schema newer than this client is refused as such."""
        prefix = str(item.get("pk", "")).split(SEPARATOR, 1)[0]
        if prefix in self.tables.newer:
            self.tables.table_for(prefix)
        return check_key(item)

    def _prepare(self, item: Mapping[str, Any], *, create: bool) -> Prepared:
        """Every check of a create or a replacement, no call: the item as it will be stored."""
        with refusing(repr(item.get("pk"))):
            schema = self._check_key(item)
            pk = str(item["pk"])
            allowed = WRITABLE_PLATFORM_ATTRIBUTES | (frozenset() if create else STORED_PLATFORM_ATTRIBUTES)
            check_attributes(pk, item, allowed=allowed)
            check_indexable(pk, schema, item)
            data = None
            if GEOMETRY in item:
                if self._s3 is None or self.bucket is None:
                    raise WriteError(f"{pk!r}: an item with a geometry needs the writer's bucket")
                item, data = offload.plan_item(self.bucket, item, threshold=self.offload_above)
            if create:
                return Prepared(globalid.new_item(item), data)
            return Prepared(dict(item), data, condition=globalid.replacement_condition(item))

    def _send(self, prepared: Prepared) -> dict[str, Any]:
        if prepared.upload is not None:
            assert self._s3 is not None and self.bucket is not None
            offload.upload(self._s3, self.bucket, prepared.upload)
        with self._table(str(prepared.item["pk"])) as table:
            if prepared.condition is None:
                return globalid.put_new(table, prepared.item)
            return globalid.put_replacement(table, prepared.item, prepared.condition)
