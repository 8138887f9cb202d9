"""The secured test node's artifacts and launcher, installed by the same set-up step as the engine (`make engine`).

Why a second node kind: the security plugin (`org.opensearch.plugin:opensearch-security`) is published for a few
engine versions only, and none is the engine's (config's `engine_version`, tests/support/engine/pom.xml), while a
plugin runs only in the core it was built for (a 3.4 plugin in a 3.3 core fails on the first action: the core's
ActionFilter API changed). So the tests of what fine-grained access control enforces run on a node of the version
the plugin is published for nearest above the engine's, pinned once: `opensearch.version` in
tests/support/secured/pom.xml (SECURED_VERSION below reads it; tests/support/test_secured_node.py states the relation).

pom.xml names the core, the engine's modules, the plugin's zip and commons-collections4 (which the plugin needs and a
distribution ships with another module); secured.lock pins each by group:artifact:version and SHA-256. `install`
copies the locked jars into .cache/engine/secured/lib, adds every jar of the verified zip whose artifact the node
does not already have (the node's own version wins), and compiles SecuredLauncher.java.

    python -m tests.support.secured_setup install
    python -m tests.support.secured_setup lock
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from tests.support.engine_setup import (
    CACHE as ENGINE_CACHE,
)
from tests.support.engine_setup import (
    ROOT,
    EngineSetupError,
    Launcher,
    LockedJar,
    compile_launcher,
    java_home,
    sha256_of,
)

SECURED_DIR = Path(__file__).resolve().parent / "secured"
POM = SECURED_DIR / "pom.xml"
LOCK = SECURED_DIR / "secured.lock"
LAUNCHER_SOURCE = SECURED_DIR / "SecuredLauncher.java"
LAUNCHER_CLASS = "refdata.secured.SecuredLauncher"
CACHE = ENGINE_CACHE / "secured"
LIB = CACHE / "lib"
SECURED = Launcher(LAUNCHER_CLASS, CACHE / "launcher.jar", LIB, CACHE / "classes.jsa")
PLUGIN_GROUP, PLUGIN_ARTIFACT = "org.opensearch.plugin", "opensearch-security"
# The engine versions `org.opensearch.plugin:opensearch-security` is published for on the registry (its metadata,
# read 2026-12-05; 3.3.x.0 was refused). The secured node's version, pom.xml's `opensearch.version`, must be the
# nearest of these at or above the engine's (tests/support/test_secured_node.py checks it): update both together.
PLUGIN_PUBLISHED_FOR = ("2.11.1", "2.19.3", "2.19.4", "3.4.0")
SECURED_VERSION = re.search(r"<opensearch\.version>([^<]+)<", POM.read_text())[1]  # type: ignore[index]
_LOCK_HEADER = (
    "# Every artifact the secured test node loads: group:artifact:version and SHA-256 (tests/support/secured_setup.py).\n"
    "# Rewrite after changing tests/support/secured/pom.xml: make engine-lock\n"
)


def _file_name(artifact: LockedJar) -> str:
    extension = "zip" if (artifact.group, artifact.artifact) == (PLUGIN_GROUP, PLUGIN_ARTIFACT) else "jar"
    return f"{artifact.artifact}-{artifact.version}.{extension}"


def read_lock(path: Path = LOCK) -> list[LockedJar]:
    artifacts = []
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            coordinates, sha256 = line.split()
            artifacts.append(LockedJar(*coordinates.split(":"), sha256))
    return artifacts


def resolve(jdk: Path, into: Path) -> dict[str, tuple[LockedJar, Path]]:
    """Maven resolves pom.xml into `into` (repository layout); file name -> (artifact, path)."""
    command = [
        "mvn", "-B", "-q", "-f", str(POM), "dependency:copy-dependencies",
        f"-DoutputDirectory={into}", "-Dmdep.useRepositoryLayout=true", "-DincludeScope=runtime",
    ]  # fmt: skip
    done = subprocess.run(command, env={**os.environ, "JAVA_HOME": str(jdk)}, capture_output=True, text=True)
    if done.returncode != 0:
        raise EngineSetupError(
            f"Maven could not resolve the secured node's artifacts:\n{done.stdout}{done.stderr}"
        )
    resolved: dict[str, tuple[LockedJar, Path]] = {}
    for path in sorted([*into.rglob("*.jar"), *into.rglob("*.zip")]):
        version_dir = path.parent
        group = ".".join(version_dir.parent.parent.relative_to(into).parts)
        artifact = LockedJar(group, version_dir.parent.name, version_dir.name, sha256_of(path))
        if path.name != _file_name(artifact) or path.name in resolved:
            raise EngineSetupError(f"unexpected artifact file {path.relative_to(into)}")
        resolved[path.name] = (artifact, path)
    return resolved


def _artifact_name(jar_name: str) -> str:
    """`netty-codec-http-4.2.7.Final.jar` -> `netty-codec-http`: the name without its version."""
    return re.sub(r"-\d[^-]*(-[A-Za-z0-9_.]+)?\.jar$", "", jar_name)


def plugin_jars(zip_path: Path, present: set[str]) -> list[str]:
    """The zip's jars whose artifact is not among `present` (artifact names)."""
    with zipfile.ZipFile(zip_path) as archive:
        names = [name for name in archive.namelist() if name.endswith(".jar") and "/" not in name.strip("/")]
    return sorted(name for name in names if _artifact_name(name) not in present)


