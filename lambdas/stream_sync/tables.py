"""Which source table holds which schema, and which table a stream record came from.

An environment may have several source tables, each holding the schemas config assigns it (infra/config.py). The
stack hands the assignment to the sync and the ops worker as ``SCHEMA_TABLES``, JSON ``{schema: table name}``. A
record of a schema that another table holds is refused (``wrong-table``): two tables writing one document id would
interleave two streams whose sequence numbers do not compare.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from refdata.registry import COUNTER, REGISTRY


def table_of_arn(arn: object) -> str | None:
    """The table name in a table or stream ARN (``arn:<partition>:dynamodb:<region>:<account>:table/<name>[/...]``),
    or None when ``arn`` is not one."""
    if not isinstance(arn, str) or ":dynamodb:" not in arn:
        return None
    _, _, resource = arn.partition(":table/")
    name = resource.split("/", 1)[0]
    return name or None


@dataclass(frozen=True)
class SchemaTables:
    """The table of each schema; empty when unknown (then nothing is checked)."""

    pairs: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, raw: str) -> SchemaTables:
        """From ``SCHEMA_TABLES``; a ValueError saying what is wrong."""
        try:
            value: Any = json.loads(raw)
        except ValueError as error:
            raise ValueError(f"not JSON: {error}") from None
        if not isinstance(value, dict) or not all(
            isinstance(table, str) and table for table in value.values()
        ):
            raise ValueError('must be a JSON object {"<schema>": "<table name>", ...}')
        unknown = sorted(name for name in value if name not in REGISTRY)
        if unknown:
            raise ValueError(f"names schemas the registry does not know: {unknown}")
        return cls.of(value)

    @classmethod
    def of(cls, tables: Mapping[str, str]) -> SchemaTables:
        return cls(tuple(sorted(tables.items())))

    @classmethod
    def single(cls, table: str) -> SchemaTables:
        """One table holding every schema (a single-table environment)."""
        return cls.of({schema: table for schema in REGISTRY if schema != COUNTER})

    def __bool__(self) -> bool:
        return bool(self.pairs)

    def table_of(self, schema: str) -> str | None:
        for name, table in self.pairs:
            if name == schema:
                return table
        return None

    def misplaced(self, schema: str, source_arn: object) -> str | None:
        """Why a record of ``schema`` from the stream ``source_arn`` must not be applied, or None when it may: its
        schema belongs to another table (or to none). Unchecked without an assignment or a source ARN."""
        source = table_of_arn(source_arn)
        if not self.pairs or source is None:
            return None
        holder = self.table_of(schema)
        if holder is None:
            return f"no table holds schema {schema!r} (SCHEMA_TABLES), yet table {source!r} streamed it"
        if holder != source:
            return (
                f"schema {schema!r} belongs to table {holder!r}, but this record came from table {source!r}: "
                "only one table may write a schema's documents (move the item to its table)"
            )
        return None
