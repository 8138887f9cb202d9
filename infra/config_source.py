"""Where a config error's value is written: the line of the field's own value, and the environment it belongs to.

A ConfigError names a field by its path (``prod.search.read_roles[0].schemas[1]``), or, when a record refuses a
keyword as it is built, by the keyword (``NetworkSettings: unknown field 'max_az'``). The traceback knows only the
call that was running: an environment's whole ``EnvironmentConfig(`` call, or ``environment_map(*envs)``. This
module reads that file's syntax tree and follows the path from the environment's call to the value's own node:
through keyword arguments, tuple items, a helper function's return value, a name to its assignment and a dict
entry (``EXAMPLE_ACCOUNTS["prod"]``). Where the path leaves what is written (a default, a value computed at run
time) the line is the last written step's. A dict entry is cited only if it holds the value the config used (an
account id given on the command line overrides ``EXAMPLE_ACCOUNTS``): the traceback's frames have the values.
"""

from __future__ import annotations

import ast
import functools
import re
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The dotted path that starts an error's message: an environment's name, then fields and indexes.
PATH = re.compile(r"^(?P<environment>[a-z][a-z0-9]*)(?P<steps>(?:\.[A-Za-z_]\w*|\[\d+\])+): ")
STEP = re.compile(r"\.(\w+)|\[(\d+)\]")
RECORD = "EnvironmentConfig"

Step = str | int


@dataclass(frozen=True)
class Location:
    """Where a config error's value is written, and the environment whose own setting that is: the value sits in
    its ``EnvironmentConfig(`` call or under its name in a dict (``EXAMPLE_ACCOUNTS["prod"]``). None for what the
    environments share (a helper, a module constant: the first environment built reports it) or where unknown."""

    filename: Path
    line: int
    environment: str | None


def locate(message: str, argument: str | None, frames: list[types.TracebackType]) -> Location | None:
    """The value's location for the error ``message`` raised with ``frames`` (outermost first, the config file's
    innermost frame last); ``argument``: the keyword a record refused as it was built, if that was the error."""
    if not frames:
        return None
    innermost = frames[-1]
    source = _source(innermost.tb_frame.f_code.co_filename)
    filename = Path(source.filename)
    call = source.call_at(innermost)
    if argument is not None:
        keyword = next((k for k in call.keywords if k.arg == argument), None) if call else None
        line = innermost.tb_lineno if keyword is None else keyword.lineno
        built = next((name for frame in reversed(frames) if (name := _environment_at(frame))), None)
        inside = built is not None and any(source.spans(env, line) for env in source.environment_calls(built))
        return Location(filename, line, built if inside else None)
    parsed = PATH.match(message)
    if parsed is None:
        return Location(filename, innermost.tb_lineno, None)
    environment = parsed["environment"]
    steps: list[Step] = [name or int(index) for name, index in STEP.findall(parsed["steps"])]
    calls = source.environment_calls(environment)
    for root in ([call] if call else []) + calls:
        runtime = _Runtime(frames)
        node = source.follow(root, steps, runtime)
        if node is not root:
            own = environment in runtime.keys or any(source.spans(env, node.lineno) for env in calls)
            return Location(filename, node.lineno, environment if own else None)
    return Location(filename, innermost.tb_lineno, environment if calls else None)


def _environment_at(frame: types.TracebackType) -> str | None:
    """The environment whose ``EnvironmentConfig(...)`` call was being evaluated in ``frame``, if any."""
    source = _source(frame.tb_frame.f_code.co_filename)
    node: ast.AST | None = source.call_at(frame)
    while node is not None:
        if isinstance(node, ast.Call) and (name := _environment_name(node)) is not None:
            return name
        node = source.parents.get(node)
    return None


def _environment_name(call: ast.Call) -> str | None:
    func = call.func
    called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
    if called != RECORD:
        return None
    name = next((k.value for k in call.keywords if k.arg == "name"), None)
    return name.value if isinstance(name, ast.Constant) and isinstance(name.value, str) else None


class _Runtime:
    """The values names had when the error was raised, from the traceback's frames (for dict entries)."""

    def __init__(self, frames: list[types.TracebackType]) -> None:
        self.frames = [frame.tb_frame for frame in frames]
        # The constant keys of the dict entries followed (``EXAMPLE_ACCOUNTS["prod"]``: "prod").
        self.keys: list[object] = []

    def lookup(self, scope: ast.AST, filename: str, name: str) -> tuple[bool, Any]:
        """(found, value) of ``name`` in the frame that ran ``scope`` (a function, or the module)."""
        for frame in reversed(self.frames):
            code = frame.f_code
            if code.co_filename != filename:
                continue
            if isinstance(scope, ast.FunctionDef):
                if code.co_name != scope.name:
                    continue
                if name in frame.f_locals:
                    return True, frame.f_locals[name]
            if name in frame.f_globals:
                return True, frame.f_globals[name]
        return False, None


def _source(filename: str) -> _Source:
    try:
        text = Path(filename).read_text()
    except (OSError, ValueError):
        text = ""
    return _parsed(filename, text)


@functools.cache
def _parsed(filename: str, text: str) -> _Source:
    """Parsed once per content: a file edited since (a scratch copy rewritten) is parsed again."""
    return _Source(filename, text)


