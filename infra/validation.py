"""How config records are checked: field names when a record is built, field types when an environment is.

Config records (infra/config.py) are frozen, keyword-only dataclasses declared with ``@dataclass(...)`` from this
module: the standard library's dataclass plus two checks a person editing ``infra/environments.py`` needs.

- Building a record with a field it does not have fails at once, naming the nearest valid field
  (``NetworkSettings: unknown field 'max_az' (did you mean 'max_azs'?)``), or, for a field the record declares
  ``renamed``, what it became (``OpsSettings: field 'smoke_startup_seconds' is now 'smoke_startup_minutes': ...``).
- ``check_types(record, path)``, run by ``EnvironmentConfig`` over its whole tree before any rule, checks each
  field's value against its annotation and names it by its full path (``dev.network.max_azs: must be an integer,
  not '2' (str)``). An enum accepts its members and their values (``"retain"`` becomes ``RemovalPolicy.RETAIN``);
  a list given for a tuple becomes a tuple. Nothing else is converted: ``"2"`` is not an integer.
- ``one_line`` prints an error with the file and line where the value it names is written (infra/config_source.py).

Why not pydantic (a dependency of the test tools only): its dataclasses validate each nested record when it is
built, before anything knows which environment and field will hold it, so errors could not carry
``dev.network.max_azs``; and its strict mode refuses enum values given as strings. These checks need only what
the annotations already say, so they stay here, in the standard library.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import types
import typing
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar, dataclass_transform

from infra.config_source import Location, locate

T = TypeVar("T")
ROOT = Path(__file__).resolve().parent.parent


class ConfigError(ValueError):
    """A setting is invalid; the message starts with the field's dotted path, or, when a record refuses a keyword
    as it is built, with the record's name (``argument`` is then that keyword)."""

    def __init__(self, message: str, *, argument: str | None = None) -> None:
        super().__init__(message)
        self.argument = argument


def nearest(name: str, candidates: typing.Iterable[str], fits: Callable[[str], bool] | None = None) -> str:
    """`` (did you mean 'x'?)`` for the closest candidate, or nothing; with ``fits``, the closest of those that
    would take the value given (``data_nodes=2`` means ``data_node_count``, not the closer ``data_node_type``)."""
    close = difflib.get_close_matches(name, list(candidates), n=5, cutoff=0.6)
    if fits is not None:
        close = [candidate for candidate in close if fits(candidate)] or close
    return f" (did you mean {close[0]!r}?)" if close else ""


def _takes(cls: type, value: Any, field_name: str) -> bool:
    """Whether field ``field_name`` of ``cls`` would take ``value``."""
    try:
        _check(value, _hints(cls)[field_name], "")
    except (ConfigError, TypeError, ValueError):
        return False
    return True


@dataclass_transform(field_specifiers=(dataclasses.field,))
def dataclass(cls: type[T] | None = None, /, *, renamed: dict[str, str] | None = None, **options: Any) -> Any:
    """``dataclasses.dataclass`` whose ``__init__`` refuses unknown and missing fields with a ConfigError;
    ``renamed``: a former field's name -> what it is now (the error says so)."""

    def wrap(cls: type[T]) -> type[T]:
        made = dataclasses.dataclass(cls, **options)
        init = made.__init__
        names = [f.name for f in dataclasses.fields(made) if f.init]  # type: ignore[arg-type]
        required = [
            f.name
            for f in dataclasses.fields(made)  # type: ignore[arg-type]
            if f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ]

        @functools.wraps(init)
        def checked_init(self: Any, *args: Any, **kwargs: Any) -> None:
            for key, value in kwargs.items():
                if key not in names and renamed and key in renamed:
                    raise ConfigError(f"{made.__name__}: field {key!r} is now {renamed[key]}", argument=key)
                if key not in names:
                    hint = nearest(key, names, functools.partial(_takes, made, value))
                    raise ConfigError(f"{made.__name__}: unknown field {key!r}{hint}", argument=key)
            given = set(names[: len(args)]) | set(kwargs)
            missing = [name for name in required if name not in given]
            if missing:
                raise ConfigError(f"{made.__name__}: missing field {missing[0]!r}")
            init(self, *args, **kwargs)

        made.__init__ = checked_init  # type: ignore[method-assign]
        return made

    return wrap if cls is None else wrap(cls)


