"""The composable template, the mapping fingerprint, and the stored ordering script run by the real engine: its rules,
convergence under any delivery order, and the in-process fakes' model of it agreeing with painless."""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ops.writes import repair_seq
from refdata.indexnames import index_name, write_alias
from refdata.keys import document_id, parse_pk
from search.documents import Change, documents_from_records, encode_update
from search.indices import (
    APPLY_SCRIPT_CONTEXT,
    APPLY_SCRIPT_ID,
    STREAM_SEQ_WIDTH,
    bootstrap_fingerprint,
    index_mappings,
    index_settings,
    index_template,
    mapping_fingerprint,
    stored_fingerprint,
    stored_script_body,
)

from tests.lambdas.stream_sync.stream_sync_fakes import PK, apply_sync_script, record
from tests.support.engine_node import EngineNode


def seq(number: int) -> str:
    return str(number).zfill(STREAM_SEQ_WIDTH)


def test_template_maps_keys_geometry_location_and_bbox_explicitly() -> None:
    properties = index_template("geozone", replicas=1)["template"]["mappings"]["properties"]

    keywords = ("pk", "sk", "globalId", "schema", "stream_seq")
    assert {key: properties[key]["type"] for key in keywords} == dict.fromkeys(keywords, "keyword")
    assert properties["tombstone"] == {"type": "boolean"}
    assert properties["geometry"] == {"type": "geo_shape"}
    assert properties["location"] == {"type": "geo_point"}
    assert properties["bbox"] == {"type": "double"}


def test_declared_attributes_are_mapped_by_kind_and_others_stay_dynamic() -> None:
    properties = index_mappings("productDate")["properties"]

    assert properties["date"] == {"type": "date"}
    assert properties["hidden"] == {"type": "boolean"}
    text = {"type": "text", "fields": {"keyword": {"type": "keyword", "ignore_above": 256}}}
    assert properties["adminNotes"] == properties["name"] == text
    assert "startDate" not in properties  # a booking attribute
    assert "startDate" in index_mappings("booking")["properties"]


def test_template_turns_off_date_and_numeric_guessing() -> None:
    mappings = index_template("geozone", replicas=1)["template"]["mappings"]

    assert mappings["date_detection"] is False and mappings["numeric_detection"] is False


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
    settings = index_template("geozone", replicas=2)["template"]["settings"]
    assert settings == {"index": {"number_of_replicas": 2}}


SCHEMA = parse_pk(PK)[0].name  # the schema of the fakes' records
DELETED_AT = 1_764_531_000  # a REMOVE's ApproximateCreationDateTime, which its tombstone keeps
# Hypothesis examples share a test's node: each writes documents of its own.
EXAMPLES = itertools.count()


@pytest.fixture
def synced_index(engine_as_left: EngineNode) -> EngineNode:
    """The node as the index bootstrap leaves it for the fakes' schema: the stored script (`PUT
    _scripts/refdata-sync-apply/update`) and the schema's first index version, made with the product's mappings and
    no replica (not through the template), behind its write alias. Only documents change from test to test, so the
    set-up is kept (`EngineNode.prepared`) and each test starts with no document."""

    def bootstrap() -> None:
        index = {"settings": index_settings(replicas=0), "mappings": index_mappings(SCHEMA)}
        index["aliases"] = {write_alias(SCHEMA): {"is_write_index": True}}
        script = (f"/_scripts/{APPLY_SCRIPT_ID}/{APPLY_SCRIPT_CONTEXT}", stored_script_body())
        for path, body in (script, (f"/{index_name(SCHEMA, 1)}", index)):
            answer = engine_as_left.request("PUT", path, body)
            assert answer.status == 200, (path, answer.body)

    engine_as_left.prepared("test_indices: the stored script and geozone-v1", bootstrap)
    return engine_as_left


def change(
    sk: str, sequence_number: int | str, attributes: dict[str, Any] | None = None, *, removed: bool = False
) -> Change:
    """A stream record of the fakes' item `sk`, parsed and built as the sync does (a REMOVE when `removed`)."""
    event = "REMOVE" if removed else "MODIFY"
    (built,) = documents_from_records(
        [record(event, sk, sequence_number, attributes, created_at=DELETED_AT)], None
    )
    return built


def named(value: str) -> dict[str, Any]:
    """Item attributes with a `name` (a mapped field: no test grows the index's mapping)."""
    return {"name": {"S": value}}


def bulk(engine: EngineNode, changes: Sequence[Change]) -> list[str]:
    """Send `changes` in one `_bulk` request, each as the sync encodes it (`encode_update`: a scripted upsert through
    the stored script, into the write alias); each item's result, in order."""
    answer = engine.request(
        "POST", "/_bulk", "".join(encode_update(each) for each in changes).encode("ascii")
    )
    assert answer.status == 200, answer.body
    items = [item["update"] for item in answer.body["items"]]
    assert not answer.body["errors"], [item for item in items if "error" in item]
    return [item["result"] for item in items]


def stored(engine: EngineNode, *sks: str) -> list[dict[str, Any] | None]:
    """The `_source` the engine holds for each of the fakes' items `sks` (None: no document); realtime, no refresh."""
    ids = [document_id(PK, sk) for sk in sks]
    answer = engine.request("POST", f"/{index_name(SCHEMA, 1)}/_mget", {"ids": ids})
    assert answer.status == 200, answer.body
    return [doc.get("_source") for doc in answer.body["docs"]]


def held(sk: str, number: int, **fields: Any) -> dict[str, Any]:
    """The `_source` the stored script leaves for the fakes' item `sk` after change `number` (a write unless `fields`
    say tombstone)."""
    return {"pk": PK, "sk": sk, "schema": SCHEMA, "stream_seq": seq(number), "tombstone": False, **fields}


