"""The reader against the loopback domain: documents synced by the stream sync's own code, read back as dev's
`public_search` read role through the SigV4 transport, IAM deciding each request with the domain's access policy
(tests/lambdas/refdata/read_domain.py). Numbers no double holds come back exact; pages cover every document once."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from decimal import Decimal
from typing import Any

import pytest
from refdata.keys import ItemKey, build_key, document_id
from refdata.queries import Page, browse
from refdata.reader import Reader, SearchError
from refdata.registry import Schema, get_schema

from tests.lambdas.refdata.read_domain import (
    PUBLIC,
    READER_KEY,
    read_domain,
    sample_key,
    signed,
    stream_record,
)
from tests.support.opensearch_server import LoopbackOpenSearch
from tests.support.secured_node import SecuredNode

pytestmark = pytest.mark.integration

SCHEMAS = [get_schema(name) for name in PUBLIC.schemas]
LIVE = range(1, 8)  # seven documents per schema: pages of three, three and one
DELETED = 8
PI = "3.141592653589793238462643383279502"  # 34 digits: no double holds it, nor it with one more digit


def price(n: int) -> str:
    return f"{PI}{n}"


def item(schema: Schema, n: int) -> dict[str, Any]:
    pk, sk = build_key(ItemKey(schema.name, sample_key(schema, n)))
    return {"pk": pk, "sk": sk, "name": f"item {n}", "price": Decimal(price(n)), "count": 10**37 + n}


@pytest.fixture(scope="module")
def server(secured_for_module: SecuredNode) -> Iterator[LoopbackOpenSearch]:
    records = []
    for offset, schema in enumerate(SCHEMAS):
        seq = 100 * offset
        records += [stream_record(item(schema, n), seq + n) for n in (*LIVE, DELETED)]
        records.append(stream_record(item(schema, DELETED), seq + 50, "REMOVE"))
    with read_domain(secured_for_module, records) as running:
        yield running


@pytest.fixture(scope="module")
def reader(server: LoopbackOpenSearch) -> Reader:
    return Reader(signed(server, READER_KEY))


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda schema: schema.name)
def test_pages_by_search_after_cover_every_document_once_with_exact_numbers(
    reader: Reader, schema: Schema
) -> None:
    pages = list(reader.pages(browse(schema.name, page=Page(size=3))))

    assert [len(page.hits) for page in pages] == [3, 3, 1]
    assert pages[-1].next is None and {page.total for page in pages} == {len(LIVE)}
    hits = [hit for page in pages for hit in page.hits]
    expected = sorted((document_id(item(schema, n)["pk"], item(schema, n)["sk"]), n) for n in LIVE)
    assert [hit.document_id for hit in hits] == [doc_id for doc_id, _ in expected]
    for hit, (_, n) in zip(hits, expected, strict=True):
        assert hit.schema is schema and hit.key == ItemKey(schema.name, sample_key(schema, n))
        assert hit.item == {"name": f"item {n}", "price": Decimal(price(n)), "count": 10**37 + n}
        assert str(hit.item["price"]) == price(n)  # digit for digit


def test_an_engine_error_raises_with_its_status_and_reason(reader: Reader) -> None:
    request = browse(SCHEMAS[0].name)
    broken = replace(request, body={**request.body, "search_after": ["only one value"]})

    with pytest.raises(SearchError) as raised:
        reader.search(broken)

    assert raised.value.status == 400
    assert "search_after has 1 value(s) but sort has 2" in raised.value.reason
