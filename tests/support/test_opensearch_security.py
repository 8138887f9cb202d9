"""The loopback server's fine-grained access control: requests act as the IAM role whose keys signed them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.credentials import Credentials
from search.indices import APPLY_SCRIPT_ID, stored_script_body
from search.transport import NDJSON_CONTENT_TYPE, OpenSearchTransport, Response

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
