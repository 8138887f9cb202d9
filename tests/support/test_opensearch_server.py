"""The loopback server answers in the documented OpenSearch formats the runtime code is tested against."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import urllib3
from botocore.credentials import Credentials
from refdata.transport import NDJSON_CONTENT_TYPE, OpenSearchTransport, Response, TransportTimeoutError
from search.indices import APPLY_SCRIPT_ID, stored_script_body

from tests.support.opensearch_server import ROUTE_BULK, LoopbackOpenSearch

pytestmark = pytest.mark.integration


@pytest.fixture
def server() -> Iterator[LoopbackOpenSearch]:
    with LoopbackOpenSearch() as running:
        yield running


@pytest.fixture
def client(server: LoopbackOpenSearch) -> OpenSearchTransport:
    return OpenSearchTransport(
        server.endpoint, "eu-west-1", timeout_seconds=2, credentials=Credentials("a", "b")
    )


def send(client: OpenSearchTransport, method: str, path: str, body: Any = None) -> Response:
    return client.request(method, path, json.dumps(body).encode() if body is not None else None)


def bulk(client: OpenSearchTransport, lines: list[Any], path: str = "_bulk") -> Response:
    body = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    return client.request("POST", path, body, {"Content-Type": NDJSON_CONTENT_TYPE})


def sync_update(
    doc_id: str, seq: int, doc: dict[str, Any], *, tombstone: bool = False
) -> list[dict[str, Any]]:
    params = {"seq": str(seq).zfill(40), "tombstone": tombstone, "doc": doc}
    return [
        {"update": {"_id": doc_id}},
        {"script": {"id": APPLY_SCRIPT_ID, "params": params}, "scripted_upsert": True, "upsert": {}},
    ]


@pytest.fixture
def places(client: OpenSearchTransport) -> str:
    """Index `places-v1` behind read alias `places` (tombstones hidden) and write alias `places-write`."""
    send(client, "PUT", f"_scripts/{APPLY_SCRIPT_ID}", stored_script_body())
    aliases = {
        "places": {"filter": {"bool": {"must_not": [{"term": {"tombstone": True}}]}}},
        "places-write": {"is_write_index": True},
    }
    assert send(client, "PUT", "places-v1", {"aliases": aliases}).status == 200
    return "places-write"


def test_unsigned_requests_are_refused_with_403(server: LoopbackOpenSearch) -> None:
    response = urllib3.request("GET", f"{server.endpoint}/_cat/indices?format=json", retries=False)

    assert response.status == 403


def test_bulk_index_create_delete_report_per_item_status(client: OpenSearchTransport, places: str) -> None:
    response = bulk(
        client,
        [
            {"index": {"_index": places, "_id": "a"}},
            {"name": "A"},
            {"create": {"_index": places, "_id": "a"}},
            {"name": "again"},
            {"delete": {"_index": places, "_id": "missing"}},
        ],
    )

    payload = response.json()
    assert response.status == 200
    assert payload["errors"] is True
    assert isinstance(payload["took"], int)
    indexed, created, deleted = payload["items"]
    assert indexed["index"]["_index"] == "places-v1"
    assert (indexed["index"]["status"], indexed["index"]["result"]) == (201, "created")
    assert created["create"]["status"] == 409
    assert created["create"]["error"]["type"] == "version_conflict_engine_exception"
    assert (deleted["delete"]["status"], deleted["delete"]["result"]) == (404, "not_found")


def test_bulk_without_trailing_newline_is_rejected(client: OpenSearchTransport, places: str) -> None:
    body = json.dumps({"delete": {"_index": places, "_id": "x"}}).encode()

    response = client.request("POST", "_bulk", body, {"Content-Type": NDJSON_CONTENT_TYPE})

    assert response.status == 400
    assert "terminated by a newline" in response.error_reason()


def test_bulk_path_index_is_the_default_target(client: OpenSearchTransport, places: str) -> None:
    response = bulk(client, [{"index": {"_id": "a"}}, {"n": 1}], path=f"{places}/_bulk")

    assert response.json()["items"][0]["index"]["_index"] == "places-v1"


def test_scripted_upsert_creates_then_ignores_an_older_change(
    client: OpenSearchTransport, server: LoopbackOpenSearch, places: str
) -> None:
    newer = sync_update("p#1", 20, {"pk": "p", "sk": "1", "schema": "places", "name": "new"})
    older = sync_update("p#1", 10, {"pk": "p", "sk": "1", "schema": "places", "name": "old"})

    first = bulk(client, newer, path=f"{places}/_bulk").json()["items"][0]["update"]
    second = bulk(client, older, path=f"{places}/_bulk").json()["items"][0]["update"]

    assert (first["status"], first["result"]) == (201, "created")
    assert (second["status"], second["result"]) == (200, "noop")
    assert server.document(places, "p#1") == {
        "pk": "p",
        "sk": "1",
        "schema": "places",
        "name": "new",
        "tombstone": False,
        "stream_seq": "20".zfill(40),
    }


def test_scripted_update_replaces_the_whole_source(
    client: OpenSearchTransport, server: LoopbackOpenSearch, places: str
) -> None:
    bulk(
        client,
        sync_update("p#1", 1, {"pk": "p", "sk": "1", "schema": "places", "gone": True}),
        f"{places}/_bulk",
    )
    bulk(client, sync_update("p#1", 2, {"pk": "p", "sk": "1", "schema": "places"}), f"{places}/_bulk")

    assert "gone" not in (server.document(places, "p#1") or {})


def test_tombstones_are_hidden_by_the_read_alias(client: OpenSearchTransport, places: str) -> None:
    doc = {"pk": "p", "sk": "1", "schema": "places", "name": "x"}
    bulk(client, sync_update("p#1", 1, doc) + sync_update("p#2", 1, doc | {"sk": "2"}), f"{places}/_bulk")
    bulk(client, sync_update("p#1", 2, doc | {"deletedAt": 1_764_531_000}, tombstone=True), f"{places}/_bulk")

    read = send(client, "GET", "places/_search", {"query": {"match_all": {}}}).json()
    everything = send(client, "GET", "places-v1/_count").json()

    assert [hit["_id"] for hit in read["hits"]["hits"]] == ["p#2"]
    assert everything["count"] == 2
    tombstone = send(client, "GET", "places-v1/_doc/p%231").json()["_source"]
    assert tombstone == {
        "pk": "p",
        "sk": "1",
        "schema": "places",
        "deletedAt": 1_764_531_000,
        "tombstone": True,
        "stream_seq": "2".zfill(40),
    }


def test_update_with_a_script_that_was_never_stored_fails_per_item(client: OpenSearchTransport) -> None:
    send(client, "PUT", "fresh-v1", {"aliases": {"fresh-write": {"is_write_index": True}}})

    response = bulk(client, sync_update("x#1", 1, {"pk": "x", "sk": "1"}), "fresh-write/_bulk").json()

    item = response["items"][0]["update"]
    assert response["errors"] is True
    assert item["status"] == 400  # UpdateHelper wraps every script failure; the cause is only in caused_by
    assert item["error"] == {
        "type": "illegal_argument_exception",
        "reason": "failed to execute script",
        "caused_by": {
            "type": "resource_not_found_exception",
            "reason": f"unable to find script [{APPLY_SCRIPT_ID}] in cluster state",
        },
    }


def test_item_faults_fail_only_the_named_document(
    client: OpenSearchTransport, server: LoopbackOpenSearch, places: str
) -> None:
    server.fail_item("bad", status=400, error_type="mapper_parsing_exception", reason="failed to parse field")
    server.fail_item("busy", status=429, error_type="rejected_execution_exception", reason="queue full")

    lines: list[dict[str, Any]] = []
    for doc_id in ("bad", "ok", "busy"):
        lines += [{"index": {"_id": doc_id}}, {}]

    items = bulk(client, lines, path=f"{places}/_bulk").json()["items"]

    assert [item["index"]["status"] for item in items] == [400, 201, 429]
    assert items[0]["index"]["error"]["type"] == "mapper_parsing_exception"
    assert server.document(places, "ok") == {}
    assert server.document(places, "bad") is None


def test_route_faults_apply_to_the_next_calls_only(
    client: OpenSearchTransport, server: LoopbackOpenSearch
) -> None:
    server.fail_next(ROUTE_BULK, 503, times=2)
    lines = [{"index": {"_index": "auto", "_id": "1"}}, {}]

    statuses = [bulk(client, lines).status for _ in range(3)]

    assert statuses == [503, 503, 200]
    assert server.count(ROUTE_BULK) == 3


def test_alias_actions_are_atomic(client: OpenSearchTransport, server: LoopbackOpenSearch) -> None:
    send(client, "PUT", "places-v1", {"aliases": {"places": {}}})
    send(client, "PUT", "places-v2", {})

    response = send(
        client,
        "POST",
        "_aliases",
        {
            "actions": [
                {"add": {"index": "places-v2", "alias": "places"}},
                {"remove": {"index": "nope", "alias": "x"}},
            ]
        },
    )

    assert response.status == 404
    assert server.aliases_of("places-v2") == {}
    assert "places" in server.aliases_of("places-v1")


def test_alias_swap_moves_the_alias_in_one_call(
    client: OpenSearchTransport, server: LoopbackOpenSearch
) -> None:
    send(client, "PUT", "places-v1", {"aliases": {"places": {}}})
    send(client, "PUT", "places-v2", {})

    response = send(
        client,
        "POST",
        "_aliases",
        {
            "actions": [
                {"remove": {"index": "places-v1", "alias": "places"}},
                {"add": {"index": "places-v2", "alias": "places"}},
            ]
        },
    )

    assert response.json() == {"acknowledged": True}
    assert send(client, "GET", "_alias/places").json() == {"places-v2": {"aliases": {"places": {}}}}


def test_index_creation_applies_the_matching_template(client: OpenSearchTransport) -> None:
    template = {
        "index_patterns": ["places-v*"],
        "priority": 5,
        "template": {"mappings": {"_meta": {"v": 1}, "properties": {"geometry": {"type": "geo_shape"}}}},
    }
    send(client, "PUT", "_index_template/places", template)
    send(client, "PUT", "places-v1", {})

    mappings = send(client, "GET", "places-v*").json()["places-v1"]["mappings"]

    assert mappings == {"_meta": {"v": 1}, "properties": {"geometry": {"type": "geo_shape"}}}


def test_unknown_field_types_are_a_mapper_parsing_exception(client: OpenSearchTransport) -> None:
    template = {
        "index_patterns": ["x-*"],
        "template": {"mappings": {"properties": {"g": {"type": "geoshape"}}}},
    }

    response = send(client, "PUT", "_index_template/x", template)

    assert response.status == 400
    assert response.json()["error"]["type"] == "mapper_parsing_exception"


def test_index_names_must_be_lower_case(client: OpenSearchTransport) -> None:
    response = send(client, "PUT", "Places-v1", {})

    assert response.status == 400
    assert response.json()["error"]["type"] == "invalid_index_name_exception"


def test_bodies_over_the_domain_limit_are_refused_with_413() -> None:
    with LoopbackOpenSearch(max_body_bytes=100) as small:
        transport = OpenSearchTransport(
            small.endpoint, "eu-west-1", timeout_seconds=2, credentials=Credentials("a", "b")
        )

        response = bulk(transport, [{"index": {"_index": "x", "_id": "1"}}, {"pad": "x" * 200}])

    assert response.status == 413
    assert small.index_names() == []


def test_a_delayed_request_still_takes_effect_after_the_client_gave_up(server: LoopbackOpenSearch) -> None:
    impatient = OpenSearchTransport(
        server.endpoint, "eu-west-1", timeout_seconds=0.1, credentials=Credentials("a", "b")
    )
    server.delay_next(ROUTE_BULK, 0.3)

    with pytest.raises(TransportTimeoutError):
        bulk(impatient, [{"index": {"_index": "late", "_id": "1"}}, {"n": 1}])
    deadline = time.monotonic() + 10  # the server applies it 0.3 s in; a loaded machine may take longer
    while server.document("late", "1") is None and time.monotonic() < deadline:
        time.sleep(0.02)

    assert server.document("late", "1") == {"n": 1}


def test_inspecting_a_missing_index_creates_nothing(server: LoopbackOpenSearch) -> None:
    assert server.document("nowhere", "1") is None
    assert server.index_names() == []


def test_a_malformed_bulk_request_changes_nothing(
    client: OpenSearchTransport, server: LoopbackOpenSearch
) -> None:
    body = b'{"index": {"_index": "x", "_id": "1"}}\n{}\n{"upsert_all": {}}\n{}\n'

    response = client.request("POST", "_bulk", body, {"Content-Type": NDJSON_CONTENT_TYPE})

    assert response.status == 400
    assert server.index_names() == []


def test_search_after_pages_through_sorted_hits_and_keeps_the_total(
    client: OpenSearchTransport, places: str
) -> None:
    doc = {"schema": "places", "name": "x"}
    lines = [
        line
        for pk, sk in [("b", "1"), ("a", "2"), ("a", "1"), ("c", "1")]
        for line in sync_update(f"{pk}#{sk}", 1, doc | {"pk": pk, "sk": sk})
    ]
    bulk(client, lines, f"{places}/_bulk")
    # Dynamically mapped strings are text: sorting needs their keyword subfield.
    sort = [{"pk.keyword": "asc"}, {"sk.keyword": {"order": "asc"}}]

    first = send(client, "POST", "places-v1/_search", {"size": 3, "sort": sort}).json()["hits"]
    after = first["hits"][-1]["sort"]
    second = send(
        client, "POST", "places-v1/_search", {"size": 3, "sort": sort, "search_after": after}
    ).json()["hits"]
    descending = send(
        client, "POST", "places-v1/_search", {"sort": [{"pk.keyword": "desc"}, "sk.keyword"]}
    ).json()

    assert [hit["_id"] for hit in first["hits"]] == ["a#1", "a#2", "b#1"]
    assert after == ["b", "1"]
    assert [hit["_id"] for hit in second["hits"]] == ["c#1"]
    assert first["total"]["value"] == second["total"]["value"] == 4
    assert [hit["_id"] for hit in descending["hits"]["hits"]] == ["c#1", "b#1", "a#1", "a#2"]


def test_search_after_without_a_sort_is_refused(client: OpenSearchTransport, places: str) -> None:
    response = send(client, "POST", "places-v1/_search", {"search_after": ["a"]})

    # The shard refuses it (SearchAfterBuilder), so the engine answers that all shards failed, with the cause.
    assert response.status == 400
    assert response.json()["error"]["type"] == "search_phase_execution_exception"
    assert response.json()["error"]["caused_by"] == {
        "type": "illegal_argument_exception",
        "reason": "Sort must contain at least one field.",
    }


def test_filter_path_keeps_only_the_named_fields_of_each_bulk_item(
    client: OpenSearchTransport, places: str
) -> None:
    lines = [{"index": {"_index": places, "_id": "a"}}, {"name": "A"}]
    response = bulk(client, lines, path="_bulk?filter_path=took,errors,items.*.status,items.*.result")

    answer = response.json()
    assert set(answer) == {"took", "errors", "items"}
    assert answer["items"] == [{"index": {"status": 201, "result": "created"}}]


def test_filter_path_keeps_item_errors_and_drops_fields_absent_from_an_item(
    client: OpenSearchTransport, server: LoopbackOpenSearch, places: str
) -> None:
    server.fail_item("bad", status=400, error_type="mapper_parsing_exception", reason="failed to parse")
    lines = [{"index": {"_index": places, "_id": "bad"}}, {"name": "B"}]
    response = bulk(
        client, lines, path="_bulk?filter_path=errors,items.*.status,items.*.error,items.*.result"
    )

    (item,) = response.json()["items"]
    assert item["index"]["status"] == 400
    assert item["index"]["error"]["type"] == "mapper_parsing_exception"
    assert "result" not in item["index"]


def test_filter_path_keeps_a_request_error_and_its_status(
    client: OpenSearchTransport, server: LoopbackOpenSearch
) -> None:
    server.fail_next(ROUTE_BULK, 429, retry_after=1)
    response = client.request(
        "POST",
        "_bulk?filter_path=took,error,status",
        b'{"index":{"_index":"x","_id":"1"}}\n{}\n',
        {"Content-Type": NDJSON_CONTENT_TYPE},
    )

    assert response.status == 429
    assert set(response.json()) <= {"error", "status"} and response.json()["status"] == 429


@pytest.mark.parametrize("expression", ["-took", "items.**.status"])
def test_filter_path_features_not_emulated_are_refused_rather_than_ignored(
    client: OpenSearchTransport, expression: str
) -> None:
    response = client.request("GET", f"_cat/indices?format=json&filter_path={expression}")

    assert response.status == 400


# --- documents against mappings ------------------------------------------------------------------------------


def mappings_of(client: OpenSearchTransport, index: str) -> dict[str, Any]:
    return dict(send(client, "GET", f"{index}/_mapping").json()[index]["mappings"])


def test_a_document_adding_fields_grows_the_mapping_with_the_default_dynamic_types(
    client: OpenSearchTransport,
) -> None:
    doc = {
        "name": "A",
        "count": 3,
        "ratio": 0.25,
        "open": True,
        "contact": {"email": "a@b"},
        "when": "2026-01-02",
    }

    response = bulk(client, [{"index": {"_index": "plain", "_id": "1"}}, doc])

    assert response.json()["items"][0]["index"]["status"] == 201
    assert mappings_of(client, "plain")["properties"] == {
        "name": {"type": "text", "fields": {"keyword": {"type": "keyword", "ignore_above": 256}}},
        "count": {"type": "long"},
        "ratio": {"type": "float"},  # 32-bit unless a dynamic template says otherwise
        "open": {"type": "boolean"},
        "contact": {
            "properties": {
                "email": {"type": "text", "fields": {"keyword": {"type": "keyword", "ignore_above": 256}}}
            }
        },
        "when": {"type": "date"},  # date_detection is on by default
    }


def test_dynamic_templates_decide_new_fields_by_json_type(client: OpenSearchTransport) -> None:
    templates = [{"num": {"match_mapping_type": "double", "mapping": {"type": "double"}}}]
    send(client, "PUT", "tpl", {"mappings": {"dynamic_templates": templates, "date_detection": False}})

    bulk(client, [{"index": {"_index": "tpl", "_id": "1"}}, {"ratio": 0.1, "when": "2026-01-02"}])

    properties = mappings_of(client, "tpl")["properties"]
    assert properties["ratio"] == {"type": "double"}
    assert properties["when"]["type"] == "text"


@pytest.mark.parametrize(
    ("mapped", "value", "cause_type", "cause_reason"),
    [
        ("keyword", {"a": 1}, "illegal_state_exception", "Can't get text on a START_OBJECT at 1:1"),
        ("long", "abc", "illegal_argument_exception", 'For input string: "abc"'),
        (
            "long",
            12345678901234567890123,
            "input_coercion_exception",
            "Numeric value (12345678901234567890123) out of range of long "
            "(-9223372036854775808 - 9223372036854775807)",
        ),
        ("double", "x", "number_format_exception", 'For input string: "x"'),
        (
            "float",
            1e39,
            "illegal_argument_exception",
            "[float] supports only finite values, but got [Infinity]",
        ),
        (
            "boolean",
            "yes",
            "illegal_argument_exception",
            "Failed to parse value [yes] as only [true] or [false] are allowed.",
        ),
    ],
)
def test_a_value_the_field_type_refuses_is_a_mapper_parsing_exception_that_changes_nothing(
    client: OpenSearchTransport,
    server: LoopbackOpenSearch,
    mapped: str,
    value: Any,
    cause_type: str,
    cause_reason: str,
) -> None:
    send(client, "PUT", "typed", {"mappings": {"properties": {"f": {"type": mapped}}}})
    before = mappings_of(client, "typed")

    item = bulk(client, [{"index": {"_index": "typed", "_id": "d1"}}, {"f": value, "new": "x"}]).json()[
        "items"
    ][0]

    preview = "{a=1}" if isinstance(value, dict) else ("1.0E39" if value == 1e39 else str(value))
    assert item["index"]["status"] == 400
    assert item["index"]["error"] == {
        "type": "mapper_parsing_exception",
        "reason": f"failed to parse field [f] of type [{mapped}] in document with id 'd1'. Preview of field's value: '{preview}'",
        "caused_by": {"type": cause_type, "reason": cause_reason},
    }
    assert mappings_of(client, "typed") == before and server.documents("typed") == {}


def test_objects_follow_enabled_and_dynamic(client: OpenSearchTransport) -> None:
    mappings = {
        "dynamic": "strict",
        "properties": {"raw": {"type": "object", "enabled": False}, "k": {"type": "keyword"}},
    }
    send(client, "PUT", "strict", {"mappings": mappings})

    kept = bulk(
        client, [{"index": {"_index": "strict", "_id": "1"}}, {"k": "a", "raw": {"/x": "1.0", "y": [1]}}]
    )
    refused = bulk(client, [{"index": {"_index": "strict", "_id": "2"}}, {"other": 1}])

    assert kept.json()["items"][0]["index"]["status"] == 201
    assert mappings_of(client, "strict")["properties"]["raw"] == {"type": "object", "enabled": False}
    assert refused.json()["items"][0]["index"]["error"] == {
        "type": "strict_dynamic_mapping_exception",
        "reason": "mapping set to strict, dynamic introduction of [other] within [_doc] is not allowed",
    }


def test_a_concrete_value_for_an_object_field_is_refused(client: OpenSearchTransport) -> None:
    bulk(client, [{"index": {"_index": "obj", "_id": "1"}}, {"o": {"a": 1}}])

    item = bulk(client, [{"index": {"_index": "obj", "_id": "2"}}, {"o": 5}]).json()["items"][0]["index"]

    assert item["error"] == {
        "type": "mapper_parsing_exception",
        "reason": "object mapping for [o] tried to parse field [o] as object, but found a concrete value",
    }


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        (".a", "object field starting or ending with a [.] makes object resolution ambiguous: [.a]"),
        ("a..b", "object field starting or ending with a [.] makes object resolution ambiguous: [a..b]"),
        ("", "field name cannot be an empty string"),
    ],
)
def test_field_names_the_engine_cannot_split_are_refused(
    client: OpenSearchTransport, name: str, reason: str
) -> None:
    item = bulk(client, [{"index": {"_index": "names", "_id": "1"}}, {name: 1}]).json()["items"][0]["index"]

    assert item["error"] == {
        "type": "mapper_parsing_exception",
        "reason": "failed to parse",
        "caused_by": {"type": "illegal_argument_exception", "reason": reason},
    }


def test_dotted_names_are_object_paths(client: OpenSearchTransport) -> None:
    bulk(client, [{"index": {"_index": "dots", "_id": "1"}}, {"a.b": 1}])

    assert mappings_of(client, "dots")["properties"] == {"a": {"properties": {"b": {"type": "long"}}}}


# --- script params and stored scripts ------------------------------------------------------------------------


def test_script_params_are_parsed_like_the_engine_parses_json(
    client: OpenSearchTransport, server: LoopbackOpenSearch, places: str
) -> None:
    big = b"123456789012345678901234567890"
    body = (
        b'{"update":{"_index":"places-write","_id":"n#1"}}\n'
        b'{"scripted_upsert":true,"upsert":{},"script":{"id":"' + APPLY_SCRIPT_ID.encode() + b'","params":'
        b'{"seq":"' + b"1".zfill(40) + b'","tombstone":false,"doc":{"pk":"n","sk":"1","schema":"places",'
        b'"pi":3.1415926535897932384626433832795028,"big":' + big + b"}}}}\n"
    )

    item = client.request("POST", "_bulk", body, {"Content-Type": NDJSON_CONTENT_TYPE}).json()["items"][0]

    # A BigInteger beyond 64 bits does not fit the dynamic `long` its first value maps to.
    assert item["update"]["error"]["caused_by"]["type"] == "input_coercion_exception"
    client.request("POST", "_bulk", body.replace(big, b"1234567890"), {"Content-Type": NDJSON_CONTENT_TYPE})
    stored = server.document(places, "n#1")
    assert stored is not None
    assert stored["pi"] == 3.141592653589793  # a double, as Jackson parses a fraction
    assert mappings_of(client, "places-v1")["properties"]["pi"] == {"type": "float"}


def test_a_script_stored_with_a_context_is_compiled_and_refused_when_it_has_no_twin(
    client: OpenSearchTransport, server: LoopbackOpenSearch
) -> None:
    source = "ctx._source.x = params.y"

    response = send(
        client, "PUT", "_scripts/edited/update", {"script": {"lang": "painless", "source": source}}
    )

    assert response.status == 400
    error = response.json()["error"]
    assert (error["type"], error["reason"], error["lang"], error["script"]) == (
        "script_exception",
        "compile error",
        "painless",
        source,
    )
    assert error["caused_by"]["type"] == "illegal_argument_exception"
    assert response.json()["error"]["root_cause"][0]["type"] == "script_exception"
    assert "edited" not in server.cluster.scripts


def test_the_sync_script_compiles_for_the_update_context_only(client: OpenSearchTransport) -> None:
    ok = send(client, "PUT", f"_scripts/{APPLY_SCRIPT_ID}/update", stored_script_body())
    wrong_context = send(client, "PUT", f"_scripts/{APPLY_SCRIPT_ID}/score", stored_script_body())
    unknown = send(client, "PUT", f"_scripts/{APPLY_SCRIPT_ID}/nope", stored_script_body())

    assert ok.status == 200
    assert (wrong_context.status, wrong_context.json()["error"]["type"]) == (400, "script_exception")
    assert unknown.json()["error"]["reason"] == f"failed to parse/compile stored script [{APPLY_SCRIPT_ID}]"
    assert unknown.json()["error"]["caused_by"] == {
        "type": "illegal_argument_exception",
        "reason": "Unknown context [nope]",
    }


def test_a_script_stored_without_a_context_fails_to_compile_when_first_used(
    client: OpenSearchTransport, places: str
) -> None:
    source = "ctx._source.clear(); ctx._source.putAll(params.doc)"
    send(client, "PUT", f"_scripts/{APPLY_SCRIPT_ID}", {"script": {"lang": "painless", "source": source}})

    item = bulk(client, sync_update("p#1", 1, {"pk": "p"}), f"{places}/_bulk").json()["items"][0]["update"]

    assert item["status"] == 400
    assert (item["error"]["type"], item["error"]["reason"]) == (
        "illegal_argument_exception",
        "failed to execute script",
    )
    assert (item["error"]["caused_by"]["type"], item["error"]["caused_by"]["reason"]) == (
        "script_exception",
        "compile error",
    )


def test_a_script_failing_at_run_time_is_a_runtime_error_for_that_document_only(
    client: OpenSearchTransport, server: LoopbackOpenSearch, places: str
) -> None:
    server.fail_script(
        "p#1", java_exception="class_cast_exception", reason="Cannot cast java.lang.String to java.util.Map"
    )
    lines = sync_update("p#1", 1, {"pk": "p"}) + sync_update("p#2", 1, {"pk": "p"})

    first, second = bulk(client, lines, f"{places}/_bulk").json()["items"]

    assert first["update"]["error"] == {
        "type": "illegal_argument_exception",
        "reason": "failed to execute script",
        "caused_by": {
            "type": "script_exception",
            "reason": "runtime error",
            "script_stack": [],
            "script": APPLY_SCRIPT_ID,
            "lang": "painless",
            "caused_by": {
                "type": "class_cast_exception",
                "reason": "Cannot cast java.lang.String to java.util.Map",
            },
        },
    }
    assert second["update"]["status"] == 201


# --- missing indices, aliases and cluster settings -----------------------------------------------------------


def test_require_alias_refuses_a_write_to_a_name_that_is_not_an_alias(
    client: OpenSearchTransport, server: LoopbackOpenSearch
) -> None:
    lines = [
        {"update": {"_index": "ghost-write", "_id": "1", "require_alias": True}},
        {"doc": {"a": 1}, "doc_as_upsert": True},
    ]

    item = bulk(client, lines).json()["items"][0]["update"]

    assert item == {
        "_index": "ghost-write",
        "_id": "1",
        "status": 404,
        "error": {
            "type": "index_not_found_exception",
            "reason": "no such index [ghost-write] and [require_alias] request flag is [true] and [ghost-write] is not an alias",
            "index_uuid": "_na_",
            "index": "ghost-write",
        },
    }
    assert server.index_names() == []


def test_without_require_alias_a_write_auto_creates_the_index(
    client: OpenSearchTransport, server: LoopbackOpenSearch
) -> None:
    bulk(client, [{"index": {"_index": "ghost-write", "_id": "1"}}, {"a": 1}])

    assert server.index_names() == ["ghost-write"]


def test_action_auto_create_index_patterns_forbid_auto_creation(
    client: OpenSearchTransport, server: LoopbackOpenSearch
) -> None:
    setting = send(
        client, "PUT", "_cluster/settings", {"persistent": {"action.auto_create_index": "-*-write,+*"}}
    )
    lines = [
        {"index": {"_index": "ghost-write", "_id": "1"}},
        {"a": 1},
        {"index": {"_index": "other", "_id": "1"}},
        {"a": 1},
    ]

    refused, created = bulk(client, lines).json()["items"]

    assert setting.json() == {
        "acknowledged": True,
        "persistent": {"action": {"auto_create_index": "-*-write,+*"}},
        "transient": {},
    }
    assert refused["index"]["status"] == 404
    assert refused["index"]["error"]["reason"] == (
        "no such index [ghost-write] and [action.auto_create_index] contains [-*-write] which forbids automatic "
        "creation of the index"
    )
    assert created["index"]["status"] == 201
    assert server.index_names() == ["other"]
    assert send(client, "GET", "_cluster/settings?flat_settings=true").json()["persistent"] == {
        "action.auto_create_index": "-*-write,+*"
    }


def test_cluster_settings_in_the_expanded_form_are_refused_like_the_service_does(
    client: OpenSearchTransport,
) -> None:
    response = send(
        client, "PUT", "_cluster/settings", {"persistent": {"action": {"auto_create_index": False}}}
    )

    assert response.status == 400


def test_an_unknown_bulk_metadata_parameter_fails_the_whole_request(
    client: OpenSearchTransport, server: LoopbackOpenSearch
) -> None:
    response = bulk(client, [{"index": {"_index": "x", "_id": "1", "requre_alias": True}}, {}])

    assert response.status == 400
    assert (
        response.json()["error"]["reason"]
        == "Action/metadata line [1] contains an unknown parameter [requre_alias]"
    )
    assert server.index_names() == []


# --- index settings and blocks -------------------------------------------------------------------------------


def test_replicas_are_a_dynamic_index_setting(client: OpenSearchTransport) -> None:
    send(client, "PUT", "rep", {})

    changed = send(client, "PUT", "rep/_settings", {"index": {"number_of_replicas": 2}})
    static = send(client, "PUT", "rep/_settings", {"index": {"number_of_shards": 2}})
    unknown = send(client, "PUT", "rep/_settings", {"index.flavour": "x"})

    assert changed.json() == {"acknowledged": True}
    settings = send(client, "GET", "rep/_settings").json()["rep"]["settings"]["index"]
    assert (settings["number_of_replicas"], settings["number_of_shards"]) == ("2", "1")
    assert (
        static.status == 400
        and "Can't update non dynamic settings [[index.number_of_shards]]" in static.json()["error"]["reason"]
    )
    assert unknown.status == 400 and unknown.json()["error"]["reason"].startswith(
        "unknown setting [index.flavour]"
    )


@pytest.mark.parametrize(
    ("block", "status", "text"),
    [
        ("write", 403, "FORBIDDEN/8/index write (api)"),
        (
            "read_only_allow_delete",
            429,
            "TOO_MANY_REQUESTS/12/disk usage exceeded flood-stage watermark, index has read-only-allow-delete block",
        ),
    ],
)
def test_a_write_block_refuses_every_item_for_that_index(
    client: OpenSearchTransport, server: LoopbackOpenSearch, places: str, block: str, status: int, text: str
) -> None:
    send(client, "PUT", "places-v1/_settings", {f"index.blocks.{block}": True})

    item = bulk(client, sync_update("p#1", 1, {"pk": "p"}), f"{places}/_bulk").json()["items"][0]["update"]

    assert item["status"] == status
    assert item["error"] == {
        "type": "cluster_block_exception",
        "reason": f"index [places-v1] blocked by: [{text}];",
    }
    assert server.document(places, "p#1") is None


# --- optimistic concurrency, range, _mget, point in time (what the tombstone purge and reconcile use) -------------


def seeded(client: OpenSearchTransport, count: int = 6) -> str:
    send(
        client,
        "PUT",
        "things",
        {"mappings": {"properties": {"n": {"type": "long"}, "k": {"type": "keyword"}}}},
    )
    lines: list[Any] = []
    for n in range(count):
        lines += [{"index": {"_index": "things", "_id": f"t{n}"}}, {"n": n, "k": f"k{n}"}]
    assert bulk(client, lines).json()["errors"] is False
    return "things"


def test_each_document_keeps_its_own_sequence_number_and_a_noop_takes_none(
    client: OpenSearchTransport, places: str
) -> None:
    first = bulk(client, sync_update("p#1", 2, {"pk": "p", "sk": "1"}), f"{places}/_bulk").json()["items"][0]
    other = bulk(client, sync_update("p#2", 2, {"pk": "p", "sk": "2"}), f"{places}/_bulk").json()["items"][0]
    replay = bulk(client, sync_update("p#1", 1, {"pk": "p", "sk": "1"}), f"{places}/_bulk").json()["items"][0]

    assert (first["update"]["_seq_no"], other["update"]["_seq_no"]) == (0, 1)
    assert replay["update"]["result"] == "noop" and replay["update"]["_seq_no"] == 0
    assert send(client, "GET", "places-v1/_doc/p%231").json()["_seq_no"] == 0


def test_a_conditional_delete_applies_only_to_the_document_as_last_read(client: OpenSearchTransport) -> None:
    seeded(client, 2)
    hits = send(client, "POST", "things/_search", {"seq_no_primary_term": True, "sort": ["k"]}).json()
    (t0, t1) = [(hit["_id"], hit["_seq_no"], hit["_primary_term"]) for hit in hits["hits"]["hits"]]
    bulk(client, [{"index": {"_index": "things", "_id": "t1"}}, {"n": 10, "k": "changed"}])

    answer = bulk(
        client,
        [
            {"delete": {"_index": "things", "_id": t0[0], "if_seq_no": t0[1], "if_primary_term": t0[2]}},
            {"delete": {"_index": "things", "_id": t1[0], "if_seq_no": t1[1], "if_primary_term": t1[2]}},
            {"delete": {"_index": "things", "_id": "gone", "if_seq_no": 0, "if_primary_term": 1}},
        ],
    ).json()

    deleted, conflict, missing = (item["delete"] for item in answer["items"])
    assert deleted["result"] == "deleted" and deleted["status"] == 200
    assert conflict["status"] == 409 and conflict["error"]["type"] == "version_conflict_engine_exception"
    assert conflict["error"]["reason"] == (
        "[t1]: version conflict, required seqNo [1], primary term [1]. current document has seqNo [2] and "
        "primary term [1]"
    )
    assert missing["status"] == 409 and missing["error"]["reason"].endswith("but no document was found")
    assert send(client, "GET", "things/_doc/t1").json()["_source"]["k"] == "changed"


def test_a_sequence_number_without_a_primary_term_fails_the_whole_request(
    client: OpenSearchTransport,
) -> None:
    seeded(client, 1)
    refused = bulk(client, [{"delete": {"_index": "things", "_id": "t0", "if_seq_no": 0}}])

    assert refused.status == 400
    assert "ifSeqNo is set, but primary term is [0]" in refused.json()["error"]["reason"]


def test_mget_answers_every_id_in_order_found_or_not(client: OpenSearchTransport) -> None:
    seeded(client, 2)

    docs = send(client, "POST", "things/_mget", {"ids": ["t1", "nope", "t0"]}).json()["docs"]

    assert [(doc["_id"], doc["found"]) for doc in docs] == [("t1", True), ("nope", False), ("t0", True)]
    assert docs[0]["_source"] == {"n": 1, "k": "k1"} and "_source" not in docs[1]


def test_a_point_in_time_is_a_frozen_view_whose_slices_partition_it(
    client: OpenSearchTransport, server: LoopbackOpenSearch
) -> None:
    seeded(client, 12)
    pit = send(client, "POST", "things/_search/point_in_time?keep_alive=1m").json()["pit_id"]
    bulk(
        client,
        [
            {"delete": {"_index": "things", "_id": "t0"}},
            {"index": {"_index": "things", "_id": "new"}},
            {"n": 99},
        ],
    )

    def page(slice_id: int | None) -> list[str]:
        body: dict[str, Any] = {"pit": {"id": pit, "keep_alive": "1m"}, "size": 100, "sort": ["k"]}
        if slice_id is not None:
            body["slice"] = {"id": slice_id, "max": 3}
        answer = send(client, "POST", "_search", body).json()
        assert answer["pit_id"] == pit
        return [hit["_id"] for hit in answer["hits"]["hits"]]

    everything = page(None)
    slices = [page(i) for i in range(3)]

    assert sorted(everything) == sorted(f"t{n}" for n in range(12))  # t0 still there, `new` not yet
    assert sorted(doc for part in slices for doc in part) == sorted(everything) and all(slices)
    assert send(client, "POST", "things/_search", {"pit": {"id": pit}}).status == 400  # no index with a pit
    assert send(client, "POST", "things/_search", {"slice": {"id": 0, "max": 2}}).status == 400  # pit only
    server.lose_points_in_time()  # a blue/green deployment or node restart
    lost = send(client, "POST", "_search", {"pit": {"id": pit}})
    assert (
        lost.status == 404 and lost.json()["error"]["caused_by"]["type"] == "search_context_missing_exception"
    )


def test_a_point_in_time_is_deleted_by_id_and_needs_a_keep_alive(client: OpenSearchTransport) -> None:
    seeded(client, 1)
    assert send(client, "POST", "things/_search/point_in_time").status == 400
    assert send(client, "POST", "things/_search/point_in_time?keep_alive=2d").status == 400  # over 24 h
    pit = send(client, "POST", "things/_search/point_in_time?keep_alive=30s").json()["pit_id"]

    closed = send(client, "DELETE", "_search/point_in_time", {"pit_id": [pit]}).json()
    again = send(client, "DELETE", "_search/point_in_time", {"pit_id": [pit]}).json()

    assert closed == {"pits": [{"successful": True, "pit_id": pit}]}
    assert again == {"pits": [{"successful": False, "pit_id": pit}]}


# --- the engine's document limits (issue 18) --------------------------------------------------------------------


def nested(levels: int, leaf: Any = 1) -> Any:
    """A document of `levels` objects (itself the first), one inside the other, the last holding `leaf`."""
    value: Any = {"x": leaf}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


@pytest.mark.parametrize(
    ("token", "value"), [("Infinity", float("inf")), ("-Infinity", float("-inf")), ("NaN", float("nan"))]
)
def test_an_update_body_with_a_non_numeric_number_fails_the_whole_request(
    client: OpenSearchTransport, server: LoopbackOpenSearch, places: str, token: str, value: float
) -> None:
    """Jackson refuses NaN and Infinity, and BulkRequestParser parses an update's body with the request: one such
    document refuses every document in it (the sync bisects to find it)."""
    response = bulk(
        client,
        [
            *sync_update("good#1", 1, {"pk": "good", "sk": "1", "n": 1}),
            *sync_update("bad#1", 1, {"pk": "bad", "sk": "1", "n": value}),
        ],
        f"{places}/_bulk",
    )

    assert response.status == 400
    error = response.json()["error"]
    assert (error["type"], error["reason"]) == (
        "x_content_parse_exception",
        "[1:1] [script] failed to parse field [params]",
    )
    assert error["caused_by"] == {
        "type": "json_parse_exception",
        "reason": f"Non-standard token '{token}': enable `JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS` to allow",
    }
    assert error["root_cause"] == [{"type": "x_content_parse_exception", "reason": error["reason"]}]
    assert server.document(places, "good#1") is None  # nothing of a refused request is applied


def test_a_field_name_over_the_parsers_limit_fails_the_whole_request(
    client: OpenSearchTransport, server: LoopbackOpenSearch, places: str
) -> None:
    ok = bulk(client, sync_update("n#1", 1, {"pk": "n", "sk": "1", "n" * 50_000: 1}), f"{places}/_bulk")
    refused = bulk(client, sync_update("n#2", 1, {"pk": "n", "sk": "2", "n" * 50_001: 1}), f"{places}/_bulk")

    assert ok.status == 200 and not ok.json()["errors"]
    assert refused.status == 400
    assert refused.json()["error"]["caused_by"] == {
        "type": "stream_constraints_exception",
        "reason": "Name length (50001) exceeds the maximum allowed (50000, from "
        "`StreamReadConstraints.getMaxNameLength()`)",
    }
    assert server.document(places, "n#2") is None


def test_an_index_source_the_parser_refuses_fails_only_its_item(client: OpenSearchTransport) -> None:
    """An index action's source is parsed on its shard, so only that item fails."""
    body = b'{"index":{"_index":"raw","_id":"1"}}\n{"n":NaN}\n{"index":{"_index":"raw","_id":"2"}}\n{"n":1}\n'
    response = client.request("POST", "_bulk", body, {"Content-Type": NDJSON_CONTENT_TYPE}).json()

    assert [item["index"]["status"] for item in response["items"]] == [400, 201]


