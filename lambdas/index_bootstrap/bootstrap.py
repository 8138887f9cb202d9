"""Idempotent set-up of the OpenSearch side for a list of indexable schemas.

Run on every deployment: puts the stored ordering script, the stream sync's fine-grained-access-control role
and its mapping to the sync's IAM role, and one composable template per schema (all idempotent PUTs), then per schema either creates `<schema>-v1` behind the read and write aliases
(no version yet), creates `<schema>-v<N+1>` without touching the aliases (the newest version's mapping
fingerprint differs from the desired one: a reindex fills it and swaps the aliases later), or does nothing.
It never deletes an index and never moves an alias.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from search.admin import JsonApi
from search.indices import (
    APPLY_SCRIPT_ID,
    cluster_settings,
    index_mappings,
    index_name,
    index_pattern,
    index_template,
    index_version,
    mapping_fingerprint,
    read_alias,
    read_alias_filter,
    stored_fingerprint,
    stored_script_body,
    template_name,
    write_alias,
)
from search.security import SYNC_ROLE, role_mapping_body, sync_role_body
from search.transport import OpenSearchTransport, Response, path_segment

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
        self, schemas: Sequence[str], *, replicas: int, sync_role_arn: str | None = None
    ) -> list[SchemaOutcome]:
        self._api.send("PUT", "_cluster/settings", cluster_settings())
        self._api.send("PUT", f"_scripts/{APPLY_SCRIPT_ID}", stored_script_body())
        if sync_role_arn:
            self._api.send("PUT", f"_plugins/_security/api/roles/{SYNC_ROLE}", sync_role_body(schemas))
            self._api.send(
                "PUT", f"_plugins/_security/api/rolesmapping/{SYNC_ROLE}", role_mapping_body(sync_role_arn)
            )
        for schema in schemas:
            self._api.send(
                "PUT",
                f"_index_template/{path_segment(template_name(schema))}",
                index_template(schema, replicas=replicas),
            )
        return [self._ensure_index(schema) for schema in schemas]

    def _ensure_index(self, schema: str) -> SchemaOutcome:
        desired = index_mappings(schema)
        existing = self._api.send("GET", index_pattern(schema)).json()
        versions = {
            version: body
            for name, body in existing.items()
            if (version := index_version(schema, name)) is not None
        }
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


def _error_type(response: Response) -> str | None:
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        return None
    return error.get("type") if isinstance(error, dict) else None
