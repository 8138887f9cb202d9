"""refdata.limits against the real engine: for each document, the check refuses it exactly when OpenSearch refuses to
index it into a fresh index of the schema's template (a document the check passes must index; one it refuses must be
refused by the engine, for the reason the check names)."""

from __future__ import annotations

from typing import Any

import pytest
from refdata.limits import FIELD_CONFLICT, DocumentLimitError, check_item
from search.indices import index_mappings

from tests.support.engine_node import EngineNode

SCHEMA = "geozone"
TEMPLATE = index_mappings(SCHEMA)

# (document, the check's kind of refusal or None) — each value's dynamic type: string text, number double, bool boolean.
CASES: list[tuple[str, dict[str, Any], str | None]] = [
    ("strings", {"phones": ["555", "556"]}, None),
    ("numbers, whole and fractional", {"sizes": [1, 2.5]}, None),
    ("booleans", {"flags": [True, False]}, None),
    ("a string then a number", {"phones": ["555", 1]}, FIELD_CONFLICT),
    ("a number then a string", {"phones": [1, "555"]}, FIELD_CONFLICT),
    ("a boolean and a number", {"flags": [True, 1]}, FIELD_CONFLICT),
    ("a string and a boolean", {"flags": ["yes", False]}, FIELD_CONFLICT),
    ("one path in two objects", {"rows": [{"a": "x"}, {"a": 2}]}, FIELD_CONFLICT),
    ("a dotted name and a nested one", {"a.b": 1, "a": {"b": "x"}}, FIELD_CONFLICT),
    ("nulls beside strings", {"phones": [None, "555", None]}, None),
    ("a dotted null beside a value on its path", {"a": {"a.b": None, "a": "x"}}, None),
    ("a value and an object at one path", {"label": "x", "label.sub": "y"}, FIELD_CONFLICT),
    ("nested lists of one kind", {"grid": [[1, 2], [3]]}, None),
    ("nested lists of two kinds", {"grid": [[1], ["x"]]}, FIELD_CONFLICT),
]


def engine_refuses(engine: EngineNode, index: str, document: dict[str, Any]) -> str | None:
    """The engine's reason for refusing ``document`` in a fresh index of the template, or None if it indexed it."""
    created = engine.request("PUT", f"/{index}", {"mappings": TEMPLATE})
    assert created.status == 200, created.body
    answer = engine.request("PUT", f"/{index}/_doc/1", document)
    engine.request("DELETE", f"/{index}")
    if answer.status < 300:
        return None
    error = answer.body["error"]
    return f"{error['type']}: {error['reason']}"


@pytest.mark.parametrize(("name", "document", "refused"), CASES, ids=[case[0] for case in CASES])
def test_the_check_refuses_exactly_what_the_engine_refuses(
    engine: EngineNode, name: str, document: dict[str, Any], refused: str | None
) -> None:
    try:
        check_item(document, TEMPLATE["properties"])
        kind = None
    except DocumentLimitError as error:
        kind = error.kind
    assert kind == refused, name
    reason = engine_refuses(engine, "limits-case", document)
    assert (reason is not None) == (refused is not None), f"{name}: the engine said {reason!r}"