@pytest.mark.parametrize(
    ("doc", "what"),
    [(nested(21), "field"), ({"a": json.loads("[" * 21 + "1" + "]" * 21)}, "nested array field")],
    ids=["objects", "arrays"],
)
def test_a_document_nested_beyond_the_depth_limit_is_refused_while_parsing(
    client: OpenSearchTransport, doc: Any, what: str
) -> None:
    """ParseContext counts the objects (the document itself is one) and the arrays around each value."""
    fits = nested(20) if what == "field" else {"a": json.loads("[" * 20 + "1" + "]" * 20)}
    assert not bulk(client, [{"index": {"_index": "deep", "_id": "1"}}, fits]).json()["errors"]

    item = bulk(client, [{"index": {"_index": "deep", "_id": "2"}}, doc]).json()["items"][0]["index"]

    assert (item["status"], item["error"]["type"], item["error"]["reason"]) == (
        400,
        "mapper_parsing_exception",
        "failed to parse",
    )
    assert item["error"]["caused_by"] == {
        "type": "parse_exception",
        "reason": f"The depth of the {what} has exceeded the allowed limit of [20]. This limit can be set by "
        "changing the [index.mapping.depth.limit] index level setting.",
    }


def test_a_dotted_name_deeper_than_the_depth_limit_is_refused_when_the_mapping_grows(
    client: OpenSearchTransport,
) -> None:
    """A dotted name makes its objects without parsing them: MappingLookup's depth check refuses the update."""
    path = ".".join(["a"] * 20)
    item = bulk(client, [{"index": {"_index": "dots", "_id": "1"}}, {f"{path}.x": 1}]).json()["items"][0]

    assert item["index"]["error"] == {
        "type": "illegal_argument_exception",
        "reason": f"Limit of mapping depth [20] has been exceeded due to object field [{path}]",
    }
    assert mappings_of(client, "dots").get("properties") is None  # a refused document changes nothing


