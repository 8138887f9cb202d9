"""Index layout per indexable schema: names, aliases, the composable template and the ordering script.

Each indexable schema has versioned indices `<schema>-v<N>` (lower case), a read alias `<schema>` that
hides tombstones, and a write alias `<schema>-write` on exactly one version (their names: refdata.indexnames).
Mappings (refdata.mappings) come from one composable index template per schema and carry a fingerprint in `_meta`, so a deployment
can tell whether the newest version already has the desired mapping.

Ordering lives in the stored painless script `refdata-sync-apply`: the sync sends every change as a bulk
`update` with `scripted_upsert`, and the script applies it only when its `stream_seq` is newer than the
stored one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

from refdata.indexnames import WRITE_ALIAS_SUFFIX, index_pattern
from refdata.mappings import document_mappings

APPLY_SCRIPT_ID: Final = "refdata-sync-apply"
# Stored with this context (`PUT _scripts/<id>/update`) the script is compiled when stored: a compile error
# fails the deployment instead of every later update.
APPLY_SCRIPT_CONTEXT: Final = "update"
STREAM_SEQ_WIDTH: Final = 40
TEMPLATE_PRIORITY: Final = 200
FINGERPRINT_META_KEY: Final = "mapping_fingerprint"

# params: seq (stream SequenceNumber zero-padded to 40 digits, so string order is numeric order),
# tombstone (true for a REMOVE), doc (the whole document; for a tombstone pk, sk, schema and deletedAt).
# The stored document is replaced as a whole, never merged, so attributes removed upstream disappear.
# A tombstone keeps `deletedAt` (epoch seconds of the deletion) so the purge can tell when no late change
# can reach it any more (ops.purge).
APPLY_SCRIPT_SOURCE: Final = """\
String incoming = params.seq;
def stored = ctx._source.stream_seq;
if (stored != null && stored.compareTo(incoming) >= 0) {
  ctx.op = 'none';
} else {
  Map replacement = new HashMap();
  if (params.tombstone == true) {
    replacement.put('pk', params.doc.get('pk'));
    replacement.put('sk', params.doc.get('sk'));
    replacement.put('schema', params.doc.get('schema'));
    replacement.put('deletedAt', params.doc.get('deletedAt'));
    replacement.put('tombstone', true);
  } else {
    replacement.putAll(params.doc);
    replacement.put('tombstone', false);
  }
  replacement.put('stream_seq', incoming);
  ctx._source.clear();
  ctx._source.putAll(replacement);
}
"""

# `action.auto_create_index`: no index named like a write alias is ever auto-created (a write to a missing
# alias would otherwise create a concrete index that blocks the alias for good); every other name as before.
AUTO_CREATE_INDEX_RULE: Final = f"-*{WRITE_ALIAS_SUFFIX},+*"


def stored_script_body() -> dict[str, Any]:
    """Body of `PUT _scripts/refdata-sync-apply/update`."""
    return {"script": {"lang": "painless", "source": APPLY_SCRIPT_SOURCE}}


def read_alias_filter() -> dict[str, Any]:
    """Readers never see tombstones."""
    return {"bool": {"must_not": [{"term": {"tombstone": True}}]}}


def _canonical_json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def mapping_fingerprint(mappings: Mapping[str, Any]) -> str:
    """SHA-256 of the mapping without `_meta`, in canonical JSON: equal mappings, equal fingerprints."""
    without_meta = {key: value for key, value in mappings.items() if key != "_meta"}
    return hashlib.sha256(_canonical_json(without_meta)).hexdigest()


def index_mappings(schema: str) -> dict[str, Any]:
    """The desired mappings of every version of `schema`'s index (`refdata.mappings`), fingerprint included in
    `_meta`."""
    body = document_mappings(schema)
    body["_meta"] = {"schema": schema, FINGERPRINT_META_KEY: mapping_fingerprint(body)}
    return body


def stored_fingerprint(mappings: Mapping[str, Any]) -> str | None:
    """The fingerprint an existing index carries in its `_meta`, if any."""
    meta = mappings.get("_meta")
    if isinstance(meta, Mapping):
        value = meta.get(FINGERPRINT_META_KEY)
        return value if isinstance(value, str) else None
    return None


def index_settings(*, replicas: int) -> dict[str, Any]:
    """Index settings every version gets: the environment's replica count (0 where one data node exists)."""
    if replicas < 0:
        raise ValueError(f"replicas must not be negative, got {replicas}")
    return {"index": {"number_of_replicas": replicas}}


def index_template(schema: str, *, replicas: int) -> dict[str, Any]:
    """Body of `PUT _index_template/<template_name(schema)>` (a composable template)."""
    return {
        "index_patterns": [index_pattern(schema)],
        "priority": TEMPLATE_PRIORITY,
        "template": {"settings": index_settings(replicas=replicas), "mappings": index_mappings(schema)},
        "_meta": {"schema": schema, "managed_by": "index_bootstrap"},
    }


def cluster_settings() -> dict[str, Any]:
    """Body of `PUT _cluster/settings`, in the flat form Amazon OpenSearch Service accepts."""
    return {"persistent": {"action.auto_create_index": AUTO_CREATE_INDEX_RULE}}


def bootstrap_fingerprint(schemas: Iterable[str], *, replicas: int) -> str:
    """Changes whenever a template, its settings, the cluster settings or the stored script would change; a
    custom-resource property."""
    desired = {
        "cluster_settings": cluster_settings(),
        "script": stored_script_body(),
        "templates": {schema: index_template(schema, replicas=replicas) for schema in sorted(schemas)},
    }
    return hashlib.sha256(_canonical_json(desired)).hexdigest()
