"""Fine-grained access control (the security plugin) as Amazon OpenSearch Service applies it, for the loopback
server (tests only).

A domain with IAM authentication attributes each SigV4-signed request to the IAM principal whose credentials
signed it (`name` and the one backend role are that role's ARN). The FGAC master user
(`AdvancedSecurityOptions.MasterUserOptions.MasterUserARN`) has every permission and alone may use the security
REST API (`_plugins/_security/api`). Any other principal gets the permissions of the FGAC roles whose role
mappings list its ARN in `backend_roles`; roles and mappings are whatever was PUT through that API.

Checks follow the security plugin's privilege evaluation:
- cluster actions (`cluster:*`, `indices:admin/index_template/*`, `indices:data/write/bulk`, ...) against a
  role's `cluster_permissions`;
- index actions against `index_permissions` entries, for every concrete index the request resolves to; an
  index pattern that matches an alias grants its member indices;
- `allowed_actions` and patterns use `*` and `?` wildcards; the static action groups expand recursively.
A refusal is a 403 `security_exception`: `no permissions for [<actions>] and User [name=..., backend_roles=[...],
requestedTenant=null]`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from tests.support.domain_principals import Subject
from tests.support.opensearch_errors import OpenSearchError

# The security plugin's static action groups (static_config/static_action_groups.yml), by name.
ACTION_GROUPS: dict[str, tuple[str, ...]] = {
    "unlimited": ("*",),
    "cluster_all": ("cluster:*",),
    "cluster_monitor": ("cluster:monitor/*",),
    "cluster_composite_ops_ro": (
        "indices:data/read/mget",
        "indices:data/read/msearch",
        "indices:data/read/mtv",
        "indices:admin/aliases/exists*",
        "indices:admin/aliases/get*",
        "indices:data/read/scroll",
        "indices:admin/resolve/index",
    ),
    "cluster_composite_ops": (
        "indices:data/write/bulk",
        "indices:admin/aliases*",
        "indices:data/write/reindex",
        "cluster_composite_ops_ro",
    ),
    "cluster_manage_index_templates": (
        "indices:admin/template/*",
        "indices:admin/index_template/*",
        "cluster:admin/component_template/*",
    ),
    "cluster_manage_pipelines": ("cluster:admin/ingest/pipeline/*",),
    "manage_snapshots": ("cluster:admin/snapshot/*", "cluster:admin/repository/*"),
    "indices_all": ("indices:*",),
    "read": ("indices:data/read*", "indices:admin/mappings/fields/get*", "indices:admin/resolve/index"),
    "write": ("indices:data/write*", "indices:admin/mapping/put"),
    "crud": ("read", "write"),
    "data_access": ("indices:data/*", "crud"),
    "search": (
        "indices:data/read/search*",
        "indices:data/read/msearch*",
        "indices:admin/resolve/index",
        "suggest",
    ),
    "suggest": ("indices:data/read/suggest*",),
    "get": ("indices:data/read/get*", "indices:data/read/mget*"),
    "delete": ("indices:data/write/delete*",),
    "index": (
        "indices:data/write/index*",
        "indices:data/write/update*",
        "indices:admin/mapping/put",
        "indices:data/write/bulk*",
    ),
    "create_index": ("indices:admin/create", "indices:admin/mapping/put"),
    "manage": ("indices:monitor/*", "indices:admin/*"),
    "manage_aliases": ("indices:admin/aliases*",),
    "indices_monitor": ("indices:monitor/*",),
    "manage_data_streams": ("indices:admin/data_stream/*", "indices:monitor/data_stream/stats"),
}


@lru_cache(maxsize=1024)
def _wildcard(pattern: str) -> re.Pattern[str]:
    """The security plugin's WildcardMatcher: `*` and `?` are wildcards, `/.../` is a regular expression."""
    if len(pattern) > 1 and pattern.startswith("/") and pattern.endswith("/"):
        return re.compile(pattern[1:-1])
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern))


def matches(pattern: str, name: str) -> bool:
    return _wildcard(pattern).fullmatch(name) is not None


def expand_actions(allowed: Iterable[str], _seen: frozenset[str] = frozenset()) -> list[str]:
    """Action patterns with every (static) action group replaced by its members, recursively."""
    expanded: list[str] = []
    for entry in allowed:
        members = ACTION_GROUPS.get(entry)
        if members is None:
            expanded.append(entry)
        elif entry not in _seen:
            expanded.extend(expand_actions(members, _seen | {entry}))
    return expanded


def forbidden(subject: Subject, actions: Sequence[str]) -> OpenSearchError:
    return OpenSearchError(
        403, "security_exception", f"no permissions for [{', '.join(actions)}] and {subject.describe()}"
    )


class Authorizer:
    """The privilege checks over the roles and role mappings stored through the security REST API."""

    def __init__(self, security: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> None:
        self._security = security

    def mapped_roles(self, subject: Subject) -> list[str]:
        return sorted(
            name
            for name, mapping in self._security["rolesmapping"].items()
            if any(role in (mapping.get("backend_roles") or []) for role in subject.backend_roles)
            or subject.name in (mapping.get("users") or [])
        )

    def roles(self, subject: Subject) -> list[Mapping[str, Any]]:
        return [
            self._security["roles"][name]
            for name in self.mapped_roles(subject)
            if name in self._security["roles"]
        ]

    def check_cluster(self, subject: Subject, action: str) -> None:
        if subject.master:
            return
        for role in self.roles(subject):
            if any(
                matches(pattern, action) for pattern in expand_actions(role.get("cluster_permissions") or [])
            ):
                return
        raise forbidden(subject, [action])

    def check_indices(
        self, subject: Subject, actions: Sequence[str], indices: Mapping[str, Sequence[str]]
    ) -> None:
        """Every action on every index; `indices` maps each concrete index (or a name that does not exist yet) to
        the aliases that point at it."""
        if subject.master:
            return
        roles = self.roles(subject)
        missing = [
            action
            for action in dict.fromkeys(actions)
            if not all(self._grants(roles, action, name, aliases) for name, aliases in indices.items())
        ]
        if missing:
            raise forbidden(subject, missing)

    @staticmethod
    def _grants(roles: Sequence[Mapping[str, Any]], action: str, index: str, aliases: Sequence[str]) -> bool:
        for role in roles:
            for entry in role.get("index_permissions") or []:
                patterns = entry.get("index_patterns") or []
                if not any(matches(p, name) for p in patterns for name in (index, *aliases)):
                    continue
                if any(matches(p, action) for p in expand_actions(entry.get("allowed_actions") or [])):
                    return True
        return False

    def security_api_refusal(self, subject: Subject) -> str | None:
        """Only the master may use `_plugins/_security/api` (as the `security_manager` role on the service); the
        message of the 403 `{"status": "FORBIDDEN", "message": ...}` answer otherwise."""
        if subject.master:
            return None
        roles = ", ".join(self.mapped_roles(subject))
        return (
            f"No permission to access REST API: User {subject.name} with Security roles [{roles}] does not have "
            "any role privileged for admin access"
        )
