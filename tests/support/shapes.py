"""GeoJSON shapes for search tests."""

from __future__ import annotations

from typing import Any


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
