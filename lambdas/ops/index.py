"""The OpenSearch side of the ops tools: a schema's versions and aliases, atomic alias moves, paging.

Alias plans are pure functions of the `GET <schema>-v*` answer, so a rerun after any crash recomputes
what is left to do from the cluster's state instead of remembering it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from search.admin import JsonApi
from search.indices import (
    index_name,
    index_pattern,
    index_version,
    read_alias,
    read_alias_filter,
    write_alias,
)
from search.transport import OpenSearchTransport, path_segment

PAGE_SIZE = 500
# pk and sk are keyword fields and `<pk>#<sk>` is the document id, so (pk, sk) orders documents totally.
DOCUMENT_ORDER: tuple[dict[str, str], ...] = ({"pk": "asc"}, {"sk": "asc"})


class OpsError(Exception):
    """OpenSearch refused a step or the cluster is not in a state the tool can work from."""


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
        self._api = JsonApi(
            transport, error=OpsError, max_attempts=max_attempts, backoff_seconds=backoff_seconds, sleep=sleep
        )

    def alias_state(self, schema: str) -> AliasState:
        return alias_state(schema, self._api.send("GET", index_pattern(schema)).json())

    def update_aliases(self, actions: Sequence[Mapping[str, Any]]) -> None:
        """One atomic `POST _aliases`: every action applies, or none does."""
        self._api.send("POST", "_aliases", {"actions": list(actions)})

    def live_count(self, index: str) -> int:
        """Documents in `index` that readers would see (tombstones excluded)."""
        answer = self._api.send(
            "POST", f"{path_segment(index)}/_count", {"query": read_alias_filter()}
        ).json()
        return int(answer["count"])

    def documents(self, index: str, *, page_size: int = PAGE_SIZE) -> Iterator[Hit]:
        """Every document of `index`, tombstones included, in (pk, sk) order, page by page (`search_after`).

        Without a point-in-time the pages are not one snapshot: a document written while paging may or may
        not be seen. Callers re-check each difference before acting on it.
        """
        body: dict[str, Any] = {"size": page_size, "sort": list(DOCUMENT_ORDER), "query": {"match_all": {}}}
        while True:
            response = self._api.send("POST", f"{path_segment(index)}/_search", body)
            # Parsed as the engine holds numbers (fractions are doubles; exact decimals are in exactNumbers).
            hits = json.loads(response.body)["hits"]["hits"]
            for hit in hits:
                yield Hit(hit["_id"], hit["_source"])
            if len(hits) < page_size:
                return
            body["search_after"] = hits[-1]["sort"]
