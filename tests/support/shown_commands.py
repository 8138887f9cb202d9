"""Commands of the project's own CLIs shown in text people read (README.md and docs/ through tests/docs, the guard's
advice through tests/infra/test_guard.py), and whether each command's own argument parser accepts them.

A command is found from its interpreter on (`python -m ops ...`, `.venv/bin/python -m infra.report ...`, any
`python3.x`) or as `make ops ARGS="..."`, for the modules in PARSERS: `ops`, every `infra.<module>`,
`stream_sync.redrive` and `refdata.docs`, each parsed by its module's `build_parser()` (ops with the configured
environments, as the repository root's `ops` package hands them over; `redrive --local` as the CLI routes it).
It ends where the shell command ends (`&&`, `;`, a pipe, a redirection, a comment) or at a backtick (a code span in a
code block or in advice). Then it is either:

- **runnable**, and parsed whole. A placeholder (`<env>`, `<the role's ARN>`, `$ENV`, `"$RUN"`, `${X}`, `$(...)`)
  stands for a valid value: the first choice of the option it follows (`--env`: a configured environment), else
  the first of the configured environments' names and regions, the indexable schemas, `1` and `x` that the
  option's type accepts;
- or a **synopsis**: written with an ellipsis (`…`, `...`), `[optional]` parts, alternatives (`reindex | purge`),
  or a placeholder where the ops subcommand goes. Only its names are checked: each option must be one the
  parser knows (for ops, one of the subcommand's, or of some subcommand's if none is named), and each ops
  subcommand written must exist.

A module named without arguments (`python -m infra.cost`, "`python -m ops` from the repository root") names the
program and is not checked. An all-capitals word after an option is argparse's way to name its value (`--schema S`,
`--segments N`): a placeholder too.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import re
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

PROJECT_MODULES = r"ops|infra\.\w+|stream_sync\.redrive|refdata\.docs"
INVOCATION = re.compile(
    rf"(?<![\w/.-])(?:[\w./~$()-]*/)?python[\d.]*\s+-m\s+(?P<module>{PROJECT_MODULES})(?![\w.])(?P<rest>[^`\n]*)"
)
MAKE_OPS = re.compile(r"(?<![\w-])make\s+ops\s+ARGS=(?P<args>\"[^\"]*\"|'[^']*'|\S*)")
ANGLE_PLACEHOLDER = re.compile(r"<[^<>\n]*>")
PLACEHOLDER = "__placeholder__"
ENDS = {"&&", "||", ";", "&", ">", ">>", "<", "(", ")", "2>&1", "|&"}
ELLIPSES = ("…", "...")
# argparse's way to name an option's value: `--schema S`, `--segments N`
METAVAR = re.compile(r"[A-Z][A-Z0-9_]*")


@dataclass(frozen=True)
class Shown:
    """One command as shown: where, its text from the interpreter on, the module it runs and its argument words
    (placeholders as PLACEHOLDER, the end of the shell command cut off)."""

    where: str
    text: str
    module: str
    words: tuple[str, ...]
    synopsis: bool


def commands_in(text: str, where: str) -> Iterator[Shown]:
    """The project's CLI commands in ``text`` (a code span, a line of a code block, a line of advice)."""
    for match in INVOCATION.finditer(text):
        rest = match.group("rest").split("`", 1)[0]  # a code span inside a code block ends the command
        yield _shown(
            where, text[match.start() : match.start("rest") + len(rest)], match.group("module"), rest
        )
    for match in MAKE_OPS.finditer(text):
        quoted = match.group("args")
        inner = quoted[1:-1] if quoted[:1] in "\"'" and len(quoted) > 1 else quoted
        yield _shown(where, match.group(0), "ops", inner)


def _shown(where: str, text: str, module: str, rest: str) -> Shown:
    rest = ANGLE_PLACEHOLDER.sub(PLACEHOLDER, rest)
    lexer = shlex.shlex(rest, posix=True, punctuation_chars=";&|<>()")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        tokens = list(lexer)
    except ValueError as error:  # an unclosed quote
        return Shown(where, text, module, ("<unsplittable: " + str(error) + ">",), synopsis=False)
    words: list[str] = []
    synopsis = False
    subcommands = _ops_subcommands() if module == "ops" else set()
    for index, token in enumerate(tokens):
        if token == "|":
            following = tokens[index + 1] if index + 1 < len(tokens) else ""
            if following in subcommands or following.startswith("-") or following in ELLIPSES:
                synopsis = True  # alternatives, not a pipe
                continue
            break
        if token in ENDS:
            break
        if "$" in token or (METAVAR.fullmatch(token) and words and words[-1].startswith("-")):
            token = PLACEHOLDER
        words.append(token)
    if any(
        any(mark in word for mark in ELLIPSES) or word.startswith("[") or word.endswith("]") for word in words
    ):
        synopsis = True
    if module == "ops" and words and PLACEHOLDER in words[0]:
        synopsis = True
    return Shown(where, " ".join(text.split()), module, tuple(words), synopsis)


# --- the parsers --------------------------------------------------------------------------------------------------


