"""The index bootstrap custom resource against the loopback OpenSearch server."""

from __future__ import annotations

import copy
import fnmatch
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.credentials import Credentials
from index_bootstrap import bootstrap, handler
from index_bootstrap.bootstrap import SELF_TEST_INDEX_PREFIX, BootstrapError
from refdata.indexnames import index_name
from refdata.registry import indexable_schemas
from refdata.transport import NDJSON_CONTENT_TYPE, OpenSearchTransport
from search.indices import (
    APPLY_SCRIPT_ID,
    APPLY_SCRIPT_SOURCE,
    index_mappings,
    index_template,
    mapping_fingerprint,
)
from search.readers import read_role_definitions

from tests.support.aws import moto_role_of_access_key
from tests.support.engine_node import EngineNode
from tests.support.opensearch_server import (
    ROUTE_ALIASES,
    ROUTE_BULK,
    ROUTE_CLUSTER_SETTINGS,
    ROUTE_INDEX,
    ROUTE_INDEX_TEMPLATE,
    ROUTE_SCRIPTS,
    ROUTE_SECURITY,
    ROUTE_SETTINGS,
    FineGrainedAccessControl,
    LoopbackOpenSearch,
)
from tests.support.secured_node import SecuredNode

pytestmark = pytest.mark.integration

REGION = "eu-west-1"
SCHEMAS = [schema.name for schema in indexable_schemas()]


ADMIN_ROLE_ARN = "arn:aws:iam::111111111111:role/dev-Stateful-SearchAdminRole"
SYNC_ROLE_ARN = "arn:aws:iam::111111111111:role/dev-Stateful-SearchAccessSyncRole"
SYNC_KEY = "AKIDSYNCROLE"
SECRETS = {"AKIDBOOTSTRAP": "bootstrap-secret", SYNC_KEY: "sync-secret"}


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch, engine: EngineNode) -> Iterator[LoopbackOpenSearch]:
    """The domain front (SigV4 verified) before the real engine; the bootstrap signs with its own credentials."""
    _credentials(monkeypatch)
    with LoopbackOpenSearch(credentials=SECRETS, region=REGION, engine=engine) as running:
        yield running


def _credentials(monkeypatch: pytest.MonkeyPatch, key: str = "AKIDBOOTSTRAP") -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRETS.get(key, "function-secret"))
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setattr(handler, "_sleep", lambda seconds: None)


@pytest.fixture
def fgac_server(monkeypatch: pytest.MonkeyPatch, secured: SecuredNode) -> Iterator[LoopbackOpenSearch]:
    """The bootstrap signs as the FGAC master role; the secured node's security plugin decides what each role may
    do."""
    _credentials(monkeypatch)
    fgac = FineGrainedAccessControl(
        ADMIN_ROLE_ARN, {"AKIDBOOTSTRAP": ADMIN_ROLE_ARN, SYNC_KEY: SYNC_ROLE_ARN}
    )
    with LoopbackOpenSearch(credentials=SECRETS, region=REGION, fgac=fgac, engine=secured) as running:
        yield running


def _properties(server: LoopbackOpenSearch, **extra: str) -> dict[str, str]:
    return {
        "Endpoint": server.endpoint,
        "Region": REGION,
        "RequestTimeoutSeconds": "30",
        "Replicas": "0",
        **extra,
    }


def on_event(
    server: LoopbackOpenSearch,
    request_type: str = "Create",
    physical_id: str = "x",
    old: dict[str, str] | None = None,
    **properties: str,
) -> dict[str, Any]:
    """The handler's answer to a CloudFormation event for `server`'s domain, with `properties` over the defaults
    (and, given `old`, the previous properties an Update carries)."""
    event: dict[str, Any] = {
        "RequestType": request_type,
        "ResourceProperties": _properties(server, **properties),
    }
    if request_type != "Create":
        event["PhysicalResourceId"] = physical_id
    if old is not None:
        event["OldResourceProperties"] = _properties(server, **old)
    response: dict[str, Any] = handler.on_event(event, None)
    return response


def deployment_fails(server: LoopbackOpenSearch, match: str) -> None:
    with pytest.raises(BootstrapError, match=match):
        on_event(server)


