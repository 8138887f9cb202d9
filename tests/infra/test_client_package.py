"""The functions ship the refdata-client package as teams install it: one source, byte for byte; `make client` builds
it without the platform's toolchain, and its metadata is whole."""

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from tests.infra.conftest import ENVIRONMENTS, Synthesized
from tests.support import client

ROOT = Path(__file__).resolve().parents[2]
FUNCTION = "AWS::Lambda::Function"


def runtime_assets(synthesized: Synthesized, env: str) -> dict[str, Path]:
    """Each Python function of lambdas/ (its handler's package is a folder of lambdas/) and its staged asset."""
    assets: dict[str, Path] = {}
    for kind in ("Stateful", "Stateless"):
        for logical_id, resource in synthesized.template_json(env, kind)["Resources"].items():
            properties = resource.get("Properties", {})
            handler = str(properties.get("Handler", ""))
            if resource["Type"] != FUNCTION or not (ROOT / "lambdas" / handler.split(".")[0]).is_dir():
                continue
            key = properties["Code"]["S3Key"]
            assets[logical_id] = synthesized.outdir / f"asset.{key.removesuffix('.zip')}"
    return assets


def package_files(asset: Path) -> dict[str, bytes]:
    return {
        path.relative_to(asset).as_posix(): path.read_bytes()
        for path in sorted((asset / "refdata").rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_every_function_ships_the_package_teams_install(synthesized: Synthesized, env: str) -> None:
    assets = runtime_assets(synthesized, env)
    assert assets, f"{env}: no function of lambdas/ found"
    installed = client.wheel_files()
    assert "refdata/py.typed" in installed and "refdata/writer.py" in installed
    for function, asset in assets.items():
        shipped = package_files(asset)
        assert shipped.keys() == installed.keys(), (
            f"{env} {function}: {sorted(shipped.keys() ^ installed.keys())}"
        )
        changed = sorted(name for name in shipped if shipped[name] != installed[name])
        assert not changed, f"{env} {function} ships other bytes than the wheel: {changed}"


def test_the_wheel_states_its_version_and_an_optional_boto3() -> None:
    import refdata

    metadata = client.wheel_files("refdata_client-")
    (text,) = [body.decode() for name, body in metadata.items() if name.endswith("/METADATA")]
    assert f"Version: {refdata.__version__}\n" in text
    assert "Requires-Python: >=3.11" in text
    requirements = [line for line in text.splitlines() if line.startswith("Requires-Dist:")]
    assert requirements and all("extra == 'aws'" in line or 'extra == "aws"' in line for line in requirements)


def test_the_wheel_summary_is_the_whole_sentence_pyproject_declares() -> None:
    metadata = client.wheel_files("refdata_client-")
    (text,) = [body.decode() for name, body in metadata.items() if name.endswith("/METADATA")]
    (summary,) = [
        line.removeprefix("Summary: ") for line in text.splitlines() if line.startswith("Summary: ")
    ]
    declared = tomllib.loads((ROOT / "lambdas" / "pyproject.toml").read_text())["project"]
    assert "description" not in declared.get("dynamic", []), "a docstring's first line is cut mid-sentence"
    assert summary == declared["description"]
    assert re.fullmatch(r"[A-Z][^\n]*[^.]\.", summary), f"not one whole sentence: {summary!r}"
    assert summary.count("(") == summary.count(")"), summary


LOCK_ENTRY = re.compile(r"^([A-Za-z0-9_.\-]+)==\S+(?:[ \t]*\\\n[ \t]+--hash=\S+)+", re.M)


def test_the_client_build_environment_is_pinned_as_the_lock_pins_it() -> None:
    """requirements-client.txt holds the build backend (lambdas/pyproject.toml's) and the version check's needs,
    each entry exactly requirements.lock's: one version of each across the project, hash-checked."""
    lock = {m.group(1): m.group(0) for m in LOCK_ENTRY.finditer((ROOT / "requirements.lock").read_text())}
    pins = {
        m.group(1): m.group(0) for m in LOCK_ENTRY.finditer((ROOT / "requirements-client.txt").read_text())
    }
    backend = tomllib.loads((ROOT / "lambdas" / "pyproject.toml").read_text())["build-system"]["requires"]
    assert {re.split(r"[<>=~!\[ ]", r)[0].replace("_", "-") for r in backend} <= pins.keys(), backend
    assert "aws-cdk-lib" not in pins and "constructs" not in pins
    assert {name: lock.get(name) for name in pins} == pins


def test_make_client_builds_the_wheel_without_the_platforms_toolchain(tmp_path: Path) -> None:
    """In a copy of the tree with no `.venv` and no `node_modules` (and no git history), `make client` checks the
    version and builds the wheel; it sets up neither, and its own environment holds no aws-cdk-lib."""
    tree = tmp_path / "tree"
    tracked = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.split()
    for name in tracked:
        if (ROOT / name).is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, tree / name)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH"))}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if ".venv" not in p)
    built = subprocess.run(
        ["make", "--no-print-directory", "client"], cwd=tree, env=env, capture_output=True, text=True
    )
    assert built.returncode == 0, built.stdout + built.stderr
    assert [p.name for p in sorted((tree / "dist").iterdir())] == [
        f"refdata_client-{client_version()}-py3-none-any.whl",
        f"refdata_client-{client_version()}.tar.gz",
    ]
    assert not (tree / ".venv").exists() and not (tree / "node_modules").exists()
    installed = {p.name.lower() for p in (tree / ".venv-client").glob("lib/python*/site-packages/*")}
    assert not {name for name in installed if name.startswith(("aws_cdk", "constructs", "jsii"))}, installed


def client_version() -> str:
    import refdata

    return refdata.__version__
