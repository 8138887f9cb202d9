"""The package as a whole: which modules need boto3, and the version it states."""

import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import refdata

# The writer makes its own boto3 session when given none.
NEEDS_BOTO3 = {"refdata.writer"}
MODULES = sorted(m.name for m in pkgutil.iter_modules(refdata.__path__, "refdata."))

BLOCK_BOTO3 = """
import importlib, sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("boto3", "botocore"):
            raise ImportError(f"{name} is not installed")
sys.meta_path.insert(0, Block())
for name in sys.argv[1:]:
    importlib.import_module(name)
"""


def test_the_conventions_import_without_boto3():
    conventions = [name for name in MODULES if name not in NEEDS_BOTO3]
    assert "refdata.registry" in conventions and "refdata.sharding" in conventions
    lambdas = Path(refdata.__file__).parent.parent
    run = subprocess.run(
        [sys.executable, "-c", BLOCK_BOTO3, "refdata", *conventions],
        cwd=lambdas,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr


def test_the_modules_said_to_need_boto3_exist():
    assert set(NEEDS_BOTO3) <= set(MODULES)


def test_the_version_is_semantic():
    assert re.fullmatch(r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)", refdata.__version__)