def signed_as(server: LoopbackOpenSearch, key: str) -> OpenSearchTransport:
    return OpenSearchTransport(
        server.endpoint, REGION, timeout_seconds=30, credentials=Credentials(key, SECRETS[key])
    )


def puts_of(server: LoopbackOpenSearch, route: str) -> dict[str, Any]:
    return {request.path: request.json() for request in server.requests_to(route, "PUT")}


def test_first_run_creates_version_one_behind_both_aliases(server: LoopbackOpenSearch) -> None:
    on_event(server)

    assert server.index_names() == sorted(index_name(schema, 1) for schema in SCHEMAS)
    aliases = server.aliases_of("geozone-v1")
    assert aliases["geozone"] == {"filter": {"bool": {"must_not": [{"term": {"tombstone": True}}]}}}
    assert aliases["geozone-write"] == {"is_write_index": True}


def test_templates_map_geometry_location_and_keys_explicitly(server: LoopbackOpenSearch) -> None:
    on_event(server)

    template = puts_of(server, ROUTE_INDEX_TEMPLATE)["/_index_template/geozone-template"]
    mappings = template["template"]["mappings"]
    assert template["index_patterns"] == ["geozone-v*"]
    assert mappings["properties"]["geometry"] == {"type": "geo_shape"}
    assert mappings["properties"]["location"] == {"type": "geo_point"}
    for key in ("pk", "sk", "globalId", "schema", "stream_seq"):
        assert mappings["properties"][key] == {"type": "keyword"}
    assert mappings["properties"]["tombstone"] == {"type": "boolean"}
    assert (mappings["date_detection"], mappings["numeric_detection"]) == (False, False)


def test_every_indexable_schema_gets_a_template(server: LoopbackOpenSearch) -> None:
    on_event(server)

    assert sorted(puts_of(server, ROUTE_INDEX_TEMPLATE)) == sorted(
        f"/_index_template/{schema.lower()}-template" for schema in SCHEMAS
    )


def mappings_of(engine: EngineNode, index: str) -> dict[str, Any]:
    mappings: dict[str, Any] = engine.request("GET", f"/{index}/_mapping").body[index]["mappings"]
    return mappings


def replicas_of(engine: EngineNode, index: str) -> str:
    settings = engine.request("GET", f"/{index}/_settings").body[index]["settings"]
    return str(settings["index"]["number_of_replicas"])


def create_index(engine: EngineNode, name: str, body: dict[str, Any]) -> None:
    created = engine.request("PUT", f"/{name}", body)
    assert created.status == 200, created.body


def test_created_index_carries_the_mapping_fingerprint(
    server: LoopbackOpenSearch, engine: EngineNode
) -> None:
    on_event(server)

    meta = mappings_of(engine, "productdate-v1")["_meta"]
    assert meta["mapping_fingerprint"] == mapping_fingerprint(index_mappings("productDate"))


def test_stored_script_is_put_with_its_painless_source(server: LoopbackOpenSearch) -> None:
    on_event(server)

    # With the update context the engine compiles the script when it is stored: a compile error fails the
    # deployment instead of every later update.
    body = puts_of(server, ROUTE_SCRIPTS)[f"/_scripts/{APPLY_SCRIPT_ID}/update"]
    assert body == {"script": {"lang": "painless", "source": APPLY_SCRIPT_SOURCE}}


def schema_index_puts(server: LoopbackOpenSearch) -> list[str]:
    """Index creations other than the self-test's scratch index."""
    return [r.path for r in server.requests_to(ROUTE_INDEX, "PUT") if SELF_TEST_INDEX_PREFIX not in r.path]


def test_second_run_creates_no_index_and_moves_no_alias(server: LoopbackOpenSearch) -> None:
    on_event(server)
    before = {name: server.aliases_of(name) for name in server.index_names()}
    index_puts = schema_index_puts(server)

    response = on_event(server, "Update")

    assert schema_index_puts(server) == index_puts
    assert server.count(ROUTE_ALIASES) == 0
    assert {name: server.aliases_of(name) for name in server.index_names()} == before
    assert response["Data"]["CreatedIndices"] == ""


