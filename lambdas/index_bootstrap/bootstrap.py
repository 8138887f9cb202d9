"""Idempotent set-up of the OpenSearch side for a list of indexable schemas.

Run on every deployment, in order: the cluster setting that keeps write-alias names from being auto-created,
the stored ordering script (compiled for the `update` context, so a compile error fails the deployment),
a self-test of that script on the real engine (on a scratch index, through the sync's own bulk lines), the
stream sync's fine-grained-access-control role and its mapping to the sync's IAM role, the read roles and their
mappings (and the deletion of read roles no longer configured), and one composable template per schema (all
idempotent PUTs); then per schema either creates `<schema>-v1` behind the read and
write aliases (no version yet), creates `<schema>-v<N+1>` without touching the aliases (the newest version's
mapping fingerprint differs from the desired one: a reindex fills it and swaps the aliases later), or does
nothing; every existing version is brought to the configured replica count. It never deletes an index (other
than its own scratch index) and never moves an alias.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

from refdata.errors import describe
from refdata.indexnames import (
    index_name,
    index_pattern,
    index_version,
    read_alias,
    template_name,
    write_alias,
)
from refdata.mappings import DELETED_AT_FIELD
from refdata.transport import OpenSearchTransport, Response, path_segment
from search.admin import JsonApi
from search.documents import Change, encode_update, engine_document, padded_sequence
from search.indices import (
    APPLY_SCRIPT_CONTEXT,
    APPLY_SCRIPT_ID,
    cluster_settings,
    index_mappings,
    index_template,
    mapping_fingerprint,
    read_alias_filter,
    stored_fingerprint,
    stored_script_body,
)
from search.security import SYNC_ROLE, role_mapping_body, sync_role_body

logger = logging.getLogger(__name__)

Action = Literal["created_first_version", "created_new_version", "unchanged"]


class BootstrapError(Exception):
    """OpenSearch refused a bootstrap step; the message names the step and OpenSearch's error reason."""


@dataclass(frozen=True)
class SchemaOutcome:
    schema: str
    action: Action
    latest_index: str
    created_index: str | None


