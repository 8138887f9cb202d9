"""The reader's parsing of `_search` answers, as contracts over every indexable schema of the registry (no HTTP):
items as the sync's documents hold them come back exact and without the platform's fields, keys parsed, pages
followed to the last, engine errors raised with their reason."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import pytest
from boto3.dynamodb.types import TypeSerializer
from refdata.exact_numbers import EXACT_NUMBERS_FIELD
from refdata.indexnames import read_alias
from refdata.keys import ItemKey, build_key, document_id
from refdata.queries import Page, SearchRequest, browse
from refdata.reader import (
    DOCUMENT_ONLY,
    ITEM_ATTRIBUTES,
    Reader,
    SearchError,
    parse_answer,
    parse_hit,
    result_page,
)
from refdata.registry import PLATFORM_ATTRIBUTES, Schema, indexable_schemas
from search.documents import encode_json, engine_document, item_document

from tests.lambdas.refdata.read_domain import sample_key
from tests.lambdas.stream_sync.stream_sync_fakes import apply_sync_script

SCHEMAS = pytest.mark.parametrize("schema", indexable_schemas(), ids=lambda schema: schema.name)
PI = "3.1415926535897932384626433832795028"  # no double holds it
TENTH = "0.1000000000000000055511151231257827"  # nor this one, close to 0.1


def keys(schema: Schema, n: int) -> tuple[str, str]:
    return build_key(ItemKey(schema.name, sample_key(schema, n)))


def engine_source(item: Mapping[str, Any], schema: Schema) -> dict[str, Any]:
    """The `_source` the engine holds for `item` after the sync wrote it: the sync's document (doubles plus
    exactNumbers) rebuilt as the stored script rebuilds it (stream_seq, tombstone; the in-process fakes' model of
    the script), as JSON."""
    image = {name: TypeSerializer().serialize(value) for name, value in item.items()}
    doc = engine_document(item_document(image, schema.name))
    stored = apply_sync_script(None, {"seq": "1".zfill(40), "tombstone": False, "doc": doc})
    return json.loads(encode_json(stored))  # type: ignore[no-any-return]


def raw_hit(pk: str, sk: str, source: Mapping[str, Any], score: float | None = None) -> dict[str, Any]:
    return {
        "_index": "x-v1",
        "_id": document_id(pk, sk),
        "_score": score,
        "_source": source,
        "sort": [pk, sk],
    }


@SCHEMAS
def test_an_item_comes_back_as_written_with_every_digit_of_its_decimals(schema: Schema) -> None:
    pk, sk = keys(schema, 1)
    attributes = {
        "price": Decimal(PI),
        "count": 10**30,  # integers stay exact at any size
        "ratio": Decimal("12.5"),  # a double holds it: the float that names it
        "rates": {"a/b": [Decimal(TENTH), Decimal("7")]},
        "location": {"lat": Decimal("49.1"), "lon": Decimal("-123.1")},
        "globalId": "g-1",
    }

    hit = parse_hit(raw_hit(pk, sk, engine_source({"pk": pk, "sk": sk, **attributes}, schema)))

    assert hit.item == {
        "price": Decimal(PI),
        "count": 10**30,
        "ratio": 12.5,
        "rates": {"a/b": [Decimal(TENTH), 7]},
        "location": {"lat": 49.1, "lon": -123.1},
        "globalId": "g-1",
    }
    assert str(hit.item["price"]) == PI and str(hit.item["rates"]["a/b"][0]) == TENTH
    assert type(hit.item["count"]) is int and type(hit.item["ratio"]) is float


@SCHEMAS
def test_the_key_is_parsed_through_the_registry(schema: Schema) -> None:
    pk, sk = keys(schema, 2)

    hit = parse_hit(raw_hit(pk, sk, {"pk": pk, "sk": sk, "schema": schema.name}, score=1.5))

    assert hit.schema is schema
    assert hit.key == ItemKey(schema.name, sample_key(schema, 2))
    assert (hit.pk, hit.sk, hit.document_id) == (pk, sk, document_id(pk, sk))
    assert (hit.score, hit.sort) == (1.5, (pk, sk))


@SCHEMAS
def test_platform_fields_are_removed_but_geometry_location_bbox_and_global_id_kept(schema: Schema) -> None:
    pk, sk = keys(schema, 3)
    source: dict[str, Any] = {name: f"<{name}>" for name in PLATFORM_ATTRIBUTES}
    source |= {"pk": pk, "sk": sk, "name": "zone", EXACT_NUMBERS_FIELD: {}}

    item = parse_hit(raw_hit(pk, sk, source)).item

    assert set(item) == {"name"} | ITEM_ATTRIBUTES
    assert not set(item) & DOCUMENT_ONLY
    assert {"exactNumbers", "stream_seq", "tombstone", "pk", "sk", "schema"} <= DOCUMENT_ONLY


def test_a_hit_without_source_has_an_empty_item() -> None:
    (schema, *_) = indexable_schemas()
    pk, sk = keys(schema, 4)
    assert parse_hit({"_id": document_id(pk, sk), "_score": None}).item == {}


# --- pages ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes


@dataclass
class FakeDomain:
    """Answers `_search` over `documents` as the engine does for the helpers' key order and `search_after`."""

    documents: list[dict[str, Any]]
    requests: list[dict[str, Any]] = field(default_factory=list)

    def request(self, method: str, path: str, body: bytes | None = None, headers: Any = None) -> Answer:
        assert method == "POST" and body is not None
        query = json.loads(body)
        self.requests.append(query)
        ordered = sorted(self.documents, key=lambda doc: (doc["pk"], doc["sk"]))
        after = tuple(query.get("search_after", ()))
        rest = [doc for doc in ordered if not after or (doc["pk"], doc["sk"]) > after]
        hits = [raw_hit(doc["pk"], doc["sk"], doc) for doc in rest[: query["size"]]]
        total = {"value": len(ordered), "relation": "eq"}
        return Answer(200, json.dumps({"timed_out": False, "hits": {"total": total, "hits": hits}}).encode())


