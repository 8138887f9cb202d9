"""The composable template, the mapping fingerprint and the ordering script's semantics."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from search.indices import (
    APPLY_SCRIPT_SOURCE,
    STREAM_SEQ_WIDTH,
    apply_sync_script,
    bootstrap_fingerprint,
    index_mappings,
    index_template,
    mapping_fingerprint,
    stored_fingerprint,
)


def seq(number: int) -> str:
    return str(number).zfill(STREAM_SEQ_WIDTH)


def test_template_maps_keys_geometry_location_and_bbox_explicitly() -> None:
    properties = index_template("geozone", replicas=1)["template"]["mappings"]["properties"]

    assert {
        key: properties[key]["type"] for key in ("pk", "sk", "globalId", "schema", "stream_seq")
    } == dict.fromkeys(("pk", "sk", "globalId", "schema", "stream_seq"), "keyword")
    assert properties["tombstone"] == {"type": "boolean"}
    assert properties["geometry"] == {"type": "geo_shape"}
    assert properties["location"] == {"type": "geo_point"}
    assert properties["bbox"] == {"type": "double"}


def test_declared_attributes_are_mapped_by_kind_and_others_stay_dynamic() -> None:
    properties = index_mappings("productDate")["properties"]

    assert properties["date"] == {"type": "date"}
    assert properties["hidden"] == {"type": "boolean"}
    assert (
        properties["adminNotes"]
        == properties["name"]
        == {
            "type": "text",
            "fields": {"keyword": {"type": "keyword", "ignore_above": 256}},
        }
    )
    assert "startDate" not in properties  # a booking attribute
    assert "startDate" in index_mappings("booking")["properties"]


def test_template_turns_off_date_and_numeric_guessing() -> None:
    mappings = index_template("geozone", replicas=1)["template"]["mappings"]

    assert mappings["date_detection"] is False
    assert mappings["numeric_detection"] is False


def _dynamic_templates(schema: str) -> dict[str, Any]:
    templates = index_template(schema, replicas=1)["template"]["mappings"]["dynamic_templates"]
    return {name: rule for entry in templates for name, rule in entry.items()}


def test_other_strings_become_text_with_a_keyword_subfield() -> None:
    rule = _dynamic_templates("booking")["strings_as_text_and_keyword"]

    assert rule["match_mapping_type"] == "string"
    assert rule["mapping"]["type"] == "text"
    assert rule["mapping"]["fields"]["keyword"]["type"] == "keyword"


def test_every_dynamic_number_is_indexed_as_a_double() -> None:
    rules = _dynamic_templates("booking")

    # Without these, integers map to long (a later fraction is truncated, beyond 64 bits refused) and fractions
    # to the 32-bit float.
    by_type = {rule["match_mapping_type"]: rule["mapping"] for rule in rules.values()}
    assert by_type["long"] == by_type["double"] == {"type": "double"}


def test_exact_numbers_are_kept_in_the_source_and_never_indexed() -> None:
    properties = index_template("booking", replicas=1)["template"]["mappings"]["properties"]

    assert properties["exactNumbers"] == {"type": "object", "enabled": False}


def test_template_targets_only_the_schemas_versions() -> None:
    template = index_template("booking", replicas=1)

    assert template["index_patterns"] == ["booking-v*"]
    assert isinstance(template["priority"], int)


def test_fingerprint_is_stored_in_meta_and_ignores_meta() -> None:
    mappings = index_mappings("geozone")

    assert stored_fingerprint(mappings) == mapping_fingerprint(mappings)
    assert mapping_fingerprint(mappings | {"_meta": {"other": 1}}) == mapping_fingerprint(mappings)


def test_fingerprint_is_deterministic_and_order_independent() -> None:
    mappings = index_mappings("geozone")
    reordered = dict(reversed(list(mappings.items())))

    assert mapping_fingerprint(reordered) == mapping_fingerprint(index_mappings("geozone"))


def test_fingerprint_changes_with_any_field_mapping() -> None:
    changed = copy.deepcopy(index_mappings("geozone"))
    changed["properties"]["bbox"] = {"type": "float"}

    assert mapping_fingerprint(changed) != mapping_fingerprint(index_mappings("geozone"))


def test_bootstrap_fingerprint_follows_the_schema_list() -> None:
    both = bootstrap_fingerprint(["geozone", "booking"], replicas=1)
    assert both == bootstrap_fingerprint(["booking", "geozone"], replicas=1)
    assert bootstrap_fingerprint(["geozone"], replicas=1) != both


def test_bootstrap_fingerprint_follows_the_replica_count() -> None:
    assert bootstrap_fingerprint(["geozone"], replicas=0) != bootstrap_fingerprint(["geozone"], replicas=1)


def test_every_index_gets_the_configured_replica_count() -> None:
    assert index_template("geozone", replicas=2)["template"]["settings"] == {
        "index": {"number_of_replicas": 2}
    }


def test_script_replaces_the_whole_document_with_a_newer_change() -> None:
    stored = {"pk": "p", "sk": "1", "old": True, "stream_seq": seq(1), "tombstone": False}

    result = apply_sync_script(stored, {"seq": seq(2), "tombstone": False, "doc": {"pk": "p", "sk": "1"}})

    assert result == {"pk": "p", "sk": "1", "stream_seq": seq(2), "tombstone": False}


@pytest.mark.parametrize("incoming", [1, 5])
def test_script_ignores_an_older_or_equal_change(incoming: int) -> None:
    stored = {"pk": "p", "sk": "1", "stream_seq": seq(5), "tombstone": False}

    assert apply_sync_script(stored, {"seq": seq(incoming), "tombstone": False, "doc": {"pk": "p"}}) is None


def test_script_writes_a_minimal_tombstone_for_a_remove() -> None:
    doc = {
        "pk": "p",
        "sk": "1",
        "schema": "geozone",
        "deletedAt": 7,
        "name": "x",
        "geometry": {"type": "Point"},
    }

    result = apply_sync_script(None, {"seq": seq(9), "tombstone": True, "doc": doc})

    assert result == {
        "pk": "p",
        "sk": "1",
        "schema": "geozone",
        "deletedAt": 7,
        "stream_seq": seq(9),
        "tombstone": True,
    }


def test_script_lets_a_newer_upsert_revive_a_tombstone() -> None:
    tombstone = {"pk": "p", "sk": "1", "schema": "s", "stream_seq": seq(3), "tombstone": True}

    result = apply_sync_script(tombstone, {"seq": seq(4), "tombstone": False, "doc": {"pk": "p", "sk": "1"}})

    assert result is not None
    assert result["tombstone"] is False


def test_script_source_has_the_same_rule_as_its_python_twin() -> None:
    source = APPLY_SCRIPT_SOURCE

    assert "stored.compareTo(incoming) >= 0" in source
    assert "ctx.op = 'none'" in source
    assert "ctx._source.clear()" in source
    assert "replacement.put('stream_seq', incoming)" in source
    assert source.count("{") == source.count("}")


changes = st.lists(
    st.tuples(st.integers(min_value=1, max_value=10**30), st.booleans(), st.integers(0, 3)),
    min_size=1,
    max_size=8,
    unique_by=lambda change: change[0],
)


@given(changes, st.randoms(use_true_random=False))
def test_any_delivery_order_converges_to_the_newest_change(
    history: list[tuple[int, bool, int]], shuffler: Any
) -> None:
    def params(change: tuple[int, bool, int]) -> dict[str, Any]:
        number, tombstone, value = change
        return {
            "seq": seq(number),
            "tombstone": tombstone,
            "doc": {"pk": "p", "sk": "1", "schema": "s", "v": value},
        }

    def deliver(order: list[tuple[int, bool, int]]) -> dict[str, Any] | None:
        current: dict[str, Any] | None = None
        for change in order:
            current = apply_sync_script(current, params(change)) or current
        return current

    shuffled = list(history)
    shuffler.shuffle(shuffled)
    replayed = shuffled + list(reversed(history))

    assert deliver(replayed) == deliver(sorted(history))