def test_a_document_that_would_map_more_fields_than_the_limit_is_refused(client: OpenSearchTransport) -> None:
    """A dynamic string is a text field and its keyword subfield: 500 strings are 1,000 fields, one more is over."""
    strings = {f"s{i}": "x" for i in range(500)}
    assert not bulk(client, [{"index": {"_index": "wide", "_id": "1"}}, strings]).json()["errors"]

    item = bulk(client, [{"index": {"_index": "wide", "_id": "2"}}, {"n": 1}]).json()["items"][0]["index"]

    assert item["error"] == {
        "type": "illegal_argument_exception",
        "reason": "Limit of total fields [1000] has been exceeded",
    }


def test_the_limits_follow_the_index_settings(client: OpenSearchTransport) -> None:
    settings = {"index.mapping.total_fields.limit": 3, "index.mapping.depth.limit": 3}
    assert send(client, "PUT", "small", {"settings": settings}).status == 200

    over = bulk(client, [{"index": {"_index": "small", "_id": "1"}}, {"a": 1, "b": 2, "c": 3, "d": 4}])
    deep = bulk(client, [{"index": {"_index": "small", "_id": "2"}}, nested(4)])

    assert (
        over.json()["items"][0]["index"]["error"]["reason"] == "Limit of total fields [3] has been exceeded"
    )
    assert "limit of [3]" in deep.json()["items"][0]["index"]["error"]["caused_by"]["reason"]