@SCHEMAS
@pytest.mark.parametrize("count", [0, 1, 5, 6])
def test_pages_cover_every_document_once_and_stop_after_the_last(schema: Schema, count: int) -> None:
    rows = [(n, *keys(schema, n)) for n in range(count)]
    documents = [{"pk": pk, "sk": sk, "n": n, EXACT_NUMBERS_FIELD: {}} for n, pk, sk in rows]
    domain = FakeDomain(documents)

    pages = list(Reader(domain).pages(browse(schema.name, page=Page(size=3))))

    found = [hit.document_id for page in pages for hit in page.hits]
    assert found == sorted(document_id(doc["pk"], doc["sk"]) for doc in documents)
    assert len(pages) == count // 3 + 1 == len(domain.requests)  # a full page asks once more; then none
    assert pages[-1].next is None and all(page.next is not None for page in pages[:-1])
    assert all(page.total == count for page in pages)
    every_hit = Reader(FakeDomain(documents)).hits(browse(schema.name))
    assert [hit.item["n"] for hit in every_hit] == list(range(count))


@SCHEMAS
def test_a_full_page_continues_after_its_last_sort_values_and_a_short_one_ends(schema: Schema) -> None:
    request = browse(schema.name, page=Page(size=2))
    hits = [raw_hit(*keys(schema, n), {}) for n in (1, 2)]

    full = parse_answer(request, {"hits": {"total": {"value": 9, "relation": "eq"}, "hits": hits}})
    short = parse_answer(request, {"hits": {"total": {"value": 9, "relation": "gte"}, "hits": hits[:1]}})

    assert full.next is not None and full.next.body["search_after"] == hits[-1]["sort"]
    assert full.next.path == request.path == f"{read_alias(schema.name)}/_search"
    assert (full.total, short.total, short.next) == (9, None, None)


# --- errors -----------------------------------------------------------------------------------------------

REQUEST = SearchRequest("geo/_search", {"size": 10})


def test_an_engine_error_names_its_status_and_the_engines_reason() -> None:
    cause = {"type": "illegal_argument_exception", "reason": "Text fields are not optimised"}
    error = {"type": "search_phase_execution_exception", "reason": "all shards failed", "caused_by": cause}
    answer = Answer(400, json.dumps({"error": error, "status": 400}).encode())
    with pytest.raises(SearchError) as raised:
        Reader(SimpleNamespace(request=lambda *_, **__: answer)).search(
            REQUEST
        )  # one answer to every request

    assert raised.value.status == 400
    assert raised.value.reason == (
        "HTTP 400 search_phase_execution_exception: all shards failed; "
        "caused by illegal_argument_exception: Text fields are not optimised"
    )
    assert str(raised.value) == f"search geo/_search failed: {raised.value.reason}"


@pytest.mark.parametrize(
    ("status", "body", "reason"),
    [
        (403, b'{"Message": "User: anonymous is not authorized"}', 'HTTP 403: {"Message": "User: anonymous'),
        (502, b"Bad Gateway", "HTTP 502: Bad Gateway"),
        (200, b"<html>", "HTTP 200: <html>"),
        (200, b'{"error": "no hits"}', "not a search answer"),
    ],
)
def test_answers_that_are_not_search_results_raise(status: int, body: bytes, reason: str) -> None:
    with pytest.raises(SearchError, match="search geo/_search failed") as raised:
        result_page(REQUEST, status, body)
    assert raised.value.status == status and reason in raised.value.reason


def test_partial_results_raise_rather_than_pass_for_all() -> None:
    failures = [{"reason": {"type": "x_exception", "reason": "boom"}}]
    failed = {"_shards": {"total": 2, "failed": 1, "failures": failures}, "hits": {"hits": []}}
    with pytest.raises(SearchError, match="1 shard\\(s\\) failed: x_exception: boom"):
        parse_answer(REQUEST, failed)
    with pytest.raises(SearchError, match="timed out"):
        parse_answer(REQUEST, {"timed_out": True, "hits": {"hits": []}})
