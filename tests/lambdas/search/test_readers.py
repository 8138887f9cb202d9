"""Read roles: the security bodies the index bootstrap puts, derived from the registry's visibility."""

from __future__ import annotations

import json

import pytest
from refdata.registry import REGISTRY
from search.readers import (
    READ_INDEX_ACTIONS,
    check_role_name,
    document_filter,
    field_exclusions,
    parse_read_roles,
    read_role_body,
    read_role_definitions,
)

READER = "arn:aws:iam::111111111111:role/public-site"


def test_readers_never_see_tombstones_nor_items_whose_hidden_flag_is_set() -> None:
    tombstones, hidden = {"term": {"tombstone": True}}, {"term": {"hidden": True}}
    # The platform's own heartbeat and canaries (refdata.reserved): geozone's pk is its scope alone.
    reserved = [{"term": {"pk": "geozone::refdata-heartbeat"}}, {"term": {"pk": "geozone::refdata-canary"}}]
    assert document_filter(REGISTRY["geozone"]) == {"bool": {"must_not": [tombstones, hidden, *reserved]}}
    # Bookings declare no hidden flag: only tombstones (and the reserved scopes, pk prefixes here) are hidden.
    reserved = [
        {"prefix": {"pk": "booking::refdata-heartbeat::"}},
        {"prefix": {"pk": "booking::refdata-canary::"}},
    ]
    assert document_filter(REGISTRY["booking"]) == {"bool": {"must_not": [tombstones, *reserved]}}


def test_internal_attributes_and_their_exact_numbers_are_excluded() -> None:
    internal = ("guestName", "adminNotes")
    expected = [
        rule
        for name in internal
        for rule in (f"~{name}", f"~exactNumbers./{name}", f"~exactNumbers./{name}/*")
    ]
    assert field_exclusions(REGISTRY["booking"]) == expected


def test_a_read_role_names_only_read_aliases_with_their_dls_and_fls() -> None:
    body = read_role_body(["productDate", "geozone"])

    assert body["cluster_permissions"] == []
    geozone, product_date = body["index_permissions"]
    assert geozone == {
        "index_patterns": ["geozone"],
        "dls": json.dumps(document_filter(REGISTRY["geozone"]), separators=(",", ":")),
        "allowed_actions": list(READ_INDEX_ACTIONS),
        "fls": field_exclusions(REGISTRY["geozone"]),
    }
    assert product_date["index_patterns"] == ["productdate"]
    assert not any(action.startswith("indices:data/write") for action in READ_INDEX_ACTIONS)


def test_definitions_round_trip_through_the_custom_resource_property() -> None:
    definitions = read_role_definitions([("public_search", ("geozone",), (READER, "saml-readers", READER))])

    assert definitions["public_search"]["mapping"]["backend_roles"] == [READER, "saml-readers"]
    assert parse_read_roles(json.dumps(definitions), "ReadRoles") == definitions
    assert parse_read_roles(None, "ReadRoles") == {}


@pytest.mark.parametrize("name", ["ab", "Readers", "1reader", "all_access", "refdata_stream_sync", "a" * 65])
def test_reserved_or_malformed_role_names_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match=r"^where: "):
        check_role_name(name, "where")


def _excludes(clauses: list[dict], pk: str) -> bool:
    """Whether one of the must_not clauses matches a document with this pk (term: equal, prefix: starts with)."""
    for clause in clauses:
        ((kind, spec),) = clause.items()
        if "pk" in spec and (spec["pk"] == pk if kind == "term" else pk.startswith(spec["pk"])):
            return True
    return False


@pytest.mark.parametrize("schema", [s.name for s in REGISTRY.values() if s.indexable])
def test_readers_never_see_the_platforms_heartbeat_or_canaries_and_see_ordinary_items(schema: str) -> None:
    from refdata.reserved import CANARY, canary_key, heartbeat_key

    clauses = document_filter(REGISTRY[schema])["bool"]["must_not"]
    heartbeat, _, _ = heartbeat_key(schema)
    canary, _, _ = canary_key(schema, "smoke-1")
    assert _excludes(clauses, heartbeat) and _excludes(clauses, canary)
    assert not _excludes(clauses, canary.replace(CANARY, "bcparks_1", 1))
    assert not _excludes(clauses, canary.replace(CANARY, f"{CANARY}2", 1))  # only the exact scope value