def verified_install(locked: list[LockedJar], lib: Path = LIB) -> bool:
    """Whether `lib` holds exactly the locked jars (checksums verified), and the verified zip's extra jars."""
    zip_name = next(_file_name(a) for a in locked if a.artifact == PLUGIN_ARTIFACT)
    if not (lib.is_dir() and (CACHE / zip_name).is_file()):
        return False
    by_name = {_file_name(artifact): artifact for artifact in locked}
    if sha256_of(CACHE / zip_name) != by_name[zip_name].sha256:
        return False
    jars = {name: artifact for name, artifact in by_name.items() if name.endswith(".jar")}
    extra = plugin_jars(CACHE / zip_name, {_artifact_name(name) for name in jars})
    if {path.name for path in lib.glob("*.jar")} != set(jars) | set(extra):
        return False
    return all(sha256_of(lib / name) == artifact.sha256 for name, artifact in jars.items())


def install() -> None:
    jdk = java_home()
    locked = read_lock()
    if not verified_install(locked):
        with tempfile.TemporaryDirectory(dir=ENGINE_CACHE if ENGINE_CACHE.is_dir() else None) as scratch:
            resolved = resolve(jdk, Path(scratch) / "repository")
            wanted = {_file_name(artifact): artifact for artifact in locked}
            unexpected, missing = sorted(set(resolved) - set(wanted)), sorted(set(wanted) - set(resolved))
            differing = sorted(n for n in wanted.keys() & resolved.keys() if resolved[n][0] != wanted[n])
            if unexpected or missing or differing:
                raise EngineSetupError(
                    "The resolved secured-node artifacts differ from tests/support/secured/secured.lock "
                    f"(unlocked: {unexpected}, not resolved: {missing}, checksum differs: {differing}). "
                    "After a deliberate version change run `make engine-lock`."
                )
            staging = Path(scratch) / "lib"
            staging.mkdir()
            zip_path = next(path for name, (_a, path) in resolved.items() if name.endswith(".zip"))
            for name, (_artifact, path) in resolved.items():
                if name.endswith(".jar"):
                    shutil.copy2(path, staging / name)
            present = {_artifact_name(name) for name in resolved if name.endswith(".jar")}
            with zipfile.ZipFile(zip_path) as archive:
                for name in plugin_jars(zip_path, present):
                    (staging / name).write_bytes(archive.read(name))
            shutil.rmtree(CACHE, ignore_errors=True)
            CACHE.mkdir(parents=True)
            shutil.copy2(zip_path, CACHE / zip_path.name)
            shutil.move(str(staging), LIB)
        print(
            f"secured node: {len(locked)} artifacts installed into {LIB.relative_to(ROOT)}, checksums verified"
        )
    compile_launcher(jdk, source=LAUNCHER_SOURCE, jar=SECURED.jar, lib=LIB)


def lock() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        resolved = resolve(java_home(), Path(scratch))
    lines = sorted(f"{a.group}:{a.artifact}:{a.version} {a.sha256}" for a, _path in resolved.values())
    LOCK.write_text(_LOCK_HEADER + "\n".join(lines) + "\n")
    print(f"secured node: {LOCK.relative_to(ROOT)} now pins {len(resolved)} artifacts")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("install", "lock"))
    arguments = parser.parse_args(argv)
    try:
        install() if arguments.action == "install" else lock()
    except EngineSetupError as error:
        print(f"secured node set-up: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
