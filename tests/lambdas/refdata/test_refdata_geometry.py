import json
import math
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from refdata.geometry import GeometryError, canonical_bytes, centroid, content_key, envelope, validate

from tests.support.shapes import square

SQUARE_WITH_HOLE = {
    "type": "Polygon",
    "coordinates": [square(0, 0, 4)["coordinates"][0], [[0, 0], [0, 2], [2, 2], [2, 0], [0, 0]]],
}


def test_envelope_covers_every_ring_and_part():
    first = [[[0, 0], [1, 0], [1, 1], [0, 0]]]
    second = [[[10, -5], [12, -5], [12, 3], [10, -5]], [[10.5, -4], [11, -4], [11, -3], [10.5, -4]]]
    assert envelope({"type": "MultiPolygon", "coordinates": [first, second]}) == (0, -5, 12, 3)


def test_polygon_centroid_is_area_weighted_and_holes_subtract():
    assert centroid(SQUARE_WITH_HOLE) == pytest.approx((28 / 12, 28 / 12))


def test_centroid_does_not_depend_on_ring_winding():
    counter = square(0, 0, 2)
    clockwise = {"type": "Polygon", "coordinates": [counter["coordinates"][0][::-1]]}
    assert centroid(clockwise) == centroid(counter) == pytest.approx((1, 1))


@pytest.mark.parametrize(
    ("geometry", "expected"),
    [
        ({"type": "Point", "coordinates": [-123.1, 49.2]}, (-123.1, 49.2)),
        ({"type": "MultiPoint", "coordinates": [[0, 0], [2, 4]]}, (1, 2)),
        ({"type": "LineString", "coordinates": [[0, 0], [2, 0], [2, 6]]}, (1.75, 2.25)),
        ({"type": "Polygon", "coordinates": [[[0, 0], [1, 1], [2, 2], [0, 0]]]}, (1, 1)),
        (
            {
                "type": "GeometryCollection",
                "geometries": [{"type": "Point", "coordinates": [100, 50]}, square(0, 0, 2)],
            },
            (1, 1),
        ),
    ],
)
def test_centroid_uses_the_highest_dimension_with_extent(geometry, expected):
    assert centroid(geometry) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("geometry", "message"),
    [
        ([], "JSON object"),
        ({"type": "Circle", "coordinates": [0, 0]}, "geometry.type: 'Circle'"),
        ({"type": "Point"}, "geometry.coordinates"),
        ({"type": "Point", "coordinates": [0]}, "a position"),
        ({"type": "Point", "coordinates": [0, "1"]}, r"coordinates\[1\]: '1' is not a number"),
        ({"type": "Point", "coordinates": [0, True]}, "not a number"),
        ({"type": "Point", "coordinates": [181, 0]}, "outside"),
        ({"type": "Point", "coordinates": [0, float("nan")]}, "not finite"),
        ({"type": "LineString", "coordinates": [[0, 0]]}, "at least 2"),
        ({"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 1]]]}, "end where it starts"),
        ({"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [0, 0]]]}, "at least 4"),
        ({"type": "MultiPolygon", "coordinates": []}, "at least 1"),
        ({"type": "GeometryCollection", "geometries": [{"type": "Nope"}]}, r"geometries\[0\].type"),
    ],
)
def test_invalid_geojson_is_rejected_saying_where_and_why(geometry, message):
    with pytest.raises(GeometryError, match=message):
        validate(geometry)


def test_canonical_bytes_ignore_number_type_and_key_order():
    from_json = {"type": "Point", "coordinates": [1, 2.5]}
    from_dynamodb = {"coordinates": [Decimal("1"), Decimal("2.5")], "type": "Point"}
    assert canonical_bytes(from_json) == canonical_bytes(from_dynamodb)
    assert json.loads(canonical_bytes(from_json)) == from_json


def test_content_key_is_the_sha256_of_the_bytes():
    sha256 = "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
    assert content_key(b"{}") == f"geometries/{sha256}.geojson"


@st.composite
def polygons(draw: st.DrawFn) -> dict:
    """Simple (star-shaped) polygons: vertices at increasing angles around a centre."""
    cx, cy = draw(st.floats(-170, 170)), draw(st.floats(-80, 80))
    jitters = draw(st.lists(st.floats(0, 0.9), min_size=4, max_size=12))
    angles = [2 * math.pi * (k + j) / len(jitters) for k, j in enumerate(jitters)]
    radii = draw(st.lists(st.floats(0.001, 10), min_size=len(angles), max_size=len(angles)))
    ring = [[cx + r * math.cos(a), cy + r * math.sin(a)] for a, r in zip(angles, radii, strict=True)]
    return {"type": "Polygon", "coordinates": [[*ring, ring[0]]]}


@settings(max_examples=100, deadline=None)
@given(polygons())
def test_envelope_contains_every_position_and_the_centroid(polygon):
    min_lon, min_lat, max_lon, max_lat = envelope(polygon)
    for lon, lat in polygon["coordinates"][0]:
        assert min_lon <= lon <= max_lon and min_lat <= lat <= max_lat
    lon, lat = centroid(polygon)
    slack = 1e-6 * (1 + abs(max_lon) + abs(max_lat))
    assert min_lon - slack <= lon <= max_lon + slack and min_lat - slack <= lat <= max_lat + slack
    assert math.isfinite(lon) and math.isfinite(lat)


@pytest.mark.parametrize(
    "coordinate",
    [int("1" * 401), -int("9" * 401), Decimal("1E+400"), float("inf"), float("nan")],
    ids=["401-digit int", "negative 401-digit int", "huge Decimal", "inf", "nan"],
)
def test_a_coordinate_no_double_holds_is_a_geometry_error_not_an_overflow(coordinate):
    """JSON allows integers of any length; float() of one beyond a double's range raises OverflowError."""
    with pytest.raises(GeometryError, match="not finite"):
        validate({"type": "Point", "coordinates": [coordinate, 0.0]})


def test_collections_nested_beyond_pythons_recursion_are_a_geometry_error():
    geometry = {"type": "Point", "coordinates": [0.0, 0.0]}
    for _ in range(5000):
        geometry = {"type": "GeometryCollection", "geometries": [geometry]}
    with pytest.raises(GeometryError, match="nest too deeply"):
        validate(geometry)


def test_the_fast_path_checks_what_the_full_check_does():
    """Positions of two floats take a shortcut; every other shape is checked the long way, with its place."""
    line = [[-123.0, 49.0], [-122.0, 49.5], [-121, 50], [Decimal("-120.5"), 50.5, 10]]
    validate({"type": "LineString", "coordinates": line})
    with pytest.raises(GeometryError, match=r"coordinates\[1\]: \(-122.0, 95.0\) is outside"):
        validate({"type": "LineString", "coordinates": [[-123.0, 49.0], [-122.0, 95.0]]})
    with pytest.raises(GeometryError, match=r"coordinates\[1\]\[0\]: True is not a number"):
        validate({"type": "LineString", "coordinates": [[-123.0, 49.0], [True, 9.0]]})
