from datetime import date

import pytest
from datamodel.registry import (
    COUNTER,
    REGISTRY,
    SHIPPED,
    CounterSk,
    Field,
    FieldsSk,
    KeyConventionError,
    Kind,
    Schema,
    build_registry,
    indexable_schemas,
    schema_of_pk,
)


def test_shipped_schemas_are_registered():
    assert set(REGISTRY) == {"geozone", "productDate", "booking", "thread", COUNTER}


def test_indexable_schemas_are_the_data_schemas_synced_to_search():
    assert [s.name for s in indexable_schemas()] == ["geozone", "productDate", "booking"]


def test_counter_schema_is_not_indexable():
    assert not REGISTRY[COUNTER].indexable


def test_schema_of_pk_reads_the_first_segment():
    assert schema_of_pk("productDate::bcparks_1::dayuse::1").name == "productDate"
    assert schema_of_pk("counter::geozone::bcparks_1").name == COUNTER


@pytest.mark.parametrize("pk", ["unknown::x", "geozone", "geozonex::1", "", "GEOZONE::bcparks_1"])
def test_schema_of_pk_rejects_unknown_schemas_naming_the_value(pk):
    with pytest.raises(KeyConventionError, match=repr(pk)):
        schema_of_pk(pk)


def test_schema_names_are_unique_case_insensitively():
    clash = Schema(name="GeoZone", scope=(Field("collectionId"),), sk=CounterSk(), indexable=True)
    with pytest.raises(KeyConventionError, match="'GeoZone' collides with 'geozone'"):
        build_registry((*SHIPPED, clash))


def test_adding_a_schema_is_one_declaration():
    permit = Schema(
        name="permit",
        scope=(Field("collectionId"),),
        sk=FieldsSk((Field("issued", Kind.DATE), Field("number", Kind.NUMBER, width=6))),
        indexable=True,
        example={"collectionId": "bcparks_1", "issued": date(2026, 1, 2), "number": 42},
    )
    assert build_registry((*SHIPPED, permit))["permit"].pk_prefix == "permit::"


@pytest.mark.parametrize(
    ("declare", "message"),
    [
        (lambda: Field("bad name"), "alphanumeric"),
        (lambda: Field("n", Kind.NUMBER), "width"),
        (lambda: Field("t", Kind.TEXT, width=3), "width"),
        (lambda: Schema("a::b", (), CounterSk(), indexable=False), "alphanumeric"),
        (lambda: Schema("x", (Field("seq"),), CounterSk(), indexable=False), "repeat"),
        (lambda: Schema("x", (Field("k", Kind.KEY), Field("a")), CounterSk(), indexable=False), "last pk"),
    ],
)
def test_bad_declarations_are_refused(declare, message):
    with pytest.raises(KeyConventionError, match=message):
        declare()


def test_schemas_are_hashable():
    assert len({*REGISTRY.values()}) == len(REGISTRY)
