"""`python -m ops ...` from the repository root.

The ops CLI and its operations live in lambdas/ops: lambdas/ is the root of every Lambda asset, where the runtime
packages import each other as top-level packages (refdata, search, stream_sync). This package puts lambdas/ on
the path and stands for lambdas/ops, so `python -m ops` runs lambdas/ops/__main__.py with everything importable,
and hands the CLI the configured environments (the Lambda asset holds no infra/ to import them from).
"""

import sys
from pathlib import Path

_LAMBDAS = Path(__file__).resolve().parent.parent / "lambdas"
if str(_LAMBDAS) not in sys.path:
    sys.path.insert(0, str(_LAMBDAS))
__path__ = [str(_LAMBDAS / "ops")]

import functools  # noqa: E402

from ops.advice import missing_dependency, third_party  # noqa: E402 (after the path is set; standard library only)

try:
    from infra.environments import environments
    from infra.validation import ConfigError, one_line, source_of
    from ops import cli
except ModuleNotFoundError as missing:  # the wrong interpreter: say which, and the one that works
    if not third_party(missing):
        raise
    raise SystemExit(missing_dependency(missing)) from None


@functools.cache
def _configured() -> dict[str, object]:
    """The configured environments; a config mistake as the CLI's one-line `ConfigUnusable`, with the environment
    whose setting it is."""
    try:
        return dict(environments())
    except ConfigError as error:
        location = source_of(error, error.__traceback__)
        environment = location.environment if location else None
        raise cli.ConfigUnusable(one_line(error, error.__traceback__), environment) from None


cli.ENVIRONMENTS = _configured  # --env's choices and regions come from config
