"""GeoJSON shapes for search tests."""

from __future__ import annotations

import math
from typing import Any


def point(lon: float, lat: float) -> dict[str, Any]:
    return {"type": "Point", "coordinates": [lon, lat]}


def square(west: float, south: float, size: float) -> dict[str, Any]:
    """A GeoJSON polygon: the square of side `size` degrees whose south-west corner is (west, south)."""
    ring = [
        [west, south],
        [west + size, south],
        [west + size, south + size],
        [west, south + size],
        [west, south],
    ]
    return {"type": "Polygon", "coordinates": [ring]}


def circle(vertices: int, lon: float = -123.3, lat: float = 48.4) -> dict[str, Any]:
    """A GeoJSON polygon of `vertices` corners on the circle of radius half a degree around (lon, lat)."""
    angles = [2 * math.pi * k / vertices for k in range(vertices)]
    ring = [[lon + 0.5 * math.cos(angle), lat + 0.5 * math.sin(angle)] for angle in angles]
    return {"type": "Polygon", "coordinates": [[*ring, ring[0]]]}