def check_types(record: Any, path: str) -> None:
    """Checks every field of ``record`` and of the records it holds against its annotation (see the module)."""
    hints = _hints(type(record))
    for f in dataclasses.fields(record):
        value = getattr(record, f.name)
        checked = _check(value, hints[f.name], f"{path}.{f.name}")
        if checked is not value:
            object.__setattr__(record, f.name, checked)


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def describe(hint: Any) -> str:
    """An annotation in words: ``an integer``, ``a tuple of ReadRole``, ``'destroy' or 'retain'``."""
    if hint is type(None):
        return "None"
    if typing.get_origin(hint) in (types.UnionType, typing.Union):
        return " or ".join(describe(arg) for arg in typing.get_args(hint))
    if typing.get_origin(hint) is tuple:
        return f"a tuple of {describe(typing.get_args(hint)[0]).removeprefix('a ').removeprefix('an ')}"
    if isinstance(hint, type) and issubclass(hint, Enum):
        return " or ".join(repr(member.value) for member in hint)
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string"}.get(
        hint, f"a {getattr(hint, '__name__', hint)}"
    )


def _refuse(value: Any, hint: Any, path: str, hint_text: str = "") -> ConfigError:
    advice = hint_text or ""
    return ConfigError(f"{path}: must be {describe(hint)}, not {value!r} ({type(value).__name__}){advice}")


def _check(value: Any, hint: Any, path: str) -> Any:
    origin = typing.get_origin(hint)
    if origin in (types.UnionType, typing.Union):
        options = typing.get_args(hint)
        if value is None and type(None) in options:
            return None
        for option in options:
            if option is not type(None) and _matches(value, option):
                return _check(value, option, path)
        for option in options:
            if isinstance(option, type) and issubclass(option, Enum) and isinstance(value, str):
                return _check(value, option, path)
        raise _refuse(value, hint, path)
    if origin is tuple:
        (item, *rest) = typing.get_args(hint)
        if isinstance(value, list):
            value = tuple(value)
        if not isinstance(value, tuple) or (rest and rest != [Ellipsis]):
            advice = " (a one-element tuple needs a trailing comma: ('x',))" if isinstance(value, str) else ""
            raise _refuse(value, hint, path, advice)
        checked = tuple(_check(element, item, f"{path}[{index}]") for index, element in enumerate(value))
        return value if all(a is b for a, b in zip(checked, value, strict=True)) else checked
    if isinstance(hint, type) and issubclass(hint, Enum):
        if isinstance(value, hint):
            return value
        valid = [member.value for member in hint]
        if isinstance(value, str) and value in valid:
            return hint(value)
        shown = ", ".join(repr(v) for v in valid)
        suggestion = nearest(value, valid) if isinstance(value, str) else ""
        raise ConfigError(f"{path}: {value!r} is not one of {shown}{suggestion}")
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        if not isinstance(value, hint):
            raise _refuse(value, hint, path)
        check_types(value, path)
        return value
    if not _matches(value, hint):
        raise _refuse(value, hint, path)
    return value


def _matches(value: Any, hint: Any) -> bool:
    """Whether ``value`` is of the kind ``hint`` names (an int is no bool, a bool no int)."""
    if hint is Any:
        return True
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    origin = typing.get_origin(hint)
    if origin is tuple:
        return isinstance(value, tuple | list)
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True


def source_of(
    error: ConfigError, traceback: types.TracebackType | None, root: Path = ROOT
) -> Location | None:
    """Where the value ``error`` names is written in the project's files under ``root`` (infra/config_source.py), and
    the environment it belongs to; None when no frame of the traceback ran a file of the project's config."""
    frames = []
    while traceback is not None:
        frames.append(traceback)
        traceback = traceback.tb_next
    machinery = {Path(__file__).resolve(), ROOT / "infra" / "config.py"}
    ours = [
        frame
        for frame in frames
        if (filename := Path(frame.tb_frame.f_code.co_filename).resolve()) not in machinery
        and filename.is_file()
        and filename.is_relative_to(root)
    ]
    return locate(str(error), error.argument, ours) if ours else None


def one_line(error: ConfigError, traceback: types.TracebackType | None, root: Path = ROOT) -> str:
    """The error as one line, prefixed with the file and line where the value it names is written."""
    location = source_of(error, traceback, root)
    if location is None:
        return f"config error: {error}"
    return f"config error: {location.filename.resolve().relative_to(root)}:{location.line}: {error}"


def run(main: Callable[[], int | None]) -> None:
    """Runs a command's ``main``; a config error ends it with one line on stderr and exit status 2."""
    import sys

    try:
        status = main()
    except ConfigError as error:
        print(one_line(error, error.__traceback__), file=sys.stderr)
        sys.exit(2)
    sys.exit(status or 0)
