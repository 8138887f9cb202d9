"""refdata as a whole (it is the distribution refdata-client): it imports the standard library and itself, and the
AWS SDK only where it talks to AWS (the writer's default session, the reader's signed transport); everything else,
the reader included, imports without it. Its version is semantic."""

import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import refdata

from tests.lambdas.module_imports import top_level_imports

NEEDS_BOTO3 = {"refdata.writer", "refdata.transport"}
AWS_SDK = {"boto3", "botocore", "urllib3"}
MODULES = sorted(m.name for m in pkgutil.iter_modules(refdata.__path__, "refdata."))

BLOCK_BOTO3 = """
import importlib, sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("boto3", "botocore", "urllib3"):
            raise ImportError(f"{name} is not installed")
sys.meta_path.insert(0, Block())
for name in sys.argv[1:]:
    importlib.import_module(name)
"""


def test_refdata_imports_only_the_standard_library_itself_and_the_aws_sdk() -> None:
    allowed = set(sys.stdlib_module_names) | {"refdata"} | AWS_SDK
    foreign = {
        path.name: sorted(top_level_imports(path) - allowed)
        for path in Path(refdata.__file__).parent.rglob("*.py")
        if top_level_imports(path) - allowed
    }
    assert foreign == {}


def test_everything_but_the_writer_and_the_transport_imports_without_the_aws_sdk():
    conventions = [name for name in MODULES if name not in NEEDS_BOTO3]
    assert {"refdata.registry", "refdata.sharding", "refdata.reader", "refdata.queries"} <= set(conventions)
    lambdas = Path(refdata.__file__).parent.parent
    command = [sys.executable, "-c", BLOCK_BOTO3, "refdata", *conventions]
    run = subprocess.run(command, cwd=lambdas, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def test_the_modules_said_to_need_boto3_exist():
    assert set(NEEDS_BOTO3) <= set(MODULES)


def test_the_version_is_semantic():
    assert re.fullmatch(r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)", refdata.__version__)
