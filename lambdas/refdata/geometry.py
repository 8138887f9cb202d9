"""GeoJSON geometry: validation, envelope, centroid and the canonical bytes that address it in S3.

Pure functions over RFC 7946 geometry objects (numbers may be int, float or Decimal). Coordinates are
WGS 84 lon/lat; envelope and centroid are planar in degrees and do not handle antimeridian crossing.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any

from refdata.exceptions import RefdataError

GEOMETRY_PREFIX = "geometries/"

Position = tuple[float, float]


class GeometryError(RefdataError, ValueError):
    """Not a valid GeoJSON geometry; the message names where and why."""


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        raise GeometryError(f"{where}: {value!r:.60} is not a number")
    try:
        number = float(value)
    except OverflowError:  # an int beyond a double's range (JSON allows any number of digits)
        number = math.inf
    if not math.isfinite(number):
        raise GeometryError(f"{where}: {value!r:.60} is not finite")
    return number


def _position(value: Any, where: str) -> Position:
    # The common case first, without building `where` texts: two finite floats in range.
    if type(value) is list and len(value) == 2:
        lon, lat = value
        if type(lon) is float and type(lat) is float and -180 <= lon <= 180 and -90 <= lat <= 90:
            return lon, lat
    if not isinstance(value, Sequence) or isinstance(value, str) or len(value) not in (2, 3):
        raise GeometryError(f"{where}: a position is [lon, lat] or [lon, lat, alt], got {value!r:.200}")
    lon, lat = _number(value[0], f"{where}[0]"), _number(value[1], f"{where}[1]")
    if len(value) == 3:
        _number(value[2], f"{where}[2]")
    if not -180 <= lon <= 180 or not -90 <= lat <= 90:
        raise GeometryError(f"{where}: ({lon}, {lat}) is outside lon [-180, 180] / lat [-90, 90]")
    return lon, lat


def _list(value: Any, where: str, minimum: int, what: str) -> Sequence[Any]:
    if not isinstance(value, Sequence) or isinstance(value, str) or len(value) < minimum:
        raise GeometryError(f"{where}: {what} needs a list of at least {minimum}, got {value!r}")
    return value


def _line(value: Any, where: str, minimum: int = 2, what: str = "a line string") -> list[Position]:
    positions = _list(value, where, minimum, what)
    line: list[Position] = []
    append = line.append
    for p in positions:
        if type(p) is list and len(p) == 2:  # the fast path of `_position`, inlined: most of a geometry
            lon, lat = p
            if type(lon) is float and type(lat) is float and -180 <= lon <= 180 and -90 <= lat <= 90:
                append((lon, lat))
                continue
        append(_position(p, f"{where}[{len(line)}]"))
    return line


def _ring(value: Any, where: str) -> list[Position]:
    ring = _line(value, where, 4, "a linear ring")
    if list(value[0]) != list(value[-1]):
        raise GeometryError(f"{where}: a linear ring must end where it starts")
    return ring


def _polygon(value: Any, where: str) -> list[list[Position]]:
    return [_ring(r, f"{where}[{i}]") for i, r in enumerate(_list(value, where, 1, "a polygon"))]


Part = tuple[int, list[Position], bool]


def _parts(geometry: Any, where: str = "geometry") -> Iterator[Part]:
    """(dimension, positions, is a hole) of every point set, line and ring; validates on the way."""
    if not isinstance(geometry, Mapping):
        raise GeometryError(f"{where}: a geometry is a JSON object, got {type(geometry).__name__}")
    kind = geometry.get("type")
    if kind == "GeometryCollection":
        members = _list(geometry.get("geometries"), f"{where}.geometries", 1, "a collection")
        for i, member in enumerate(members):
            yield from _parts(member, f"{where}.geometries[{i}]")
        return
    at = f"{where}.coordinates"
    coordinates = geometry.get("coordinates")
    if kind == "Point":
        yield 0, [_position(coordinates, at)], False
    elif kind == "MultiPoint":
        yield 0, _line(coordinates, at, 1, "a multi point"), False
    elif kind == "LineString":
        yield 1, _line(coordinates, at), False
    elif kind == "MultiLineString":
        for i, line in enumerate(_list(coordinates, at, 1, "a multi line string")):
            yield 1, _line(line, f"{at}[{i}]"), False
    elif kind == "Polygon":
        yield from _rings(_polygon(coordinates, at))
    elif kind == "MultiPolygon":
        for i, polygon in enumerate(_list(coordinates, at, 1, "a multi polygon")):
            yield from _rings(_polygon(polygon, f"{at}[{i}]"))
    else:
        raise GeometryError(f"{where}.type: {kind!r} is not a GeoJSON geometry type")


def _rings(polygon: list[list[Position]]) -> Iterator[Part]:
    # The first ring of a polygon is its exterior; the rings after it are holes.
    return ((2, ring, i > 0) for i, ring in enumerate(polygon))


def validate(geometry: Any) -> None:
    """Raise GeometryError unless `geometry` is a valid GeoJSON geometry object."""
    try:
        for _ in _parts(geometry):
            pass
    except RecursionError:  # geometry collections nested beyond Python's recursion limit
        raise GeometryError("geometry: geometry collections nest too deeply") from None


def envelope(geometry: Any) -> tuple[float, float, float, float]:
    """[minLon, minLat, maxLon, maxLat] over every position of every ring and part."""
    positions = [p for _, part, _ in _parts(geometry) for p in part]
    lons, lats = [p[0] for p in positions], [p[1] for p in positions]
    return min(lons), min(lats), max(lons), max(lats)


def _ring_moments(ring: list[Position]) -> tuple[float, float, float]:
    area = cx = cy = 0.0
    for (x0, y0), (x1, y1) in itertools.pairwise(ring):
        cross = x0 * y1 - x1 * y0
        area += cross
        cx += (x0 + x1) * cross
        cy += (y0 + y1) * cross
    if area == 0:
        return 0.0, 0.0, 0.0
    # Moments of the ring's area, independent of its winding direction.
    return abs(area) / 2, cx / (3 * area) * abs(area) / 2, cy / (3 * area) * abs(area) / 2


def _line_moments(line: list[Position]) -> tuple[float, float, float]:
    length = mx = my = 0.0
    for (x0, y0), (x1, y1) in itertools.pairwise(line):
        segment = math.hypot(x1 - x0, y1 - y0)
        length += segment
        mx += segment * (x0 + x1) / 2
        my += segment * (y0 + y1) / 2
    return length, mx, my


def centroid(geometry: Any) -> Position:
    """(lon, lat) centroid of the highest-dimension parts: area-weighted for polygons (holes subtract),
    length-weighted for lines, the mean for points; degenerate parts fall back to the next dimension."""
    sums = {d: [0.0, 0.0, 0.0] for d in (0, 1, 2)}
    for dimension, part, hole in _parts(geometry):
        moments = [(0, (float(len(part)), sum(p[0] for p in part), sum(p[1] for p in part)))]
        if dimension >= 1:
            moments.append((1, _line_moments(part)))
        if dimension == 2:
            weight, mx, my = _ring_moments(part)
            sign = -1.0 if hole else 1.0
            moments.append((2, (sign * weight, sign * mx, sign * my)))
        for d, (weight, mx, my) in moments:
            sums[d][0] += weight
            sums[d][1] += mx
            sums[d][2] += my
    for d in (2, 1, 0):
        weight, mx, my = sums[d]
        if weight > 0:
            return mx / weight, my / weight
    raise GeometryError("geometry: has no positions")


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [_plain(v) for v in value]
    if isinstance(value, int | Decimal) and not isinstance(value, bool):
        return float(value)
    return value


def canonical_bytes(geometry: Any) -> bytes:
    """Compact JSON with sorted keys and every number as a float, so equal geometries give equal bytes
    whether they came from JSON (ints, floats) or from DynamoDB (Decimals)."""
    return json.dumps(_plain(geometry), sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def content_key(data: bytes) -> str:
    """S3 key addressing `data` by its SHA-256, so uploading the same bytes again is a no-op."""
    return f"{GEOMETRY_PREFIX}{hashlib.sha256(data).hexdigest()}.geojson"
