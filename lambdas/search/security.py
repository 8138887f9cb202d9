"""The fine-grained-access-control role the stream sync is mapped to: writes to the platform's indices only.

The sync sends only `_bulk` scripted upserts. The security plugin checks `indices:data/write/bulk` as a
cluster permission, then, per concrete index the items land in, `indices:data/write/bulk[s]` and each item's
action (`indices:data/write/update`). Index templates map a few fields and leave the rest dynamic: when a
document introduces a field, the engine updates the mapping as the calling user, which needs
`indices:admin/mapping/put` on that concrete index. All of them are granted on the `<schema>-v*` indices only
(the write aliases resolve to them before any index permission is checked).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from refdata.indexnames import index_pattern

SYNC_ROLE = "refdata_stream_sync"
SYNC_CLUSTER_ACTIONS = ("indices:data/write/bulk",)
SYNC_INDEX_ACTIONS = ("indices:data/write/bulk*", "indices:data/write/update", "indices:admin/mapping/put")


def sync_role_body(schemas: Iterable[str]) -> dict[str, Any]:
    """`PUT _plugins/_security/api/roles/<SYNC_ROLE>`: bulk scripted upserts into the schemas' versioned indices."""
    return {
        "description": "DynamoDB stream sync: scripted upserts into the platform's indices",
        "cluster_permissions": list(SYNC_CLUSTER_ACTIONS),
        "index_permissions": [
            {
                "index_patterns": sorted({index_pattern(name) for name in schemas}),
                "allowed_actions": list(SYNC_INDEX_ACTIONS),
            }
        ],
    }


def role_mapping_body(role_arn: str) -> dict[str, Any]:
    """`PUT _plugins/_security/api/rolesmapping/<SYNC_ROLE>`: the IAM role that signs the sync's requests."""
    return {"backend_roles": [role_arn], "description": "Mapped by the index bootstrap custom resource"}
