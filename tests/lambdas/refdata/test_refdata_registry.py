from datetime import date

import pytest
from refdata.registry import (
    COUNTER,
    REGISTRY,
    SHIPPED,
    Attribute,
    AttributeKind,
    CounterSk,
    Field,
    FieldsSk,
    KeyConventionError,
    Kind,
    Schema,
    Visibility,
    build_registry,
    indexable_schemas,
    schema_of_pk,
)


def test_indexable_schemas_are_the_registry_s_indexable_ones_in_registry_order():
    indexable = [name for name, schema in REGISTRY.items() if schema.indexable]
    assert [s.name for s in indexable_schemas()] == indexable


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


# --- search attributes and visibility ---------------------------------------------------------------------


def zone(**changes):
    return Schema(name="zone", scope=(Field("collectionId"),), sk=CounterSk(), indexable=True, **changes)


def hidden_by(flag: Attribute) -> Schema:
    return zone(attributes=(flag,), hidden_flag=flag.name)


TEXT = (Attribute("a", AttributeKind.TEXT),)


def test_attributes_are_listed_by_kind_and_visibility_in_declaration_order():
    schema = REGISTRY["productDate"]
    assert schema.attributes_of(AttributeKind.TEXT, Visibility.PUBLIC) == ("name", "description")
    assert schema.attributes_of(AttributeKind.DATE) == ("date",)
    assert schema.attributes_of(visibility=Visibility.INTERNAL) == ("adminNotes",)
    assert schema.hidden_flag == "hidden"


@pytest.mark.parametrize(
    ("declare", "message"),
    [
        (lambda: Attribute("bad name", AttributeKind.TEXT), "alphanumeric"),
        (lambda: Attribute("tombstone", AttributeKind.BOOLEAN), "platform"),
        (lambda: Attribute("geometry", AttributeKind.KEYWORD), "platform"),
        (lambda: zone(attributes=TEXT * 2), "repeat"),
        (lambda: zone(hidden_flag="hidden"), "declared BOOLEAN"),
        (lambda: hidden_by(Attribute("hidden", AttributeKind.TEXT)), "BOOLEAN"),
        (
            lambda: hidden_by(Attribute("hidden", AttributeKind.BOOLEAN, Visibility.INTERNAL)),
            "must be public",
        ),
        (
            lambda: Schema("note", (Field("id"),), CounterSk(), indexable=False, attributes=TEXT),
            "not indexable",
        ),
    ],
)
def test_bad_attribute_declarations_are_refused(declare, message):
    with pytest.raises(KeyConventionError, match=message):
        declare()


def test_no_schema_may_declare_a_field_the_sync_reserves() -> None:
    """A declared attribute the sync refuses (search.documents.RESERVED_FIELDS: deletedAt, stream_seq, ...) would
    dead-letter every item that carries it and change the schema's mapping: the registry refuses it first."""
    from refdata.registry import PLATFORM_ATTRIBUTES
    from search.documents import RESERVED_FIELDS

    assert set(RESERVED_FIELDS) <= PLATFORM_ATTRIBUTES
    for name in RESERVED_FIELDS:
        with pytest.raises(KeyConventionError, match=r"by the platform itself|must be alphanumeric"):
            Attribute(name, AttributeKind.KEYWORD)
