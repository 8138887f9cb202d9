"""The loopback server's fine-grained access control: requests act as the IAM role whose keys signed them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.credentials import Credentials
from refdata.transport import NDJSON_CONTENT_TYPE, OpenSearchTransport, Response
from search.indices import APPLY_SCRIPT_ID, stored_script_body

from tests.support.opensearch_server import FineGrainedAccessControl, LoopbackOpenSearch

pytestmark = pytest.mark.integration

ACCOUNT = "arn:aws:iam::111111111111:role"
MASTER, WRITER, READER, NOBODY = (f"{ACCOUNT}/{name}" for name in ("admin", "writer", "reader", "nobody"))
KEYS = {"AKIDMASTER": MASTER, "AKIDWRITER": WRITER, "AKIDREADER": READER, "AKIDNOBODY": NOBODY}


@pytest.fixture
def server() -> Iterator[LoopbackOpenSearch]:
    with LoopbackOpenSearch(fgac=FineGrainedAccessControl(MASTER, KEYS)) as running:
        yield running


def signed_by(server: LoopbackOpenSearch, access_key: str) -> OpenSearchTransport:
    return OpenSearchTransport(
        server.endpoint, "eu-west-1", timeout_seconds=2, credentials=Credentials(access_key, "secret")
    )


def send(client: OpenSearchTransport, method: str, path: str, body: Any = None) -> Response:
    return client.request(method, path, json.dumps(body).encode() if body is not None else None)


def bulk(client: OpenSearchTransport, lines: list[Any]) -> Response:
    body = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    return client.request("POST", "_bulk", body, {"Content-Type": NDJSON_CONTENT_TYPE})


def update(index: str, doc_id: str, doc: dict[str, Any], seq: int = 1) -> list[dict[str, Any]]:
    params = {"seq": str(seq).zfill(40), "tombstone": False, "doc": doc}
    return [
        {"update": {"_index": index, "_id": doc_id}},
        {"scripted_upsert": True, "upsert": {}, "script": {"id": APPLY_SCRIPT_ID, "params": params}},
    ]


def user(arn: str) -> str:
    return f"User [name={arn}, backend_roles=[{arn}], requestedTenant=null]"


def grant(admin: OpenSearchTransport, role: str, arn: str, body: dict[str, Any]) -> None:
    assert send(admin, "PUT", f"_plugins/_security/api/roles/{role}", body).status in (200, 201)
    mapping = {"backend_roles": [arn]}
    assert send(admin, "PUT", f"_plugins/_security/api/rolesmapping/{role}", mapping).status in (200, 201)


def writer_role(*actions: str, patterns: tuple[str, ...] = ("places-v*",)) -> dict[str, Any]:
    return {
        "cluster_permissions": ["indices:data/write/bulk"],
        "index_permissions": [{"index_patterns": list(patterns), "allowed_actions": list(actions)}],
    }


@pytest.fixture
def admin(server: LoopbackOpenSearch) -> OpenSearchTransport:
    """The master sets up `places-v1` (mapped pk, sk, schema, stream_seq, tombstone) behind `places-write`."""
    client = signed_by(server, "AKIDMASTER")
    keyword = {"type": "keyword"}
    mappings = {
        "properties": {
            **{name: keyword for name in ("pk", "sk", "schema", "stream_seq")},
            "tombstone": {"type": "boolean"},
        }
    }
    body = {"mappings": mappings, "aliases": {"places-write": {"is_write_index": True}}}
    assert send(client, "PUT", "places-v1", body).status == 200
    assert send(client, "PUT", f"_scripts/{APPLY_SCRIPT_ID}/update", stored_script_body()).status == 200
    return client


KEYS_ONLY = {"pk": "p", "sk": "1", "schema": "places"}


def test_an_access_key_no_principal_owns_is_refused_before_fgac(server: LoopbackOpenSearch) -> None:
    response = send(signed_by(server, "AKIDSTRANGER"), "GET", "places-v1")

    assert response.status == 403
    assert response.json()["message"] == "The security token included in the request is invalid."


def test_an_unmapped_principal_is_refused_every_action(
    server: LoopbackOpenSearch, admin: OpenSearchTransport
) -> None:
    nobody = signed_by(server, "AKIDNOBODY")

    read = send(nobody, "GET", "places-v1")
    write = bulk(nobody, update("places-write", "p#1", KEYS_ONLY))

    assert read.status == 403
    assert read.json() == {
        "error": {
            "root_cause": [
                {
                    "type": "security_exception",
                    "reason": f"no permissions for [indices:admin/get] and {user(NOBODY)}",
                }
            ],
            "type": "security_exception",
            "reason": f"no permissions for [indices:admin/get] and {user(NOBODY)}",
        },
        "status": 403,
    }
    # The cluster permission of a bulk request is checked before any item: the whole request is refused.
    assert write.status == 403
    assert (
        write.json()["error"]["reason"] == f"no permissions for [indices:data/write/bulk] and {user(NOBODY)}"
    )


def test_only_the_master_may_use_the_security_api(
    server: LoopbackOpenSearch, admin: OpenSearchTransport
) -> None:
    grant(admin, "writer", WRITER, writer_role("indices:data/write/bulk[s]", "indices:data/write/update"))

    response = send(signed_by(server, "AKIDWRITER"), "PUT", "_plugins/_security/api/roles/mine", {})

    assert response.status == 403
    assert response.json() == {
        "status": "FORBIDDEN",
        "message": f"No permission to access REST API: User {WRITER} with Security roles [writer] does not have "
        "any role privileged for admin access",
    }


def test_a_document_adding_a_field_needs_mapping_put_on_the_concrete_index(
    server: LoopbackOpenSearch, admin: OpenSearchTransport
) -> None:
    grant(admin, "writer", WRITER, writer_role("indices:data/write/bulk[s]", "indices:data/write/update"))
    writer = signed_by(server, "AKIDWRITER")
    before = server.cluster.indices["places-v1"].mappings

    mapped_only = bulk(writer, update("places-write", "p#1", KEYS_ONLY)).json()["items"][0]["update"]
    new_field = bulk(writer, update("places-write", "p#2", {**KEYS_ONLY, "name": "x"})).json()["items"][0][
        "update"
    ]

    assert mapped_only["status"] == 201
    assert new_field["status"] == 403
    assert new_field["error"] == {
        "type": "security_exception",
        "reason": f"no permissions for [indices:admin/mapping/put] and {user(WRITER)}",
    }
    assert server.document("places-write", "p#2") is None
    assert server.cluster.indices["places-v1"].mappings == before

    grant(
        admin,
        "writer",
        WRITER,
        writer_role("indices:data/write/bulk[s]", "indices:data/write/update", "indices:admin/mapping/put"),
    )
    again = bulk(writer, update("places-write", "p#2", {**KEYS_ONLY, "name": "x"})).json()["items"][0][
        "update"
    ]

    assert again["status"] == 201
    assert "name" in server.cluster.indices["places-v1"].mappings["properties"]


def test_each_item_action_is_checked_on_the_concrete_index(
    server: LoopbackOpenSearch, admin: OpenSearchTransport
) -> None:
    grant(admin, "writer", WRITER, writer_role("indices:data/write/bulk[s]", "indices:data/write/index"))

    item = bulk(signed_by(server, "AKIDWRITER"), update("places-write", "p#1", KEYS_ONLY)).json()["items"][0][
        "update"
    ]

    assert (item["_index"], item["status"]) == ("places-v1", 403)
    assert item["error"]["reason"] == f"no permissions for [indices:data/write/update] and {user(WRITER)}"


def test_a_pattern_naming_an_alias_grants_its_member_indices(
    server: LoopbackOpenSearch, admin: OpenSearchTransport
) -> None:
    role = writer_role("indices:data/write/bulk[s]", "indices:data/write/update", patterns=("places-write",))
    grant(admin, "writer", WRITER, role)

    item = bulk(signed_by(server, "AKIDWRITER"), update("places-write", "p#1", KEYS_ONLY)).json()["items"][0][
        "update"
    ]

    assert item["status"] == 201


def test_auto_creating_an_index_needs_create_on_its_name(
    server: LoopbackOpenSearch, admin: OpenSearchTransport
) -> None:
    grant(admin, "writer", WRITER, writer_role("write", patterns=("*",)))

    item = bulk(
        signed_by(server, "AKIDWRITER"), [{"index": {"_index": "fresh", "_id": "1"}}, {"a": 1}]
    ).json()

    assert item["items"][0]["index"]["status"] == 403
    assert (
        item["items"][0]["index"]["error"]["reason"]
        == f"no permissions for [indices:admin/create] and {user(WRITER)}"
    )
    assert "fresh" not in server.index_names()


def test_a_read_only_role_reads_and_is_refused_writes(
    server: LoopbackOpenSearch, admin: OpenSearchTransport
) -> None:
    bulk(admin, update("places-write", "p#1", KEYS_ONLY))
    grant(
        admin,
        "reader",
        READER,
        {"index_permissions": [{"index_patterns": ["places*"], "allowed_actions": ["read"]}]},
    )
    reader = signed_by(server, "AKIDREADER")

    found = send(reader, "POST", "places-v1/_search", {"query": {"match_all": {}}})
    written = bulk(reader, update("places-write", "p#1", {**KEYS_ONLY, "name": "y"}, seq=2))
    aliased = send(
        reader, "POST", "_aliases", {"actions": [{"remove": {"index": "places-v1", "alias": "places-write"}}]}
    )

    assert found.json()["hits"]["total"]["value"] == 1
    assert written.status == 403 and aliased.status == 403
    assert "places-write" in server.aliases_of("places-v1")


# --- document- and field-level security -------------------------------------------------------------------


def read_entry(patterns: list[str], **restrictions: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"index_patterns": patterns, "allowed_actions": ["read"]}
    if "dls" in restrictions:
        entry["dls"] = json.dumps(restrictions["dls"])
    if "fls" in restrictions:
        entry["fls"] = restrictions["fls"]
    return entry


def grant_read(admin: OpenSearchTransport, role: str, patterns: list[str], **restrictions: Any) -> None:
    """The reader gets `role`: read on `patterns` with the given `dls` query and/or `fls` patterns."""
    grant(admin, role, READER, {"index_permissions": [read_entry(patterns, **restrictions)]})


@pytest.fixture
def catalogue(server: LoopbackOpenSearch, admin: OpenSearchTransport) -> OpenSearchTransport:
    """`places-v1` behind the alias `places` with three documents; the reader's client."""
    assert send(
        admin, "POST", "_aliases", {"actions": [{"add": {"index": "places-v1", "alias": "places"}}]}
    ).ok
    for n, extra in [("1", {"kind": "park", "notes": "a"}), ("2", {"kind": "camp"}), ("3", {"kind": "park"})]:
        doc = {"pk": "p", "sk": n, "schema": "places", "name": f"place {n}", "secret": {"code": n}, **extra}
        assert not bulk(admin, update("places-write", f"p#{n}", doc)).json()["errors"]
    return signed_by(server, "AKIDREADER")


