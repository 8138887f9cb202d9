"""Search requests as the engine answers them, for the loopback server (tests only).

`search` runs a `_search` / `_count` body over the documents of one or more concrete indices, each seen through
its alias filters and the caller's document- and field-level security (tests/support/opensearch_dlsfls.py).
Emulated, with the engine's semantics (checked against OpenSearch's and Lucene's source):

- queries: `match_all`, `match_none`, `bool` (`must`, `filter`, `should`, `must_not`, integer
  `minimum_should_match`), `term`, `terms`, `range` (`gt`/`gte`/`lt`/`lte` on numbers, dates and strings), `exists`,
  `prefix`, `match` and `multi_match` (`best_fields`, `most_fields`; `operator`, `tie_breaker`, `field^boost`),
  `geo_shape` (point, envelope, (multi)polygon, (multi)line string and multipoint shapes; relations
  `intersects`, `within`, `contains`, `disjoint`), `geo_bounding_box` and `geo_distance` (arc) on `geo_point`;
- field types from the index mappings: `text` is analyzed like the standard analyzer (Unicode word characters,
  joined by `'` or `.` between them, lower-cased; no stop words), `keyword` is exact (values longer than
  `ignore_above` are not indexed), numbers compare as doubles, dates as epoch milliseconds (default format
  `strict_date_optional_time||epoch_millis`; a bound missing date components is rounded the way the engine
  rounds `gte`/`lt` down and `gt`/`lte` up), a query on an unmapped field matches nothing;
- spatial predicates by shapely (planar on lon/lat degrees, as Lucene's shape relations are, boundaries
  inclusive); distances by the haversine formula on the sphere of mean radius 6,371,008.7714 m, the formula
  of Lucene's `SloppyMath.haversinMeters` and OpenSearch's `GeoUtils.arcDistance`;
- relevance: BM25 (k1 1.2, b 0.75) with the index's term statistics (every document counts, as Lucene's do,
  whatever the caller may see), summed over `bool` clauses, `dis_max` for `best_fields`; `term` on a keyword
  field scores idf / (1 + k1) (no norms); `terms`, `range`, `exists`, `prefix` and the geo queries score a
  constant 1 (times `boost`); filter context scores 0;
- `sort` on keyword, numeric, date and boolean fields (min for ascending, max for descending; `missing`
  `_last` or `_first`), `_score`, `_geo_distance`; `search_after`; `size`, `from`, `track_total_hits`;
- `seq_no_primary_term` (each hit's `_seq_no` and `_primary_term`); `slice` (`{"id", "max"}`, only with a point
  in time, which the server keeps: tests/support/opensearch_server.py), a document in slice `crc32(_id) % max`
  (the engine hashes `_id` with murmur3: the same partition into disjoint slices that cover the index, other
  members).

Not emulated, each answering 400 with a reason that says so: other queries and parameters, date math (`now`,
`||`), custom date formats and time zones, WKT and geohash values, circles, shapes spanning more than 180° of
longitude (the engine splits them at the dateline), aggregations, highlighting, `_source` filtering, scroll. Not reproduced: Lucene's lossy field-length norms (exact lengths here; Lucene's are exact below
24 tokens), the ~1 cm quantization of indexed coordinates, the `line`/`col` of parse errors; ties without a sort
keep index order.
"""

from __future__ import annotations

import calendar
import math
import re
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import shapely
from shapely.geometry import shape as geojson_shape

from tests.support.opensearch_errors import OpenSearchError, cause
from tests.support.opensearch_mapping import java_text

K1 = 1.2
B = 0.75
EARTH_MEAN_RADIUS_M = 6371008.7714
DEFAULT_SIZE = 10
MAX_RESULT_WINDOW = 10000
DEFAULT_TRACK_TOTAL_HITS = 10000
_NUMERIC = frozenset({"double", "float", "half_float", "scaled_float", "long", "integer", "short", "byte"})
_INTEGERS = frozenset({"long", "integer", "short", "byte"})
_STRINGS = frozenset({"keyword", "text"})
_SEARCH_KEYS = frozenset(
    {
        "query",
        "size",
        "from",
        "sort",
        "search_after",
        "track_total_hits",
        "pit",
        "slice",
        "seq_no_primary_term",
    }
)
_TOKEN = re.compile(r"\w+(?:['.’]\w+)*")
_DATE = re.compile(
    r"(?P<year>[+-]?\d{4,9})(?:-(?P<month>\d{2})(?:-(?P<day>\d{2})(?:T(?P<hour>\d{2})(?::(?P<minute>\d{2})"
    r"(?::(?P<second>\d{2})(?:[.,](?P<fraction>\d{1,9}))?)?)?(?P<zone>Z|[+-]\d{2}(?::?\d{2})?)?)?)?)?"
)
_DISTANCE = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?\d+)?)\s*(m|km|mi|meters|kilometers|miles)?\s*")
_UNIT_METERS = {
    "m": 1.0,
    "meters": 1.0,
    "km": 1000.0,
    "kilometers": 1000.0,
    "mi": 1609.344,
    "miles": 1609.344,
}


def not_emulated(what: str) -> OpenSearchError:
    return OpenSearchError(400, "parsing_exception", f"{what} is not emulated by the loopback server")


def _parsing(reason: str) -> OpenSearchError:
    return OpenSearchError(400, "parsing_exception", reason)


def java_boolean(value: Any) -> bool:
    """Booleans.parseBoolean: only `true` and `false`."""
    text = str(value).lower() if isinstance(value, bool) else str(value)
    if text not in ("true", "false"):
        raise OpenSearchError(
            400,
            "illegal_argument_exception",
            f"Failed to parse value [{value}] as only [true] or [false] are allowed.",
        )
    return text == "true"


class ShardFailure(Exception):
    """An error the engine raises while a shard runs the request: answered as `search_phase_execution_exception`
    (all shards failed) with the cause."""

    def __init__(self, error: OpenSearchError) -> None:
        super().__init__(error.reason)
        self.error = error