class _Source:
    """One file's syntax tree, with what following a path through it needs."""

    def __init__(self, filename: str, text: str) -> None:
        self.filename = filename
        try:
            self.tree: ast.Module = ast.parse(text, filename)
        except (SyntaxError, ValueError):
            self.tree = ast.Module(body=[], type_ignores=[])
        self.parents = {
            child: parent for parent in ast.walk(self.tree) for child in ast.iter_child_nodes(parent)
        }
        self.calls: dict[tuple[int | None, ...], ast.Call] = {
            (node.lineno, node.end_lineno, node.col_offset, node.end_col_offset): node
            for node in ast.walk(self.tree)
            if isinstance(node, ast.Call)
        }

    def call_at(self, frame: types.TracebackType) -> ast.Call | None:
        """The call ``frame`` was running (the instruction's position in the code object)."""
        positions = list(frame.tb_frame.f_code.co_positions())
        index = frame.tb_lasti // 2
        return self.calls.get(positions[index]) if index < len(positions) else None

    def environment_calls(self, environment: str) -> list[ast.Call]:
        """Every ``EnvironmentConfig(name=<environment>, ...)`` call in the file, the last first."""
        calls = [call for call in self.calls.values() if _environment_name(call) == environment]
        return sorted(calls, key=lambda call: (call.lineno, call.col_offset), reverse=True)

    @staticmethod
    def spans(call: ast.Call, line: int) -> bool:
        return call.lineno <= line <= (call.end_lineno or call.lineno)

    def follow(self, node: ast.expr, steps: list[Step], runtime: _Runtime) -> ast.expr:
        """The node ``steps`` lead to from ``node``, or the last written one on the way."""
        for step in steps:
            taken = self._step(self._through(node, runtime), step, runtime)
            if taken is None:
                return node
            node = taken
        return self._through(node, runtime)

    def _step(self, node: ast.expr, step: Step, runtime: _Runtime) -> ast.expr | None:
        if isinstance(step, int):
            if not isinstance(node, ast.Tuple | ast.List) or step >= len(node.elts):
                return None
            if any(isinstance(element, ast.Starred) for element in node.elts[: step + 1]):
                return None
            return node.elts[step]
        if not isinstance(node, ast.Call):
            return None
        keyword = next((k for k in node.keywords if k.arg == step), None)
        if keyword is not None:
            return keyword.value
        returned = self._returned(node)
        return None if returned is None else self._step(self._through(returned, runtime), step, runtime)

    def _returned(self, call: ast.Call) -> ast.expr | None:
        """What a helper function of this file returns, when it has one ``return <value>`` at its top level."""
        if not isinstance(call.func, ast.Name):
            return None
        helper = next(
            (
                node
                for node in self.tree.body
                if isinstance(node, ast.FunctionDef) and node.name == call.func.id
            ),
            None,
        )
        returns = [node for node in helper.body if isinstance(node, ast.Return)] if helper else []
        return returns[0].value if len(returns) == 1 else None

    def _scope(self, node: ast.AST) -> ast.AST:
        """The function ``node`` sits in, or the module."""
        parent = self.parents.get(node)
        while parent is not None and not isinstance(parent, ast.FunctionDef):
            parent = self.parents.get(parent)
        return parent or self.tree

    def _assigned(self, name: ast.Name) -> ast.expr | None:
        """The value last assigned to ``name`` before its use, in its function, else at the module's top level."""
        scope = self._scope(name)
        for body in ([scope] if scope is not self.tree else []) + [self.tree]:
            statements = body.body if isinstance(body, ast.FunctionDef | ast.Module) else []
            values = [
                statement.value
                for statement in statements
                if isinstance(statement, ast.Assign)
                and len(statement.targets) == 1
                and isinstance(statement.targets[0], ast.Name)
                and statement.targets[0].id == name.id
                and (body is self.tree or statement.lineno < name.lineno)
            ]
            if values:
                return values[-1]
        return None

    def _through(self, node: ast.expr, runtime: _Runtime) -> ast.expr:
        """``node``, or the value it names: a name's assignment, a dict entry for a constant key."""
        if isinstance(node, ast.Name):
            value = self._assigned(node)
            return node if value is None else self._through(value, runtime)
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            container = self._through(node.value, runtime)
            entry = (
                self._entry(container, node.slice.value, runtime) if isinstance(container, ast.Dict) else None
            )
            if entry is None or not self._used(node, entry, runtime):
                return node
            runtime.keys.append(node.slice.value)
            return self._through(entry, runtime)
        return node

    def _entry(self, mapping: ast.Dict, key: object, runtime: _Runtime) -> ast.expr | None:
        """The entry for ``key`` a dict display writes (its last, ``**`` merges followed), or None."""
        for written, value in reversed(list(zip(mapping.keys, mapping.values, strict=True))):
            if written is None:
                merged = self._through(value, runtime)
                found = self._entry(merged, key, runtime) if isinstance(merged, ast.Dict) else None
                if found is not None:
                    return found
            elif isinstance(written, ast.Constant) and written.value == key:
                return value
        return None

    def _used(self, subscript: ast.Subscript, entry: ast.expr, runtime: _Runtime) -> bool:
        """Whether the written ``entry`` holds the value ``subscript`` had (a ``**`` merge of something computed at
        run time, such as account ids from the command line, may have replaced it)."""
        try:
            written = ast.literal_eval(entry)
        except ValueError:
            return True
        if not isinstance(subscript.value, ast.Name):
            return True
        found, mapping = runtime.lookup(self._scope(subscript), self.filename, subscript.value.id)
        if not found:
            return True
        try:
            return bool(mapping[subscript.slice.value] == written)  # type: ignore[attr-defined]
        except (KeyError, TypeError, IndexError):
            return True
