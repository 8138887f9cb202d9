import json
from decimal import Decimal

import pytest
from refdata.geometry import GeometryError, canonical_bytes, content_key
from refdata.item_size import ItemSizeError, item_size
from refdata.offload import fetch_geometry, load_geometry, prepare_item, write_item

from tests.support.shapes import circle

pytestmark = pytest.mark.integration

THRESHOLD = 50_000


def zone(geometry, sk="0000000001", **attributes):
    return {"pk": "geozone::bcparks_1", "sk": sk, "name": "Zone", "geometry": geometry, **attributes}


def objects(s3, bucket):
    return [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]


def test_small_geometry_stays_inline_with_envelope_and_centroid(table, s3, bucket):
    stored = write_item(table, s3, bucket, zone(circle(8)), threshold=THRESHOLD)
    item = table.get_item(Key={"pk": stored["pk"], "sk": stored["sk"]})["Item"]
    assert "geometryUrl" not in item
    assert item["geometry"]["type"] == "Polygon"
    assert [float(v) for v in item["bbox"]] == pytest.approx([-123.8, 47.9, -122.8, 48.9])
    assert float(item["location"]["lon"]) == pytest.approx(-123.3)
    assert float(item["location"]["lat"]) == pytest.approx(48.4)
    assert objects(s3, bucket) == []


def test_large_geometry_round_trips_through_s3_byte_equal(table, s3, bucket):
    geometry = circle(3000)
    assert item_size(json.loads(json.dumps(zone(geometry)), parse_float=Decimal)) > THRESHOLD
    write_item(table, s3, bucket, zone(geometry), threshold=THRESHOLD)

    item = table.get_item(Key={"pk": "geozone::bcparks_1", "sk": "0000000001"})["Item"]
    assert "geometry" not in item
    expected = canonical_bytes(geometry)
    assert item["geometryUrl"] == f"s3://{bucket}/{content_key(expected)}"
    assert fetch_geometry(s3, item["geometryUrl"]) == expected
    assert load_geometry(s3, item) == geometry
    assert float(item["bbox"][0]) == pytest.approx(-123.8)
    assert float(item["location"]["lat"]) == pytest.approx(48.4)


def test_identical_geometry_is_stored_once(table, s3, bucket):
    write_item(table, s3, bucket, zone(circle(3000), sk="0000000001"), threshold=THRESHOLD)
    write_item(table, s3, bucket, zone(circle(3000), sk="0000000002"), threshold=THRESHOLD)
    assert len(objects(s3, bucket)) == 1


def test_replacing_an_offloaded_item_with_a_small_geometry_drops_the_url(table, s3, bucket):
    write_item(table, s3, bucket, zone(circle(3000)), threshold=THRESHOLD)
    stored = table.get_item(Key={"pk": "geozone::bcparks_1", "sk": "0000000001"})["Item"]
    write_item(table, s3, bucket, {**stored, "geometry": circle(8)}, threshold=THRESHOLD, create=False)
    item = table.get_item(Key={"pk": "geozone::bcparks_1", "sk": "0000000001"})["Item"]
    assert "geometryUrl" not in item and item["geometry"]["type"] == "Polygon"


def test_invalid_geojson_writes_neither_item_nor_object(table, s3, bucket):
    broken = circle(3000)
    broken["coordinates"][0][-1] = [0, 0]
    with pytest.raises(GeometryError, match="end where it starts"):
        write_item(table, s3, bucket, zone(broken), threshold=THRESHOLD)
    assert table.scan()["Items"] == []
    assert objects(s3, bucket) == []


def test_item_too_large_even_without_geometry_uploads_nothing(table, s3, bucket):
    with pytest.raises(ItemSizeError, match="400 KB"):
        write_item(table, s3, bucket, zone(circle(3000), notes="x" * 420_000), threshold=THRESHOLD)
    assert table.scan()["Items"] == []
    assert objects(s3, bucket) == []


def test_items_without_geometry_pass_unchanged(s3, bucket):
    item = {"pk": "geozone::c", "sk": "0000000001", "name": "n"}
    assert prepare_item(s3, bucket, item, threshold=THRESHOLD) == item


@pytest.mark.parametrize("threshold", [0, 400 * 1024])
def test_threshold_must_be_below_the_item_limit(s3, bucket, threshold):
    with pytest.raises(ValueError, match="threshold"):
        prepare_item(s3, bucket, zone(circle(8)), threshold=threshold)


def test_tampered_object_is_detected(s3, bucket):
    key = content_key(b"{}")
    s3.put_object(Bucket=bucket, Key=key, Body=b"[]")
    with pytest.raises(GeometryError, match="SHA-256"):
        fetch_geometry(s3, f"s3://{bucket}/{key}")


@pytest.mark.parametrize("url", ["http://x/y", "s3://bucket", "s3:///key"])
def test_malformed_urls_are_rejected(s3, bucket, url):
    with pytest.raises(GeometryError, match="geometryUrl"):
        fetch_geometry(s3, url)
