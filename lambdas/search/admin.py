"""JSON calls to a domain's REST APIs with a short bounded retry, shared by the index bootstrap and ops tools."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from refdata.transport import NDJSON_CONTENT_TYPE, OpenSearchTransport, Response, TransportError

RETRYABLE_STATUSES = frozenset({429, 502, 503, 504})


class JsonApi:
    """Sends JSON bodies; throttling, unavailability and transport failures are retried with backoff.

    Failures raise ``error`` (the caller's exception type) with the method, path and OpenSearch's reason; when
    the last attempt was still throttled or unavailable they raise ``transient`` (default: ``error``), so a caller
    that can retry later (a workflow step) can tell "try again" from "refused".
    """

    def __init__(
        self,
        transport: OpenSearchTransport,
        *,
        error: type[Exception],
        max_attempts: int,
        backoff_seconds: float,
        sleep: Callable[[float], None] = time.sleep,
        transient: type[Exception] | None = None,
    ) -> None:
        self._transport = transport
        self._error = error
        self._transient = transient or error
        self._max_attempts = max_attempts
        self._backoff_seconds = backoff_seconds
        self._sleep = sleep

    def send(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Response:
        """The response of a successful call; any other final answer raises ``error``."""
        return self.checked(method, path, self.request(method, path, body))

    def checked(self, method: str, path: str, response: Response) -> Response:
        """`response` if it succeeded; else it raises ``error`` (or ``transient``) as `send` does."""
        if not response.ok:
            raise self._failure(response)(f"{method} {path} failed: {response.error_reason()}")
        return response

    def _failure(self, response: Response) -> type[Exception]:
        return self._transient if response.status in RETRYABLE_STATUSES else self._error

    def bulk(self, ndjson: str) -> Response:
        """`POST _bulk` with NDJSON lines; the request must succeed (the items are for the caller to read)."""
        response = self._request(
            "POST", "_bulk", ndjson.encode("ascii"), {"Content-Type": NDJSON_CONTENT_TYPE}
        )
        if not response.ok:
            raise self._failure(response)(f"POST _bulk failed: {response.error_reason()}")
        return response

    def request(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Response:
        """The final response, error statuses included; only exhausted transport failures raise ``error``."""
        payload = json.dumps(body, separators=(",", ":")).encode() if body is not None else None
        return self._request(method, path, payload, None)

    def _request(
        self, method: str, path: str, payload: bytes | None, headers: Mapping[str, str] | None
    ) -> Response:
        for attempt in range(1, self._max_attempts + 1):
            try:
                response = self._transport.request(method, path, payload, headers)
            except TransportError as failure:
                if attempt == self._max_attempts:
                    raise self._transient(f"{method} {path} failed: {failure}") from failure
            else:
                if response.status not in RETRYABLE_STATUSES or attempt == self._max_attempts:
                    return response
            self._sleep(self._backoff_seconds * 2 ** (attempt - 1))
        raise AssertionError("unreachable: the last attempt returns or raises")
