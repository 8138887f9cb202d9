"""Query helpers for application code: OpenSearch searches of one schema's read alias, as pure functions.

Each helper returns a `SearchRequest` (the path `<read alias>/_search` and the JSON body in the documented query
DSL) for any client that signs requests as a read role (e.g. `refdata.transport.OpenSearchTransport`); nothing
here does I/O. docs/search.md shows every helper with the body it builds.

- `geo_shape_search`: documents whose `geometry` intersects, lies within, contains or is disjoint from a point,
  a bounding box or a polygon (`geo_shape`);
- `bounding_box_search` and `distance_search`: documents whose `location` (the centroid point) lies in a box
  (`geo_bounding_box`) or within a distance (`geo_distance`, nearest first);
- `text_search`: full text over the schema's public text attributes (`multi_match`, best field first);
- `browse`: documents sorted by attributes.

Every helper filters by collection (the pk scope) and by a date attribute's range when asked (`Filters`), and
pages with `search_after`: results are sorted with the key `(pk, sk)` as the last tiebreaker (unique: the
document id is `<pk>#<sk>`), so `next_page(request, answer)` continues exactly after the last hit. Pages are not
one snapshot: a document written between two pages may or may not appear.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime
from enum import StrEnum
from typing import Any, Final

from refdata.exceptions import RefdataError
from refdata.geometry import validate
from refdata.indexnames import read_alias
from refdata.keys import pk_prefix
from refdata.registry import AttributeKind, Schema, Visibility, get_schema

COLLECTION_FIELD: Final = "collectionId"
MAX_PAGE_SIZE: Final = 1000
# pk and sk are keyword fields and `<pk>#<sk>` is the document id: together they order documents totally.
TIEBREAKER: Final[tuple[dict[str, str], ...]] = ({"pk": "asc"}, {"sk": "asc"})


class QueryError(RefdataError, ValueError):
    """A request the helpers refuse to build: a schema not searchable that way, a value out of range."""


@dataclass(frozen=True)
class SearchRequest:
    """`POST <path>` with `body` (JSON)."""

    path: str
    body: dict[str, Any]


@dataclass(frozen=True)
class GeoPoint:
    lat: float
    lon: float

    def __post_init__(self) -> None:
        if not -90 <= self.lat <= 90 or not -180 <= self.lon <= 180:
            raise QueryError(f"({self.lat}, {self.lon}) is outside lat [-90, 90] / lon [-180, 180]")

    def geojson(self) -> dict[str, Any]:
        return {"type": "Point", "coordinates": [self.lon, self.lat]}


@dataclass(frozen=True)
class BoundingBox:
    """A box between meridians `west` <= `east` and parallels `south` <= `north` (no antimeridian crossing)."""

    west: float
    south: float
    east: float
    north: float

    def __post_init__(self) -> None:
        for lat, lon in ((self.south, self.west), (self.north, self.east)):
            GeoPoint(lat, lon)  # range checks
        if self.west > self.east or self.south > self.north:
            raise QueryError(
                f"box west {self.west} east {self.east} south {self.south} north {self.north}: west must not be "
                "east of east, nor south north of north (boxes crossing the antimeridian are not supported)"
            )

    def geojson(self) -> dict[str, Any]:
        """OpenSearch's `envelope`: [[west, north], [east, south]]."""
        return {"type": "envelope", "coordinates": [[self.west, self.north], [self.east, self.south]]}


@dataclass(frozen=True)
class Polygon:
    """An outer ring and optional holes, each a closed list of points (the last equals the first)."""

    outer: tuple[GeoPoint, ...]
    holes: tuple[tuple[GeoPoint, ...], ...] = ()

    def __post_init__(self) -> None:
        validate(self.geojson())

    def geojson(self) -> dict[str, Any]:
        rings = (self.outer, *self.holes)
        return {"type": "Polygon", "coordinates": [[[p.lon, p.lat] for p in ring] for ring in rings]}


Shape = GeoPoint | BoundingBox | Polygon


