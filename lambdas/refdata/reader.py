"""Search results for application code: run a `refdata.queries` request as a read role, get typed hits back.

`Reader(transport).search(request)` sends one search and returns a `ResultPage`; `pages(request)` follows
`search_after` page by page (`refdata.queries.next_page`) until the last. The transport is
`refdata.transport.OpenSearchTransport` signing as the read role, or anything with the same `request` method.

Each `Hit` carries the item as the application wrote it, read back from the document's `_source` through the
registry: its schema and parsed key, and `item` with the exact decimals applied (`refdata.exact_numbers`: a number
a double cannot hold comes back digit for digit as a `Decimal`; integers are ints and other fractions the floats
that name them) and without the fields only the platform writes into documents (`DOCUMENT_ONLY`: keys, schema,
ordering, tombstones...). Its geometry, location, bbox and globalId stay.

Parsing an answer (`result_page`, `parse_hit`) is pure; only `Reader` does I/O. An engine error answer raises
`SearchError` naming its status and the engine's reason; no answer at all raises the transport's own error.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from refdata.errors import describe, error_reason
from refdata.exact_numbers import apply_exact_numbers
from refdata.exceptions import RefdataError
from refdata.keys import ItemKey, parse_document_id, parse_key
from refdata.queries import SearchRequest, next_page
from refdata.registry import PLATFORM_ATTRIBUTES, Schema, schema_of_pk

# Platform attributes an item carries as its own (the writer derives location and bbox from its geometry).
ITEM_ATTRIBUTES: Final = frozenset({"geometry", "location", "bbox", "globalId"})
# What documents hold besides the item's attributes: removed from `Hit.item` (the key is `Hit.key`).
DOCUMENT_ONLY: Final = PLATFORM_ATTRIBUTES - ITEM_ATTRIBUTES


class SearchError(RefdataError):
    """The engine answered a search with an error (or with partial results): `status` and the engine's
    `reason` (`<type>: <reason>; caused by ...`)."""

    def __init__(self, path: str, status: int, reason: str) -> None:
        super().__init__(f"search {path} failed: {reason}")
        self.path = path
        self.status = status
        self.reason = reason


class Answer(Protocol):
    """An HTTP answer, as `refdata.transport.Response` is one."""

    @property
    def status(self) -> int: ...

    @property
    def body(self) -> bytes: ...


class Transport(Protocol):
    """What `Reader` needs of a transport: `refdata.transport.OpenSearchTransport.request`."""

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Answer: ...


@dataclass(frozen=True)
class Hit:
    """One document found: its item, where it sorts and how it scored (None unless sorted by `_score`)."""

    schema: Schema
    key: ItemKey
    document_id: str
    item: dict[str, Any]
    score: float | None
    sort: tuple[Any, ...]

    @property
    def pk(self) -> str:
        return parse_document_id(self.document_id)[0]

    @property
    def sk(self) -> str:
        return parse_document_id(self.document_id)[1]


@dataclass(frozen=True)
class ResultPage:
    """One page of hits; `total` counts every match (None when the engine did not count exactly) and `next` is
    the request for the page after this one (None on the last)."""

    hits: tuple[Hit, ...]
    total: int | None
    next: SearchRequest | None


def parse_hit(raw: Mapping[str, Any]) -> Hit:
    """A hit of a `_search` answer: the key from its document id, the item from its `_source`."""
    doc_id = raw["_id"]
    pk, sk = parse_document_id(doc_id)
    item = apply_exact_numbers(raw.get("_source") or {})
    score = raw.get("_score")
    return Hit(
        schema=schema_of_pk(pk),
        key=parse_key(pk, sk),
        document_id=doc_id,
        item={name: value for name, value in item.items() if name not in DOCUMENT_ONLY},
        score=None if score is None else float(score),
        sort=tuple(raw.get("sort", ())),
    )


def result_page(request: SearchRequest, status: int, body: bytes) -> ResultPage:
    """The page an HTTP answer to `request` holds; SearchError for an error answer or partial results."""
    if not 200 <= status < 300:
        raise SearchError(request.path, status, error_reason(status, body))
    try:
        answer = json.loads(body)
    except ValueError:
        raise SearchError(request.path, status, error_reason(status, body)) from None
    if not isinstance(answer, dict) or not isinstance(answer.get("hits"), dict):
        raise SearchError(request.path, status, f"HTTP {status}: not a search answer: {body[:200]!r}")
    return parse_answer(request, answer)


def parse_answer(request: SearchRequest, answer: Mapping[str, Any]) -> ResultPage:
    """The page a `_search` answer (parsed JSON) to `request` holds; SearchError when it is partial."""
    shards = answer.get("_shards") or {}
    if shards.get("failed"):
        failures = shards.get("failures") or [{}]
        reason = describe(failures[0].get("reason", "no reason given"))
        raise SearchError(request.path, 200, f"{shards['failed']} shard(s) failed: {reason}")
    if answer.get("timed_out"):
        raise SearchError(request.path, 200, "timed out: the hits are partial")
    hits = answer["hits"]
    total = hits.get("total")
    if isinstance(total, Mapping):
        total = total.get("value") if total.get("relation", "eq") == "eq" else None
    return ResultPage(
        hits=tuple(parse_hit(raw) for raw in hits["hits"]),
        total=total if isinstance(total, int) else None,
        next=next_page(request, answer),
    )


class Reader:
    """Searches through one transport (signing as a read role)."""

    def __init__(self, transport: Transport) -> None:
        self._transport = transport

    def search(self, request: SearchRequest) -> ResultPage:
        """One page: the hits of `request`."""
        body = json.dumps(request.body, separators=(",", ":")).encode()
        answer = self._transport.request("POST", request.path, body, {"Content-Type": "application/json"})
        return result_page(request, answer.status, answer.body)

    def pages(self, request: SearchRequest) -> Iterator[ResultPage]:
        """`request`'s page and every page after it, by `search_after`, up to the last."""
        following: SearchRequest | None = request
        while following is not None:
            page = self.search(following)
            yield page
            following = page.next

    def hits(self, request: SearchRequest) -> Iterator[Hit]:
        """Every hit of every page of `request`, in order."""
        for page in self.pages(request):
            yield from page.hits
