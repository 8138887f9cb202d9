"""What `python -m ops` says when it cannot run as invoked: the wrong interpreter, the wrong folder, no AWS
credentials. Standard library only: it must load where the project's dependencies do not."""

from __future__ import annotations

import sys
from pathlib import Path

# lambdas/ops/advice.py -> the repository root (in a checkout; the Lambda asset never runs the CLI).
ROOT = Path(__file__).resolve().parents[2]
RUN = "`.venv/bin/python -m ops ...` from the repository root"


def third_party(error: ModuleNotFoundError) -> bool:
    """Whether the module missing is a dependency (botocore, ...), not one of the project's own packages (a mistake in
    the code, which the traceback shows best)."""
    own = {path.parent.name for path in (ROOT / "lambdas").glob("*/__init__.py")} | {"infra", "ops"}
    return (error.name or "").split(".")[0] not in own


def missing_dependency(error: ModuleNotFoundError) -> str:
    """One line for an interpreter without the project's dependencies (`No module named 'botocore'`)."""
    return (
        f"python -m ops: {error} in {sys.executable}, which lacks the project's dependencies: "
        f"run `make setup` in {ROOT}, then {RUN}"
    )


def no_configured_environments(env: str) -> str:
    """--env run where the configured environments were not loaded (run from lambdas/ rather than the root)."""
    return (
        f"no configured environment {env!r} here: only the repository root's `ops` package loads the environments "
        f"(infra/environments.py) and their regions; run {RUN} (here: {Path.cwd()}), or name --region"
    )


def no_credentials(error: Exception) -> str:
    """One line for a deployed run that found no AWS credentials, or an expired sign-in."""
    return (
        f"python -m ops: {type(error).__name__}: {error}. Sign in and name the profile: `aws sso login --profile "
        "<profile>`, then `AWS_PROFILE=<profile> .venv/bin/python -m ops ...` (or export AWS_PROFILE; "
        "`aws sts get-caller-identity` shows who you are)"
    )