def _shard_failure(error_type: str, reason: str, **extra: Any) -> ShardFailure:
    return ShardFailure(cause(error_type, reason, **extra))


# --- analysis and values ----------------------------------------------------------------------------------


def analyze(text: str) -> list[str]:
    """The standard analyzer as emulated here: word tokens (UAX#29-like), lower-cased, no stop words."""
    return [token.lower() for token in _TOKEN.findall(text)]


def source_values(source: Mapping[str, Any], path: Sequence[str]) -> list[Any]:
    """Every value at a dotted path, through arrays of objects and arrays of values (nulls dropped)."""
    nodes: list[Any] = [source]
    for part in path:
        following: list[Any] = []
        for node in nodes:
            if isinstance(node, Mapping) and part in node:
                value = node[part]
                following.extend(value if isinstance(value, list) else [value])
            elif isinstance(node, list):
                following.extend(
                    member[part] for member in node if isinstance(member, Mapping) and part in member
                )
        nodes = following
    flat: list[Any] = []
    for node in nodes:
        flat.extend(node if isinstance(node, list) else [node])
    return [value for value in flat if value is not None]


def _keyword_text(value: Any) -> str:
    return java_text(value) if not isinstance(value, str) else value


@dataclass(frozen=True)
class FieldType:
    """A field as a query sees it: its mapping (`spec`, `kind`) and where its values live in `_source`."""

    name: str
    kind: str
    spec: Mapping[str, Any]
    path: tuple[str, ...]


def field_type(mappings: Mapping[str, Any], name: str) -> FieldType | None:
    """The mapping of a dotted field name: an object path, optionally ending in a multi-field (`name.keyword`)."""
    parts = name.split(".")
    properties: Mapping[str, Any] = mappings.get("properties") or {}
    for position, part in enumerate(parts):
        spec = properties.get(part)
        if not isinstance(spec, Mapping):
            return None
        kind = spec.get("type", "object")
        rest = parts[position + 1 :]
        if kind in ("object", "nested") or "properties" in spec:
            properties = spec.get("properties") or {}
            continue
        path = tuple(parts[: position + 1])
        if not rest:
            return FieldType(name, str(kind), spec, path)
        subfield = (spec.get("fields") or {}).get(".".join(rest))
        if not isinstance(subfield, Mapping):
            return None
        return FieldType(name, str(subfield.get("type")), subfield, path)
    return None


# --- dates, numbers, booleans, points -------------------------------------------------------------------


def _last_day(year: int, month: int) -> int:
    return calendar.monthrange(year, month)[1]


def date_millis(value: Any, *, round_up: bool = False) -> int:
    """`strict_date_optional_time||epoch_millis` to epoch milliseconds; missing components are the smallest
    value, or the largest with `round_up` (the engine's rounding of `gt` and `lte` bounds)."""
    if isinstance(value, bool):
        raise ValueError(value)
    if isinstance(value, int | float):
        return int(value)
    text = str(value)
    if re.fullmatch(r"[+-]?\d+", text) and len(text.lstrip("+-")) > 9:
        return int(text)
    if "now" in text or "||" in text:
        raise OpenSearchError(400, "parsing_exception", "date math is not emulated by the loopback server")
    match = _DATE.fullmatch(text)
    if not match:
        if re.fullmatch(r"[+-]?\d+", text):
            return int(text)
        raise ValueError(text)
    year = int(match["year"])
    month = int(match["month"] or (12 if round_up else 1))
    day = int(match["day"] or (_last_day(year, month) if round_up else 1))
    hour = int(match["hour"] or (23 if round_up else 0))
    minute = int(match["minute"] or (59 if round_up else 0))
    second = int(match["second"] or (59 if round_up else 0))
    fraction = match["fraction"]
    millis = int(fraction[:3].ljust(3, "0")) if fraction else (999 if round_up else 0)
    moment = datetime(year, month, day, hour, minute, second, tzinfo=UTC)
    zone = match["zone"]
    if zone and zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        digits = zone[1:].replace(":", "")
        moment -= sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:] or 0))
    return calendar.timegm(moment.utctimetuple()) * 1000 + millis


def _boolean(value: Any) -> bool | None:
    if value is True or value is False:
        return value
    if value in ("true", "false"):
        return value == "true"
    return None


def _point(value: Any) -> tuple[float, float] | None:
    """(lon, lat) of a geo_point value: `{lat, lon}`, `[lon, lat]` or `"lat,lon"`."""
    if isinstance(value, Mapping) and "lat" in value and "lon" in value:
        return float(value["lon"]), float(value["lat"])
    if isinstance(value, list) and len(value) in (2, 3) and all(isinstance(v, int | float) for v in value):
        return float(value[0]), float(value[1])
    if isinstance(value, str) and "," in value:
        lat, lon = (float(part) for part in value.split(",")[:2])
        return lon, lat
    return None


def _query_point(value: Any, what: str) -> tuple[float, float]:
    point = _point(value)
    if point is None:
        raise not_emulated(f"{what} {value!r} (only {{lat, lon}}, [lon, lat] and 'lat,lon' points)")
    return point


def haversine_meters(lon1: float, lat1: float, lon2: float, lat2: float) -> float:
    """Arc distance on the engine's sphere (SloppyMath.haversinMeters, GeoUtils.arcDistance)."""
    phi1, phi2 = math.radians(lat1), math.radians(lat2)
    h = (
        math.sin((phi2 - phi1) / 2) ** 2
        + math.cos(phi1) * math.cos(phi2) * math.sin(math.radians(lon2 - lon1) / 2) ** 2
    )
    return 2 * EARTH_MEAN_RADIUS_M * math.asin(min(1.0, math.sqrt(h)))


