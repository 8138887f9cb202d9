"""The OpenSearch side of the ops tools: a schema's versions and aliases, atomic alias moves, documents by id,
sliced paging over a point in time, and the tombstone purge's conditional deletes.

Alias plans are pure functions of the `GET <schema>-v*` answer, so a rerun after any crash recomputes
what is left to do from the cluster's state instead of remembering it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from refdata.indexnames import index_name, index_pattern, index_version, read_alias, write_alias
from refdata.queries import TIEBREAKER
from refdata.transport import OpenSearchTransport, Response, path_segment
from search.admin import JsonApi
from search.indices import read_alias_filter

PAGE_SIZE = 500


class OpsError(Exception):
    """OpenSearch refused a step or the cluster is not in a state the tool can work from."""


POINT_IN_TIME_GONE = "search_context_missing_exception"


class PointInTimeGone(OpsError):
    """A search through a point in time the engine no longer holds (past its keep-alive, or lost with its node in a
    restart or a blue/green deployment). The engine answers 404 `search_phase_execution_exception` ("all shards
    failed") whose root causes, one per shard, are `search_context_missing_exception`."""


class TransientFailure(OpsError):
    """Still throttled or unavailable after the client's own retries: nothing was given up, the step is to be
    retried later from where it stands (the workflows retry it with backoff; its name is their retry rule)."""


@dataclass(frozen=True)
class AliasState:
    """Where a schema's read and write aliases are, over its versioned indices."""

    schema: str
    versions: tuple[int, ...]
    read_holders: tuple[str, ...]
    write_holders: tuple[str, ...]
    read_filters: Mapping[str, Any]
    write_flags: Mapping[str, Any]

    @property
    def newest(self) -> str:
        if not self.versions:
            raise OpsError(f"no index matches {index_pattern(self.schema)}: run the index bootstrap first")
        return index_name(self.schema, self.versions[-1])

    @property
    def write_index(self) -> str | None:
        flagged = [name for name in self.write_holders if self.write_flags.get(name) is True]
        if flagged:
            return flagged[0]
        unflagged = [name for name in self.write_holders if self.write_flags.get(name) is not False]
        return unflagged[0] if len(self.write_holders) == 1 and unflagged else None


def alias_state(schema: str, indices_answer: Mapping[str, Any]) -> AliasState:
    """Read `GET <schema>-v*` (index name -> {"aliases": ...}); other names are ignored."""
    versions: list[int] = []
    read_holders: list[str] = []
    write_holders: list[str] = []
    read_filters: dict[str, Any] = {}
    write_flags: dict[str, Any] = {}
    reader, writer = read_alias(schema), write_alias(schema)
    for name, body in indices_answer.items():
        version = index_version(schema, name)
        if version is None:
            continue
        versions.append(version)
        aliases = body.get("aliases") or {}
        if reader in aliases:
            read_holders.append(name)
            read_filters[name] = (aliases[reader] or {}).get("filter")
        if writer in aliases:
            write_holders.append(name)
            write_flags[name] = (aliases[writer] or {}).get("is_write_index")
    return AliasState(
        schema=schema,
        versions=tuple(sorted(versions)),
        read_holders=tuple(sorted(read_holders)),
        write_holders=tuple(sorted(write_holders)),
        read_filters=read_filters,
        write_flags=write_flags,
    )


def write_alias_done(state: AliasState, target: str) -> bool:
    return state.write_holders == (target,) and state.write_flags.get(target) is True


def read_alias_done(state: AliasState, target: str) -> bool:
    return state.read_holders == (target,) and state.read_filters.get(target) == read_alias_filter()


def move_write_alias(state: AliasState, target: str) -> list[dict[str, Any]]:
    """The one `POST _aliases` body's actions that leave the write alias on `target` only ([] if done)."""
    if write_alias_done(state, target):
        return []
    alias = write_alias(state.schema)
    actions: list[dict[str, Any]] = [
        {"remove": {"index": holder, "alias": alias}} for holder in state.write_holders if holder != target
    ]
    actions.append({"add": {"index": target, "alias": alias, "is_write_index": True}})
    return actions


def swap_read_alias(state: AliasState, target: str) -> list[dict[str, Any]]:
    """The actions that leave the read alias, with the tombstone filter, on `target` only ([] if done)."""
    if read_alias_done(state, target):
        return []
    alias = read_alias(state.schema)
    actions: list[dict[str, Any]] = [
        {"remove": {"index": holder, "alias": alias}} for holder in state.read_holders if holder != target
    ]
    actions.append({"add": {"index": target, "alias": alias, "filter": read_alias_filter()}})
    return actions


@dataclass(frozen=True)
class Hit:
    doc_id: str
    source: Mapping[str, Any]
    sort: Sequence[Any] | None = None
    seq_no: int | None = None
    primary_term: int | None = None


class IndexClient:
    """The few OpenSearch calls the tools make, with a short bounded retry on throttling/unavailability."""

    def __init__(
        self,
        transport: OpenSearchTransport,
        *,
        max_attempts: int = 4,
        backoff_seconds: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._transport = transport
        self._api = JsonApi(
            transport,
            error=OpsError,
            transient=TransientFailure,
            max_attempts=max_attempts,
            backoff_seconds=backoff_seconds,
            sleep=sleep,
        )

    def close(self) -> None:
        self._transport.close()

    def alias_state(self, schema: str) -> AliasState:
        return alias_state(schema, self._api.send("GET", index_pattern(schema)).json())

    def update_aliases(self, actions: Sequence[Mapping[str, Any]]) -> None:
        """One atomic `POST _aliases`: every action applies, or none does."""
        self._api.send("POST", "_aliases", {"actions": list(actions)})

    def refresh(self, index: str) -> None:
        """Make every write to `index` so far visible to searches and counts (the engine refreshes on its own only
        every `index.refresh_interval`, a second by default)."""
        self._api.send("POST", f"{path_segment(index)}/_refresh")

    def live_count(self, index: str) -> int:
        """Documents in `index` that readers would see (tombstones excluded)."""
        return self.count(index, read_alias_filter())

    def count(self, index: str, query: Mapping[str, Any]) -> int:
        answer = self._api.send("POST", f"{path_segment(index)}/_count", {"query": query}).json()
        return int(answer["count"])

    def indices(self, pattern: str) -> list[str]:
        """The concrete indices matching `pattern`, sorted."""
        return sorted(self._api.send("GET", pattern).json())

    def get_documents(self, index: str, ids: Sequence[str]) -> dict[str, Mapping[str, Any] | None]:
        """`_source` of each id in `index` (through an alias: its one index), None where there is none."""
        if not ids:
            return {}
        response = self._api.send("POST", f"{path_segment(index)}/_mget", {"ids": list(ids)})
        docs = json.loads(response.body)["docs"]  # numbers as the engine holds them
        return {doc["_id"]: doc.get("_source") if doc.get("found") else None for doc in docs}

    def open_point_in_time(self, index: str, keep_alive: str) -> str:
        path = f"{path_segment(index)}/_search/point_in_time?keep_alive={keep_alive}"
        return str(self._api.send("POST", path).json()["pit_id"])

    def close_point_in_time(self, pit_id: str) -> None:
        """Release it early (it expires by itself after its keep-alive anyway); a PIT already gone is fine."""
        self._api.send("DELETE", "_search/point_in_time", {"pit_id": [pit_id]})

    def point_in_time_page(
        self,
        pit_id: str,
        *,
        keep_alive: str,
        query: Mapping[str, Any],
        after: Sequence[Any] | None,
        part: int,
        parts: int,
        page_size: int = PAGE_SIZE,
    ) -> list[Hit]:
        """One page of slice `part` of `parts` over a point in time, in (pk, sk) order after `after`."""
        body: dict[str, Any] = {
            "pit": {"id": pit_id, "keep_alive": keep_alive},
            "size": page_size,
            "sort": list(TIEBREAKER),
            "query": query,
        }
        if parts > 1:  # the engine refuses a slice of one
            body["slice"] = {"id": part, "max": parts}
        if after is not None:
            body["search_after"] = list(after)
        response = self._api.request("POST", "_search", body)
        if response.status == 404 and _root_cause_types(response) == {POINT_IN_TIME_GONE}:
            raise PointInTimeGone(f"POST _search failed: {response.error_reason()}")
        hits = json.loads(self._api.checked("POST", "_search", response).body)["hits"]["hits"]
        return [Hit(hit["_id"], hit["_source"], hit.get("sort")) for hit in hits]

    def search_page(
        self,
        index: str,
        *,
        query: Mapping[str, Any],
        after: Sequence[Any] | None,
        page_size: int = PAGE_SIZE,
    ) -> list[Hit]:
        """One page of `index` in (pk, sk) order after `after`, each hit with its sequence number and term."""
        body: dict[str, Any] = {
            "size": page_size,
            "sort": list(TIEBREAKER),
            "query": query,
            "seq_no_primary_term": True,
        }
        if after is not None:
            body["search_after"] = list(after)
        hits = json.loads(self._api.send("POST", f"{path_segment(index)}/_search", body).body)["hits"]["hits"]
        return [
            Hit(hit["_id"], hit["_source"], hit.get("sort"), hit.get("_seq_no"), hit.get("_primary_term"))
            for hit in hits
        ]

    def delete_unchanged(self, index: str, hits: Sequence[Hit]) -> list[Mapping[str, Any]]:
        """One `_bulk` of deletes, each only if the document is still the one read (`if_seq_no` and
        `if_primary_term` of the hit): a document changed since answers 409 and stays. The items, in order."""
        lines = "".join(
            json.dumps(
                {
                    "delete": {
                        "_index": index,
                        "_id": hit.doc_id,
                        "if_seq_no": hit.seq_no,
                        "if_primary_term": hit.primary_term,
                    }
                },
                separators=(",", ":"),
            )
            + "\n"
            for hit in hits
        )
        items = self._api.bulk(lines).json()["items"]
        return [item["delete"] for item in items]


def _root_cause_types(response: Response) -> set[str]:
    """The `type` of each root cause of an error answer (empty when it has none)."""
    try:
        error = json.loads(response.body).get("error")
    except (ValueError, AttributeError):
        return set()
    causes = error.get("root_cause") if isinstance(error, dict) else None
    return {str(cause.get("type")) for cause in causes or [] if isinstance(cause, dict)}
