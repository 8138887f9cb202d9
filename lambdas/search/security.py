"""The fine-grained-access-control role the stream sync is mapped to: writes to the platform's indices only."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from search.indices import index_pattern, write_alias

SYNC_ROLE = "refdata_stream_sync"


def sync_role_body(schemas: Iterable[str]) -> dict[str, Any]:
    """`PUT _plugins/_security/api/roles/<SYNC_ROLE>`: bulk scripted upserts through the write aliases."""
    names = list(schemas)
    return {
        "description": "DynamoDB stream sync: scripted upserts into the platform's indices",
        "cluster_permissions": ["indices:data/write/bulk", "cluster:admin/script/get"],
        "index_permissions": [
            {
                "index_patterns": sorted(
                    {*(index_pattern(n) for n in names), *(write_alias(n) for n in names)}
                ),
                "allowed_actions": [
                    "indices:data/write/bulk*",
                    "indices:data/write/index",
                    "indices:data/write/update",
                ],
            }
        ],
    }


def role_mapping_body(role_arn: str) -> dict[str, Any]:
    """`PUT _plugins/_security/api/rolesmapping/<SYNC_ROLE>`: the IAM role that signs the sync's requests."""
    return {"backend_roles": [role_arn], "description": "Mapped by the index bootstrap custom resource"}
