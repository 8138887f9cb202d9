"""The writer as application code uses it, over every data schema of the registry, against moto."""

import json
import re
import uuid
from collections.abc import Callable
from datetime import date
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import boto3
import botocore.endpoint
import pytest
from boto3.dynamodb.conditions import Key
from botocore.exceptions import ReadTimeoutError
from refdata import __version__
from refdata.checks import WriteError
from refdata.exceptions import ItemNotFoundError, TableNotFoundError
from refdata.globalid import ItemExistsError
from refdata.keys import CANARY_SCOPE, HEARTBEAT_SCOPE, build_pk, build_sk, parse_key
from refdata.registry import (
    COUNTER,
    PLATFORM_ATTRIBUTES,
    REGISTRY,
    AttributeKind,
    CounterSk,
    KeyConventionError,
    Kind,
    Schema,
)
from refdata.sharding import sharded_pk
from refdata.writer import CONVENTION_ERRORS, ClientTooOldError, Tables, Writer

from tests.lambdas.refdata.conftest import REGION, TABLE_NAME
from tests.support.aws import single_table
from tests.support.shapes import circle

pytestmark = pytest.mark.integration

DATA_SCHEMAS = [schema for schema in REGISTRY.values() if schema.name != COUNTER]
OTHER_TABLE = "refdata-other"


def key_values(schema: Schema) -> dict[str, object]:
    """The schema's example key, without what the writer supplies (the counter's value, UUIDs)."""
    supplied = {schema.sk.field_name} if isinstance(schema.sk, CounterSk) else set()
    supplied |= {f.name for f in schema.pk_fields + schema.sk_fields if f.kind is Kind.UUID}
    fields = {f.name for f in schema.pk_fields + schema.sk_fields} | {"part", "ts"}
    return {k: v for k, v in schema.example.items() if k in fields and k not in supplied and k != "shard"}


def attributes(schema: Schema, **extra: object) -> dict[str, object]:
    """A sharded schema's sharding attribute (when the key does not hold it) and `extra`."""
    found = dict(extra)
    if schema.sharding is not None and schema.sharding.attribute not in key_values(schema):
        found[schema.sharding.attribute] = str(schema.example.get(schema.sharding.attribute, "value-1"))
    return found


@pytest.fixture
def writer(table, bucket, boto_session) -> Writer:
    return Writer(Tables.of(TABLE_NAME), bucket=bucket, session=boto_session, offload_above=50_000)


@pytest.mark.parametrize("schema", DATA_SCHEMAS, ids=lambda s: s.name)
def test_every_data_schema_is_created_by_its_key_strategy(schema, writer, table):
    first = writer.create(schema.name, key_values(schema), attributes(schema, note="first"))
    stored = table.get_item(Key={"pk": first["pk"], "sk": first["sk"]})["Item"]
    assert parse_key(stored["pk"], stored["sk"]).schema == schema.name
    assert stored["note"] == "first"
    assert ("globalId" in stored) == schema.global_id
    if isinstance(schema.sk, CounterSk):
        second = writer.create(schema.name, key_values(schema), attributes(schema))
        numbers = [parse_key(item["pk"], item["sk"]).values[schema.sk.field_name] for item in (first, second)]
        assert numbers == [1, 2]
    uuids = [f.name for f in schema.pk_fields + schema.sk_fields if f.kind is Kind.UUID]
    for name in uuids:
        assert uuid.UUID(str(parse_key(first["pk"], first["sk"]).values[name]))


@pytest.mark.parametrize("schema", DATA_SCHEMAS, ids=lambda s: s.name)
def test_an_item_goes_to_the_table_holding_its_schema(schema, writer, table, boto_session):
    other = boto_session.resource("dynamodb").create_table(**single_table(OTHER_TABLE))
    routed = Writer(Tables.of(TABLE_NAME, {OTHER_TABLE: (schema.name,)}), session=boto_session)
    stored = routed.create(schema.name, key_values(schema), attributes(schema))
    key = {"pk": stored["pk"], "sk": stored["sk"]}
    assert "Item" in other.get_item(Key=key)
    assert "Item" not in table.get_item(Key=key)


