"""Write DynamoDB item states into a schema's write alias through the stream sync's own batch path.

Every write is a synthetic stream record built by the DLQ redrive (`current_state_record`) and applied by
`stream_sync.sync.process_batch`, so the documents, geometry dereferencing, bulk chunking, retries and the
ordering script are exactly the sync's. Only the sequence number differs:

- `BACKFILL_SEQ` (forty zeros) for a document that may not exist: any real stream change is greater, so
  it wins whichever arrives first, and an existing document is never touched (the script answers noop);
- `repair_seq(stored)` = the stored `stream_seq` + "r" to overwrite a document known to be wrong. In
  keyword (string) order `<q>r` sorts after `q` and before every 40-digit sequence number greater than `q`,
  so a repair beats the state it was computed against and never a genuinely newer stream change.

The sync's record parser keeps a repair suffix after the padded digits (`search.documents.padded_sequence`),
so a repair is an ordinary synthetic record whose SequenceNumber is the repair label.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from refdata.keys import document_id
from search import documents
from search.indices import STREAM_SEQ_WIDTH
from stream_sync.config import Settings
from stream_sync.redrive import current_state_record
from stream_sync.sync import Fate, Ports, process_batch

BACKFILL_SEQ: Final = "0" * STREAM_SEQ_WIDTH
REPAIR_SUFFIX: Final = documents.REPAIR_SUFFIX
# What the index may hold: a padded stream sequence number, possibly already repaired (suffixed) before.
STORED_SEQ: Final = re.compile(rf"[0-9]{{{STREAM_SEQ_WIDTH}}}{REPAIR_SUFFIX}*")
APPLIED: Final = frozenset({Fate.INDEXED, Fate.DELETED})
UNCHANGED: Final = frozenset({Fate.STALE_SKIPPED})

Item = dict[str, Any]  # DynamoDB JSON, as the low-level client returns it


def repair_seq(stored_seq: str) -> str:
    """The sequence number that overwrites a document stored with `stored_seq`, and nothing newer."""
    if not STORED_SEQ.fullmatch(stored_seq):
        raise ValueError(f"not a stored stream_seq: {stored_seq!r:.60}")
    return stored_seq + REPAIR_SUFFIX


@dataclass(frozen=True)
class Write:
    """Put `item`'s state (a tombstone when None) at `keys` with sequence number `seq`."""

    keys: Item
    item: Item | None
    seq: str = BACKFILL_SEQ

    @property
    def doc_id(self) -> str:
        return document_id(self.keys["pk"]["S"], self.keys["sk"]["S"])


@dataclass(frozen=True)
class WriteResult:
    doc_id: str
    fate: Fate
    reason: str | None = None


def apply_writes(writes: Sequence[Write], *, settings: Settings, ports: Ports) -> list[WriteResult]:
    """Apply every write (one per document) and report each one's fate.

    Fates: indexed/deleted (applied), stale-skipped (the index already held this or a newer change),
    rejected (permanent: the sync would dead-letter it), retry (transient failures outlasted the retries).
    """
    if not writes:
        return []
    if len({write.doc_id for write in writes}) != len(writes):
        raise ValueError("one write per document: the sync's batch path would coalesce the others")
    records = []
    read_at = ports.now()  # the states were read just before: a tombstone's deletedAt is never earlier
    for write in writes:
        if write.seq != BACKFILL_SEQ and not (
            write.seq.endswith(REPAIR_SUFFIX) and STORED_SEQ.fullmatch(write.seq)
        ):
            raise ValueError(f"a write's seq is forty zeros or a repair_seq, not {write.seq!r:.60}")
        records.append(current_state_record(write.keys, write.seq, write.item, read_at))
    result = process_batch(
        records, settings=settings, ports=ports, remaining_seconds=lambda: 900.0, dead_letter=False
    )
    return [
        WriteResult(write.doc_id, outcome.fate or Fate.RETRY, outcome.reason)
        for write, outcome in zip(writes, result.outcomes, strict=True)
    ]