def test_mapping_change_creates_next_version_without_moving_aliases(
    server: LoopbackOpenSearch, engine: EngineNode
) -> None:
    old_mappings = {"_meta": {"mapping_fingerprint": "older"}, "properties": {"pk": {"type": "keyword"}}}
    create_index(
        engine,
        "geozone-v1",
        {"mappings": old_mappings, "aliases": {"geozone": {}, "geozone-write": {"is_write_index": True}}},
    )

    response = on_event(server)

    assert "geozone-v2" in server.index_names()
    assert server.aliases_of("geozone-v2") == {}
    assert set(server.aliases_of("geozone-v1")) == {"geozone", "geozone-write"}
    assert "geozone-v2" in response["Data"]["CreatedIndices"].split(",")


def test_latest_version_decides_when_several_exist(server: LoopbackOpenSearch, engine: EngineNode) -> None:
    create_index(engine, "booking-v1", {"mappings": {"_meta": {"mapping_fingerprint": "older"}}})
    create_index(engine, "booking-v2", {"mappings": index_mappings("booking")})

    on_event(server)

    assert [name for name in server.index_names() if name.startswith("booking")] == [
        "booking-v1",
        "booking-v2",
    ]


def test_a_mapping_the_engine_refuses_fails_the_deployment_with_the_engines_reason(
    server: LoopbackOpenSearch, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(schema: str, *, replicas: int) -> dict[str, Any]:
        """The product's template with its geometry mapped as a type no module declares (a typo of geo_shape)."""
        template = copy.deepcopy(index_template(schema, replicas=replicas))
        template["template"]["mappings"]["properties"]["geometry"] = {"type": "geoshape"}
        return template

    monkeypatch.setattr(bootstrap, "index_template", refused)

    deployment_fails(
        server, r"mapper_parsing_exception: No handler for type \[geoshape\] declared on field \[geometry\]"
    )
    assert server.index_names() == []


def test_throttling_is_retried_a_bounded_number_of_times(server: LoopbackOpenSearch) -> None:
    server.fail_next(ROUTE_SCRIPTS, 429, retry_after=1, times=2)

    on_event(server)

    assert server.count(ROUTE_SCRIPTS) == 3


def test_persistent_unavailability_fails_after_the_last_attempt(server: LoopbackOpenSearch) -> None:
    server.fail_next(ROUTE_SCRIPTS, 503, times=5)

    deployment_fails(server, "HTTP 503")
    assert server.count(ROUTE_SCRIPTS) == 3


def test_delete_keeps_every_index(server: LoopbackOpenSearch) -> None:
    on_event(server)
    indices = server.index_names()

    server.forget_requests()

    response = on_event(server, "Delete", "bootstrap-id")

    assert response == {"PhysicalResourceId": "bootstrap-id"}
    assert server.index_names() == indices
    assert server.requests == []


def test_physical_id_is_stable_for_one_endpoint(server: LoopbackOpenSearch) -> None:
    first = on_event(server)["PhysicalResourceId"]
    second = on_event(server, "Update", first)["PhysicalResourceId"]

    assert first == second == f"opensearch-index-bootstrap:127.0.0.1:{server.port}"


@pytest.mark.parametrize("replicas", [None, "", "one", "-1"])
def test_a_missing_or_bad_replica_count_is_an_error_naming_the_property(
    server: LoopbackOpenSearch, replicas: str | None
) -> None:
    properties = _properties(server)
    if replicas is None:
        del properties["Replicas"]
    else:
        properties["Replicas"] = replicas
    with pytest.raises(ValueError, match="Replicas"):
        handler.on_event({"RequestType": "Create", "ResourceProperties": properties}, None)
    assert server.requests == []


def test_templates_carry_the_replica_count(server: LoopbackOpenSearch) -> None:
    on_event(server, Replicas="2")

    template = puts_of(server, ROUTE_INDEX_TEMPLATE)["/_index_template/geozone-template"]
    assert template["template"]["settings"] == {"index": {"number_of_replicas": 2}}


def test_missing_endpoint_is_an_error_naming_the_property() -> None:
    with pytest.raises(ValueError, match="Endpoint"):
        handler.on_event({"RequestType": "Create", "ResourceProperties": {}}, None)


def test_sync_role_is_mapped_to_a_write_only_role_on_the_platform_indices(
    fgac_server: LoopbackOpenSearch,
) -> None:
    server = fgac_server
    on_event(server, SyncRoleArn=SYNC_ROLE_ARN)

    security = puts_of(server, ROUTE_SECURITY)
    role = security["/_plugins/_security/api/roles/refdata_stream_sync"]
    assert role["cluster_permissions"] == ["indices:data/write/bulk"]
    (permission,) = role["index_permissions"]
    assert permission["index_patterns"] == sorted(f"{name.lower()}-v*" for name in SCHEMAS)
    assert set(permission["allowed_actions"]) == {
        "indices:data/write/bulk*",
        "indices:data/write/update",
        "indices:admin/mapping/put",  # documents introduce fields: the mapping grows as the sync's user
    }
    mapping = security["/_plugins/_security/api/rolesmapping/refdata_stream_sync"]
    assert mapping["backend_roles"] == [SYNC_ROLE_ARN]


def test_no_index_named_like_a_write_alias_can_be_auto_created(server: LoopbackOpenSearch) -> None:
    on_event(server)
    admin = signed_as(server, "AKIDBOOTSTRAP")
    stray = b'{"index":{"_index":"stray-write","_id":"1"}}\n{"a":1}\n'

    (item,) = admin.request("POST", "_bulk", stray, {"Content-Type": NDJSON_CONTENT_TYPE}).json()["items"]

    # Amazon OpenSearch Service accepts only the flat form of a cluster setting.
    assert puts_of(server, ROUTE_CLUSTER_SETTINGS)["/_cluster/settings"] == {
        "persistent": {"action.auto_create_index": "-*-write,+*"}
    }
    assert item["index"]["status"] == 404
    assert "[action.auto_create_index] contains [-*-write]" in item["index"]["error"]["reason"]
    assert "stray-write" not in server.index_names()


def test_without_a_sync_role_no_security_api_is_called(server: LoopbackOpenSearch) -> None:
    on_event(server)

    assert server.count(ROUTE_SECURITY) == 0


def test_requests_are_signed_with_the_assumed_admin_role(
    monkeypatch: pytest.MonkeyPatch, secured: SecuredNode
) -> None:
    from moto import mock_aws

    _credentials(monkeypatch, "AKIDFUNCTIONROLE")
    admin_role = "arn:aws:iam::123456789012:role/search-admin"
    fgac = FineGrainedAccessControl(admin_role, moto_role_of_access_key)
    with mock_aws(), LoopbackOpenSearch(region=REGION, fgac=fgac, engine=secured) as running:
        on_event(running, AdminRoleArn=admin_role)

        signers = {
            request.headers["authorization"].split("Credential=")[1].split("/")[0]
            for request in running.requests
        }
        tokens = {request.headers.get("x-amz-security-token") for request in running.requests}
    assert len(signers) == 1 and "AKIDFUNCTIONROLE" not in signers
    assert None not in tokens


# --- the stored script is compiled when stored, then exercised on the engine before anything depends on it --


def test_a_painless_source_that_does_not_compile_fails_the_deployment(
    server: LoopbackOpenSearch, engine: EngineNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    edited = {"script": {"lang": "painless", "source": APPLY_SCRIPT_SOURCE + "\nctx._source.x = ;"}}
    monkeypatch.setattr(bootstrap, "stored_script_body", lambda: edited)

    deployment_fails(
        server, r"PUT _scripts/refdata-sync-apply/update failed: HTTP 400 script_exception: compile error"
    )
    assert server.index_names() == []
    assert engine.request("GET", f"/_scripts/{APPLY_SCRIPT_ID}").body["found"] is False


def test_the_self_test_runs_the_sync_lines_on_a_scratch_index_and_removes_it(
    server: LoopbackOpenSearch,
) -> None:
    on_event(server)

    (created,) = [r for r in server.requests_to(ROUTE_INDEX, "PUT") if SELF_TEST_INDEX_PREFIX in r.path]
    scratch = created.path.lstrip("/")
    assert created.json()["settings"] == {"index": {"number_of_shards": 1, "number_of_replicas": 0}}
    assert not any(fnmatch.fnmatchcase(scratch, f"{schema.lower()}-v*") for schema in SCHEMAS)
    lines = [line for request in server.requests_to(ROUTE_BULK) for line in request.ndjson()]
    actions, updates = lines[::2], lines[1::2]
    assert [action["update"]["_index"] for action in actions] == [scratch] * 3
    assert [u["script"]["params"]["seq"].lstrip("0") for u in updates] == ["2", "1", "3"]
    assert [u["script"]["params"]["tombstone"] for u in updates] == [False, False, True]
    assert [r.path for r in server.requests_to(ROUTE_INDEX, "DELETE")] == [f"/{scratch}"]
    assert not any(name.startswith(SELF_TEST_INDEX_PREFIX) for name in server.index_names())


def stored_script_edited(monkeypatch: pytest.MonkeyPatch, old: str, new: str) -> None:
    """The bootstrap stores APPLY_SCRIPT_SOURCE with `old` replaced by `new` (painless the engine runs)."""
    assert old in APPLY_SCRIPT_SOURCE
    edited = {"script": {"lang": "painless", "source": APPLY_SCRIPT_SOURCE.replace(old, new)}}
    monkeypatch.setattr(bootstrap, "stored_script_body", lambda: edited)


# A runtime error for the probe document only: painless throws on a method call on null.
FAILS_AT_RUNTIME = (
    "String incoming = params.seq;",
    "String incoming = params.seq;\nparams.missing.length();",
)


def test_a_script_that_does_not_keep_order_on_the_engine_fails_the_deployment(
    server: LoopbackOpenSearch, monkeypatch: pytest.MonkeyPatch
) -> None:
    stored_script_edited(monkeypatch, "stored.compareTo(incoming) >= 0", "stored.compareTo(incoming) > 1")

    deployment_fails(
        server, r"a replayed older change answered HTTP 200 result updated, expected HTTP 200 result noop"
    )
    assert server.index_names() == []  # the scratch index is gone and no schema index was created


def test_a_runtime_error_of_the_script_fails_the_deployment_with_the_engines_reason(
    server: LoopbackOpenSearch, monkeypatch: pytest.MonkeyPatch
) -> None:
    stored_script_edited(monkeypatch, *FAILS_AT_RUNTIME)

    deployment_fails(server, r"failed to execute script; caused by script_exception: runtime error")
    assert server.index_names() == []


def test_a_stored_document_other_than_expected_fails_the_deployment(
    server: LoopbackOpenSearch, monkeypatch: pytest.MonkeyPatch
) -> None:
    stored_script_edited(
        monkeypatch,
        "replacement.put('stream_seq', incoming);",
        "replacement.remove('exactNumbers');\n  replacement.put('stream_seq', incoming);",
    )

    deployment_fails(server, r"the stored document is .*, expected .*exactNumbers")


def test_a_failed_self_test_whose_cleanup_fails_too_reports_both(
    server: LoopbackOpenSearch, monkeypatch: pytest.MonkeyPatch
) -> None:
    stored_script_edited(monkeypatch, *FAILS_AT_RUNTIME)
    server.fail_next(ROUTE_INDEX, 500, method="DELETE", reason="node left")

    deployment_fails(
        server,
        r"runtime error.*; and DELETE refdata-bootstrap-selftest-\w+ failed too: HTTP 500 exception: node left",
    )


def test_existing_versions_are_brought_to_the_configured_replica_count(
    server: LoopbackOpenSearch, engine: EngineNode
) -> None:
    create_index(engine, "booking-v1", {"mappings": {"_meta": {"mapping_fingerprint": "older"}}})
    create_index(engine, "booking-v2", {"mappings": index_mappings("booking")})

    on_event(server, Replicas="2")

    replicas = {name: replicas_of(engine, name) for name in server.index_names()}
    assert replicas == dict.fromkeys(
        sorted({"booking-v1", *(index_name(schema, 1) for schema in SCHEMAS)} | {"booking-v2"}), "2"
    )
    assert sorted(r.path for r in server.requests_to(ROUTE_SETTINGS, "PUT")) == [
        "/booking-v1/_settings",
        "/booking-v2/_settings",
    ]


def test_versions_already_at_the_replica_count_are_left_alone(
    server: LoopbackOpenSearch, engine: EngineNode
) -> None:
    on_event(server, Replicas="1")
    server.forget_requests()

    on_event(server, "Update", Replicas="1")
    unchanged = server.count(ROUTE_SETTINGS)
    on_event(server, "Update", Replicas="0")

    assert unchanged == 0
    assert server.count(ROUTE_SETTINGS, "PUT") == len(SCHEMAS)  # one per schema's version
    assert {replicas_of(engine, name) for name in server.index_names()} == {"0"}


# --- read roles -----------------------------------------------------------------------------------------------


READER_ARN = "arn:aws:iam::111111111111:role/public-site"


def security_entries(node: SecuredNode, kind: str) -> dict[str, Any]:
    """The roles or role mappings a test put on the secured node (not the plugin's reserved or static ones)."""
    entries: dict[str, Any] = node.request("GET", f"/_plugins/_security/api/{kind}").body
    return {
        name: entry
        for name, entry in entries.items()
        if not (entry.get("reserved") or entry.get("static") or entry.get("hidden")) and name != "all_access"
    }


def read_roles_property(*names: str) -> str:
    return json.dumps(read_role_definitions((name, ("geozone",), (READER_ARN,)) for name in names))


def test_read_roles_and_their_mappings_are_put_as_the_property_defines_them(
    fgac_server: LoopbackOpenSearch, secured: SecuredNode
) -> None:
    server = fgac_server
    on_event(server, ReadRoles=read_roles_property("app"))

    security = puts_of(server, ROUTE_SECURITY)
    (definition,) = read_role_definitions([("app", ("geozone",), (READER_ARN,))]).values()
    assert security["/_plugins/_security/api/roles/app"] == definition["role"]
    assert security["/_plugins/_security/api/rolesmapping/app"] == definition["mapping"]
    assert security_entries(secured, "rolesmapping")["app"]["backend_roles"] == [READER_ARN]


def test_a_read_role_removed_from_config_is_deleted_on_the_next_update(
    fgac_server: LoopbackOpenSearch, secured: SecuredNode
) -> None:
    server = fgac_server
    both = {"ReadRoles": read_roles_property("app", "partner")}
    on_event(server, **both)
    server.forget_requests()

    on_event(server, "Update", old=both, ReadRoles=read_roles_property("app"))

    deleted = [request.path for request in server.requests_to(ROUTE_SECURITY, "DELETE")]
    assert deleted == [
        "/_plugins/_security/api/rolesmapping/partner",
        "/_plugins/_security/api/roles/partner",
    ]
    assert set(security_entries(secured, "roles")) == {"app"}
    assert set(security_entries(secured, "rolesmapping")) == {"app"}


def test_retiring_a_read_role_that_is_already_gone_succeeds(
    fgac_server: LoopbackOpenSearch, secured: SecuredNode
) -> None:
    server = fgac_server
    on_event(server, "Update", old={"ReadRoles": read_roles_property("partner")})

    assert server.count(ROUTE_SECURITY, "DELETE") == 2
    assert "partner" not in security_entries(secured, "roles")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("[", "ResourceProperties.ReadRoles is not JSON"),
        ("[]", "must be a JSON object"),
        ('{"all_access": {"role": {"index_permissions": []}, "mapping": {"backend_roles": []}}}', "reserved"),
        ('{"app": {"role": {}}}', "exactly 'role' and 'mapping'"),
        (
            '{"app": {"role": {"index_permissions": {}}, "mapping": {"backend_roles": []}}}',
            "index_permissions",
        ),
    ],
)
def test_a_malformed_read_roles_property_fails_naming_it(
    server: LoopbackOpenSearch, value: str, message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        on_event(server, ReadRoles=value)
    assert server.count(ROUTE_SECURITY) == 0