def _meters(distance: Any, what: str) -> float:
    if isinstance(distance, int | float) and not isinstance(distance, bool):
        return float(distance)
    match = _DISTANCE.fullmatch(str(distance))
    if not match:
        raise not_emulated(f"{what} {distance!r} (units m, km, mi)")
    return float(match[1]) * _UNIT_METERS[match[2] or "m"]


def _geometry(value: Any, what: str) -> shapely.Geometry:
    """A GeoJSON (or OpenSearch `envelope`) object as a shapely geometry."""
    if not isinstance(value, Mapping) or not isinstance(value.get("type"), str):
        raise not_emulated(f"{what} {value!r} (only GeoJSON objects and envelopes)")
    kind = value["type"].lower()
    if kind == "envelope":
        (min_lon, max_lat), (max_lon, min_lat) = value["coordinates"]
        geometry = shapely.box(min_lon, min_lat, max_lon, max_lat)
    elif kind in ("point", "multipoint", "linestring", "multilinestring", "polygon", "multipolygon"):
        geometry = geojson_shape({"type": _GEOJSON_TYPES[kind], "coordinates": value["coordinates"]})
    elif kind == "geometrycollection":
        geometry = shapely.GeometryCollection([_geometry(member, what) for member in value["geometries"]])
    else:
        raise not_emulated(f"{what} of type [{value['type']}]")
    min_lon, _, max_lon, _ = geometry.bounds
    if max_lon - min_lon > 180:
        raise not_emulated(f"{what} spanning more than 180 degrees of longitude (the dateline split)")
    return geometry


_GEOJSON_TYPES = {
    "point": "Point",
    "multipoint": "MultiPoint",
    "linestring": "LineString",
    "multilinestring": "MultiLineString",
    "polygon": "Polygon",
    "multipolygon": "MultiPolygon",
}
_RELATIONS: dict[str, Callable[[shapely.Geometry, shapely.Geometry], bool]] = {
    "intersects": lambda document, query: bool(document.intersects(query)),
    "disjoint": lambda document, query: not document.intersects(query),
    "within": lambda document, query: bool(document.covered_by(query)),
    "contains": lambda document, query: bool(document.covers(query)),
}


# --- the index a query runs on ----------------------------------------------------------------------------


@dataclass
class _FieldStats:
    doc_count: int
    average_length: float
    doc_freq: Counter[str]


@dataclass
class IndexView:
    """One concrete index as a request sees it: its mappings and every document (for term statistics)."""

    name: str
    mappings: Mapping[str, Any]
    documents: Mapping[str, Mapping[str, Any]]
    _stats: dict[str, _FieldStats] = field(default_factory=dict)

    def field(self, name: str) -> FieldType | None:
        return field_type(self.mappings, name)

    def stats(self, typed: FieldType) -> _FieldStats:
        """Term statistics of a text or keyword field over every document of the index."""
        if typed.name not in self._stats:
            doc_freq: Counter[str] = Counter()
            doc_count = total = 0
            for source in self.documents.values():
                terms = indexed_terms(typed, source)
                if terms:
                    doc_count += 1
                    total += len(terms)
                    doc_freq.update(set(terms))
            self._stats[typed.name] = _FieldStats(
                doc_count, total / doc_count if doc_count else 0.0, doc_freq
            )
        return self._stats[typed.name]


def indexed_terms(typed: FieldType, source: Mapping[str, Any]) -> list[str]:
    """The terms a text or keyword field indexes for a document (all values, in order)."""
    values = source_values(source, typed.path)
    if typed.kind == "text":
        return [token for value in values for token in analyze(_keyword_text(value))]
    limit = typed.spec.get("ignore_above")
    texts = [_keyword_text(value) for value in values if not isinstance(value, Mapping | list)]
    return [text for text in texts if limit is None or len(text) <= int(limit)]


# A compiled query: the score of a document (a `_source` as the caller may see it), or None when it does not match.
Matcher = Callable[[Mapping[str, Any]], float | None]


def _never(_source: Mapping[str, Any]) -> float | None:
    return None


def _boost(options: Mapping[str, Any]) -> float:
    return float(options.get("boost", 1.0))


def _check_options(kind: str, options: Mapping[str, Any], allowed: Iterable[str]) -> None:
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise not_emulated(f"[{kind}] query parameter(s) {unknown}")


def _one_field(kind: str, spec: Any) -> tuple[str, Any, dict[str, Any]]:
    """`{field: value}` or `{field: {...}}` plus top-level options (`boost`, ...)."""
    if not isinstance(spec, Mapping):
        raise _parsing(f"[{kind}] query malformed, no start_object after query name")
    options = {key: value for key, value in spec.items() if key in ("boost", "_name", "ignore_unmapped")}
    fields = [key for key in spec if key not in options]
    if len(fields) != 1:
        raise _parsing(f"[{kind}] query doesn't support multiple fields, found {fields}")
    return fields[0], spec[fields[0]], options


def _field_and_value(
    kind: str, spec: Any, key: str, extra: Iterable[str] = ()
) -> tuple[str, Any, dict[str, Any]]:
    """`{field: value}` or `{field: {key: value, boost, ...extra}}`: the field, the value and the options."""
    name, value, options = _one_field(kind, spec)
    if isinstance(value, Mapping):
        _check_options(kind, value, (key, "boost", *extra))
        options = {**options, **value}
        value = value.get(key)
    return name, value, options


