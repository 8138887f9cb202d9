import uuid
from datetime import date

import pytest
from refdata.globalid import (
    GlobalIdError,
    ItemExistsError,
    create_item,
    lookup,
    replace_item,
    update_attributes,
)
from refdata.keys import build_pk, build_sk
from refdata.registry import KeyConventionError

pytestmark = pytest.mark.integration

BOOKING_ID = "0b9a3c1e-6f1d-4c8e-9a51-3c2f0e4d5a6b"


def booking(**attributes):
    values = {"collectionId": "bcparks_1", "shard": 0, "startDate": date(2026, 7, 1), "bookingId": BOOKING_ID}
    return {"pk": build_pk("booking", values), "sk": build_sk("booking", values), **attributes}


def test_create_assigns_a_uuid_global_id_for_global_id_schemas(table):
    stored = create_item(table, booking(guests=2))
    assert uuid.UUID(stored["globalId"]).version == 4


def test_create_assigns_no_global_id_for_other_schemas(table):
    assert "globalId" not in create_item(table, {"pk": "geozone::c", "sk": "0000000001"})


def test_create_never_overwrites(table):
    create_item(table, booking())
    with pytest.raises(ItemExistsError):
        create_item(table, booking())


def test_create_refuses_a_caller_chosen_global_id(table):
    with pytest.raises(GlobalIdError, match="assigned at creation"):
        create_item(table, booking(globalId=str(uuid.uuid4())))


def test_create_refuses_keys_outside_the_conventions(table):
    with pytest.raises(KeyConventionError):
        create_item(table, {"pk": "unknown::x", "sk": "1"})


def test_create_refuses_indexable_keys_too_long_for_an_opensearch_id(table):
    with pytest.raises(KeyConventionError, match="document id"):
        create_item(table, {"pk": "geozone::" + "c" * 600, "sk": "0000000001"})


def test_replace_keeps_the_global_id(table):
    stored = create_item(table, booking(guests=2))
    replace_item(table, {**stored, "guests": 3})
    assert lookup(table, stored["globalId"])["guests"] == 3


def test_replace_with_another_global_id_is_refused_and_changes_nothing(table):
    stored = create_item(table, booking(guests=2))
    with pytest.raises(GlobalIdError):
        replace_item(table, {**stored, "globalId": str(uuid.uuid4()), "guests": 9})
    assert lookup(table, stored["globalId"]) == stored


def test_replace_without_the_global_id_is_refused(table):
    create_item(table, booking())
    with pytest.raises(GlobalIdError, match="needs its stored globalId"):
        replace_item(table, booking(guests=1))


def test_replace_of_a_missing_item_is_refused(table):
    with pytest.raises(GlobalIdError):
        replace_item(table, booking(globalId=str(uuid.uuid4())))


def test_update_sets_attributes_and_keeps_the_global_id(table):
    stored = create_item(table, booking(guests=2))
    updated = update_attributes(table, stored["pk"], stored["sk"], {"guests": 4, "note": "late"})
    assert updated == {**stored, "guests": 4, "note": "late"}


@pytest.mark.parametrize("attribute", ["globalId", "pk", "sk"])
def test_update_cannot_touch_keys_or_global_id(table, attribute):
    stored = create_item(table, booking())
    with pytest.raises(GlobalIdError):
        update_attributes(table, stored["pk"], stored["sk"], {attribute: "x"})


def test_update_of_a_missing_item_is_refused(table):
    with pytest.raises(KeyError):
        update_attributes(table, "geozone::c", "0000000001", {"name": "x"})


def test_lookup_returns_the_whole_item_through_the_keys_only_index(table):
    stored = create_item(table, booking(guests=2, note="n"))
    create_item(
        table,
        {**booking(), "sk": build_sk("booking", {"startDate": date(2026, 7, 2), "bookingId": BOOKING_ID})},
    )
    assert lookup(table, stored["globalId"]) == stored


def test_lookup_of_an_unknown_global_id_is_none(table):
    assert lookup(table, str(uuid.uuid4())) is None
