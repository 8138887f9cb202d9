"""The ops worker's SDK clients, made once per execution environment and reused by its later invocations, as Lambda
advises ("Initialize SDK clients and database connections outside of the function handler", Lambda developer guide,
"Best practices for working with AWS Lambda functions"). A map's parts invoke the worker hundreds of times per run, and
a new client builds its endpoint rules and copies its session's event handlers: measured, client creation was a third
of the worker's CPU in the smoke run's tests.

A client's key holds what it was made from besides its service and region (the execution role's credentials and the
endpoint overrides in the environment), so a changed environment gets a new one. boto3 clients are thread-safe; the
distributed maps run parts on threads of one environment only in tests, where a race makes at most one extra client.
"""

from __future__ import annotations

import os
from typing import Any

_ENVIRONMENT = ("AWS_ACCESS_KEY_ID", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "DYNAMODB_STREAMS_ENDPOINT")
_MADE: dict[tuple[str | None, ...], Any] = {}


def _reused(kind: str, service: str, region: str) -> Any:
    key = (kind, service, region, *(os.environ.get(name) for name in _ENVIRONMENT))
    made = _MADE.get(key)
    if made is None:
        import boto3

        if kind == "resource":
            made = boto3.resource(service, region_name=region)
        elif service == "dynamodbstreams":
            from stream_sync.redrive import streams_client

            made = streams_client(region)
        elif service == "sts":
            from refdata.transport import sts_client

            made = sts_client(region)
        else:
            made = boto3.client(service, region_name=region)
        made = _MADE.setdefault(key, made)
    return made


def client(service: str, region: str) -> Any:
    """The environment's client of `service` in `region`."""
    return _reused("client", service, region)


def resource(service: str, region: str) -> Any:
    """The environment's boto3 resource of `service` in `region` (its client is its own)."""
    return _reused("resource", service, region)