def test_tables_refuse_an_unknown_schema_a_schema_held_twice_and_counters():
    name = DATA_SCHEMAS[0].name
    with pytest.raises(KeyConventionError, match="unknown schema"):
        Tables.of("a", {"b": ("noSuchSchema",)})
    with pytest.raises(WriteError, match="held by 'b' and 'c'"):
        Tables.of("a", {"b": (name,), "c": (name,)})
    with pytest.raises(WriteError, match="counters live beside"):
        Tables({COUNTER: "a"})
    with pytest.raises(WriteError, match="JSON object"):
        Tables.parse("[]")


def test_tables_parse_what_the_stack_outputs_and_refuse_a_schema_no_table_holds(nowhere, aws):
    held, unheld = DATA_SCHEMAS[0], DATA_SCHEMAS[1]
    tables = Tables.parse(json.dumps({held.name: "t1"}))
    assert tables.table_for(held.name) == "t1"
    with pytest.raises(WriteError, match=f"no table holds schema {unheld.name!r}"):
        tables.table_for(unheld.name)
    partial = Writer(tables, session=nowhere.session)
    with pytest.raises(WriteError, match="no table holds"):
        partial.create(unheld.name, key_values(unheld), attributes(unheld))


def test_a_create_never_overwrites_an_item(writer):
    item = _item(next(s for s in DATA_SCHEMAS if not isinstance(s.sk, CounterSk) and s.sharding is None))
    writer.create_item({**item, "note": "first"})
    with pytest.raises(ItemExistsError):
        writer.create_item({**item, "note": "second"})


@pytest.fixture
def nowhere(boto_session) -> Writer:
    """A writer whose table does not exist: any call it made would fail with ResourceNotFoundException."""
    return Writer(Tables.of("no-such-table"), bucket="no-such-bucket", session=boto_session)


def refusals(schema: Schema, writer: Writer) -> dict[str, Callable[[], object]]:
    """Every refusal the writer makes before a call, by what is refused, for an item of `schema`."""
    values, item = key_values(schema), _item(schema)
    pk, sk = str(item["pk"]), str(item["sk"])
    first = schema.scope[0]

    def create(key: dict[str, object] = values, **extra: object) -> Callable[[], object]:
        return lambda: writer.create(schema.name, key, attributes(schema, **extra))

    def create_item(**changes: object) -> Callable[[], object]:
        return lambda: writer.create_item({**item, **changes})

    cases: dict[str, Callable[[], object]] = {
        "a platform attribute": create(tombstone=True),
        "a float": create(price=1.5),
        "a float, given the key": create_item(price=1.5),
        "a number DynamoDB cannot hold": create_item(price=Decimal("1." + "1" * 40)),
        "an empty set": create(tags=set()),
        "an item over 400 KB": create(text="x" * 410_000),
        "a globalId given": create_item(globalId=str(uuid.uuid4())),
        "a key value off the conventions": create({**values, first.name: "a::b"}),
        "a key field missing": create({k: v for k, v in values.items() if k != first.name}),
        "a pk off the conventions": create_item(pk="nothing::x"),
        "an unknown schema": lambda: writer.create("noSuchSchema", values, {}),
        "an invalid geometry": create_item(geometry={"type": "Polygon"}),
        "an update of nothing": lambda: writer.update(pk, sk, {}),
        "an update of the globalId": lambda: writer.update(pk, sk, {"globalId": "x"}),
        "an update with a float": lambda: writer.update(pk, sk, {"price": 1.5}),
        "an update of the geometry": lambda: writer.update(pk, sk, {"geometry": circle(8)}),
        "a replacement of a platform attribute": lambda: writer.replace({**item, "tombstone": True}),
        "a delete off the conventions": lambda: writer.delete("nothing::x", sk),
    }
    if schema.global_id:
        cases["a replacement without its globalId"] = lambda: writer.replace(item)
    if isinstance(schema.sk, CounterSk):
        cases["a counter value given"] = create({**values, schema.sk.field_name: 7})
    if first.kind is Kind.TEXT:
        for scope in (HEARTBEAT_SCOPE, CANARY_SCOPE):
            cases[f"the reserved scope {scope}"] = create({**values, first.name: scope})
    return cases


@pytest.mark.parametrize("schema", DATA_SCHEMAS, ids=lambda s: s.name)
def test_every_refusal_is_a_write_error_before_any_call(schema, nowhere, aws):
    """`nowhere` has no table and no bucket: a refusal that came after a call (the counter's, a put, an upload)
    would be a ResourceNotFound or NoSuchBucket ClientError, not a WriteError. What the conventions raise is the
    WriteError's cause."""
    for case, write in refusals(schema, nowhere).items():
        with pytest.raises(WriteError) as refused:
            write()
        assert type(refused.value) is WriteError, f"{case}: {type(refused.value).__name__}"
        cause = refused.value.__cause__
        assert cause is None or isinstance(cause, CONVENTION_ERRORS), f"{case}: caused by {cause!r}"


