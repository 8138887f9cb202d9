"""refdata is self-contained (it becomes the distribution refdata-client): it imports the standard library and
itself, and the AWS SDK only where it talks to AWS; the reader and the conventions it needs import without it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.lambdas.test_runtime_imports import top_level_imports

LAMBDAS = Path(__file__).resolve().parents[3] / "lambdas"
AWS_SDK = {"boto3", "botocore", "urllib3"}
# What application code imports to search, and what those import: never the SDK.
READER_MODULES = (
    "refdata",
    "refdata.errors",
    "refdata.exact_numbers",
    "refdata.indexnames",
    "refdata.keys",
    "refdata.numbers",
    "refdata.queries",
    "refdata.reader",
    "refdata.registry",
)


def test_refdata_imports_only_the_standard_library_itself_and_the_aws_sdk() -> None:
    allowed = set(sys.stdlib_module_names) | {"refdata"} | AWS_SDK
    foreign = {
        path.name: sorted(top_level_imports(path) - allowed)
        for path in (LAMBDAS / "refdata").rglob("*.py")
        if top_level_imports(path) - allowed
    }
    assert foreign == {}


def test_the_reader_imports_without_the_aws_sdk() -> None:
    check = (
        "import importlib, sys\n"
        f"for name in {READER_MODULES!r}: importlib.import_module(name)\n"
        f"print(sorted(name for name in sys.modules if name.split('.')[0] in {sorted(AWS_SDK)!r}))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", check], cwd=LAMBDAS, capture_output=True, text=True, check=True
    ).stdout
    assert loaded.strip() == "[]"
