"""SigV4-signed HTTP transport to an OpenSearch domain, over one urllib3 connection pool.

Applications read through it as a read role (refdata.reader); the sync, the index bootstrap and the ops tools
write and administer through it. It needs botocore and urllib3 (the `aws` extra of refdata-client); the
conventions, the query helpers and the reader do not.

The transport sends exactly one HTTP request per call and returns whatever status came back: HTTP error
statuses are data for the caller (a `_bulk` 429 is retried differently from a mapping error), while
connection failures and timeouts raise `TransportError`. There are no hidden retries: every caller
decides its own retry policy and its own time budget.

Every request is signed for the service `es` with the exact body bytes that go on the wire
(`x-amz-content-sha256` carries their SHA-256), so a large `_bulk` body is hashed once and never copied.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import urllib3
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials, ReadOnlyCredentials
from botocore.session import Session as BotocoreSession

from refdata.errors import error_reason
from refdata.exceptions import ArgumentError, RefdataError

SERVICE = "es"
JSON_CONTENT_TYPE = "application/json"
NDJSON_CONTENT_TYPE = "application/x-ndjson"


class TransportError(RefdataError):
    """The request got no HTTP response: connection failure, dropped connection or timeout."""


class TransportTimeoutError(TransportError):
    """Connecting or waiting for the response took longer than the transport's timeout."""


class TransportConnectionError(TransportError):
    """The connection could not be made, or was closed before a response arrived."""


class MissingCredentialsError(TransportError):
    """No AWS credentials were given and none could be found in the botocore credential chain."""


@dataclass(frozen=True)
class Response:
    """One HTTP response. Header names are lower case."""

    status: int
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def json(self) -> Any:
        """The body parsed as JSON; raises ValueError when the body is empty or not JSON."""
        return json.loads(self.body)

    def error_reason(self) -> str:
        """A one-line description of an OpenSearch error response: type and reason, and every `caused_by`."""
        return error_reason(self.status, self.body)


def sts_client(region: str) -> Any:
    """A client of the regional STS endpoint (reached through the VPC endpoint)."""
    import boto3  # imported here: the sync never assumes a role

    return boto3.client("sts", region_name=region, endpoint_url=f"https://sts.{region}.amazonaws.com")


def assume_role(
    role_arn: str, region: str, *, session_name: str, duration_seconds: int = 900, sts: Any = None
) -> Credentials:
    """Short-lived credentials of ``role_arn`` from the regional STS endpoint; the functions that act as the FGAC
    admin role sign with them. ``sts``: the `sts_client` to ask, for a caller that assumes roles on every invocation
    and keeps its clients; by default one is made."""
    sts = sts_client(region) if sts is None else sts
    issued = sts.assume_role(
        RoleArn=role_arn, RoleSessionName=session_name, DurationSeconds=duration_seconds
    )["Credentials"]
    return Credentials(issued["AccessKeyId"], issued["SecretAccessKey"], issued["SessionToken"])


def path_segment(value: str) -> str:
    """Percent-encode one path segment (document ids contain `#` and `::`)."""
    return quote(value, safe="")


def normalize_endpoint(endpoint: str) -> str:
    """`https://host` for a bare domain endpoint (as CloudFormation returns it); URLs pass unchanged."""
    endpoint = endpoint.strip().rstrip("/")
    if not endpoint:
        raise ArgumentError("OpenSearch endpoint is empty")
    if "://" not in endpoint:
        endpoint = f"https://{endpoint}"
    return endpoint


class OpenSearchTransport:
    """Signed requests to one OpenSearch endpoint (`https://host`, a bare host, or `http://127.0.0.1:port`)."""

    def __init__(
        self,
        endpoint: str,
        region: str,
        *,
        timeout_seconds: float,
        credentials: Credentials | ReadOnlyCredentials | None = None,
        max_connections: int = 4,
    ) -> None:
        if timeout_seconds <= 0:
            raise ArgumentError(f"timeout_seconds must be positive, got {timeout_seconds!r}")
        if not region:
            raise ArgumentError("region is required to sign requests")
        self.endpoint = normalize_endpoint(endpoint)
        self.region = region
        self.timeout_seconds = timeout_seconds
        self._credentials = credentials
        self._pool = urllib3.PoolManager(
            num_pools=1,
            maxsize=max_connections,
            timeout=urllib3.Timeout(connect=timeout_seconds, read=timeout_seconds),
            retries=False,
        )

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Response:
        """Send one signed request and return the response, whatever its status.

        `path` is sent as given, so it must already be percent-encoded (`path_segment` for document ids) and
        may carry a query string (`_cat/indices?format=json`). Raises `TransportError` when no response came.
        """
        method = method.upper()
        url = f"{self.endpoint}/{path.lstrip('/')}"
        payload = body if body is not None else b""
        request_headers = {"Content-Type": JSON_CONTENT_TYPE} if payload else {}
        if headers:
            request_headers.update(headers)
        request_headers["X-Amz-Content-SHA256"] = hashlib.sha256(payload).hexdigest()

        signed_headers = self._sign(method, url, payload, request_headers)
        try:
            raw = self._pool.request(
                method,
                url,
                body=payload if payload else None,
                headers=signed_headers,
                retries=False,
                redirect=False,
                preload_content=True,
            )
        except urllib3.exceptions.NewConnectionError as error:
            raise TransportConnectionError(f"{method} {path}: cannot connect to {self.endpoint}") from error
        except urllib3.exceptions.TimeoutError as error:
            raise TransportTimeoutError(
                f"{method} {path}: no response within {self.timeout_seconds} s from {self.endpoint}"
            ) from error
        except urllib3.exceptions.HTTPError as error:
            raise TransportConnectionError(f"{method} {path}: {error}") from error
        return Response(
            status=raw.status,
            headers={name.lower(): value for name, value in raw.headers.items()},
            body=raw.data,
        )

    def close(self) -> None:
        """Close pooled connections; the transport reconnects if used again."""
        self._pool.clear()

    def _sign(self, method: str, url: str, payload: bytes, headers: dict[str, str]) -> dict[str, str]:
        aws_request = AWSRequest(method=method, url=url, data=payload, headers=headers)
        SigV4Auth(self._frozen_credentials(), SERVICE, self.region).add_auth(aws_request)
        return dict(aws_request.headers.items())

    def _frozen_credentials(self) -> ReadOnlyCredentials:
        credentials = self._credentials
        if credentials is None:
            credentials = BotocoreSession().get_credentials()
            if credentials is None:
                raise MissingCredentialsError("no AWS credentials found to sign OpenSearch requests")
            self._credentials = credentials
        if isinstance(credentials, ReadOnlyCredentials):
            return credentials
        # Frozen per request: role credentials refresh themselves, and one signature must not mix two sets.
        return credentials.get_frozen_credentials()