def test_a_geometry_without_the_writers_bucket_and_a_schema_no_table_holds_are_refused_before_any_call(
    boto_session, aws
):
    schema = next(s for s in DATA_SCHEMAS if s.indexable and s.sharding is None)
    other = next(s for s in DATA_SCHEMAS if s is not schema)
    bucketless = Writer(Tables({schema.name: "no-such-table"}), session=boto_session)
    with pytest.raises(WriteError, match="needs the writer's bucket"):
        bucketless.create_item({**_item(schema), "geometry": circle(8)})
    with pytest.raises(WriteError, match=f"no table holds schema {other.name!r}"):
        bucketless.create(other.name, key_values(other), attributes(other))


def test_counter_items_and_the_platforms_own_attributes_are_refused(nowhere, aws):
    counted = next(s for s in DATA_SCHEMAS if isinstance(s.sk, CounterSk))
    counter = {
        "pk": build_pk(COUNTER, {"partition": build_pk(counted.name, key_values(counted))}),
        "sk": "counter",
    }
    with pytest.raises(WriteError, match="counter items"):
        nowhere.create_item(counter)
    with pytest.raises(WriteError, match="comes from the counter"):
        nowhere.create(counted.name, {**key_values(counted), counted.sk.field_name: 7}, {})
    platform_owned = PLATFORM_ATTRIBUTES - {"pk", "sk", "geometry", "expiresAt", "globalId"}
    item = _item(counted)
    for name in sorted(platform_owned):
        with pytest.raises(WriteError, match=name):
            nowhere.create_item({**item, name: 1})
        with pytest.raises(WriteError, match=name):
            nowhere.update(str(item["pk"]), str(item["sk"]), {name: 1})


def _item(schema: Schema) -> dict[str, object]:
    """A key of `schema` as the writer would build it (new UUIDs, the counter's first value)."""
    values = key_values(schema) | {
        f.name: str(uuid.uuid4()) for f in schema.pk_fields + schema.sk_fields if f.kind is Kind.UUID
    }
    if isinstance(schema.sk, CounterSk):
        values[schema.sk.field_name] = 1
    if schema.sharding is not None:
        return {
            "pk": sharded_pk(schema.name, attributes(schema) | values),
            "sk": build_sk(schema.name, values),
        }
    return {"pk": build_pk(schema.name, values), "sk": build_sk(schema.name, values)}


def test_a_large_geometry_is_offloaded_and_a_small_one_stays_inline(writer, s3, bucket):
    schema = next(s for s in DATA_SCHEMAS if s.indexable and s.sharding is None)
    small = writer.create(schema.name, key_values(schema), attributes(schema, geometry=circle(8)))
    large = writer.create(schema.name, key_values(schema), attributes(schema, geometry=circle(4000)))
    assert "geometry" in small and "geometryUrl" not in small
    assert "geometry" not in large and large["geometryUrl"].startswith(f"s3://{bucket}/")
    assert {"bbox", "location"} <= set(small) & set(large)


def test_update_replace_and_delete_by_key(writer, table):
    schema = next(s for s in DATA_SCHEMAS if s.global_id)
    stored = writer.create(schema.name, key_values(schema), attributes(schema, note="first"))
    key = {"pk": stored["pk"], "sk": stored["sk"]}
    assert writer.update(stored["pk"], stored["sk"], {"note": "second"})["note"] == "second"
    with pytest.raises(WriteError, match="geometry"):
        writer.update(stored["pk"], stored["sk"], {"geometry": circle(8)})
    writer.replace({**table.get_item(Key=key)["Item"], "note": "third"})
    assert table.get_item(Key=key)["Item"]["globalId"] == stored["globalId"]
    writer.delete(stored["pk"], stored["sk"])
    assert "Item" not in table.get_item(Key=key)
    with pytest.raises(ItemNotFoundError, match="no item"):
        writer.delete(stored["pk"], stored["sk"])
    with pytest.raises(ItemNotFoundError, match="no item"):
        writer.update(stored["pk"], stored["sk"], {"note": "gone"})


