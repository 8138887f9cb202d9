"""How a reindex or reconcile run reads the table: a parallel scan, or a DynamoDB export (docs/operations.md,
"Scan or export").

`choose_source` decides at prepare time. The scan gives one part per segment (`segments` of them, run
`max_concurrency` at a time); the export gives one part per data file, which the workflow's distributed map
runs once the export is complete (`export_ready` records it). `table_pages` reads one part's pages.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Literal

from refdata.registry import REGISTRY

from ops.index import OpsError
from ops.table import ReadPacer, TablePage, export_pages, scan_pages
from ops.workflow import Env

Source = Literal["scan", "export"]
SOURCES = ("auto", "scan", "export")
DAY_SECONDS = 86400


def choose_source(env: Env, schema: str, requested: str) -> dict[str, Any]:
    """What prepare records about reading the table that holds `schema`: `source`, the scan's `parts`,
    `expectedItems` (the table's approximate item count, which DynamoDB refreshes about every six hours),
    `tableBytes`, and `tableArn` (the table an export reads)."""
    if requested not in SOURCES:
        raise OpsError(f"source must be one of {', '.join(SOURCES)}, not {requested!r}")
    table = env.dynamodb.describe_table(TableName=env.table_for(schema))["Table"]
    size = int(table.get("TableSizeBytes", 0))
    source: Source
    if requested == "auto":
        above = env.export_above_bytes
        source = "export" if above is not None and size > above else "scan"
    else:
        source = "scan" if requested == "scan" else "export"
    if source == "export" and env.export_above_bytes is None:
        raise OpsError("this run cannot start a DynamoDB export (only a deployed run can): use the scan")
    parts = (
        [{"kind": "segment", "number": n, "of": env.segments} for n in range(env.segments)]
        if source == "scan"
        else []
    )
    return {
        "source": source,
        "tableParts": parts,
        "expectedItems": int(table.get("ItemCount", 0)),
        "tableBytes": size,
        "tableArn": table["TableArn"],
    }


def table_pages(
    env: Env, record: Mapping[str, Any], part: Mapping[str, Any], cursor: Any
) -> Iterator[TablePage]:
    """The pages of one table part (a scan segment or an export data file) from `cursor` on."""
    schema = REGISTRY[record["schema"]]
    if part["kind"] == "segment":
        pacer = ReadPacer(env.read_units_per_second) if env.read_units_per_second else None
        return scan_pages(
            env.dynamodb,
            env.table_for(schema.name),
            schema,
            segment=int(part["number"]),
            total_segments=int(part["of"]),
            start_key=cursor,
            page_items=env.scan_page_items,
            pacer=pacer,
        )
    if part["kind"] == "file":
        snapshot_age_check(env, record)
        body = env.s3.get_object(Bucket=env.bucket, Key=part["key"])["Body"]
        return export_pages(body, schema, skip_lines=int(cursor or 0))
    raise OpsError(f"not a table part: {dict(part)!r:.200}")


def snapshot_age_check(env: Env, record: Mapping[str, Any]) -> None:
    """Refuse to write from an export older than the tombstone purge's bound (less a day): by then a purge may
    have removed the tombstone of an item the snapshot still holds, and writing the snapshot's copy would bring
    the deleted item back. Such a run is started again (a fresh export)."""
    snapshot = record.get("snapshotTime")
    limit = env.tombstone_min_age_seconds - DAY_SECONDS
    if snapshot is None or env.tombstone_min_age_seconds <= 0:
        return
    age = env.now() - float(snapshot)
    if age > limit:
        raise OpsError(
            f"the export is {age / DAY_SECONDS:.1f} days old, over the {limit / DAY_SECONDS:.1f} days a snapshot may "
            "be written from (tombstones older than the purge bound may be gone): start a new run"
        )


def export_ready(
    record: dict[str, Any], description: Mapping[str, Any], manifest: Mapping[str, Any], files: int
) -> str:
    """Record a completed export (its DescribeExport `ExportDescription`, the `manifest-summary.json` it wrote and
    the number of data files its `manifest-files.json` lists): the snapshot time, the item count progress is
    measured against, the parts to expect. Returns the key of `manifest-files.json`, whose lines the distributed
    map runs as parts."""
    record["exportArn"] = description["ExportArn"]
    record["partCount"] = len(record.get("parts", [])) + files
    record["snapshotTime"] = _epoch(description.get("ExportTime") or manifest.get("exportTime"))
    record["expectedItems"] = int(manifest.get("itemCount", description.get("ItemCount", 0)))
    key = str(manifest["manifestFilesS3Key"])
    record["manifestFilesKey"] = key
    return key


def _epoch(value: Any) -> float:
    """An export time as Step Functions passes it (epoch seconds, or an ISO 8601 string from the manifest)."""
    if isinstance(value, int | float):
        return float(value)
    from datetime import datetime

    return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
