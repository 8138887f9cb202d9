"""Runtime code imports only what the Lambda runtime has: the standard library, boto3/botocore/urllib3 and the
packages under lambdas/ (nothing is vendored). Test-only libraries such as shapely never reach a function."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.lambdas.module_imports import top_level_imports

LAMBDAS = Path(__file__).resolve().parents[2] / "lambdas"
RUNTIME = {"boto3", "botocore", "urllib3"}


def test_runtime_code_imports_only_the_standard_library_the_runtime_sdk_and_its_own_packages() -> None:
    own = {path.name for path in LAMBDAS.iterdir() if (path / "__init__.py").exists()}
    allowed = set(sys.stdlib_module_names) | RUNTIME | own

    foreign = {
        str(path.relative_to(LAMBDAS)): sorted(top_level_imports(path) - allowed)
        for path in LAMBDAS.rglob("*.py")
        if top_level_imports(path) - allowed
    }

    assert foreign == {}