class Relation(StrEnum):
    """How a document's `geometry` relates to the query shape (boundaries count as inside)."""

    INTERSECTS = "intersects"  # they share at least one point
    WITHIN = "within"  # the document lies inside the shape
    CONTAINS = "contains"  # the document covers the whole shape
    DISJOINT = "disjoint"  # they share no point (documents without geometry never match)


@dataclass(frozen=True)
class DateRange:
    """Inclusive bounds on a DATE attribute (the schema's only one unless `attribute` names it). A `date` bound
    covers its whole day (UTC); a `datetime` must carry its time zone."""

    start: date | datetime | None = None
    end: date | datetime | None = None
    attribute: str | None = None

    def __post_init__(self) -> None:
        for bound in (self.start, self.end):
            if isinstance(bound, datetime) and bound.tzinfo is None:
                raise QueryError(f"{bound.isoformat()} has no time zone")
        if self.start is None and self.end is None:
            raise QueryError("a date range needs a start or an end")


@dataclass(frozen=True)
class Filters:
    """Restrict any search to one collection (its pk scope) and/or a date range."""

    collection: str | None = None
    dates: DateRange | None = None


@dataclass(frozen=True)
class Page:
    """`size` hits after the sort values `after` (the last hit's `sort` of the previous page)."""

    size: int = 20
    after: tuple[Any, ...] | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.size <= MAX_PAGE_SIZE:
            raise QueryError(f"page size {self.size} must be 1 to {MAX_PAGE_SIZE}")


@dataclass(frozen=True)
class SortBy:
    """Sort by a declared public attribute (a text attribute sorts by its exact `.keyword` value)."""

    attribute: str
    descending: bool = False


NO_FILTERS: Final = Filters()
FIRST_PAGE: Final = Page()


# --- the helpers ------------------------------------------------------------------------------------------


def geo_shape_search(
    schema: str,
    shape: Shape,
    relation: Relation = Relation.INTERSECTS,
    *,
    filters: Filters = NO_FILTERS,
    page: Page = FIRST_PAGE,
) -> SearchRequest:
    """Documents whose `geometry` has `relation` to `shape`, in key order."""
    query = {"geo_shape": {"geometry": {"shape": shape.geojson(), "relation": relation.value}}}
    return _request(schema, query, filters, list(TIEBREAKER), page)


def bounding_box_search(
    schema: str, box: BoundingBox, *, filters: Filters = NO_FILTERS, page: Page = FIRST_PAGE
) -> SearchRequest:
    """Documents whose `location` lies in `box` (edges included), in key order."""
    corners = {"top_left": _latlon(box.north, box.west), "bottom_right": _latlon(box.south, box.east)}
    return _request(schema, {"geo_bounding_box": {"location": corners}}, filters, list(TIEBREAKER), page)


def distance_search(
    schema: str,
    center: GeoPoint,
    meters: float,
    *,
    filters: Filters = NO_FILTERS,
    page: Page = FIRST_PAGE,
) -> SearchRequest:
    """Documents whose `location` is at most `meters` from `center` (great-circle), nearest first; each hit's
    first sort value is its distance in meters."""
    if not meters > 0:
        raise QueryError(f"distance {meters} must be positive")
    origin = _latlon(center.lat, center.lon)
    query = {"geo_distance": {"distance": f"{meters}m", "location": origin}}
    sort: list[dict[str, Any]] = [
        {"_geo_distance": {"location": origin, "order": "asc", "unit": "m"}},
        *TIEBREAKER,
    ]
    return _request(schema, query, filters, sort, page)


def text_search(
    schema: str,
    text: str,
    *,
    every_word: bool = True,
    filters: Filters = NO_FILTERS,
    page: Page = FIRST_PAGE,
) -> SearchRequest:
    """Documents whose public text attributes match `text` (all its words in one attribute, or any word with
    `every_word=False`), most relevant first."""
    declared = get_schema(schema)
    fields = declared.attributes_of(AttributeKind.TEXT, Visibility.PUBLIC)
    if not fields:
        raise QueryError(f"schema {schema!r} declares no public text attribute to search")
    if not text.strip():
        raise QueryError("the text to search for is empty")
    query = {
        "multi_match": {
            "query": text,
            "fields": list(fields),
            "type": "best_fields",
            "operator": "and" if every_word else "or",
        }
    }
    return _request(schema, query, filters, [{"_score": "desc"}, *TIEBREAKER], page)


