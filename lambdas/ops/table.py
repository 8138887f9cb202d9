"""The DynamoDB side of the ops tools: a schema's items from one segment of a parallel scan or from one data file
of a DynamoDB export, page by page, each page with the cursor that resumes after it.

Both read the whole table (DynamoDB has no per-schema read path) and keep the schema's items: those whose pk
starts with `<schema>::` (the separator is part of the prefix, so a schema whose name starts with another's never
matches it). A scan page is strongly consistent and can be empty while the scan goes on.
"""

from __future__ import annotations

import gzip
import io
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from refdata.registry import Schema

Item = dict[str, Any]  # DynamoDB JSON, as the low-level client returns it (and an export writes it)
EXPORT_PAGE_LINES = 1000  # export lines per page: a page is one batch of writes and one saved cursor


@dataclass
class ReadPacer:
    """Keeps a scan's consumed read capacity under `units_per_second` on average, so a repair never starves
    the table's own readers: after each page it sleeps until the units spent so far fit the budget."""

    units_per_second: float
    now: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    _started: float | None = field(default=None, init=False)
    _spent: float = field(default=0.0, init=False)

    def spend(self, units: float) -> None:
        if self._started is None:
            self._started = self.now()
        self._spent += units
        ahead = self._spent / self.units_per_second - (self.now() - self._started)
        if ahead > 0:
            self.sleep(ahead)


@dataclass(frozen=True)
class TablePage:
    """The schema's items of one page, how many items were read to find them, and where to resume after it."""

    items: list[Item]
    read: int
    cursor: Any


def scan_pages(
    dynamodb: Any,
    table: str,
    schema: Schema,
    *,
    segment: int = 0,
    total_segments: int = 1,
    start_key: Item | None = None,
    page_items: int | None = None,
    pacer: ReadPacer | None = None,
) -> Iterator[TablePage]:
    """Segment `segment` of `total_segments` of a consistent parallel scan, filtered on the schema's pk prefix;
    a page's cursor is the key to resume after it (None after the last page). `start_key` resumes a segment."""
    request: dict[str, Any] = {
        "TableName": table,
        "ConsistentRead": True,
        "FilterExpression": "begins_with(#pk, :prefix)",
        "ExpressionAttributeNames": {"#pk": "pk"},
        "ExpressionAttributeValues": {":prefix": {"S": schema.pk_prefix}},
        "ReturnConsumedCapacity": "TOTAL",
    }
    if total_segments > 1:
        request |= {"Segment": segment, "TotalSegments": total_segments}
    if page_items is not None:
        request["Limit"] = page_items
    if start_key is not None:
        request["ExclusiveStartKey"] = start_key
    while True:
        page = dynamodb.scan(**request)
        if pacer is not None:
            pacer.spend(float(page.get("ConsumedCapacity", {}).get("CapacityUnits", 0.0)))
        last_key = page.get("LastEvaluatedKey")
        yield TablePage(page.get("Items", []), int(page.get("ScannedCount", 0)), last_key)
        if last_key is None:
            return
        request["ExclusiveStartKey"] = last_key


def export_pages(
    body: io.RawIOBase | Any, schema: Schema, *, skip_lines: int = 0, page_lines: int = EXPORT_PAGE_LINES
) -> Iterator[TablePage]:
    """The schema's items of one gzip data file of a DynamoDB export (DYNAMODB_JSON: one `{"Item": {...}}` per
    line), read as a stream; a page's cursor is the number of lines consumed. `skip_lines` resumes there."""
    prefix = schema.pk_prefix
    consumed = 0
    page: list[Item] = []
    start = skip_lines
    with gzip.GzipFile(fileobj=body, mode="rb") as lines:
        for line in lines:
            consumed += 1
            if consumed <= skip_lines or not line.strip():
                continue
            item = json.loads(line)["Item"]
            if item["pk"]["S"].startswith(prefix):
                page.append(item)
            if consumed % page_lines == 0:
                yield TablePage(page, consumed - start, consumed)
                page, start = [], consumed
    if consumed > start:
        yield TablePage(page, consumed - start, consumed)


def keys_of(item: Item) -> Item:
    return {"pk": item["pk"], "sk": item["sk"]}
