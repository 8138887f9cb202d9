"""Tombstone purge: delete tombstones no late change can reach any more, without ever deleting a newer document.

A REMOVE leaves a tombstone so that a stale change arriving later is refused (docs/sync.md, "Ordering
guarantee"). Changes older than a deletion can still arrive for a while: a stream record lives 24 hours, the
event source mapping retries a record up to its maximum age, and the dead-letter queue keeps a record 14 days
for the redrive. A tombstone whose `deletedAt` is older than the sum of the three (`minimum_age_seconds`) has
outlived every one of them, so it can go.

Each part is one concrete index (`<schema>-v<N>`, every version of every indexable schema). A page is a search
for `tombstone: true AND deletedAt < bound`, sorted on (pk, sk) and read with each hit's sequence number and
primary term, then one `_bulk` of deletes that each apply only to the document as it was read (`if_seq_no`,
`if_primary_term`): a tombstone that a newer change replaced in between answers 409 and stays (`superseded`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from refdata.indexnames import index_pattern
from refdata.mappings import DELETED_AT_FIELD
from refdata.registry import indexable_schemas
from stream_sync.sync import Ports

from ops.index import Hit, OpsError, TransientFailure
from ops.runs import Merged, PartState, Run
from ops.workflow import DONE, FAILED, WORK_LEFT, Env

STREAM_RETENTION_SECONDS: Final = 24 * 3600
DLQ_RETENTION_SECONDS: Final = (
    14 * 24 * 3600
)  # infra/constructs/dead_letter_queue.py keeps messages this long
PAGE_SIZE: Final = 500
_TRANSIENT_STATUSES: Final = frozenset({429, 502, 503, 504})


def minimum_age_seconds(max_record_age_seconds: int) -> int:
    """How old a tombstone must be before it may go: stream retention + the event source mapping's maximum record
    age + the dead-letter queue's retention."""
    return STREAM_RETENTION_SECONDS + max_record_age_seconds + DLQ_RETENTION_SECONDS


def purge_query(bound: int) -> dict[str, Any]:
    return {
        "bool": {
            "filter": [
                {"term": {"tombstone": True}},
                {"range": {DELETED_AT_FIELD: {"lt": bound}}},
            ]
        }
    }


def purgeable(hit: Hit, bound: int) -> bool:
    """The query's condition checked again on what came back: only a tombstone deleted before `bound`."""
    deleted_at = hit.source.get(DELETED_AT_FIELD)
    return (
        hit.source.get("tombstone") is True
        and isinstance(deleted_at, int | float)
        and not isinstance(deleted_at, bool)
        and deleted_at < bound
        and hit.seq_no is not None
        and hit.primary_term is not None
    )


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Purge:
    name = "purge"

    def __init__(self, page_size: int = PAGE_SIZE) -> None:
        self.page_size = page_size

    def prepare(self, env: Env, run: Run, request: Mapping[str, Any]) -> dict[str, Any]:
        if env.tombstone_min_age_seconds < minimum_age_seconds(0):
            raise OpsError(
                f"a tombstone minimum age of {env.tombstone_min_age_seconds} s is below the stream and "
                "dead-letter retention alone"
            )
        bound = int(env.now()) - env.tombstone_min_age_seconds
        indices = [
            name for schema in indexable_schemas() for name in env.client.indices(index_pattern(schema.name))
        ]
        record = {
            "operation": self.name,
            "runId": run.run_id,
            "dryRun": bool(request.get("dryRun", False)),
            "bound": bound,
            "minimumAgeSeconds": env.tombstone_min_age_seconds,
            "startedAt": env.now(),
            "source": "none",
            "indices": indices,
            "expectedItems": sum(env.client.count(name, purge_query(bound)) for name in indices),
            "parts": [{"kind": "index", "name": name} for name in indices],
        }
        run.save_record(record)
        return record

    def pages(self, env: Env, run: dict[str, Any], state: PartState) -> Iterator[tuple[Any, Any]]:
        after = state.cursor
        while True:
            hits = env.client.search_page(
                state.part["name"], query=purge_query(run["bound"]), after=after, page_size=self.page_size
            )
            if not hits:
                return
            after = list(hits[-1].sort or [])
            yield hits, after

    def process(
        self, env: Env, run: dict[str, Any], state: PartState, page: Sequence[Hit], ports: Ports
    ) -> None:
        eligible = [hit for hit in page if purgeable(hit, run["bound"])]
        if run["dryRun"] or not eligible:
            state.items += len(page)
            state.counts["purge:found"] += len(eligible)
            return
        answers = env.client.delete_unchanged(state.part["name"], eligible)
        transient = [answer for answer in answers if answer.get("status") in _TRANSIENT_STATUSES]
        if transient:
            raise TransientFailure(
                f"{len(transient)} deletes throttled or unavailable: {transient[0].get('error')}"
            )
        state.items += len(page)
        state.counts["purge:found"] += len(eligible)
        for hit, answer in zip(eligible, answers, strict=True):
            status = int(answer.get("status", 0))
            if status == 200:
                state.counts["purge:deleted"] += 1
            elif status in (404, 409):  # gone already, or replaced by a newer change since it was read
                state.counts["purge:superseded"] += 1
            else:
                state.fail(
                    {"documentId": hit.doc_id, "fate": "failed", "reason": str(answer.get("error"))[:300]}
                )

    def finish(self, env: Env, run: dict[str, Any], merged: Merged, error: str | None) -> dict[str, Any]:
        counts = merged.section("purge")
        bound = run.get("bound")
        summary: dict[str, Any] = {
            "command": self.name,
            "dryRun": run.get("dryRun", False),
            "bound": None if bound is None else _iso(bound),
            "boundEpochSeconds": bound,
            "minimumAgeSeconds": run.get("minimumAgeSeconds"),
            "indices": run.get("indices", []),
            "found": counts.get("found", 0),
            "deleted": counts.get("deleted", 0),
            "superseded": counts.get("superseded", 0),
            "failed": merged.failures,
            "failedCount": merged.failure_count,
            "errors": merged.errors,
        }
        if error or bound is None:
            return summary | {"status": FAILED}
        return summary | {"status": DONE if merged.finished and not merged.failure_count else WORK_LEFT}
