"""The functions ship the refdata-client package as teams install it: one source, byte for byte."""

from pathlib import Path

import pytest

from tests.infra.conftest import ENVIRONMENTS, Synthesized
from tests.support import client

ROOT = Path(__file__).resolve().parents[2]


def runtime_assets(synthesized: Synthesized, env: str) -> dict[str, Path]:
    """Each Python function of lambdas/ (its handler's package is a folder of lambdas/) and its staged asset."""
    assets: dict[str, Path] = {}
    for kind in ("Stateful", "Stateless"):
        for logical_id, resource in synthesized.template_json(env, kind)["Resources"].items():
            properties = resource.get("Properties", {})
            handler = str(properties.get("Handler", ""))
            if (
                resource["Type"] != "AWS::Lambda::Function"
                or not (ROOT / "lambdas" / handler.split(".")[0]).is_dir()
            ):
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
