"""A scratch copy of infra/environments.py with a planted mistake, found through the copy's syntax tree (so a plant
follows whatever the file configures), loaded as a module of its own."""

from __future__ import annotations

import ast
import importlib.util
import itertools
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "infra" / "environments.py"
_modules = itertools.count()


def load(directory: Path, text: str) -> ModuleType:
    """``text`` (a copy of infra/environments.py, maybe with a mistake) written to ``directory`` and imported."""
    scratch = directory / "environments.py"
    scratch.write_text(text)
    spec = importlib.util.spec_from_file_location(f"scratch_environments_{next(_modules)}", scratch)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # From the text, never from byte code: two copies written to one path within a second and of one size would
    # share a cached .pyc (the loader checks only mtime and size), and the second would run the first's values.
    exec(compile(text, scratch, "exec"), module.__dict__)
    return module


def called(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return node.func.id
    return None


def keyword(call: ast.Call, name: str) -> ast.keyword | None:
    return next((k for k in call.keywords if k.arg == name), None)


def environment_call(tree: ast.Module, name: str) -> ast.Call:
    """The ``EnvironmentConfig(name=<name>, ...)`` call of the file."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and called(node) == "EnvironmentConfig":
            written = getattr(keyword(node, "name"), "value", None)
            if isinstance(written, ast.Constant) and written.value == name:
                return node
    raise AssertionError(f"no EnvironmentConfig(name={name!r}) call in {CONFIG}")


def replaced(text: str, node: ast.AST, source: str) -> str:
    """``text`` with ``node``'s source replaced by ``source``."""
    lines = text.splitlines(keepends=True)
    start = sum(len(line) for line in lines[: node.lineno - 1]) + node.col_offset  # type: ignore[attr-defined]
    end = sum(len(line) for line in lines[: node.end_lineno - 1]) + node.end_col_offset  # type: ignore[attr-defined]
    return text[:start] + source + text[end:]


def module_assignment(tree: ast.Module, name: str) -> ast.Assign | None:
    for node in tree.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == [name]:
            return node
    return None


def search_call(tree: ast.Module, env: str) -> ast.Call:
    search = keyword(environment_call(tree, env), "search")
    assert isinstance(getattr(search, "value", None), ast.Call), f"{env} writes no search=SearchSettings(...)"
    return search.value


def bad_domain_name(text: str, env: str) -> tuple[str, ast.expr]:
    """``text`` with ``env``'s ``search.domain_name`` written as ``"Bad_Name"``, and the value's node."""
    domain = keyword(search_call(ast.parse(text), env), "domain_name")
    assert domain is not None, f"{env} writes no search domain_name"
    return replaced(text, domain.value, '"Bad_Name"'), domain.value
