"""The refdata-client distribution as `make client` builds it, once per test process, and what installing it takes."""

import fcntl
import functools
import re
import subprocess
import tempfile
import zipfile
from email.parser import Parser
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements.lock"
LOCK_ENTRY = re.compile(r"^([A-Za-z0-9_.\-]+)==\S+(?:[ \t]*\\\n[ \t]+--hash=\S+)+", re.M)


# Workers build at once: the first `make client` of a fresh tree creates .venv-client, and two creating it together
# broke it (a recipe's scratch copy failed so); each build waits for the one before.
BUILD_LOCK = ROOT / ".cache" / "client-build.lock"


@functools.cache
def built() -> Path:
    """The directory holding the wheel and the sdist, built by the Makefile's own command."""
    out = Path(tempfile.mkdtemp(prefix="refdata-client-"))
    BUILD_LOCK.parent.mkdir(exist_ok=True)
    with BUILD_LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = subprocess.run(
            ["make", "--no-print-directory", "-s", "client", f"CLIENT_DIST={out}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
    if done.returncode:
        raise RuntimeError(f"`make client` failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return out


def wheel() -> Path:
    (found,) = built().glob("refdata_client-*-py3-none-any.whl")
    return found


def wheel_files(prefix: str = "refdata/") -> dict[str, bytes]:
    """The package's files in the wheel, by their path in it."""
    with zipfile.ZipFile(wheel()) as archive:
        return {name: archive.read(name) for name in archive.namelist() if name.startswith(prefix)}


def requirements(extra: str) -> list[Requirement]:
    """What the wheel's own metadata requires with `extra`, markers evaluated for this interpreter."""
    with zipfile.ZipFile(wheel()) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        requires = Parser().parsestr(archive.read(name).decode()).get_all("Requires-Dist") or []
    return [r for r in map(Requirement, requires) if r.marker is None or r.marker.evaluate({"extra": extra})]


def locked_closure(extra: str) -> str:
    """The lock's entries (version and hashes) for everything the wheel with `extra` needs, transitively.

    The project's environment was installed from this lock, so each dependency's own requirements are read from its
    installed metadata. An install of exactly these, hash-checked and without resolving (`--no-deps`), needs only
    the wheels the set-up's `uv pip sync` already fetched: no index, no metadata, nothing a warm cache alone holds.
    """
    entries = {canonicalize_name(m.group(1)): m.group(0) for m in LOCK_ENTRY.finditer(LOCK.read_text())}
    needed: dict[str, Requirement] = {}
    pending = requirements(extra)
    while pending:
        requirement = pending.pop()
        name = canonicalize_name(requirement.name)
        if name in needed:
            continue
        assert name in entries, f"{requirement} (needed by refdata-client[{extra}]) is not in {LOCK.name}"
        needed[name] = requirement
        for text in metadata.requires(name) or []:
            nested = Requirement(text)
            if nested.marker is None or nested.marker.evaluate({"extra": ""}):
                pending.append(nested)
    return "\n".join(entries[name] for name in sorted(needed)) + "\n"