class QueryCompiler:
    """Turns a query body into a Matcher for one index (field types and statistics from its mappings)."""

    def __init__(self, index: IndexView) -> None:
        self.index = index

    def compile(self, query: Any, *, scoring: bool = True) -> Matcher:
        if not isinstance(query, Mapping) or len(query) != 1:
            raise _parsing("[_na] query malformed, must start with start_object and name exactly one query")
        ((kind, spec),) = query.items()
        builder = getattr(self, f"_q_{kind}", None)
        if builder is None:
            raise _parsing(f"unknown query [{kind}] (not emulated by the loopback server)")
        matcher: Matcher = builder(spec, scoring)
        return matcher

    # --- compound and trivial ---

    def _q_match_all(self, spec: Any, scoring: bool) -> Matcher:
        _check_options("match_all", spec or {}, ("boost", "_name"))
        score = _boost(spec or {})
        return lambda _source: score

    def _q_match_none(self, spec: Any, scoring: bool) -> Matcher:
        return _never

    def _q_bool(self, spec: Any, scoring: bool) -> Matcher:
        _check_options(
            "bool", spec, ("must", "filter", "should", "must_not", "minimum_should_match", "boost", "_name")
        )

        def clauses(key: str, score: bool) -> list[Matcher]:
            value = spec.get(key, [])
            return [
                self.compile(c, scoring=score) for c in ([value] if isinstance(value, Mapping) else value)
            ]

        must, should = clauses("must", scoring), clauses("should", scoring)
        filters, must_not = clauses("filter", False), clauses("must_not", False)
        if not (must or should or filters or must_not):
            return self._q_match_all({}, scoring)
        minimum = spec.get("minimum_should_match")
        if minimum is None:
            minimum = 0 if (must or filters or not should) else 1
        elif not re.fullmatch(r"-?\d+", str(minimum)):
            raise not_emulated(f"[bool] minimum_should_match [{minimum}] (integers only)")
        required = int(minimum) if int(minimum) >= 0 else max(0, len(should) + int(minimum))
        boost = _boost(spec)

        def run(source: Mapping[str, Any]) -> float | None:
            total = 0.0
            for clause in must:
                score = clause(source)
                if score is None:
                    return None
                total += score
            if any(clause(source) is None for clause in filters):
                return None
            if any(clause(source) is not None for clause in must_not):
                return None
            matched = 0
            for clause in should:
                score = clause(source)
                if score is not None:
                    matched += 1
                    total += score
            if matched < required:
                return None
            return total * boost if scoring else 0.0

        return run

    # --- term-level ---

    def _typed(self, kind: str, name: str, allowed: Iterable[str]) -> FieldType | None:
        typed = self.index.field(name)
        if typed is not None and typed.kind not in allowed:
            raise _shard_failure(
                "query_shard_exception",
                f"Field [{name}] of type [{typed.kind}] does not support [{kind}] queries",
                index=self.index.name,
            )
        return typed

    def _equals(self, typed: FieldType, wanted: Any) -> Callable[[Mapping[str, Any]], int]:
        """How often a document holds `wanted` in the field (term semantics for its type)."""
        if typed.kind in _STRINGS:
            term = _keyword_text(wanted)
            return lambda source: indexed_terms(typed, source).count(term)
        if typed.kind in _NUMERIC:
            number = float(wanted)
            return lambda source: sum(1 for v in source_values(source, typed.path) if _as_float(v) == number)
        if typed.kind == "boolean":
            flag = _boolean(wanted)
            return lambda source: sum(1 for v in source_values(source, typed.path) if _boolean(v) is flag)
        if typed.kind == "date":
            millis = date_millis(wanted)
            return lambda source: sum(
                1 for v in source_values(source, typed.path) if date_millis(v) == millis
            )
        raise _shard_failure(
            "query_shard_exception",
            f"Field [{typed.name}] of type [{typed.kind}] does not support term queries",
            index=self.index.name,
        )

    def _term_scorer(self, typed: FieldType, term: str, boost: float) -> Callable[[int, int], float]:
        """BM25 of one term: (frequency in the document, field length) -> score."""
        stats = self.index.stats(typed)
        frequency_of_docs = stats.doc_freq.get(term, 0)
        idf = math.log(1 + (stats.doc_count - frequency_of_docs + 0.5) / (frequency_of_docs + 0.5))
        if typed.kind != "text":  # keyword fields omit norms: length 1, average 1
            return lambda frequency, _length: boost * idf * frequency / (frequency + K1)
        average = stats.average_length or 1.0
        return lambda frequency, length: (
            boost * idf * frequency / (frequency + K1 * (1 - B + B * length / average))
        )

    def _q_term(self, spec: Any, scoring: bool) -> Matcher:
        name, value, options = _field_and_value("term", spec, "value")
        typed = self.index.field(name)
        if typed is None:
            return _never
        count = self._equals(typed, value)
        if typed.kind in _STRINGS:
            scorer = self._term_scorer(typed, _keyword_text(value), _boost(options))

            def scored(source: Mapping[str, Any]) -> float | None:
                found = count(source)
                if not found:
                    return None
                return scorer(found, len(indexed_terms(typed, source))) if scoring else 0.0

            return scored
        return self._constant(lambda source: count(source) > 0, options, scoring)

    @staticmethod
    def _constant(
        test: Callable[[Mapping[str, Any]], bool], options: Mapping[str, Any], scoring: bool
    ) -> Matcher:
        score = _boost(options) if scoring else 0.0
        return lambda source: score if test(source) else None

    def _q_terms(self, spec: Any, scoring: bool) -> Matcher:
        name, values, options = _one_field("terms", spec)
        if not isinstance(values, list):
            raise not_emulated("[terms] lookup")
        typed = self.index.field(name)
        if typed is None:
            return _never
        counts = [self._equals(typed, value) for value in values]
        return self._constant(lambda source: any(count(source) for count in counts), options, scoring)

    def _q_range(self, spec: Any, scoring: bool) -> Matcher:
        name, bounds, options = _one_field("range", spec)
        if not isinstance(bounds, Mapping):
            raise _parsing(f"[range] query malformed, no start_object after field [{name}]")
        _check_options("range", bounds, ("gt", "gte", "lt", "lte", "boost"))
        options = {**options, **{k: v for k, v in bounds.items() if k == "boost"}}
        typed = self._typed("range", name, _NUMERIC | _STRINGS | {"date"})
        if typed is None:
            return _never
        convert: Callable[[Any, bool], Any]
        if typed.kind == "date":
            convert = lambda value, up: date_millis(value, round_up=up)  # noqa: E731
        elif typed.kind in _NUMERIC:
            convert = lambda value, _up: float(value)  # noqa: E731
        else:
            convert = lambda value, _up: _keyword_text(value)  # noqa: E731
        checks: list[Callable[[Any], bool]] = []
        for operator, test in (
            ("gt", lambda v, b: v > b),
            ("gte", lambda v, b: v >= b),
            ("lt", lambda v, b: v < b),
            ("lte", lambda v, b: v <= b),
        ):
            if operator in bounds and bounds[operator] is not None:
                bound = convert(bounds[operator], operator in ("gt", "lte"))
                checks.append(lambda value, test=test, bound=bound: test(value, bound))

        def values(source: Mapping[str, Any]) -> list[Any]:
            if typed.kind in _STRINGS:
                return indexed_terms(typed, source)
            return [convert(v, False) for v in source_values(source, typed.path)]

        return self._constant(
            lambda source: any(all(check(v) for check in checks) for v in values(source)), options, scoring
        )

    def _q_exists(self, spec: Any, scoring: bool) -> Matcher:
        _check_options("exists", spec, ("field", "boost", "_name"))
        typed = self.index.field(spec["field"])
        if typed is None:
            return _never
        return self._constant(lambda source: bool(source_values(source, typed.path)), spec, scoring)

    def _q_prefix(self, spec: Any, scoring: bool) -> Matcher:
        name, value, options = _field_and_value("prefix", spec, "value")
        typed = self._typed("prefix", name, _STRINGS)
        if typed is None:
            return _never
        prefix = str(value)
        return self._constant(
            lambda source: any(term.startswith(prefix) for term in indexed_terms(typed, source)),
            options,
            scoring,
        )

    # --- full text ---

    def _text_matcher(self, name: str, text: Any, operator: str, boost: float, scoring: bool) -> Matcher:
        """A `match` query on one field: analyzed terms on text fields, a term query on any other."""
        typed = self._typed("match", name, _NUMERIC | _STRINGS | {"date", "boolean"})
        if typed is None:
            return _never
        if typed.kind != "text":
            return self._q_term({name: {"value": text, "boost": boost}}, scoring)
        terms = analyze(_keyword_text(text))
        if not terms:
            return _never
        scorers = [self._term_scorer(typed, term, boost) for term in terms]
        need_all = operator == "and"

        def run(source: Mapping[str, Any]) -> float | None:
            indexed = indexed_terms(typed, source)
            counts = Counter(indexed)
            found = [counts[term] for term in terms]
            if (all(found) if need_all else any(found)) is False:
                return None
            if not scoring:
                return 0.0
            return sum(
                score(count, len(indexed)) for score, count in zip(scorers, found, strict=True) if count
            )

        return run

    def _q_match(self, spec: Any, scoring: bool) -> Matcher:
        name, value, options = _field_and_value("match", spec, "query", ("operator",))
        return self._text_matcher(name, value, _operator(options), _boost(options), scoring)

    def _q_multi_match(self, spec: Any, scoring: bool) -> Matcher:
        _check_options(
            "multi_match", spec, ("query", "fields", "type", "operator", "tie_breaker", "boost", "_name")
        )
        kind = spec.get("type", "best_fields")
        if kind not in ("best_fields", "most_fields"):
            raise not_emulated(f"[multi_match] type [{kind}]")
        fields = spec.get("fields")
        if not isinstance(fields, list) or not fields:
            raise not_emulated("[multi_match] without an explicit list of fields")
        matchers: list[Matcher] = []
        for entry in fields:
            name, _, weight = str(entry).partition("^")
            if "*" in name:
                raise not_emulated(f"[multi_match] field pattern [{name}]")
            boost = _boost(spec) * (float(weight) if weight else 1.0)
            matchers.append(self._text_matcher(name, spec.get("query"), _operator(spec), boost, scoring))
        tie_breaker = float(spec.get("tie_breaker", 1.0 if kind == "most_fields" else 0.0))

        def run(source: Mapping[str, Any]) -> float | None:
            scores = [score for matcher in matchers if (score := matcher(source)) is not None]
            if not scores:
                return None
            best = max(scores)
            return best + tie_breaker * (sum(scores) - best)

        return run

    # --- geo ---

    def _geo_field(self, kind: str, name: str, allowed: str, options: Mapping[str, Any]) -> FieldType | None:
        typed = self.index.field(name)
        if typed is None:
            if options.get("ignore_unmapped") is True:
                return None
            raise _shard_failure(
                "query_shard_exception", f"failed to find {allowed} field [{name}]", index=self.index.name
            )
        if typed.kind in ("geo_point", "geo_shape") and typed.kind != allowed:
            raise not_emulated(f"[{kind}] on a {typed.kind} field")
        if typed.kind != allowed:
            raise _shard_failure(
                "query_shard_exception",
                f"Field [{name}] is of unsupported type [{typed.kind}] for [{kind}] query",
                index=self.index.name,
            )
        return typed

    def _q_geo_shape(self, spec: Any, scoring: bool) -> Matcher:
        name, value, options = _one_field("geo_shape", spec)
        if not isinstance(value, Mapping):
            raise _parsing(f"[geo_shape] query malformed, no start_object after field [{name}]")
        _check_options("geo_shape", value, ("shape", "relation"))
        if "shape" not in value:
            raise not_emulated("[geo_shape] without an inline shape (indexed_shape)")
        relation = str(value.get("relation", "intersects")).lower()
        if relation not in _RELATIONS:
            raise _parsing(f"Unknown shape relation [{relation}]")
        typed = self._geo_field("geo_shape", name, "geo_shape", options)
        if typed is None:
            return _never
        query_shape = _geometry(value["shape"], "[geo_shape] query shape")
        relate = _RELATIONS[relation]

        def test(source: Mapping[str, Any]) -> bool:
            shapes = [_geometry(v, f"indexed [{name}]") for v in source_values(source, typed.path)]
            if not shapes:
                return False
            document = shapes[0] if len(shapes) == 1 else shapely.GeometryCollection(shapes)
            return relate(document, query_shape)

        return self._constant(test, options, scoring)

    def _geo_points(self, typed: FieldType, source: Mapping[str, Any]) -> list[tuple[float, float]]:
        raw = source_values(source, typed.path)
        if len(raw) in (2, 3) and all(isinstance(v, int | float) for v in raw):  # one [lon, lat] array
            return [(float(raw[0]), float(raw[1]))]
        points = [_point(v) for v in raw]
        if any(p is None for p in points):
            raise not_emulated(
                f"indexed [{typed.name}] geo_point values other than {{lat, lon}}, [lon, lat], 'lat,lon'"
            )
        return [p for p in points if p is not None]

    def _q_geo_bounding_box(self, spec: Any, scoring: bool) -> Matcher:
        name, corners, options = _one_field("geo_bounding_box", spec)
        if not isinstance(corners, Mapping):
            raise _parsing(f"[geo_bounding_box] query malformed, no start_object after field [{name}]")
        if set(corners) == {"top_left", "bottom_right"}:
            left, top = _query_point(corners["top_left"], "[geo_bounding_box] top_left")
            right, bottom = _query_point(corners["bottom_right"], "[geo_bounding_box] bottom_right")
        elif set(corners) == {"top", "left", "bottom", "right"}:
            top, left, bottom, right = (float(corners[k]) for k in ("top", "left", "bottom", "right"))
        else:
            raise not_emulated(f"[geo_bounding_box] corners {sorted(corners)}")
        typed = self._geo_field("geo_bounding_box", name, "geo_point", options)
        if typed is None:
            return _never
        boxes = (
            [shapely.box(left, bottom, right, top)]
            if left <= right
            else [shapely.box(left, bottom, 180, top), shapely.box(-180, bottom, right, top)]
        )
        return self._constant(
            lambda source: any(
                box.covers(shapely.Point(point)) for point in self._geo_points(typed, source) for box in boxes
            ),
            options,
            scoring,
        )

    def _q_geo_distance(self, spec: Any, scoring: bool) -> Matcher:
        if not isinstance(spec, Mapping) or "distance" not in spec:
            raise _parsing("[geo_distance] requires [distance]")
        options = {k: v for k, v in spec.items() if k in ("boost", "_name", "ignore_unmapped")}
        if spec.get("distance_type", "arc") != "arc":
            raise not_emulated(f"[geo_distance] distance_type [{spec['distance_type']}]")
        fields = [k for k in spec if k not in ("distance", "distance_type", *options)]
        if len(fields) != 1:
            raise not_emulated(f"[geo_distance] parameters {sorted(fields)}")
        name = fields[0]
        lon, lat = _query_point(spec[name], "[geo_distance] origin")
        radius = _meters(spec["distance"], "[geo_distance] distance")
        typed = self._geo_field("geo_distance", name, "geo_point", options)
        if typed is None:
            return _never
        return self._constant(
            lambda source: any(
                haversine_meters(lon, lat, p_lon, p_lat) <= radius
                for p_lon, p_lat in self._geo_points(typed, source)
            ),
            options,
            scoring,
        )


