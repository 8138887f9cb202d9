"""The OpenSearch names of a schema's indices and aliases (lower case).

Each indexable schema has versioned indices `<schema>-v<N>`, a read alias `<schema>` (what readers search: it
hides tombstones) and a write alias `<schema>-write` on exactly one version (search.indices builds the layout).
"""

from __future__ import annotations

import re
from typing import Final

from refdata.exceptions import ArgumentError

WRITE_ALIAS_SUFFIX: Final = "-write"

_INDEX_NAME_FORBIDDEN = re.compile(r'[\\/*?"<>|,#:\s]')


def _base(schema: str) -> str:
    base = schema.lower()
    if not base or base.startswith(("_", "-", "+")) or _INDEX_NAME_FORBIDDEN.search(base):
        raise ArgumentError(f"schema name {schema!r} cannot be used in an OpenSearch index name")
    return base


def index_name(schema: str, version: int) -> str:
    if version < 1:
        raise ArgumentError(f"index versions start at 1, got {version}")
    return f"{_base(schema)}-v{version}"


def read_alias(schema: str) -> str:
    return _base(schema)


def write_alias(schema: str) -> str:
    return f"{_base(schema)}{WRITE_ALIAS_SUFFIX}"


def template_name(schema: str) -> str:
    return f"{_base(schema)}-template"


def index_pattern(schema: str) -> str:
    return f"{_base(schema)}-v*"


def index_version(schema: str, index: str) -> int | None:
    """N for `<schema>-v<N>`, None for any other name."""
    match = re.fullmatch(re.escape(_base(schema)) + r"-v([1-9][0-9]*)", index)
    return int(match.group(1)) if match else None