def found(reader: OpenSearchTransport, path: str, query: dict[str, Any] | None = None) -> list[str]:
    body = {"query": query or {"match_all": {}}, "sort": [{"sk": "asc"}]}
    response = send(reader, "POST", path, body)
    assert response.status == 200, response.body
    return [hit["_id"] for hit in response.json()["hits"]["hits"]]


def test_dls_on_an_alias_pattern_applies_through_the_alias_and_the_concrete_index(
    server: LoopbackOpenSearch, admin: OpenSearchTransport, catalogue: OpenSearchTransport
) -> None:
    grant_read(admin, "reader", ["places"], dls={"term": {"kind": "park"}})

    assert found(catalogue, "places/_search") == ["p#1", "p#3"]
    assert found(catalogue, "places-v1/_search") == ["p#1", "p#3"]
    assert send(catalogue, "POST", "places-v1/_count", {}).json()["count"] == 2
    assert send(catalogue, "GET", "places-v1/_doc/p%232").status == 404
    assert send(catalogue, "GET", "places/_doc/p%231").json()["found"] is True


def test_dls_of_several_roles_is_a_union_and_a_role_without_dls_does_not_lift_it(
    server: LoopbackOpenSearch, admin: OpenSearchTransport, catalogue: OpenSearchTransport
) -> None:
    grant_read(admin, "parks", ["places"], dls={"term": {"sk": "1"}})
    grant_read(admin, "camps", ["places-v*"], dls={"term": {"sk": "2"}})
    grant_read(admin, "plain", ["places*"])

    # plugins.security.dfm_empty_overrides_all is false by default: restricted rules win over unrestricted ones.
    assert found(catalogue, "places/_search") == ["p#1", "p#2"]


