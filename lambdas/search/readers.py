"""Read roles: fine-grained-access-control roles through which application teams and public sites read.

A read role may search, count and get documents through the read aliases of the schemas it names, nothing
else. The security plugin resolves a role's index pattern that names an alias to the alias's member indices
(IndexPattern.matches), and applies the document- and field-level security of an alias's rules to its
member indices too (AbstractRuleBasedPrivileges collects the rules of an index and of its parent aliases), so
whichever name a reader sends a query to, the same restrictions hold:

- **document-level security** (`dls`): tombstones, items whose schema's hidden flag is true and the platform's
  own heartbeat and smoke-run canaries (their reserved scopes) are never returned (not by `_search`, `_count` or
  `_doc`);
- **field-level security** (`fls`): the schema's internal attributes are removed from every `_source` and
  cannot be queried, sorted or aggregated on; so is their exact decimal text in `exactNumbers`.

The domain's access policy (infra/constructs/search_domain.py) admits a read role's IAM roles to the read
aliases' `_search`, `_count` and `_doc` paths only. The index bootstrap puts the roles and their mappings
(`search.readers.read_role_definitions`, rendered at synth and passed as a custom-resource property).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from refdata import reserved
from refdata.exact_numbers import EXACT_NUMBERS_FIELD
from refdata.indexnames import read_alias
from refdata.registry import SEPARATOR, Schema, Visibility, get_schema

from search.security import SYNC_ROLE

# _search and _count are `indices:data/read/search` (the query phase and its per-shard actions match `*`),
# a `_doc` GET is `indices:data/read/get`.
READ_INDEX_ACTIONS: Final = ("indices:data/read/search*", "indices:data/read/get")
ROLE_NAME: Final = re.compile(r"[a-z][a-z0-9_-]{2,63}")
# The security plugin's reserved and static roles, and the platform's own: never redefined by a read role.
RESERVED_ROLE_NAMES: Final = frozenset(
    {
        SYNC_ROLE,
        "all_access",
        "security_manager",
        "manage_snapshots",
        "readall",
        "readall_and_monitor",
        "kibana_user",
        "kibana_server",
        "opensearch_dashboards_user",
        "opensearch_dashboards_read_only",
        "logstash",
        "own_index",
        "alerting_full_access",
        "alerting_read_access",
    }
)


def document_filter(schema: Schema) -> dict[str, Any]:
    """The query a reader's documents of `schema` must match: no tombstone, hidden flag not true, and none of the
    platform's own items (the reserved heartbeat and canary scopes, refdata.reserved)."""
    hidden: list[dict[str, Any]] = [{"term": {"tombstone": True}}]
    if schema.hidden_flag:
        hidden.append({"term": {schema.hidden_flag: True}})
    for scope in reserved.SCOPES:
        prefix = reserved.scope_prefix(schema.name, scope)
        hidden.append({"prefix": {"pk": prefix}} if prefix.endswith(SEPARATOR) else {"term": {"pk": prefix}})
    return {"bool": {"must_not": hidden}}


def field_exclusions(schema: Schema) -> list[str]:
    """FLS exclusions (`~<field>`) hiding the schema's internal attributes, with their `exactNumbers` entries
    (keyed by JSON Pointer: `/<name>` and anything below it)."""
    exclusions: list[str] = []
    for name in schema.attributes_of(visibility=Visibility.INTERNAL):
        exclusions += [f"~{name}", f"~{EXACT_NUMBERS_FIELD}./{name}", f"~{EXACT_NUMBERS_FIELD}./{name}/*"]
    return exclusions


def read_role_body(schemas: Iterable[str]) -> dict[str, Any]:
    """`PUT _plugins/_security/api/roles/<name>`: search and get on each schema's read alias, with its DLS and
    FLS. Names the aliases only: the concrete `<schema>-v<N>` indices are reached through them."""
    permissions = []
    for name in sorted(set(schemas), key=str.lower):
        schema = get_schema(name)
        permission: dict[str, Any] = {
            "index_patterns": [read_alias(schema.name)],
            "dls": json.dumps(document_filter(schema), separators=(",", ":")),
            "allowed_actions": list(READ_INDEX_ACTIONS),
        }
        exclusions = field_exclusions(schema)
        if exclusions:
            permission["fls"] = exclusions
        permissions.append(permission)
    return {
        "description": "Read role: read aliases only; no tombstones, hidden items or internal fields",
        "cluster_permissions": [],
        "index_permissions": permissions,
    }


def read_role_mapping_body(backend_roles: Iterable[str]) -> dict[str, Any]:
    """`PUT _plugins/_security/api/rolesmapping/<name>`: IAM role ARNs (SigV4-signed requests) and other
    backend roles (e.g. SAML groups) that act as the role."""
    return {"backend_roles": sorted(set(backend_roles)), "description": "Mapped by the index bootstrap"}


def read_role_definitions(roles: Iterable[tuple[str, Sequence[str], Sequence[str]]]) -> dict[str, Any]:
    """`{name: {"role": ..., "mapping": ...}}` for (name, schemas, backend roles) triples: the bootstrap's
    `ReadRoles` property (JSON), so a change of config or of the registry's visibility is a property change."""
    return {
        name: {"role": read_role_body(schemas), "mapping": read_role_mapping_body(backend_roles)}
        for name, schemas, backend_roles in roles
    }


def parse_read_roles(text: str | None, what: str) -> dict[str, dict[str, Any]]:
    """The `ReadRoles` property (JSON text, or absent) back as definitions, checked; errors name `what`."""
    if not text:
        return {}
    try:
        definitions = json.loads(text)
    except ValueError as error:
        raise ValueError(f"{what} is not JSON: {error}") from None
    if not isinstance(definitions, dict):
        raise ValueError(f"{what} must be a JSON object of role name -> {{role, mapping}}")
    for name, definition in definitions.items():
        check_role_name(name, f"{what}.{name}")
        if not isinstance(definition, Mapping) or set(definition) != {"role", "mapping"}:
            raise ValueError(f"{what}.{name} must be an object with exactly 'role' and 'mapping'")
        if not isinstance(definition["role"].get("index_permissions"), list):
            raise ValueError(f"{what}.{name}.role.index_permissions must be a list")
        if not isinstance(definition["mapping"].get("backend_roles"), list):
            raise ValueError(f"{what}.{name}.mapping.backend_roles must be a list")
    return definitions


def check_role_name(name: str, what: str) -> None:
    """A read role's name: 3-64 of a-z 0-9 _ -, starting with a letter; no reserved or platform role."""
    if not ROLE_NAME.fullmatch(name):
        raise ValueError(f"{what}: {name!r} must be 3-64 of a-z 0-9 _ -, starting with a letter")
    if name in RESERVED_ROLE_NAMES:
        raise ValueError(f"{what}: {name!r} is a reserved or platform role")
