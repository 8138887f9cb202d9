"""The refdata-client distribution as `make client` builds it, once per test process."""

import functools
import subprocess
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@functools.cache
def built() -> Path:
    """The directory holding the wheel and the sdist, built by the Makefile's own command."""
    out = Path(tempfile.mkdtemp(prefix="refdata-client-"))
    subprocess.run(
        ["make", "--no-print-directory", "-s", "client", f"CLIENT_DIST={out}"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    return out


def wheel() -> Path:
    (found,) = built().glob("refdata_client-*-py3-none-any.whl")
    return found


def wheel_files(prefix: str = "refdata/") -> dict[str, bytes]:
    """The package's files in the wheel, by their path in it."""
    with zipfile.ZipFile(wheel()) as archive:
        return {name: archive.read(name) for name in archive.namelist() if name.startswith(prefix)}
