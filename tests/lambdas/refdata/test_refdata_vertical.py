import pytest
from refdata.globalid import ItemExistsError
from refdata.registry import KeyConventionError
from refdata.vertical import Comment, Entity, add_comment, assemble, load_entity, put_entity, split

PK = "thread::bcparks_1::0000000009"

THREAD = Entity(
    pk=PK,
    meta={"title": "How to Build Software", "category": "technology", "createdAt": 98765432},
    text="A transistor is like a light switch...",
    comments=(
        Comment(1234567890000, {"userId": "rytheturtle", "comment": "Good read...."}),
        Comment(1234567890500, {"userId": "someone", "comment": "Agreed"}),
    ),
)


def test_split_gives_meta_text_and_one_item_per_comment():
    parts = ["META", "TEXT", "COMMENT#1234567890000", "COMMENT#1234567890500"]
    assert [item["sk"] for item in split(THREAD)] == parts


def test_assemble_inverts_split_whatever_the_item_order():
    assert assemble(PK, reversed(split(THREAD))) == THREAD


def test_assemble_of_nothing_is_none():
    assert assemble(PK, []) is None


def test_only_vertically_partitioned_schemas_are_accepted():
    with pytest.raises(KeyConventionError, match="not vertically partitioned"):
        split(Entity(pk="geozone::bcparks_1", meta={}))


def test_part_attributes_may_not_shadow_the_keys():
    with pytest.raises(KeyConventionError, match="must not be named"):
        split(Entity(pk=PK, meta={"sk": "x"}))


@pytest.mark.integration
@pytest.mark.parametrize("page_size", [None, 1, 2])
def test_entity_round_trips_through_one_paginated_query(table, page_size):
    put_entity(table, THREAD)
    assert load_entity(table, PK, page_size=page_size) == THREAD


@pytest.mark.integration
def test_comments_are_added_one_item_at_a_time_in_time_order(table):
    put_entity(table, Entity(pk=PK, meta={"title": "t"}))
    add_comment(table, PK, Comment(20, {"comment": "second"}))
    add_comment(table, PK, Comment(10, {"comment": "first"}))
    loaded = load_entity(table, PK)
    assert [c.attributes["comment"] for c in loaded.comments] == ["first", "second"]


@pytest.mark.integration
def test_a_comment_never_overwrites_another_with_the_same_timestamp(table):
    add_comment(table, PK, Comment(10, {"comment": "first"}))
    with pytest.raises(ItemExistsError):
        add_comment(table, PK, Comment(10, {"comment": "clash"}))


@pytest.mark.integration
def test_loading_a_missing_entity_is_none(table):
    assert load_entity(table, PK) is None
