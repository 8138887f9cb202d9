"""onEvent handler of the index bootstrap custom resource (CDK `custom_resources.Provider`).

ResourceProperties (set by the index bootstrap construct; CloudFormation passes every value as a string):
- `Endpoint` (required): the domain endpoint, bare host as `DomainEndpoint` returns it, or a URL.
- `Region` (optional): region used to sign requests; defaults to the function's `AWS_REGION`.
- `RequestTimeoutSeconds` (optional, default 30): timeout of each OpenSearch request.
- `Replicas` (required): replicas per shard of every index (the environment's `search.replicas`).
- `Fingerprint` (optional, not read): `search.indices.bootstrap_fingerprint(...)` of the deployed code, so a
  template or script change alters the properties and CloudFormation sends an Update.
- `AdminRoleArn` (optional): the fine-grained-access-control master role; the handler assumes it and signs every
  request with its credentials (only the master may put roles and mappings). Without it, the function's own
  credentials sign.
- `SyncRoleArn` (optional): the stream sync's IAM role, mapped to the write-only `refdata_stream_sync` role.
- `Schemas` (optional, not read): the indexable schema names; the registry shipped with the function decides.
- `ReadRoles` (optional): JSON `{name: {"role": ..., "mapping": ...}}` (`search.readers.read_role_definitions`):
  the read roles to put with their mappings. On Update, roles in `OldResourceProperties.ReadRoles` that are no
  longer listed are deleted, so a reader removed from config loses its access (a rollback restores it).

The endpoint comes from the properties rather than the function's environment so that a new domain
endpoint is itself a property change (an Update with a new physical id). Create and Update run the
idempotent bootstrap; Delete changes nothing, so indices and their data outlive the stack resource.
Errors propagate: the provider framework then reports FAILED with the exception message, which carries
OpenSearch's error reason.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping
from typing import Any

from refdata.registry import indexable_schemas
from refdata.transport import OpenSearchTransport, assume_role, normalize_endpoint
from search.readers import parse_read_roles

from index_bootstrap.bootstrap import IndexBootstrap

logger = logging.getLogger(__name__)
logger.setLevel(logging.INFO)

DEFAULT_TIMEOUT_SECONDS = 30.0


def physical_resource_id(endpoint: str) -> str:
    return f"opensearch-index-bootstrap:{normalize_endpoint(endpoint).split('://', 1)[1]}"


def on_event(event: Mapping[str, Any], context: object) -> dict[str, Any]:
    request_type = event["RequestType"]
    if request_type == "Delete":
        logger.info(json.dumps({"request": "Delete", "note": "indices are kept"}))
        return {"PhysicalResourceId": event["PhysicalResourceId"]}
    if request_type not in ("Create", "Update"):
        raise ValueError(f"unknown RequestType {request_type!r}")

    properties = event.get("ResourceProperties", {})
    endpoint = properties.get("Endpoint")
    if not endpoint:
        raise ValueError("ResourceProperties.Endpoint is required (the OpenSearch domain endpoint)")
    region = properties.get("Region") or os.environ.get("AWS_REGION")
    if not region:
        raise ValueError("ResourceProperties.Region is not set and AWS_REGION is not in the environment")
    timeout = float(properties.get("RequestTimeoutSeconds", DEFAULT_TIMEOUT_SECONDS))
    replicas = replica_count(properties.get("Replicas"))
    read_roles = parse_read_roles(properties.get("ReadRoles"), "ResourceProperties.ReadRoles")
    previous = parse_read_roles(
        event.get("OldResourceProperties", {}).get("ReadRoles"), "OldResourceProperties.ReadRoles"
    )

    admin_role = properties.get("AdminRoleArn")
    credentials = assume_role(admin_role, region, session_name="index-bootstrap") if admin_role else None
    transport = OpenSearchTransport(endpoint, region, timeout_seconds=timeout, credentials=credentials)
    try:
        outcomes = IndexBootstrap(transport, sleep=_sleep).run(
            [schema.name for schema in indexable_schemas()],
            replicas=replicas,
            sync_role_arn=properties.get("SyncRoleArn") or None,
            read_roles=read_roles,
            retired_read_roles=sorted(set(previous) - set(read_roles)),
        )
    finally:
        transport.close()

    for outcome in outcomes:
        logger.info(json.dumps({"request": request_type, "schema": outcome.schema, "action": outcome.action}))
    return {
        "PhysicalResourceId": physical_resource_id(endpoint),
        "Data": {
            "LatestIndices": ",".join(outcome.latest_index for outcome in outcomes),
            "CreatedIndices": ",".join(o.created_index for o in outcomes if o.created_index),
        },
    }


def replica_count(value: Any) -> int:
    """``Replicas`` as an int (CloudFormation passes every property as a string)."""
    try:
        replicas = int(str(value))
    except ValueError:
        raise ValueError(f"ResourceProperties.Replicas must be a whole number, got {value!r}") from None
    if replicas < 0:
        raise ValueError(f"ResourceProperties.Replicas must not be negative, got {replicas}")
    return replicas


def _sleep(seconds: float) -> None:
    time.sleep(seconds)