def _ops_parser() -> argparse.ArgumentParser:
    from infra.environments import environments
    from ops import cli

    saved = cli.ENVIRONMENTS
    cli.ENVIRONMENTS = environments  # as the repository root's `ops` package hands them over
    try:
        return cli.build_parser()
    finally:
        cli.ENVIRONMENTS = saved


def parser_of(module: str) -> argparse.ArgumentParser:
    """``module``'s own parser: `ops.cli.build_parser()` for ops, else `<module>.build_parser()`."""
    if module == "ops":
        return _ops_parser()
    built: Callable[[], argparse.ArgumentParser] | None = getattr(
        importlib.import_module(module), "build_parser", None
    )
    if built is None:
        raise LookupError(
            f"{module} has no build_parser(): give its CLI one, so that the commands the docs show can be parsed"
        )
    return built()


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


@cache
def _ops_subcommands() -> set[str]:
    return set(_subparsers(_ops_parser()))


@cache
def _pool() -> tuple[str, ...]:
    """Values a placeholder may stand for: config's and the registry's names first, then a number and a word."""
    from refdata.registry import REGISTRY

    from infra.environments import environments

    configs = environments()
    indexable = [name for name, schema in REGISTRY.items() if schema.indexable]
    return (*configs, *dict.fromkeys(c.region for c in configs.values()), *indexable, "1", "x")


def _value_for(action: argparse.Action | None) -> str:
    if action is not None and action.choices is not None:
        return str(next(iter(action.choices)))
    kind: Any = action.type if action is not None else None
    if not callable(kind):
        return _pool()[0]
    for candidate in _pool():
        try:
            kind(candidate)
        except (argparse.ArgumentTypeError, ValueError, TypeError):
            continue
        return candidate
    return "x"


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return dict(parser._option_string_actions)


def _filled(words: tuple[str, ...], parser: argparse.ArgumentParser) -> list[str]:
    """``words`` with each placeholder replaced by a value the option it follows accepts."""
    subparsers = _subparsers(parser)
    scope = _options(parser)
    if words and words[0] in subparsers:
        scope = _options(subparsers[words[0]])
    filled: list[str] = []
    for index, word in enumerate(words):
        if PLACEHOLDER not in word:
            filled.append(word)
            continue
        option, equals, _ = word.partition("=")
        if equals and option in scope:
            filled.append(f"{option}={_value_for(scope[option])}")
            continue
        previous = words[index - 1] if index else ""
        action = scope.get(previous)
        filled.append(_value_for(action if action is not None and action.nargs != 0 else None))
    return filled


def _parse(parser: argparse.ArgumentParser, words: list[str]) -> str | None:
    """None if ``parser`` accepts ``words``, else what it said."""
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said), contextlib.redirect_stdout(io.StringIO()):
            parser.parse_args(words)
    except SystemExit as exit:
        if exit.code not in (0, None):
            text = said.getvalue().strip()
            return text.splitlines()[-1] if text else f"exit {exit.code}"
    return None


def _synopsis_refusal(shown: Shown, parser: argparse.ArgumentParser) -> str | None:
    subparsers = _subparsers(parser)
    words = [word.strip("[]") for word in shown.words]
    known = set(_options(parser))
    if subparsers:
        named = [w for w in words if w in subparsers]
        bare = [
            w
            for i, w in enumerate(words)
            if (i == 0 or shown.words[i - 1] == "|") and w and not w.startswith("-") and PLACEHOLDER not in w
        ]
        unknown = [w for w in bare if w not in subparsers and w not in ELLIPSES]
        if unknown:
            return f"no subcommand {unknown[0]!r} (one of {', '.join(subparsers)})"
        for sub in named or subparsers:
            known |= set(_options(subparsers[sub]))
        if shown.module == "ops" and "redrive" in (named or subparsers):
            known |= {option for one in _redrive_local() for option in _options(one)}
    for word in words:
        option = word.partition("=")[0]
        if option.startswith("--") and option not in known and option.strip("-."):
            return f"unrecognized option {option}"
    return None


def _redrive_local() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """`redrive --local`'s parsers as the ops CLI routes it: its settings, then the redrive module's own."""
    from stream_sync import redrive

    from ops import cli

    return cli.redrive_settings(), redrive.build_parser()


def refusal(shown: Shown) -> str | None:
    """None if the command's own parser accepts it (a synopsis: its names), else what is wrong."""
    if shown.words[:1] and shown.words[0].startswith("<unsplittable"):
        return f"cannot split it as shell words ({shown.words[0][14:-1]})"
    try:
        parser = parser_of(shown.module)
    except (LookupError, ImportError) as error:
        return str(error)
    if not shown.words:
        return None  # the program named, not a command run
    if shown.synopsis:
        return _synopsis_refusal(shown, parser)
    words = _filled(shown.words, parser)
    if shown.module == "ops" and words[:1] == ["redrive"] and "--local" in words:
        settings, own = _redrive_local()
        _, rest = settings.parse_known_args([w for w in words[1:] if w != "--local"])
        return _parse(own, rest)
    return _parse(parser, words)


def refused(shown: list[Shown]) -> list[str]:
    """`where: `command`: what its parser said` for each command its parser refuses."""
    return [f"{one.where}: `{one.text}`: {said}" for one in shown if (said := refusal(one)) is not None]