@pytest.mark.parametrize("schema", [s for s in DATA_SCHEMAS if s.indexable], ids=lambda s: s.name)
def test_what_search_could_never_index_is_refused_before_any_call(schema, nowhere, aws):
    """The engine's document limits, as the stream sync would dead-letter them (refdata.limits)."""
    item = _item(schema)
    too_deep: dict = {"leaf": 1}
    for _ in range(25):
        too_deep = {"next": too_deep}
    cases = {  # refdata.limits: depth, an invalid field name, the total of fields, one path as value and object,
        # one new path given two kinds of value (DynamoDB lists may mix them: the engine refuses the document)
        "depth": {"nested": too_deep},
        "field name": {"a..b": 1},
        "total fields": {f"field{i}": "text" for i in range(600)},
        "value and object": {"label": "x", "label.sub": "y"},
        "two kinds in one list": {"phones": ["555", Decimal(1)]},
    }
    for attributes in cases.values():
        with pytest.raises(WriteError, match="search could never index it"):
            nowhere.create_item({**item, **attributes})
        with pytest.raises(WriteError, match="search could never index it"):
            nowhere.update(str(item["pk"]), str(item["sk"]), attributes)


# A value each kind of declared attribute cannot take (tests/lambdas/refdata/test_refdata_checks_engine.py shows the
# engine refusing each as "failed to parse field [<name>] of type [<type>]").
WRONG_KIND = {
    AttributeKind.DATE: "July 1",
    AttributeKind.BOOLEAN: "yes",
    AttributeKind.TEXT: {"not": "text"},
    AttributeKind.KEYWORD: {"not": "a keyword"},
}


@pytest.mark.parametrize("schema", [s for s in DATA_SCHEMAS if s.attributes], ids=lambda s: s.name)
def test_a_declared_attribute_given_a_value_of_another_kind_is_refused_before_any_call(schema, nowhere, aws):
    values, item = key_values(schema), _item(schema)
    for attribute in schema.attributes:
        wrong = {attribute.name: WRONG_KIND[attribute.kind]}
        refused = f"attribute '{attribute.name}' \\(mapped as {attribute.kind.value}\\) takes"
        with pytest.raises(WriteError, match=refused):
            nowhere.create(schema.name, values, attributes(schema, **wrong))
        with pytest.raises(WriteError, match=refused):
            nowhere.update(str(item["pk"]), str(item["sk"]), wrong)
        with pytest.raises(WriteError, match=refused):
            nowhere.replace({**item, **wrong})


@pytest.mark.parametrize("schema", [s for s in DATA_SCHEMAS if s.attributes], ids=lambda s: s.name)
def test_a_date_object_is_refused_with_the_advice_to_pass_its_iso_text(schema, nowhere, aws):
    """DynamoDB has no date type: a date attribute, or any other, takes `.isoformat()`'s text."""
    values = key_values(schema)
    day = date(2026, 7, 1)
    named = [a.name for a in schema.attributes if a.kind is AttributeKind.DATE] + ["undeclaredDay"]
    for name in named:
        with pytest.raises(WriteError, match=re.escape("date.isoformat() ('2026-07-01')")):
            nowhere.create(schema.name, values, attributes(schema, **{name: day}))


@pytest.mark.parametrize("schema", DATA_SCHEMAS, ids=lambda s: s.name)
def test_a_table_that_does_not_exist_is_named(schema, nowhere, aws):
    """The first call of a create (the counter's or the put) names the table SchemaTables gave and the schema."""
    with pytest.raises(TableNotFoundError, match="'no-such-table' \\(holding schema") as missing:
        nowhere.create(schema.name, key_values(schema), attributes(schema))
    assert (missing.value.table, missing.value.schema) == ("no-such-table", schema.name)
    item = _item(schema)
    with pytest.raises(TableNotFoundError):
        nowhere.delete(str(item["pk"]), str(item["sk"]))


def test_an_unknown_schema_names_the_nearest_one(nowhere, aws):
    schema = DATA_SCHEMAS[0]
    misspelt = schema.name[:-1]
    with pytest.raises(WriteError, match=f"did you mean '{schema.name}'"):
        nowhere.create(misspelt, key_values(schema), {})


