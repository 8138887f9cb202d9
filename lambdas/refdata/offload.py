"""Write items that carry a GeoJSON geometry, offloading the geometry to S3 when the item is too big.

Every item with a `geometry` gets `bbox` ([minLon, minLat, maxLon, maxLat]) and `location`
({"lat", "lon"} centroid, an OpenSearch geo_point). When the item would exceed `threshold` bytes, the
geometry's canonical bytes go to `s3://<bucket>/geometries/<sha256>.geojson` and the item keeps that URL
in `geometryUrl` instead of `geometry`. Everything that can fail is checked before the upload, so an
invalid geometry or an item that is still too large leaves neither an item nor an object behind.
Objects are never deleted here: the same content may back other items.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from refdata.exceptions import ArgumentError
from refdata.geometry import GeometryError, canonical_bytes, centroid, content_key, envelope
from refdata.globalid import create_item, replace_item
from refdata.item_size import MAX_ITEM_BYTES, check_item, item_size

GEOMETRY = "geometry"
GEOMETRY_URL = "geometryUrl"
BBOX = "bbox"
LOCATION = "location"


def _dynamo(value: Any) -> Any:
    """Floats as Decimal (their shortest repr), which is what the boto3 resource API stores."""
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, Mapping):
        return {k: _dynamo(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_dynamo(v) for v in value]
    return value


def geometry_url(bucket: str, data: bytes) -> str:
    return f"s3://{bucket}/{content_key(data)}"


def plan_item(bucket: str, item: Mapping[str, Any], *, threshold: int) -> tuple[dict[str, Any], bytes | None]:
    """The item to store and the geometry bytes to upload first (None when it stays inline), with no I/O: derived
    bbox and location added; the geometry replaced by its URL when the inline item would be larger than `threshold`
    bytes. Everything that can fail is checked here. Items without geometry pass as they are."""
    if not 0 < threshold < MAX_ITEM_BYTES:
        raise ArgumentError(f"threshold must be between 1 and {MAX_ITEM_BYTES - 1} bytes, got {threshold}")
    if GEOMETRY not in item:
        return dict(item), None
    geometry = item[GEOMETRY]
    min_lon, min_lat, max_lon, max_lat = envelope(geometry)
    lon, lat = centroid(geometry)
    derived = {BBOX: [min_lon, min_lat, max_lon, max_lat], LOCATION: {"lat": lat, "lon": lon}}
    base = {k: v for k, v in item.items() if k not in (GEOMETRY, GEOMETRY_URL)}
    inline = {**base, **_dynamo({**derived, GEOMETRY: geometry})}
    if item_size(inline) <= threshold:
        check_item(inline)
        return inline, None
    data = canonical_bytes(geometry)
    offloaded = {**base, **_dynamo(derived), GEOMETRY_URL: geometry_url(bucket, data)}
    check_item(offloaded)
    return offloaded, data


def upload(s3: Any, bucket: str, data: bytes) -> None:
    """Put a geometry's canonical bytes at their content address (`plan_item`'s URL)."""
    s3.put_object(
        Bucket=bucket,
        Key=content_key(data),
        Body=data,
        ContentType="application/geo+json",
        ChecksumSHA256=base64.b64encode(hashlib.sha256(data).digest()).decode("ascii"),
    )


def prepare_item(s3: Any, bucket: str, item: Mapping[str, Any], *, threshold: int) -> dict[str, Any]:
    """The item to store (`plan_item`), its geometry uploaded when it is offloaded."""
    planned, data = plan_item(bucket, item, threshold=threshold)
    if data is not None:
        upload(s3, bucket, data)
    return planned


def write_item(
    table: Any, s3: Any, bucket: str, item: Mapping[str, Any], *, threshold: int, create: bool = True
) -> dict[str, Any]:
    """Prepare the item (see `prepare_item`), then create it (never overwriting) or replace it whole."""
    prepared = prepare_item(s3, bucket, item, threshold=threshold)
    return create_item(table, prepared) if create else replace_item(table, prepared)


def fetch_geometry(s3: Any, url: str) -> bytes:
    """The bytes behind a `geometryUrl`, checked against the SHA-256 in its key."""
    bucket, _, key = url.removeprefix("s3://").partition("/")
    if not url.startswith("s3://") or not bucket or not key:
        raise GeometryError(f"geometryUrl {url!r} is not s3://<bucket>/<key>")
    data: bytes = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    if content_key(data) != key:
        raise GeometryError(f"object {url!r} does not match the SHA-256 in its key")
    return data


def load_geometry(s3: Any, item: Mapping[str, Any]) -> Any:
    """The item's geometry, inline or fetched from S3; None when it has none."""
    if GEOMETRY_URL in item:
        return json.loads(fetch_geometry(s3, item[GEOMETRY_URL]))
    return item.get(GEOMETRY)
