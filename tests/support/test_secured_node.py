"""The secured test node: its version's relation to the engine's, its proxy authentication, and the front that
hands it the SigV4-verified principal."""

from __future__ import annotations

import http.client

from botocore.credentials import Credentials
from refdata.transport import OpenSearchTransport

from tests.support.engine_setup import PLUGIN_ZIPS, read_lock, verified_install
from tests.support.opensearch_server import FineGrainedAccessControl, LoopbackOpenSearch
from tests.support.secured_node import SUITE_ARN, SecuredNode
from tests.support.secured_setup import PLUGIN_PUBLISHED_FOR, SECURED, SECURED_VERSION

MASTER = "arn:aws:iam::123456789012:role/master"
READER = "arn:aws:iam::123456789012:role/reader"


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def test_secured_node_is_the_nearest_version_at_or_above_the_engine_that_the_plugin_is_published_for(
    secured: SecuredNode,
) -> None:
    (engine,) = {jar.version for jar in read_lock() if jar.group == "org.opensearch"}
    at_or_above = [v for v in PLUGIN_PUBLISHED_FOR if _version(v)[:2] >= _version(engine)[:2]]
    assert min(at_or_above, key=_version) == SECURED_VERSION
    assert _version(SECURED_VERSION)[0] == _version(engine)[0], "the same major version as the domains"
    assert secured.request("GET", "/").body["version"]["number"] == SECURED_VERSION == secured.version
    locked = read_lock(SECURED.lock)
    assert {a.version for a in locked if a.group == "org.opensearch"} == {SECURED_VERSION}
    assert {a.version for a in locked if (a.group, a.artifact) in PLUGIN_ZIPS} == {f"{SECURED_VERSION}.0"}
    assert verified_install(locked, SECURED.lib), (
        "`make engine` installs the locked artifacts; .cache/engine/secured differs"
    )


def test_secured_node_starts_from_its_class_archive_or_records_it(secured: SecuredNode) -> None:
    assert secured.class_archive_problem() is None


def _raw(node: SecuredNode, headers: dict[str, str], source: str | None) -> int:
    connection = http.client.HTTPConnection(
        "127.0.0.1", node.port, timeout=30, source_address=(source, 0) if source else None
    )
    try:
        connection.request("GET", "/_plugins/_security/authinfo", headers=headers)
        return connection.getresponse().status
    finally:
        connection.close()


def test_only_the_proxy_address_may_name_a_user(secured: SecuredNode) -> None:
    named = secured.proxy_headers(SUITE_ARN)
    assert _raw(secured, named, "127.0.0.2") == 200
    assert _raw(secured, named, None) == 401  # 127.0.0.1 is not the front
    assert _raw(secured, {}, "127.0.0.2") == 401  # no user named, no anonymous access
    assert _raw(secured, {k: v for k, v in named.items() if k != "x-forwarded-for"}, "127.0.0.2") == 401


def test_the_front_acts_as_the_verified_role_whatever_proxy_headers_the_client_sends(
    secured: SecuredNode,
) -> None:
    fgac = FineGrainedAccessControl(MASTER, {"AKIDMASTER": MASTER, "AKIDREADER": READER})
    with LoopbackOpenSearch(fgac=fgac, engine=secured) as front:
        reader = OpenSearchTransport(
            front.endpoint, "ca-central-1", timeout_seconds=5, credentials=Credentials("AKIDREADER", "x")
        )
        master = OpenSearchTransport(
            front.endpoint, "ca-central-1", timeout_seconds=5, credentials=Credentials("AKIDMASTER", "x")
        )
        forged = {"x-proxy-user": MASTER, "x-proxy-roles": MASTER, "x-forwarded-for": "127.0.0.2"}

        who = reader.request("GET", "_plugins/_security/authinfo", None, forged).json()
        refused = reader.request("GET", "_plugins/_security/api/roles", None, forged)
        admitted = master.request("GET", "_plugins/_security/api/roles")

    assert (who["user_name"], who["backend_roles"], who["roles"]) == (READER, [READER], [])
    assert refused.status == 403
    assert admitted.status == 200


def test_wipe_removes_the_roles_and_mappings_a_test_put(secured: SecuredNode) -> None:
    role = {"index_permissions": [{"index_patterns": ["left*"], "allowed_actions": ["read"]}]}
    assert secured.request("PUT", "/_plugins/_security/api/roles/left", role).status == 201
    mapped = secured.request("PUT", "/_plugins/_security/api/rolesmapping/left", {"backend_roles": [READER]})
    assert mapped.status == 201
    secured.map_master(MASTER)

    secured.wipe()

    assert secured.request("GET", "/_plugins/_security/api/roles/left").status == 404
    assert secured.request("GET", "/_plugins/_security/api/rolesmapping/left").status == 404
    mapping = secured.request("GET", "/_plugins/_security/api/rolesmapping/all_access").body
    assert mapping["all_access"]["backend_roles"] == [SUITE_ARN]
