"""The reserved scopes (refdata.reserved), for every indexable schema of the registry: the heartbeat's one key
and the canaries' unique keys follow the key conventions, are recognised by their pk alone, and no writer can build
them through the ordinary key builders; the registry keeps the scope field a text field."""

from __future__ import annotations

import json
from datetime import date

import pytest
from refdata import counters
from refdata.keys import build_pk, document_id, parse_key
from refdata.registry import CounterSk, Field, FieldsSk, KeyConventionError, Kind, Schema, indexable_schemas
from refdata.reserved import (
    CANARY,
    HEARTBEAT,
    SCOPES,
    canary_key,
    heartbeat_key,
    is_heartbeat,
    is_reserved,
    sample_attributes,
    scope_field,
    scope_of,
    scope_prefix,
)

SCHEMAS = [schema.name for schema in indexable_schemas()]


@pytest.mark.parametrize("schema", SCHEMAS)
def test_the_heartbeat_key_is_one_fixed_key_of_the_conventions(schema: str) -> None:
    pk, sk, attributes = heartbeat_key(schema)
    assert heartbeat_key(schema) == (pk, sk, attributes)  # the same item, rewritten in place
    assert parse_key(pk, sk).schema == schema and document_id(pk, sk)
    assert pk.startswith(scope_prefix(schema, HEARTBEAT)) and scope_of(pk) == HEARTBEAT and is_heartbeat(pk)


@pytest.mark.parametrize("schema", SCHEMAS)
def test_every_canary_key_is_new_of_the_conventions_and_never_a_heartbeat(schema: str) -> None:
    keys = {canary_key(schema, f"smoke-run-{n}", today=date(2026, 12, 1))[:2] for n in range(50)}
    assert len(keys) == 50
    for pk, sk in keys:
        assert parse_key(pk, sk).schema == schema and document_id(pk, sk)
        assert pk.startswith(scope_prefix(schema, CANARY)) and scope_of(pk) == CANARY
        assert is_reserved(pk) and not is_heartbeat(pk)


@pytest.mark.parametrize("schema", SCHEMAS)
@pytest.mark.parametrize("scope", SCOPES)
def test_no_writer_can_build_a_reserved_key(schema: str, scope: str) -> None:
    first = scope_field(next(s for s in indexable_schemas() if s.name == schema))
    pk, sk, _ = heartbeat_key(schema) if scope == HEARTBEAT else canary_key(schema, "x")
    values = parse_key(pk, sk).values
    with pytest.raises(KeyConventionError, match=rf"field '{first.name}' value '{scope}': is reserved"):
        build_pk(schema, values)


@pytest.mark.parametrize("schema", SCHEMAS)
def test_an_ordinary_key_is_not_reserved(schema: str) -> None:
    pk, _, _ = canary_key(schema, "x")
    ordinary = pk.replace(CANARY, "bcparks_1", 1)
    assert scope_of(ordinary) is None and not is_reserved(ordinary)
    assert scope_of(pk.replace(CANARY, f"{CANARY}x", 1)) is None  # a value that merely starts like the scope


@pytest.mark.parametrize("schema", SCHEMAS)
def test_a_canary_sets_every_declared_attribute_and_is_never_hidden_by_its_flag(schema: str) -> None:
    declared = next(s for s in indexable_schemas() if s.name == schema)
    values = sample_attributes(schema, "refdata smoke canary", date(2026, 12, 1))
    assert set(values) == {attribute.name for attribute in declared.attributes}
    if declared.hidden_flag:
        assert values[declared.hidden_flag] is False  # only the reserved scope hides it from readers
    json.dumps(values)


def test_the_registry_refuses_an_indexable_schema_whose_scope_field_is_not_text() -> None:
    with pytest.raises(KeyConventionError, match="first scope field must be text"):
        Schema(name="dated", scope=(Field("day", Kind.DATE),), sk=CounterSk(), indexable=True)
    Schema(name="dated", scope=(Field("day", Kind.DATE),), sk=CounterSk(), indexable=False)


def test_a_schema_with_no_field_a_canary_can_make_unique_is_refused_by_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import refdata.registry as registry

    odd = Schema(
        name="odd", scope=(Field("collectionId"),), sk=FieldsSk((Field("day", Kind.DATE),)), indexable=True
    )
    monkeypatch.setattr(registry, "REGISTRY", registry.build_registry([*registry.REGISTRY.values(), odd]))
    with pytest.raises(KeyConventionError, match="'odd': no key field besides the reserved scope"):
        canary_key("odd", "x")


def test_the_heartbeat_never_takes_a_counter_value(table: object) -> None:
    for schema in indexable_schemas():
        if isinstance(schema.sk, CounterSk):
            pk, sk, _ = heartbeat_key(schema.name)
            assert parse_key(pk, sk).values[schema.sk.field_name] == 0  # counters start at 1
            assert counters.next_value(table, pk) == 1  # and its partition's counter was never touched