def test_a_schema_that_is_not_indexed_has_no_engine_limits(writer, table):
    schema = next((s for s in DATA_SCHEMAS if not s.indexable), None)
    if schema is None:
        pytest.skip("every data schema is indexed")
    stored = writer.create_item({**_item(schema), "a..b": 1})
    assert stored["a..b"] == 1


def test_a_client_keeps_the_schemas_it_knows_and_says_to_upgrade_for_one_the_platform_added(
    table, boto_session
):
    """`SchemaTables` of a platform one schema ahead of this client (a minor release): every schema this client
    knows still writes; a write to the new one says to upgrade, naming this client's version."""
    output = json.dumps({**{s.name: TABLE_NAME for s in DATA_SCHEMAS}, "addedLater": TABLE_NAME})
    tables = Tables.parse(output)
    assert tables.newer == {"addedLater"} and set(tables.holders) == {s.name for s in DATA_SCHEMAS}
    writer = Writer(tables, session=boto_session)
    for schema in DATA_SCHEMAS:
        writer.create(schema.name, key_values(schema), attributes(schema))
    upgrade = rf"'addedLater' is newer than refdata-client {re.escape(__version__)}.*upgrade refdata-client"
    with pytest.raises(ClientTooOldError, match=upgrade):
        writer.create("addedLater", {"collectionId": "c1"}, {"name": "x"})
    for write in (
        lambda: writer.create_item({"pk": "addedLater::c1", "sk": "META"}),
        lambda: writer.update("addedLater::c1", "META", {"name": "y"}),
        lambda: writer.delete("addedLater::c1", "META"),
    ):
        with pytest.raises(ClientTooOldError, match=upgrade):
            write()


def first_answer_lost(session: boto3.Session, operation: str, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The first `operation` call of `session`'s DynamoDB clients reaches the table (moto applies it) and its answer
    is lost on the way back, as a read timeout: botocore's retry handler sends it again. Returns the backoff the
    retries asked to sleep (recorded, not slept)."""
    from moto.core.models import botocore_stubber

    backoff: list[float] = []
    monkeypatch.setattr(botocore.endpoint, "time", SimpleNamespace(sleep=backoff.append))
    attempts: list[str] = []

    def lose(request: Any, event_name: str, **_: Any) -> None:
        attempts.append(event_name)
        if len(attempts) == 1:
            botocore_stubber(event_name=event_name, request=request)  # applied by the service...
            raise ReadTimeoutError(endpoint_url=request.url)  # ...and the answer never arrives

    session.events.register_first(f"before-send.dynamodb.{operation}", lose)
    return backoff


@pytest.fixture
def retrying_session(aws) -> boto3.Session:
    """A session of its own: the lost answers are registered on its events."""
    return boto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION)


def test_a_create_whose_answer_was_lost_is_its_own_write_not_another_s(table, retrying_session, monkeypatch):
    """The retried put fails its condition on the item its first attempt wrote: the create still succeeds, with
    the item it stored, and the table holds that one item (a caller told otherwise would create it again)."""
    schema = next(s for s in DATA_SCHEMAS if isinstance(s.sk, CounterSk))
    backoff = first_answer_lost(retrying_session, "PutItem", monkeypatch)
    writer = Writer(Tables.of(TABLE_NAME), session=retrying_session)
    stored = writer.create(schema.name, key_values(schema), attributes(schema, note="once"))
    assert len(backoff) == 1, "the put was retried by the SDK"
    items = table.query(KeyConditionExpression=Key("pk").eq(stored["pk"]))["Items"]
    assert items == [stored]


def test_a_counter_increment_whose_answer_was_lost_skips_a_number_and_never_repeats_one(
    table, retrying_session, monkeypatch
):
    schema = next(s for s in DATA_SCHEMAS if isinstance(s.sk, CounterSk))
    backoff = first_answer_lost(retrying_session, "UpdateItem", monkeypatch)
    writer = Writer(Tables.of(TABLE_NAME), session=retrying_session)
    first = writer.create(schema.name, key_values(schema), attributes(schema))
    second = writer.create(schema.name, key_values(schema), attributes(schema))
    assert len(backoff) == 1
    numbers = [parse_key(item["pk"], item["sk"]).values[schema.sk.field_name] for item in (first, second)]
    assert numbers == [2, 3]
    items = table.query(KeyConditionExpression=Key("pk").eq(first["pk"]))["Items"]
    assert sorted(item["sk"] for item in items) == sorted({first["sk"], second["sk"]})
