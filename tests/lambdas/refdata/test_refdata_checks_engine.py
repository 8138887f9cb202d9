"""refdata.checks' value checks against the real engine: for every indexable schema of the registry, and a generated
schema without free attributes, each mapped attribute's values the writer takes index into a fresh index of the
schema's template, and the ones it refuses are refused by the engine for the reason the check names ("failed to
parse field [date] of type [date]", a strict mapping's undeclared field). The values the writer refuses although the
engine would coerce them are listed apart and checked to be exactly those."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from refdata import registry
from refdata.checks import WRITABLE_PLATFORM_ATTRIBUTES, WriteError, check_values
from refdata.registry import Attribute, AttributeKind, Field, FieldsSk, Schema, indexable_schemas
from search.indices import index_mappings

from tests.support.engine_node import EngineNode

# Per mapped type: values the writer takes, values both it and the engine refuse, and values only the writer refuses
# (the engine would coerce them into the type, or read them as epoch milliseconds: the writer wants the type itself).
TAKEN: dict[str, list[Any]] = {
    "date": [
        "2026-07-01",
        "2026-07-01T09:30",
        "2026-07-01T09:30:00Z",
        "2026-07-01T09:30:00.123456789+05:30",
        "2024-02-29T23:59:59-18:00",
        ["2026-07-01", "2026-07-02"],
        None,
    ],
    "boolean": [True, False, [True, False], None],
    "text": ["Alpine Meadow", ["a", "b"], "", None],
    "keyword": ["bcparks_1", ["a", "b"], None],
    "long": [1751328000, -1, 2**63 - 1, None],
}
REFUSED_BY_BOTH: dict[str, list[Any]] = {
    "date": [
        "July 1",
        "2026-02-30",
        "2026-13-01",
        "2026-07-01T24:00:00",
        "2026-07-01 09:30:00",
        "01/07/2026",
        "2026-07-01T09:30:00+19:00",
        ["2026-07-01", "soon"],
        True,
    ],
    "boolean": ["yes", "no", 1, ["true", "maybe"]],
    "text": [{"nested": "object"}],
    "keyword": [{"nested": "object"}],
    "long": ["soon", 2**63],
}
REFUSED_BY_THE_WRITER_ONLY: dict[str, list[Any]] = {
    "date": ["2026", "2026-07", "20260701", 1751328000000],
    "boolean": ["true", "false", ""],
    "text": [3, True],
    "keyword": [3, False],
    "long": ["17", 1.5],
}

STRICT = Schema(
    name="strictDate",
    scope=(Field("collectionId"),),
    sk=FieldsSk((Field("day"),)),
    indexable=True,
    attributes=(
        Attribute("label", AttributeKind.KEYWORD),
        Attribute("opens", AttributeKind.DATE),
        Attribute("closed", AttributeKind.BOOLEAN),
    ),
    free_attributes=False,
)


@pytest.fixture
def with_strict_schema(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(registry, "REGISTRY", registry.build_registry([*registry.REGISTRY.values(), STRICT]))
    yield


def writable_fields(schema: str) -> dict[str, str]:
    """The fields of `schema`'s template an application item may set, by mapped type (geometry aside: its own)."""
    properties = index_mappings(schema)["properties"]
    declared = {attribute.name for attribute in registry.get_schema(schema).attributes}
    return {
        name: spec["type"]
        for name, spec in properties.items()
        if name in declared or (name in WRITABLE_PLATFORM_ATTRIBUTES and spec["type"] in TAKEN)
    }


def engine_refusal(engine: EngineNode, index: str, document: dict[str, Any]) -> str | None:
    answer = engine.request("PUT", f"/{index}/_doc/1", document)
    if answer.status < 300:
        return None
    error = answer.body["error"]
    return f"{error['type']}: {error['reason']}"


def writer_refusal(schema: str, document: dict[str, Any]) -> str | None:
    try:
        check_values("pk", registry.get_schema(schema), document)
    except WriteError as error:
        return str(error)
    return None


def verdicts(engine: EngineNode, schema: str) -> list[str]:
    """Every disagreement with the contract, over every writable field of `schema`'s template."""
    index = f"checks-{schema.lower()}"
    created = engine.request("PUT", f"/{index}", {"mappings": index_mappings(schema)})
    assert created.status == 200, created.body
    wrong: list[str] = []
    for name, kind in writable_fields(schema).items():
        parse_failure = f"failed to parse field [{name}] of type [{kind}]"
        for value in TAKEN[kind]:
            document = {name: value}
            if (refused := writer_refusal(schema, document)) is not None:
                wrong.append(f"{name}={value!r}: the writer refused it: {refused}")
            if (reason := engine_refusal(engine, index, document)) is not None:
                wrong.append(f"{name}={value!r}: the writer takes it, the engine refused it: {reason}")
        for value in REFUSED_BY_BOTH[kind]:
            document = {name: value}
            if writer_refusal(schema, document) is None:
                wrong.append(f"{name}={value!r}: the writer took it")
            reason = engine_refusal(engine, index, document)
            if reason is None or parse_failure not in reason:
                wrong.append(f"{name}={value!r}: the engine said {reason!r}, not {parse_failure!r}")
        for value in REFUSED_BY_THE_WRITER_ONLY[kind]:
            document = {name: value}
            if writer_refusal(schema, document) is None:
                wrong.append(f"{name}={value!r}: the writer took it")
            if (reason := engine_refusal(engine, index, document)) is not None:
                wrong.append(f"{name}={value!r}: listed as coerced, but the engine refused it: {reason}")
    return wrong


@pytest.mark.parametrize("schema", [s.name for s in indexable_schemas()])
def test_what_the_writer_takes_indexes_and_what_it_refuses_the_engine_refuses(
    engine: EngineNode, schema: str
) -> None:
    assert writable_fields(schema), f"{schema}: no writable field mapped"
    wrong = verdicts(engine, schema)
    assert not wrong, "\n".join(wrong)


def test_a_schema_without_free_attributes_refuses_an_undeclared_name_as_the_engine_does(
    engine: EngineNode, with_strict_schema: None
) -> None:
    wrong = verdicts(engine, STRICT.name)
    assert not wrong, "\n".join(wrong)
    misspelt = {"lable": "x"}
    refused = writer_refusal(STRICT.name, misspelt)
    assert refused is not None and "did you mean 'label'?" in refused, refused
    reason = engine_refusal(engine, f"checks-{STRICT.name.lower()}", misspelt)
    assert reason is not None and reason.startswith("strict_dynamic_mapping_exception"), reason


def test_a_schema_with_free_attributes_takes_undeclared_names_as_the_engine_does(engine: EngineNode) -> None:
    for schema in indexable_schemas():
        if not schema.free_attributes:
            continue
        document = {"undeclaredName": "x", "undeclaredNumber": 3}
        assert writer_refusal(schema.name, document) is None, schema.name
        index = f"free-{schema.name.lower()}"
        assert engine.request("PUT", f"/{index}", {"mappings": index_mappings(schema.name)}).status == 200
        assert engine_refusal(engine, index, document) is None, schema.name