def script_params(each: Change) -> dict[str, Any]:
    """The params the stored script receives for `each`: read back from the update the sync sends."""
    params: dict[str, Any] = json.loads(encode_update(each).splitlines()[1])["script"]["params"]
    return params


def test_the_stored_script_replaces_the_whole_document_with_a_newer_change(synced_index: EngineNode) -> None:
    old = {"description": {"S": "old"}, "hidden": {"BOOL": True}}

    results = bulk(synced_index, [change("1", 1, old), change("1", 2)])

    assert results == ["created", "updated"]
    assert stored(synced_index, "1") == [held("1", 2)]


@pytest.mark.parametrize("incoming", [1, 5])
def test_the_stored_script_ignores_an_older_or_equal_change(synced_index: EngineNode, incoming: int) -> None:
    results = bulk(synced_index, [change("1", 5, named("kept")), change("1", incoming, named("late"))])

    assert results == ["created", "noop"]
    assert stored(synced_index, "1") == [held("1", 5, name="kept")]


def test_the_stored_script_writes_a_minimal_tombstone_for_a_remove(synced_index: EngineNode) -> None:
    point = {"M": {"type": {"S": "Point"}, "coordinates": {"L": [{"N": "-123.1"}, {"N": "49.1"}]}}}
    item = named("x") | {"description": {"S": "d"}, "geometry": point}

    bulk(synced_index, [change("1", 8, item), change("1", 9, removed=True)])

    assert stored(synced_index, "1") == [held("1", 9, deletedAt=DELETED_AT, tombstone=True)]


def test_the_stored_script_lets_a_newer_upsert_revive_a_tombstone(synced_index: EngineNode) -> None:
    results = bulk(synced_index, [change("1", 3, removed=True), change("1", 4, named("back"))])

    assert results == ["created", "updated"]
    assert stored(synced_index, "1") == [held("1", 4, name="back")]


def test_the_stored_script_lets_a_repair_win_only_over_what_it_was_computed_against(
    synced_index: EngineNode,
) -> None:
    first = change("1", 5, named("v1"))
    bulk(synced_index, [first])

    assert bulk(synced_index, [change("1", repair_seq(first.seq), named("v2"))]) == ["updated"]
    (repaired,) = stored(synced_index, "1")
    assert repaired is not None and repaired["name"] == "v2"
    assert bulk(synced_index, [change("1", 5), change("1", 6, named("v3"))]) == ["noop", "updated"]


# A history: distinct stream sequence numbers, each a REMOVE or a write of one of a few values.
histories = st.lists(
    st.tuples(st.integers(min_value=1, max_value=10**30), st.booleans(), st.integers(0, 3)),
    min_size=1,
    max_size=8,
    unique_by=lambda step: step[0],
)


def history_change(sk: str, step: tuple[int | str, bool, int]) -> Change:
    """One step of a history as the change of item `sk`: its sequence number, a REMOVE or a write of `v<value>`."""
    sequence_number, removed, value = step
    return change(sk, sequence_number, None if removed else named(f"v{value}"), removed=removed)


# Each example is one bulk request and one read, each on a few documents of its own, on the node the test's fixture
# set up once for all its examples (hence the health check); 20 examples cost the node about 0.15 s of CPU.
ON_THE_NODE = settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@ON_THE_NODE
@given(histories, st.randoms(use_true_random=False))
def test_any_delivery_order_converges_to_the_newest_change(
    synced_index: EngineNode, history: list[tuple[int, bool, int]], shuffler: Any
) -> None:
    shuffled = list(history)
    shuffler.shuffle(shuffled)
    orders = {
        "shuffled": shuffled,
        "replayed": shuffled + list(reversed(history)),
        "sorted": sorted(history),
        "newest-first": sorted(history, reverse=True),
    }
    example = next(EXAMPLES)
    sks = {name: f"converge-{example}-{name}" for name in orders}

    bulk(synced_index, [history_change(sks[name], step) for name, order in orders.items() for step in order])

    number, removed, value = max(history)
    newest = {"tombstone": True, "deletedAt": DELETED_AT} if removed else {"name": f"v{value}"}
    found = dict(zip(orders, stored(synced_index, *sks.values()), strict=True))
    assert found == {name: held(sks[name], number, **newest) for name in orders}


# Sequence numbers from a few values, some of them repairs (`<seq>r`): two changes with the same number and different
# contents are drawn often, as are a change and its repair.
model_steps = st.tuples(
    st.builds(lambda number, repairs: f"{number}{'r' * repairs}", st.integers(1, 4), st.integers(0, 2)),
    st.booleans(),
    st.integers(0, 3),
)


@ON_THE_NODE
@given(st.lists(st.lists(model_steps, min_size=1, max_size=6), min_size=1, max_size=4))
def test_the_fakes_model_of_the_script_agrees_with_painless_on_any_history(
    synced_index: EngineNode, deliveries: list[list[tuple[str, bool, int]]]
) -> None:
    example = next(EXAMPLES)
    changes = {
        f"model-{example}-{n}": [history_change(f"model-{example}-{n}", step) for step in delivery]
        for n, delivery in enumerate(deliveries)
    }

    bulk(synced_index, [each for delivered in changes.values() for each in delivered])

    modelled: dict[str, dict[str, Any] | None] = {}
    for sk, delivered in changes.items():
        current: dict[str, Any] | None = None
        for each in delivered:
            current = apply_sync_script(current, script_params(each)) or current
        modelled[sk] = current
    assert dict(zip(changes, stored(synced_index, *changes), strict=True)) == modelled
