"""The query helpers: the DSL they build, and the hits a read role gets for it from the loopback server.

One server for the module: set up by the real index bootstrap (templates, aliases, the public read role with its
document- and field-level security), documents written through the stream sync's own bulk lines, every search
signed as the read role.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, date, datetime
from typing import Any

import pytest
from refdata.offload import prepare_item
from refdata.queries import (
    BoundingBox,
    DateRange,
    Filters,
    GeoPoint,
    Page,
    Polygon,
    Relation,
    SearchRequest,
    SortBy,
    bounding_box_search,
    browse,
    distance_search,
    geo_shape_search,
    next_page,
    text_search,
)
from refdata.transport import OpenSearchTransport

from tests.lambdas.refdata.read_domain import (
    ADMIN_KEY,
    READER,
    READER_KEY,
    read_domain,
    signed,
    stream_record,
)
from tests.support.opensearch_server import LoopbackOpenSearch
from tests.support.secured_node import SecuredNode
from tests.support.shapes import point, square

pytestmark = pytest.mark.integration


def zone(name: str, description: str, geometry: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"collection": "bcparks_1", "name": name, "description": description, "geometry": geometry} | extra


ZONES: dict[str, dict[str, Any]] = {
    # centroid (49.1, -123.1)
    "1": zone("Alpine Meadow", "wildflowers and a lake", square(-123.2, 49.0, 0.2)),
    "2": zone("Lake Shore", "sandy beach on the lake", square(-122.0, 49.0, 0.2), adminNotes="bear seen"),
    # a collection whose id starts like bcparks_1's
    "3": zone("Harbour", "a lake by the harbour", square(-123.5, 48.4, 0.1), collection="bcparks_10"),
    "4": zone("Closed Lake", "a lake under restoration", square(-123.15, 49.05, 0.05), hidden=True),
    "5": zone("Trailhead", "start of the lake trail", point(-123.05, 49.05)),
    "7": zone("Lookout", "a view over the valley", point(-121.5, 49.5)),  # outside every polygon below
    # deleted: only its tombstone is indexed
    "6": zone("Old Lake Camp", "removed", square(-123.1, 49.1, 0.05)),
}


def product(collection: str, activity_id: str, product_id: str, day: str, name: str) -> dict[str, Any]:
    pk = f"productDate::{collection}::dayuse::{activity_id}"
    return {"pk": pk, "sk": f"{product_id}::{day}", "name": name, "date": day}


PRODUCTS: list[dict[str, Any]] = [
    product("bcparks_1", "1", "1", "2025-12-30", "Lake day pass"),
    product("bcparks_1", "1", "1", "2025-12-31", "Lake day pass"),
    product("bcparks_1", "2", "2", "2026-01-01", "Lake night pass"),
    product("bcparks_2", "1", "1", "2025-12-31", "Lake day pass"),
]


def zone_pk(number: str) -> str:
    return f"geozone::{ZONES[number]['collection']}"


def zone_id(number: str) -> str:
    return f"{zone_pk(number)}#{number.zfill(10)}"


def zone_item(number: str) -> dict[str, Any]:
    attributes = {k: v for k, v in ZONES[number].items() if k != "collection"}
    item = {"pk": zone_pk(number), "sk": number.zfill(10), **attributes}
    return prepare_item(None, "unused", item, threshold=300 * 1024)  # adds bbox and location (the centroid)


@pytest.fixture(scope="module")
def server(secured_for_module: SecuredNode) -> Iterator[LoopbackOpenSearch]:
    records = [stream_record(zone_item(n), int(n)) for n in ZONES]
    records += [stream_record(item, 100 + i) for i, item in enumerate(PRODUCTS)]
    records.append(stream_record(zone_item("6"), 200, "REMOVE"))
    with read_domain(secured_for_module, records) as running:
        yield running


@pytest.fixture(scope="module")
def reader(server: LoopbackOpenSearch) -> OpenSearchTransport:
    return signed(server, READER_KEY)


def run(reader: OpenSearchTransport, request: SearchRequest) -> dict[str, Any]:
    response = reader.request("POST", request.path, json.dumps(request.body).encode())
    assert response.status == 200, response.body
    return response.json()  # type: ignore[no-any-return]


def ids(answer: dict[str, Any]) -> list[str]:
    return [hit["_id"] for hit in answer["hits"]["hits"]]


def zones(*numbers: str) -> list[str]:
    return [zone_id(n) for n in numbers]


# --- geospatial on geometry -------------------------------------------------------------------------------


def rectangle(west: float, south: float, east: float, north: float) -> Polygon:
    corners = [(west, south), (east, south), (east, north), (west, north), (west, south)]
    return Polygon(tuple(GeoPoint(lat, lon) for lon, lat in corners))


AROUND_ZONE_1 = rectangle(-123.3, 48.9, -122.9, 49.3)


def test_a_polygon_finds_the_shapes_it_intersects_and_never_hidden_or_deleted_ones(
    reader: OpenSearchTransport,
) -> None:
    answer = run(reader, geo_shape_search("geozone", AROUND_ZONE_1))

    # The trailhead point (5) is inside, the lookout point (7) outside; zone 4 (hidden) and zone 6 (a tombstone)
    # lie inside the polygon too.
    assert ids(answer) == zones("1", "5")
    assert answer["hits"]["total"] == {"value": 2, "relation": "eq"}


def test_a_point_inside_a_zone_finds_it_and_a_point_outside_every_zone_finds_nothing(
    reader: OpenSearchTransport,
) -> None:
    inside = run(reader, geo_shape_search("geozone", GeoPoint(49.19, -121.81)))
    outside = run(reader, geo_shape_search("geozone", GeoPoint(49.5, -120.0)))

    assert ids(inside) == zones("2")
    assert ids(outside) == []


def test_within_keeps_only_the_shapes_wholly_inside(reader: OpenSearchTransport) -> None:
    half_of_zone_1 = rectangle(-123.1, 49.0, -122.9, 49.2)

    within = run(reader, geo_shape_search("geozone", half_of_zone_1, Relation.WITHIN))
    intersecting = run(reader, geo_shape_search("geozone", half_of_zone_1))

    assert ids(within) == zones("5")  # the trailhead point; zone 1 only overlaps
    assert ids(intersecting) == zones("1", "5")


def test_contains_finds_the_zone_around_a_point_and_disjoint_everything_else(
    reader: OpenSearchTransport,
) -> None:
    point = GeoPoint(49.01, -123.19)

    containing = run(reader, geo_shape_search("geozone", point, Relation.CONTAINS))
    disjoint = run(reader, geo_shape_search("geozone", point, Relation.DISJOINT))

    assert ids(containing) == zones("1")
    assert ids(disjoint) == zones("2", "5", "7", "3")  # key order: geozone::bcparks_1 before ::bcparks_10


def test_a_bounding_box_as_shape_finds_the_geometries_it_touches(reader: OpenSearchTransport) -> None:
    box = BoundingBox(west=-122.1, south=48.3, east=-121.9, north=49.1)

    assert ids(run(reader, geo_shape_search("geozone", box))) == zones("2")


# --- geospatial on location -------------------------------------------------------------------------------


def test_a_bounding_box_finds_the_locations_inside_it(reader: OpenSearchTransport) -> None:
    box = BoundingBox(west=-123.2, south=49.0, east=-123.0, north=49.11)

    # Zone 4's centroid is inside too, but zone 4 is hidden.
    assert ids(run(reader, bounding_box_search("geozone", box))) == zones("1", "5")


def test_distance_search_returns_the_locations_in_range_nearest_first(reader: OpenSearchTransport) -> None:
    answer = run(reader, distance_search("geozone", GeoPoint(49.06, -123.06), 10_000))

    assert ids(answer) == zones("5", "1")
    distances = [hit["sort"][0] for hit in answer["hits"]["hits"]]
    # 0.01° (then 0.04°) of latitude and of longitude at 49°N: 1,112 m north-south by 729 m east-west.
    assert distances == [pytest.approx(1330, rel=0.005), pytest.approx(5318, rel=0.005)]


# --- full text --------------------------------------------------------------------------------------------


def test_text_search_ranks_the_best_matching_field_first_and_hides_what_the_reader_may_not_see(
    reader: OpenSearchTransport,
) -> None:
    answer = run(reader, text_search("geozone", "LAKE"))

    # "lake" is rare among names, common among descriptions: Lake Shore's name outscores every description.
    assert ids(answer)[0] == zone_id("2")
    assert sorted(ids(answer)) == sorted(zones("1", "2", "3", "5"))
    assert all("adminNotes" not in hit["_source"] for hit in answer["hits"]["hits"])
    scores = [hit["sort"][0] for hit in answer["hits"]["hits"]]
    assert scores == sorted(scores, reverse=True)


def test_every_word_must_appear_in_one_field_unless_any_word_will_do(reader: OpenSearchTransport) -> None:
    every = run(reader, text_search("geozone", "sandy lake"))
    any_word = run(reader, text_search("geozone", "sandy meadow", every_word=False))

    assert ids(every) == zones("2")
    assert sorted(ids(any_word)) == sorted(zones("1", "2"))


def test_internal_fields_cannot_be_searched_by_a_reader(
    server: LoopbackOpenSearch, reader: OpenSearchTransport
) -> None:
    request = SearchRequest("geozone/_search", {"query": {"match": {"adminNotes": "bear"}}})

    assert ids(run(reader, request)) == []
    assert ids(run(signed(server, ADMIN_KEY), request)) == zones("2")


def test_the_collection_filter_stops_at_the_collection_boundary(reader: OpenSearchTransport) -> None:
    answer = run(reader, text_search("geozone", "lake", filters=Filters(collection="bcparks_1")))

    assert sorted(ids(answer)) == sorted(zones("1", "2", "5"))  # not bcparks_10's harbour


def test_text_search_filters_by_collection_and_inclusive_dates(reader: OpenSearchTransport) -> None:
    dates = DateRange(start=date(2025, 12, 31), end=date(2025, 12, 31))

    answer = run(
        reader, text_search("productDate", "day pass", filters=Filters(collection="bcparks_1", dates=dates))
    )
    new_year = DateRange(end=datetime(2026, 1, 1, 0, 0, tzinfo=UTC))
    until_new_year = run(reader, text_search("productDate", "pass", filters=Filters(dates=new_year)))

    assert ids(answer) == ["productDate::bcparks_1::dayuse::1#1::2025-12-31"]
    assert len(ids(until_new_year)) == 4  # midnight on 1 January is in range


# --- browse -----------------------------------------------------------------------------------------------


def test_browse_pages_through_everything_visible_in_order_with_search_after(
    reader: OpenSearchTransport,
) -> None:
    request: SearchRequest | None = browse("geozone", [SortBy("name")], page=Page(size=2))
    pages: list[list[str]] = []
    while request is not None:
        answer = run(reader, request)
        pages.append(ids(answer))
        request = next_page(request, answer)

    # Alpine Meadow, Harbour, Lake Shore, Lookout, Trailhead: by name (exact keyword), two per page.
    assert pages == [zones("1", "3"), zones("2", "7"), zones("5")]


def test_browse_descending_with_a_last_page_that_is_not_full(reader: OpenSearchTransport) -> None:
    first = browse("geozone", [SortBy("name", descending=True)], page=Page(size=3))
    answer = run(reader, first)
    following = next_page(first, answer)
    assert following is not None
    rest = run(reader, following)

    assert ids(answer) == zones("5", "7", "2")
    assert ids(rest) == zones("3", "1")
    assert next_page(following, rest) is None
    assert rest["hits"]["total"]["value"] == 5


# --- the DSL ----------------------------------------------------------------------------------------------


def test_a_text_search_with_filters_builds_the_documented_body() -> None:
    request = text_search(
        "productDate",
        "day pass",
        filters=Filters(collection="bcparks_1", dates=DateRange(start=date(2025, 12, 1))),
        page=Page(size=5, after=(1.5, "p", "s")),
    )

    words = {"query": "day pass", "fields": ["name", "description"], "type": "best_fields", "operator": "and"}
    filters = [{"prefix": {"pk": "productDate::bcparks_1::"}}, {"range": {"date": {"gte": "2025-12-01"}}}]
    assert request.path == "productdate/_search"
    assert request.body == {
        "query": {"bool": {"must": [{"multi_match": words}], "filter": filters}},
        "sort": [{"_score": "desc"}, {"pk": "asc"}, {"sk": "asc"}],
        "size": 5,
        "track_total_hits": True,
        "search_after": [1.5, "p", "s"],
    }


def test_a_collection_that_is_the_whole_pk_is_a_term() -> None:
    body = browse("geozone", filters=Filters(collection="bcparks_1")).body

    assert body["query"]["bool"]["filter"] == [{"term": {"pk": "geozone::bcparks_1"}}]


def test_shapes_become_geojson_and_envelopes() -> None:
    box = geo_shape_search("geozone", BoundingBox(west=-1, south=-2, east=3, north=4), Relation.WITHIN).body
    point = geo_shape_search("geozone", GeoPoint(lat=4, lon=-1)).body

    envelope = {"type": "envelope", "coordinates": [[-1, 4], [3, -2]]}
    assert box["query"] == {"geo_shape": {"geometry": {"shape": envelope, "relation": "within"}}}
    assert point["query"]["geo_shape"]["geometry"]["shape"] == {"type": "Point", "coordinates": [-1, 4]}


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: GeoPoint(91, 0), "outside"),
        (lambda: BoundingBox(west=170, south=0, east=-170, north=1), "antimeridian"),
        (lambda: Polygon((GeoPoint(0, 0), GeoPoint(0, 1), GeoPoint(1, 1))), "at least 4"),
        (
            lambda: Polygon((GeoPoint(0, 0), GeoPoint(0, 1), GeoPoint(1, 1), GeoPoint(1, 0))),
            "end where it starts",
        ),
        (lambda: Page(size=0), "page size"),
        (lambda: DateRange(), "start or an end"),
        (lambda: DateRange(start=datetime(2025, 1, 1)), "time zone"),
        (lambda: distance_search("geozone", GeoPoint(0, 0), 0), "positive"),
        (lambda: text_search("booking", "x"), "no public text attribute"),
        (lambda: text_search("geozone", "  "), "empty"),
        (
            lambda: text_search("geozone", "x", filters=Filters(dates=DateRange(end=date(2025, 1, 1)))),
            "name one",
        ),
        (lambda: browse("geozone", [SortBy("adminNotes")]), "not a public attribute"),
        (lambda: browse("thread"), "not synced"),
        (lambda: browse("counter", filters=Filters(collection="x")), "not synced"),
    ],
)
def test_bad_requests_are_refused_before_anything_is_sent(build: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build()


def test_iam_admits_the_readers_queries_by_the_access_policy_and_the_documented_identity_policy_alone(
    server: LoopbackOpenSearch, reader: OpenSearchTransport
) -> None:
    assert server.access is not None
    request = text_search("geozone", "lake")
    run(reader, request)
    decisions = {(role, action, decision) for role, action, _, decision in server.access.decided}
    assert (READER, "es:ESHttpPost", "allow") in decisions
    assert not [d for d in decisions if d[0] == READER and d[2] != "allow"]
    # Without its identity policy the same request is refused by IAM, before FGAC: the access policy names the
    # account, which only delegates.
    documented = server.access.identity
    server.access.identity = lambda role: [] if role == READER else documented(role)
    try:
        refused = reader.request("POST", request.path, json.dumps(request.body).encode())
    finally:
        server.access.identity = documented
    assert (
        refused.status == 403 and "is not authorized to perform: es:ESHttpPost" in refused.json()["Message"]
    )
