"""The secured test node: OpenSearch with the real security plugin (fine-grained access control), for the tests of
what FGAC enforces. Same lazy pattern as the engine (tests/support/engine_node.py): one node per pytest process,
started in the background when collection finds a test using the ``secured`` fixture; the fixture gives it back
empty (indices, templates, scripts, and the roles and role mappings a test put, gone).

Its version is the one the plugin is published for nearest above the engine's (tests/support/secured_setup.py).

How a domain's FGAC is reproduced: HTTP stays plain on loopback and the plugin authenticates every request by
proxy authentication, trusting only connections from 127.0.0.2 (`internalProxies`). The domain front
(tests/support/opensearch_server.py) verifies SigV4 and the access policy, then forwards from 127.0.0.2 with
`x-proxy-user` and `x-proxy-roles` set to the verified IAM role ARN, as the service names a principal (user and
backend role). The domain's master user is mapped to `all_access` (as the service does for `MasterUserARN`), which
alone may use the security REST API. Everything else (read roles, the sync's role, their mappings) is what the
project's own index bootstrap puts through that API.
"""

from __future__ import annotations

import datetime
import http.client
import ipaddress
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID, ObjectIdentifier

from tests.support.engine_node import EngineNode, Layout, SessionNode
from tests.support.secured_setup import SECURED

PROXY_ADDRESS = "127.0.0.2"  # the only source address the plugin takes a user from (Linux routes 127/8 on lo)
# Who the suite's own housekeeping (wipe, inspection) acts as: mapped to all_access in the initial configuration.
SUITE_ARN = "arn:aws:iam::000000000000:role/refdata-tests-housekeeping"
# plugins.security.cert.oid's default: the node's identity in its SAN
NODE_OID = ObjectIdentifier("1.2.3.4.5.5")

NODE_SETTINGS = {
    "plugins.security.ssl.transport.pemcert_filepath": "certs/node.pem",
    "plugins.security.ssl.transport.pemkey_filepath": "certs/node-key.pem",
    "plugins.security.ssl.transport.pemtrustedcas_filepath": "certs/ca.pem",
    "plugins.security.ssl.transport.enforce_hostname_verification": False,
    "plugins.security.ssl.http.enabled": False,
    "plugins.security.allow_default_init_securityindex": True,  # the files below seed the security index
    "plugins.security.restapi.roles_enabled": ["all_access"],
    "plugins.security.audit.type": "noop",
    "plugins.security.system_indices.enabled": True,
}
PROXY_AUTHENTICATION = {
    "http": {
        "anonymous_auth_enabled": False,
        "xff": {"enabled": True, "internalProxies": r"127\.0\.0\.2", "remoteIpHeader": "x-forwarded-for"},
    },
    "authc": {
        "iam_proxy": {
            "http_enabled": True,
            "transport_enabled": False,
            "order": 0,
            "http_authenticator": {
                "type": "proxy",
                "challenge": False,
                "config": {"user_header": "x-proxy-user", "roles_header": "x-proxy-roles"},
            },
            "authentication_backend": {"type": "noop"},
        }
    },
}
# Each file's `_meta.type` is its name without the underscores.
SECURITY_FILES: dict[str, dict[str, Any]] = {
    f"{name}.yml": {"_meta": {"type": name.replace("_", ""), "config_version": 2}, **content}
    for name, content in {
        "config": {"config": {"dynamic": PROXY_AUTHENTICATION}},
        "roles_mapping": {"all_access": {"reserved": False, "backend_roles": [SUITE_ARN]}},
        "roles": {},
        "internal_users": {},
        "action_groups": {},
        "tenants": {},
    }.items()
}


