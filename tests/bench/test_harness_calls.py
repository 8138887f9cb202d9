"""The benchmarks drive the tests' own harnesses (the smoke stack, the engine nodes): every call they make to a
function or class of a module under tests/ binds to its signature, so a harness that loses a parameter the benchmarks
pass fails here, not at the end of a `make bench` run."""

from __future__ import annotations

import ast
import importlib
import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = sorted((ROOT / "bench").glob("*.py"))


def harness(name: str, monkeypatch: pytest.MonkeyPatch) -> Any | None:
    """The module under tests/ a benchmark imports, by its package or, as the benchmarks put its folder on sys.path,
    by its file's name; None for any other module."""
    if name.startswith("tests."):
        return importlib.import_module(name)
    found = [path for path in (ROOT / "tests").rglob(f"{name}.py") if "__pycache__" not in path.parts]
    if len(found) != 1:
        return None
    monkeypatch.syspath_prepend(str(found[0].parent))
    return importlib.import_module(name)


def harness_calls(path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[int, Any, ast.Call]]:
    """(line, the harness object, the call) of each call by name to something imported from a harness module."""
    tree = ast.parse(path.read_text())
    imported: dict[str, Any] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and (module := harness(node.module, monkeypatch)):
            imported |= {alias.asname or alias.name: getattr(module, alias.name) for alias in node.names}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in imported:
            yield node.lineno, imported[node.func.id], node


def test_the_benchmarks_call_the_harnesses_they_import(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the check below reads: the smoke stack, the secured node, the engine node (else it checks nothing)."""
    called = {target.__name__ for path in BENCHMARKS for _, target, _ in harness_calls(path, monkeypatch)}
    assert called >= {"smoke_stack", "SecuredNode", "EngineNode"}, called


@pytest.mark.parametrize("path", BENCHMARKS, ids=lambda path: path.name)
def test_every_call_a_benchmark_makes_to_a_harness_binds_to_its_signature(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for line, target, call in harness_calls(path, monkeypatch):
        keywords = {keyword.arg: None for keyword in call.keywords if keyword.arg}
        try:
            inspect.signature(target).bind_partial(*[None] * len(call.args), **keywords)
        except TypeError as error:
            pytest.fail(f"bench/{path.name}:{line}: {ast.unparse(call.func)}(...): {error}")