def _operator(options: Mapping[str, Any]) -> str:
    operator = str(options.get("operator", "or")).lower()
    if operator not in ("or", "and"):
        raise _parsing(f"Unknown operator [{operator}]")
    return operator


def _as_float(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


# --- sorting ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _SortField:
    """One sort criterion: how to read a hit's value, its order, where missing values go."""

    label: str
    descending: bool
    missing_first: bool
    value: Callable[[Mapping[str, Any], float | None], Any]
    coerce: Callable[[Any], Any]


class _Reverse:
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __lt__(self, other: _Reverse) -> bool:
        return bool(other.value < self.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Reverse) and other.value == self.value


def _sort_key(fields: Sequence[_SortField], values: Sequence[Any]) -> tuple[Any, ...]:
    key: list[Any] = []
    for criterion, value in zip(fields, values, strict=True):
        missing = value is None
        key.append(
            (
                missing != criterion.missing_first,
                None if missing else _Reverse(value) if criterion.descending else value,
            )
        )
    return tuple(key)


class SortCompiler:
    """`sort` entries for one index: field sorts by mapping type, `_score` and `_geo_distance`."""

    def __init__(self, index: IndexView) -> None:
        self.index = index

    def compile(self, sort: Any) -> list[_SortField]:
        entries = sort if isinstance(sort, list) else [sort]
        return [self._entry(entry) for entry in entries]

    def _entry(self, entry: Any) -> _SortField:
        if isinstance(entry, str):
            name, options = entry, {}
        elif isinstance(entry, Mapping) and len(entry) == 1:
            ((name, options),) = entry.items()
            options = {"order": options} if isinstance(options, str) else options
        else:
            raise _parsing(f"malformed sort entry {entry!r}")
        if not isinstance(options, Mapping):
            raise _parsing(f"malformed sort entry {entry!r}")
        if name == "_geo_distance":
            return self._geo_distance(options)
        _check_options("sort", options, ("order", "missing", "unmapped_type"))
        order = options.get("order", "desc" if name == "_score" else "asc")
        if order not in ("asc", "desc"):
            raise _parsing(f"[sort] unknown order [{order}]")
        missing = options.get("missing", "_last")
        if missing not in ("_last", "_first"):
            raise not_emulated(f"[sort] missing value [{missing}]")
        if name == "_score":
            return _SortField(name, order == "desc", False, lambda _source, score: score, float)
        typed = self.index.field(name)
        if typed is None:
            if "unmapped_type" not in options:
                raise _shard_failure(
                    "query_shard_exception",
                    f"No mapping found for [{name}] in order to sort on",
                    index=self.index.name,
                )
            return _SortField(
                name, order == "desc", missing == "_first", lambda _s, _score: None, lambda v: v
            )
        if typed.kind == "text":
            raise _shard_failure(
                "illegal_argument_exception",
                "Text fields are not optimised for operations that require per-document field data like "
                "aggregations and sorting, so these operations are disabled by default. Please use a keyword field "
                f"instead. Alternatively, set fielddata=true on [{name}] in order to load field data by uninverting "
                "the inverted index. Note that this can use significant memory.",
            )
        convert = _sort_conversion(typed)
        pick = max if order == "desc" else min

        def value(source: Mapping[str, Any], _score: float | None) -> Any:
            if typed.kind == "keyword":
                values: list[Any] = indexed_terms(typed, source)
            else:
                values = [convert(v) for v in source_values(source, typed.path)]
            return pick(values) if values else None

        return _SortField(name, order == "desc", missing == "_first", value, convert)

    def _geo_distance(self, options: Mapping[str, Any]) -> _SortField:
        _check_options(
            "_geo_distance sort", options, ("order", "unit", "distance_type", *self._point_fields(options))
        )
        if options.get("distance_type", "arc") != "arc":
            raise not_emulated(f"[_geo_distance] distance_type [{options['distance_type']}]")
        (name,) = self._point_fields(options)
        lon, lat = _query_point(options[name], "[_geo_distance] origin")
        unit = _UNIT_METERS.get(str(options.get("unit", "m")))
        if unit is None:
            raise not_emulated(f"[_geo_distance] unit [{options['unit']}] (m, km, mi)")
        typed = self.index.field(name)
        if typed is None or typed.kind != "geo_point":
            raise _shard_failure(
                "illegal_argument_exception",
                f"failed to find mapper for [{name}] for geo distance based sort",
            )
        order = options.get("order", "asc")
        compiler = QueryCompiler(self.index)

        def value(source: Mapping[str, Any], _score: float | None) -> Any:
            distances = [
                haversine_meters(lon, lat, p_lon, p_lat) / unit
                for p_lon, p_lat in compiler._geo_points(typed, source)
            ]
            return (max if order == "desc" else min)(distances) if distances else None

        return _SortField("_geo_distance", order == "desc", False, value, float)

    @staticmethod
    def _point_fields(options: Mapping[str, Any]) -> list[str]:
        return [k for k in options if k not in ("order", "unit", "distance_type")]


def _sort_conversion(typed: FieldType) -> Callable[[Any], Any]:
    if typed.kind in _INTEGERS:
        return lambda value: int(float(value))
    if typed.kind in _NUMERIC:
        return float
    if typed.kind == "date":
        return date_millis
    if typed.kind == "boolean":
        return lambda value: 1 if _boolean(value) else 0
    if typed.kind == "keyword":
        return _keyword_text
    raise _shard_failure(
        "illegal_argument_exception",
        f"can't sort on {typed.kind} field [{typed.name}] without a specific sort",
    )


# --- the request ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Visible:
    """How a caller sees one index: the alias filters of the names it used, the document-level security query
    (None: unrestricted), and the field-level security that turns a `_source` into what the caller may see."""

    index: IndexView
    alias_filters: Sequence[Mapping[str, Any]]
    document_filter: Mapping[str, Any] | None
    fields: Callable[[Mapping[str, Any]], Mapping[str, Any]]
    seq_nos: Mapping[str, int]  # each document's sequence number (its primary term is always 1)


def visible_document(view: Visible, source: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """A stored document as a `_doc` GET shows it: None when document-level security hides it, else the fields
    the caller may see (alias filters do not apply to a get)."""
    if view.document_filter is not None:
        try:
            hidden = QueryCompiler(view.index).compile(view.document_filter, scoring=False)(source) is None
        except ShardFailure as failure:
            raise failure.error from None
        if hidden:
            return None
    return view.fields(source)


class _SearchPhaseExecution(OpenSearchError):
    """SearchPhaseExecutionException: its root causes are those of the shard failures."""

    def root_cause(self) -> dict[str, Any]:
        assert self.cause is not None
        return self.cause.root_cause()


def _search_phase_failure(failure: ShardFailure, index: str) -> OpenSearchError:
    reason = failure.error.error_object()
    return _SearchPhaseExecution(
        400,
        "search_phase_execution_exception",
        "all shards failed",
        cause=failure.error,
        phase="query",
        grouped=True,
        failed_shards=[{"shard": 0, "index": index, "node": "loopback", "reason": reason}],
    )


def _page(body: Mapping[str, Any]) -> tuple[int, int]:
    size, start = int(body.get("size", DEFAULT_SIZE)), int(body.get("from", 0))
    if size < 0 or start < 0:
        raise OpenSearchError(400, "illegal_argument_exception", "[from] and [size] must not be negative")
    if start + size > MAX_RESULT_WINDOW:
        raise OpenSearchError(
            400,
            "illegal_argument_exception",
            f"Result window is too large, from + size must be less than or equal to: [{MAX_RESULT_WINDOW}] but "
            f"was [{start + size}].",
        )
    if body.get("search_after") is not None and start not in (0, -1):
        raise OpenSearchError(
            400,
            "action_request_validation_exception",
            "Validation Failed: 1: `from` parameter must be set to 0 when `search_after` is used;",
        )
    return start, size


def _slice(body: Mapping[str, Any]) -> tuple[int, int] | None:
    """SliceBuilder's checks: `{"id": i, "max": n}` with 0 <= i < n and n > 1, on a point-in-time search."""
    spec = body.get("slice")
    if spec is None:
        return None
    if (
        not isinstance(spec, Mapping)
        or not isinstance(spec.get("id"), int)
        or not isinstance(spec.get("max"), int)
    ):
        raise _parsing("[slice] needs integer [id] and [max]")
    slice_id, maximum = spec["id"], spec["max"]
    if maximum <= 1:
        raise OpenSearchError(400, "illegal_argument_exception", "max must be greater than 1")
    if slice_id < 0:
        raise OpenSearchError(400, "illegal_argument_exception", "id must be greater than or equal to 0")
    if slice_id >= maximum:
        raise OpenSearchError(400, "illegal_argument_exception", "max must be greater than id")
    if "pit" not in body:
        raise OpenSearchError(
            400,
            "illegal_argument_exception",
            "[slice] can only be used with [scroll] or [point-in-time] requests",
        )
    return slice_id, maximum


def search(
    views: Sequence[Visible], body: Mapping[str, Any] | None, *, count_only: bool = False
) -> dict[str, Any]:
    """The `_search` answer (or `{"count": n}` with `count_only`) over the visible documents of `views`."""
    body = body or {}
    if not isinstance(body, Mapping):
        raise _parsing("request body must be a JSON object")
    allowed = ("query",) if count_only else _SEARCH_KEYS
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        if count_only:
            raise OpenSearchError(400, "parsing_exception", f"request does not support [{unknown[0]}]")
        raise not_emulated(f"search request parameter(s) {unknown}")
    start, size = (0, 0) if count_only else _page(body)
    sliced = _slice(body)
    with_seq_no = java_boolean(body.get("seq_no_primary_term", False))
    hits: list[_Hit] = []
    for view in views:
        try:
            hits.extend(
                _run(
                    view,
                    body.get("query"),
                    body.get("sort"),
                    body.get("search_after"),
                    sliced=sliced,
                    with_seq_no=with_seq_no,
                )
            )
        except ShardFailure as failure:
            raise _search_phase_failure(failure, view.index.name) from None
        except (KeyError, TypeError, ValueError) as malformed:  # a value of the wrong shape or type
            raise _parsing(f"failed to parse the search request: {malformed!r}") from None
    if count_only:
        return {"count": len(hits), "_shards": _SHARDS}
    sorted_by_fields = body.get("sort") is not None
    # Every match counts towards the total; only those after `search_after` are returned (Lucene's paging collector).
    following = [hit for hit in hits if hit.follows]
    ordered = sorted(following, key=(lambda hit: hit.key) if sorted_by_fields else (lambda hit: -hit.score))
    scored = [hit.score for hit in hits if hit.answer["_score"] is not None]
    answer: dict[str, Any] = {"max_score": max(scored) if scored else None}
    # Counted exactly up to 10,000 by default, exactly with `true`, up to N with a number, not at all with `false`.
    track = body.get("track_total_hits", DEFAULT_TRACK_TOTAL_HITS)
    if track is not False:
        limit = len(hits) if track is True else int(track)
        answer["total"] = {"value": min(len(hits), limit), "relation": "eq" if len(hits) <= limit else "gte"}
    answer["hits"] = [hit.answer for hit in ordered[start : start + size]]
    return {"took": 1, "timed_out": False, "_shards": _SHARDS, "hits": answer}


_SHARDS = {"total": 1, "successful": 1, "skipped": 0, "failed": 0}


@dataclass(frozen=True)
class _Hit:
    key: tuple[Any, ...]
    score: float
    answer: dict[str, Any]
    follows: bool  # comes after `search_after` (True without one)


def _run(
    view: Visible,
    query: Any,
    sort_spec: Any,
    after: Any,
    *,
    sliced: tuple[int, int] | None = None,
    with_seq_no: bool = False,
) -> Iterable[_Hit]:
    """One index's hits (of slice `sliced`), keyed for sorting and marked whether they follow `after`."""
    compiler = QueryCompiler(view.index)
    sort_fields = SortCompiler(view.index).compile(sort_spec) if sort_spec is not None else None
    if after is not None and sort_fields is None:
        raise _shard_failure("illegal_argument_exception", "Sort must contain at least one field.")
    scoring = sort_fields is None or any(criterion.label == "_score" for criterion in sort_fields)
    matcher = compiler.compile(query if query is not None else {"match_all": {}}, scoring=scoring)
    filters = [compiler.compile(f, scoring=False) for f in view.alias_filters]
    security = None if view.document_filter is None else compiler.compile(view.document_filter, scoring=False)
    after_key = None if after is None or sort_fields is None else _after_key(sort_fields, after)
    for doc_id, raw in view.index.documents.items():
        if sliced is not None and zlib.crc32(doc_id.encode()) % sliced[1] != sliced[0]:
            continue
        if security is not None and security(raw) is None:
            continue
        source = view.fields(raw)  # alias filters and queries see only the fields the caller may see
        if any(f(source) is None for f in filters):
            continue
        score = matcher(source)
        if score is None:
            continue
        answer: dict[str, Any] = {
            "_index": view.index.name,
            "_id": doc_id,
            "_score": score,
            "_source": source,
        }
        if with_seq_no:
            answer |= {"_seq_no": view.seq_nos[doc_id], "_primary_term": 1}
        key: tuple[Any, ...] = ()
        if sort_fields is not None:
            values = [criterion.value(source, score) for criterion in sort_fields]
            key = _sort_key(sort_fields, values)
            answer["sort"] = values
            if not scoring:
                answer["_score"] = None
        yield _Hit(key, score, answer, after_key is None or key > after_key)


def _after_key(sort_fields: Sequence[_SortField], after: Any) -> tuple[Any, ...]:
    if not isinstance(after, list) or len(after) != len(sort_fields):
        given = len(after) if isinstance(after, list) else 1
        raise _shard_failure(
            "illegal_argument_exception",
            f"search_after has {given} value(s) but sort has {len(sort_fields)}.",
        )
    values = [
        None if value is None else criterion.coerce(value)
        for criterion, value in zip(sort_fields, after, strict=True)
    ]
    return _sort_key(sort_fields, values)