def test_fls_hides_fields_from_sources_queries_and_sorts(
    server: LoopbackOpenSearch, admin: OpenSearchTransport, catalogue: OpenSearchTransport
) -> None:
    grant_read(admin, "reader", ["places"], fls=["~notes", "~secret.code"])

    hits = send(catalogue, "POST", "places/_search", {"query": {"term": {"sk": "1"}}}).json()["hits"]["hits"]
    hit = hits[0]
    got = send(catalogue, "GET", "places-v1/_doc/p%231").json()["_source"]

    assert "notes" not in hit["_source"] and hit["_source"]["secret"] == {}
    assert got == hit["_source"]
    assert found(catalogue, "places-v1/_search", {"exists": {"field": "notes"}}) == []
    assert found(catalogue, "places-v1/_search", {"term": {"notes.keyword": "a"}}) == []
    assert found(admin, "places-v1/_search", {"exists": {"field": "notes"}}) == ["p#1"]


def test_fls_inclusions_show_only_the_named_fields_and_exclusions_of_two_roles_add_up(
    server: LoopbackOpenSearch, admin: OpenSearchTransport, catalogue: OpenSearchTransport
) -> None:
    grant_read(admin, "reader", ["places"], fls=["name", "secret.code"])
    included = send(catalogue, "GET", "places/_doc/p%231").json()["_source"]
    grant_read(admin, "reader", ["places"], fls=["~notes"])
    grant_read(admin, "other", ["places-v1"], fls=["~kind"])
    excluded = send(catalogue, "GET", "places/_doc/p%231").json()["_source"]

    assert included == {"name": "place 1", "secret": {"code": "1"}}
    assert "notes" not in excluded and "kind" not in excluded and excluded["name"] == "place 1"


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ({"index_permissions": [{"index_patterns": ["x"], "dls": {"match_all": {}}}]}, "Invalid DLS"),
        ({"index_permissions": [{"index_patterns": ["x"], "dls": "{not json"}]}, "Invalid DLS"),
        ({"index_permissions": [{"index_patterns": ["x"], "fls": "~a"}]}, "Invalid FLS"),
        ({"index_permissions": [{"index_patterns": ["x"], "masked_fields": ["a"]}]}, "not emulated"),
    ],
)
def test_a_role_with_malformed_or_unemulated_restrictions_is_refused(
    admin: OpenSearchTransport, entry: dict[str, Any], reason: str
) -> None:
    response = send(admin, "PUT", "_plugins/_security/api/roles/bad", entry)

    assert response.status == 400
    assert reason in response.json()["error"]["reason"]


def test_roles_and_mappings_can_be_deleted_once(admin: OpenSearchTransport) -> None:
    grant_read(admin, "reader", ["places"])

    first = send(admin, "DELETE", "_plugins/_security/api/rolesmapping/reader")
    again = send(admin, "DELETE", "_plugins/_security/api/rolesmapping/reader")
    role = send(admin, "DELETE", "_plugins/_security/api/roles/reader")

    assert (first.status, first.json()["status"]) == (200, "OK")
    assert (again.status, again.json()["status"]) == (404, "NOT_FOUND")
    assert role.status == 200
    assert send(admin, "GET", "_plugins/_security/api/roles/reader").status == 404