def browse(
    schema: str,
    sort_by: Sequence[SortBy] = (),
    *,
    filters: Filters = NO_FILTERS,
    page: Page = FIRST_PAGE,
) -> SearchRequest:
    """Every visible document, sorted by `sort_by` then by key (documents without a value come last)."""
    declared = get_schema(schema)
    sort = [{_sort_field(declared, s.attribute): "desc" if s.descending else "asc"} for s in sort_by]
    return _request(schema, {"match_all": {}}, filters, [*sort, *TIEBREAKER], page)


def next_page(request: SearchRequest, answer: Mapping[str, Any]) -> SearchRequest | None:
    """The request for the page after `answer` (the JSON answer to `request`), or None when it was the last."""
    hits = answer["hits"]["hits"]
    if len(hits) < request.body["size"]:
        return None
    return replace(request, body={**request.body, "search_after": list(hits[-1]["sort"])})


# --- building blocks --------------------------------------------------------------------------------------


def _latlon(lat: float, lon: float) -> dict[str, float]:
    return {"lat": lat, "lon": lon}


def _request(
    schema: str, query: dict[str, Any], filters: Filters, sort: list[dict[str, Any]], page: Page
) -> SearchRequest:
    declared = get_schema(schema)
    if not declared.indexable:
        raise QueryError(f"schema {schema!r} is not synced to OpenSearch")
    clauses = _filter_clauses(declared, filters)
    if clauses:
        query = {"bool": {"must": [query], "filter": clauses}}
    body: dict[str, Any] = {"query": query, "sort": sort, "size": page.size, "track_total_hits": True}
    if page.after is not None:
        body["search_after"] = list(page.after)
    return SearchRequest(f"{read_alias(declared.name)}/_search", body)


def _filter_clauses(schema: Schema, filters: Filters) -> list[dict[str, Any]]:
    clauses: list[dict[str, Any]] = []
    if filters.collection is not None:
        if not schema.pk_fields or schema.pk_fields[0].name != COLLECTION_FIELD:
            raise QueryError(f"schema {schema.name!r} is not scoped by {COLLECTION_FIELD}")
        prefix = pk_prefix(schema.name, {COLLECTION_FIELD: filters.collection})
        clauses.append({"term": {"pk": prefix}} if len(schema.pk_fields) == 1 else {"prefix": {"pk": prefix}})
    if filters.dates is not None:
        clauses.append(_date_clause(schema, filters.dates))
    return clauses


def _date_clause(schema: Schema, dates: DateRange) -> dict[str, Any]:
    candidates = schema.attributes_of(AttributeKind.DATE, Visibility.PUBLIC)
    attribute = dates.attribute
    if attribute is None:
        if len(candidates) != 1:
            raise QueryError(
                f"schema {schema.name!r} has public date attributes {list(candidates)}: name one"
            )
        (attribute,) = candidates
    elif attribute not in candidates:
        raise QueryError(
            f"{attribute!r} is not a public date attribute of {schema.name!r}: {list(candidates)}"
        )
    # Date-only bounds are inclusive days: the engine rounds `gte` to the day's start and `lte` to its end.
    bounds = {
        operator: bound.isoformat()
        for operator, bound in (("gte", dates.start), ("lte", dates.end))
        if bound is not None
    }
    return {"range": {attribute: bounds}}


def _sort_field(schema: Schema, attribute: str) -> str:
    declared = {a.name: a for a in schema.attributes if a.visibility is Visibility.PUBLIC}
    if attribute not in declared:
        raise QueryError(
            f"{attribute!r} is not a public attribute of {schema.name!r}: {sorted(declared)} can sort"
        )
    return f"{attribute}.keyword" if declared[attribute].kind is AttributeKind.TEXT else attribute