def _name(common: str) -> x509.Name:
    organization = x509.NameAttribute(NameOID.ORGANIZATION_NAME, "refdata")
    return x509.Name([organization, x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _certificate(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: str,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    ca: bool,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(_name(issuer))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )
    if not ca:
        loopback = x509.IPAddress(ipaddress.ip_address("127.0.0.1"))
        san = [x509.RegisteredID(NODE_OID), x509.DNSName("localhost"), loopback]
        usages = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
        builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False).add_extension(
            x509.ExtendedKeyUsage(usages), critical=False
        )
    return builder.sign(issuer_key, hashes.SHA256())


def write_certificates(directory: Path) -> None:
    """The transport TLS material the plugin requires even on one node: a CA and a node certificate it signed (EC
    P-256, the key as unencrypted PKCS#8 PEM, which the plugin's PEM loader reads)."""
    directory.mkdir(mode=0o700, parents=True)
    ca_key, node_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    pem = serialization.Encoding.PEM
    ca = _certificate("tests-ca", ca_key, "tests-ca", ca_key, ca=True)
    (directory / "ca.pem").write_bytes(ca.public_bytes(pem))
    node = _certificate("node-0", node_key, "tests-ca", ca_key, ca=False)
    (directory / "node.pem").write_bytes(node.public_bytes(pem))
    (directory / "node-key.pem").write_bytes(
        node_key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )


def write_home(home: Path) -> None:
    """The node's config directory: settings, certificates and the security index's initial files (JSON is YAML)."""
    config = home / "config"
    write_certificates(config / "certs")
    (config / "opensearch.yml").write_text(json.dumps(NODE_SETTINGS, indent=1))
    (config / "opensearch-security").mkdir()
    for name, content in SECURITY_FILES.items():
        (config / "opensearch-security" / name).write_text(json.dumps(content, indent=1))
    for path in [config, *config.rglob("*")]:  # the plugin warns about config files others may read
        path.chmod(0o700 if path.is_dir() else 0o600)


class SecuredNode(EngineNode):
    """One secured node in a child JVM; requests reach it only through a proxy connection naming a principal."""

    kind, launcher = "secured", SECURED

    def prepare_home(self) -> None:
        write_home(self.directory)

    def connect(self, timeout: float) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(
            "127.0.0.1", self.wait_ready().port, timeout=timeout, source_address=(PROXY_ADDRESS, 0)
        )

    def proxy_headers(self, principal: str | None) -> dict[str, str]:
        """The plugin's proxy authentication: user and backend role are the IAM role ARN, as on a domain."""
        arn = SUITE_ARN if principal is None else principal
        return {"x-forwarded-for": "127.0.0.1", "x-proxy-user": arn, "x-proxy-roles": arn}

    master_arn: str | None = None  # the domain front's master user, mapped since the last wipe

    def map_master(self, master_arn: str) -> None:
        """What the service does for a domain's `MasterUserARN`: that IAM role acts as `all_access`."""
        self.master_arn = master_arn
        backend_roles, description = [SUITE_ARN, master_arn], "the domain's master user"
        body = {"backend_roles": backend_roles, "description": description}
        mapped = self._checked("GET", "/_plugins/_security/api/rolesmapping/all_access")["all_access"]
        if not _maps_only(mapped, body) or mapped.get("description") != description:
            self._checked("PUT", "/_plugins/_security/api/rolesmapping/all_access", body)

    def prepared(self, key: str, build: Callable[[], object]) -> bool:
        """As the engine's; the domain front's master user stays mapped through the wipe before `build`."""
        master = self.master_arn

        def build_with_master() -> object:
            if master is not None:
                self.map_master(master)
            return build()

        return super().prepared(key, build_with_master)

    def layout(self) -> Layout:
        """As the engine's, and the security plugin's roles and role mappings."""
        layout = super().layout()
        kinds = ("roles", "rolesmapping")
        layout.rest += [self._checked("GET", f"/_plugins/_security/api/{kind}") for kind in kinds]
        return layout

    def wipe(self) -> None:
        """As the engine's, and the roles and role mappings a test put are gone (all_access maps the suite only).
        One PATCH per kind: each change to the security configuration makes the plugin write its index and reload
        the whole configuration (about 30 ms of the node's CPU), so one change for all of them, not one each."""
        super().wipe()
        self.master_arn = None
        suite_only = {"backend_roles": [SUITE_ARN]}
        for kind in ("rolesmapping", "roles"):
            entries = self._checked("GET", f"/_plugins/_security/api/{kind}")
            patch: list[dict[str, Any]] = [
                {"op": "remove", "path": f"/{name}"}
                for name, entry in entries.items()
                if not (entry.get("reserved") or entry.get("static") or entry.get("hidden"))
                and name != "all_access"
            ]
            if kind == "rolesmapping" and not _maps_only(entries.get("all_access", {}), suite_only):
                patch.append({"op": "add", "path": "/all_access", "value": suite_only})
            if patch:
                self._checked("PATCH", f"/_plugins/_security/api/{kind}", patch)


def _maps_only(mapping: dict[str, Any], wanted: dict[str, list[str]]) -> bool:
    """Whether a role mapping as the security API shows it maps exactly `wanted` (backend roles, users, hosts)."""
    kinds = ("backend_roles", "users", "hosts", "and_backend_roles")
    return all(sorted(mapping.get(kind) or []) == sorted(wanted.get(kind, [])) for kind in kinds)


SESSION = SessionNode(SecuredNode, "secured", "secured_for_module")
pytest_collection_modifyitems = SESSION.pytest_collection_modifyitems
pytest_collection_finish, pytest_unconfigure = SESSION.pytest_collection_finish, SESSION.pytest_unconfigure


@pytest.fixture
def secured() -> SecuredNode:
    """The secured node, empty: what an earlier test made (indices, scripts, roles, role mappings) is gone."""
    return SESSION.empty()


@pytest.fixture(scope="module")
def secured_for_module() -> SecuredNode:
    """The secured node, emptied once for a module whose tests only read what its module-scoped fixtures put."""
    return SESSION.empty()


@pytest.fixture
def secured_as_left(request: pytest.FixtureRequest) -> SecuredNode:
    """The secured node as the last test left it (`SessionNode.as_left`)."""
    return SESSION.as_left(request)