class IndexBootstrap:
    """The bootstrap steps over one transport, with a small bounded retry on throttling and unavailability."""

    def __init__(
        self,
        transport: OpenSearchTransport,
        *,
        max_attempts: int = 3,
        backoff_seconds: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._api = JsonApi(
            transport,
            error=BootstrapError,
            max_attempts=max_attempts,
            backoff_seconds=backoff_seconds,
            sleep=sleep,
        )

    def run(
        self,
        schemas: Sequence[str],
        *,
        replicas: int,
        sync_role_arn: str | None = None,
        read_roles: Mapping[str, Mapping[str, Any]] | None = None,
        retired_read_roles: Sequence[str] = (),
    ) -> list[SchemaOutcome]:
        """``read_roles``: `{name: {"role": ..., "mapping": ...}}` (search.readers) to put; ``retired_read_roles``:
        names to delete (roles a previous deployment put that are no longer configured)."""
        self._api.send("PUT", "_cluster/settings", cluster_settings())
        self._api.send("PUT", f"_scripts/{APPLY_SCRIPT_ID}/{APPLY_SCRIPT_CONTEXT}", stored_script_body())
        self.self_test(schemas, secrets.token_hex(6))
        if sync_role_arn:
            self._api.send("PUT", f"{SECURITY_API}/roles/{SYNC_ROLE}", sync_role_body(schemas))
            self._api.send(
                "PUT", f"{SECURITY_API}/rolesmapping/{SYNC_ROLE}", role_mapping_body(sync_role_arn)
            )
        for name, definition in (read_roles or {}).items():
            self._api.send("PUT", f"{SECURITY_API}/roles/{path_segment(name)}", definition["role"])
            self._api.send("PUT", f"{SECURITY_API}/rolesmapping/{path_segment(name)}", definition["mapping"])
        for name in retired_read_roles:
            self._retire_read_role(name)
        for schema in schemas:
            self._api.send(
                "PUT",
                f"_index_template/{path_segment(template_name(schema))}",
                index_template(schema, replicas=replicas),
            )
        return [self._ensure_index(schema, replicas) for schema in schemas]

    def _retire_read_role(self, name: str) -> None:
        """Delete a read role's mapping, then the role (either may already be gone: a rerun, or a hand edit)."""
        for kind in ("rolesmapping", "roles"):
            path = f"{SECURITY_API}/{kind}/{path_segment(name)}"
            response = self._api.request("DELETE", path)
            if not response.ok and response.status != 404:
                raise BootstrapError(f"DELETE {path} failed: {response.error_reason()}")
        logger.info(json.dumps({"read_role": name, "deleted": True}))

    def self_test(self, schemas: Sequence[str], token: str) -> None:
        """Exercise the stored script on the engine before anything depends on it.

        On a scratch index (`refdata-bootstrap-selftest-<token>`, matching no schema's `<schema>-v*` pattern,
        0 replicas, the first schema's mappings), through `search.documents.encode_update`: a change is
        created, an older change replayed must answer `noop`, the stored source must be the change as the
        engine holds it, and a tombstone (keys, `deletedAt`) must replace it. The scratch index is deleted whatever happens. Any
        deviation raises BootstrapError with what OpenSearch answered, which fails the deployment.
        """
        if not schemas:
            return
        scratch = f"{SELF_TEST_INDEX_PREFIX}{token}"
        clashing = [schema for schema in schemas if fnmatch.fnmatchcase(scratch, index_pattern(schema))]
        if clashing:
            raise BootstrapError(f"self-test index {scratch} would match the index pattern of {clashing}")
        settings = {"index": {"number_of_shards": 1, "number_of_replicas": 0}}
        self._api.send(
            "PUT", path_segment(scratch), {"settings": settings, "mappings": index_mappings(schemas[0])}
        )
        try:
            self._probe(scratch)
        except BootstrapError as failed:
            deleted = self._api.request("DELETE", path_segment(scratch))
            if not deleted.ok:
                raise BootstrapError(
                    f"{failed}; and DELETE {scratch} failed too: {deleted.error_reason()}"
                ) from failed
            raise
        self._api.send("DELETE", path_segment(scratch))

    def _probe(self, scratch: str) -> None:
        newer = _probe_change(scratch, "2", {**_PROBE_DOC, "name": "newer"})
        older = _probe_change(scratch, "1", {**_PROBE_DOC, "name": "older"})
        tombstone = _probe_change(
            scratch,
            "3",
            {**{key: _PROBE_DOC[key] for key in ("pk", "sk", "schema")}, DELETED_AT_FIELD: _PROBE_DELETED_AT},
        )
        tombstone.tombstone = True
        self._expect_item(scratch, newer, (201, "created"), "a new change")
        self._expect_item(scratch, older, (200, "noop"), "a replayed older change")
        assert newer.doc is not None
        self._expect_source(
            scratch, engine_document(newer.doc) | {"tombstone": False, "stream_seq": newer.seq}
        )
        self._expect_item(scratch, tombstone, (200, "updated"), "a tombstone")
        self._expect_source(
            scratch,
            {
                **_PROBE_KEYS,
                DELETED_AT_FIELD: _PROBE_DELETED_AT,
                "tombstone": True,
                "stream_seq": tombstone.seq,
            },
        )

    def _expect_item(self, scratch: str, change: Change, expected: tuple[int, str], step: str) -> None:
        answer = self._api.bulk(
            encode_update(change, require_alias=False)
        ).json()  # a concrete index on purpose
        items = answer.get("items") if isinstance(answer, dict) else None
        item = items[0].get("update", {}) if isinstance(items, list) and len(items) == 1 else {}
        got = (item.get("status"), item.get("result"))
        if got != expected:
            detail = describe(item.get("error")) if "error" in item else f"result {got[1]}"
            raise BootstrapError(
                f"self-test on {scratch}: {step} answered HTTP {got[0]} {detail}, expected HTTP "
                f"{expected[0]} result {expected[1]}"
            )

    def _expect_source(self, scratch: str, expected: Mapping[str, Any]) -> None:
        stored = self._api.send("GET", f"{path_segment(scratch)}/_doc/{path_segment(_PROBE_ID)}").json()
        source = stored.get("_source") if isinstance(stored, dict) else None
        if source != expected:
            raise BootstrapError(
                f"self-test on {scratch}: the stored document is {json.dumps(source, sort_keys=True)}, expected "
                f"{json.dumps(expected, sort_keys=True)}"
            )

    def _ensure_index(self, schema: str, replicas: int) -> SchemaOutcome:
        desired = index_mappings(schema)
        existing = self._api.send("GET", index_pattern(schema)).json()
        versions = {
            version: body
            for name, body in existing.items()
            if (version := index_version(schema, name)) is not None
        }
        self._set_replicas(schema, versions, replicas)
        if not versions:
            first = index_name(schema, 1)
            aliases = {
                read_alias(schema): {"filter": read_alias_filter()},
                write_alias(schema): {"is_write_index": True},
            }
            self._create_index(first, {"mappings": desired, "aliases": aliases}, desired)
            logger.info(json.dumps({"schema": schema, "created": first, "aliases": sorted(aliases)}))
            return SchemaOutcome(schema, "created_first_version", first, first)

        latest_version = max(versions)
        latest = index_name(schema, latest_version)
        if stored_fingerprint(versions[latest_version].get("mappings", {})) == mapping_fingerprint(desired):
            return SchemaOutcome(schema, "unchanged", latest, None)
        successor = index_name(schema, latest_version + 1)
        self._create_index(successor, {"mappings": desired}, desired)
        logger.info(
            json.dumps(
                {
                    "schema": schema,
                    "created": successor,
                    "aliases_left_on": latest,
                    "reason": "mapping changed",
                }
            )
        )
        return SchemaOutcome(schema, "created_new_version", successor, successor)

    def _set_replicas(self, schema: str, versions: Mapping[int, Mapping[str, Any]], replicas: int) -> None:
        """Bring every existing version to the configured replica count (a dynamic setting; new versions get
        it from the template)."""
        for version, body in sorted(versions.items()):
            current = body.get("settings", {}).get("index", {}).get("number_of_replicas")
            if current == str(replicas):
                continue
            name = index_name(schema, version)
            self._api.send(
                "PUT", f"{path_segment(name)}/_settings", {"index": {"number_of_replicas": replicas}}
            )
            logger.info(json.dumps({"schema": schema, "index": name, "replicas": replicas, "were": current}))

    def _create_index(self, name: str, body: Mapping[str, Any], desired: Mapping[str, Any]) -> None:
        response = self._api.request("PUT", name, body)
        if response.ok:
            return
        if _error_type(response) == "resource_already_exists_exception":
            # An earlier attempt of this same step may have succeeded after its response was lost.
            mappings = self._api.send("GET", name).json().get(name, {}).get("mappings", {})
            if stored_fingerprint(mappings) == mapping_fingerprint(desired):
                return
        raise BootstrapError(f"PUT {name} failed: {response.error_reason()}")


SECURITY_API = "_plugins/_security/api"
SELF_TEST_INDEX_PREFIX = "refdata-bootstrap-selftest-"
_PROBE_KEYS = {"pk": "self-test", "sk": "probe", "schema": "self-test"}
_PROBE_ID = "self-test#probe"
_PROBE_DELETED_AT = 1_764_531_000  # a tombstone keeps its deletion time (what the tombstone purge reads)
# Strings, integers, a fraction, a decimal no double holds (its exact text goes to exactNumbers), nesting. A list
# holds one type: the engine refuses a dynamically mapped array that mixes strings and numbers.
_PROBE_DOC: dict[str, Any] = {
    **_PROBE_KEYS,
    "count": 12,
    "ratio": 0.5,
    "exact": Decimal("3.1415926535897932384626433832795028"),
    "nested": {"list": ["a", "b"]},
}


def _probe_change(scratch: str, sequence_number: str, doc: dict[str, Any]) -> Change:
    return Change(
        record={},
        event_id="self-test",
        seq=padded_sequence(sequence_number),
        pk=_PROBE_KEYS["pk"],
        sk=_PROBE_KEYS["sk"],
        doc_id=_PROBE_ID,
        tombstone=False,
        expired=False,
        created_at=None,
        schema=_PROBE_KEYS["schema"],
        index=scratch,
        doc=doc,
    )


def _error_type(response: Response) -> str | None:
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        return None
    return error.get("type") if isinstance(error, dict) else None
