"""The test nodes' artifacts and launcher, installed by the set-up (`make test` runs it), never at test time.

A node kind is a Maven project (pom.xml) naming the OpenSearch core and the modules the platform uses, and a lock
pinning every artifact it resolves to, with their transitive dependencies, by group:artifact:version and SHA-256.
`install` copies exactly the locked artifacts into the kind's .cache lib (Maven's own client and its default remote
repository; an artifact the lock does not name, or one whose checksum differs, fails the set-up), adds every jar of a
locked plugin zip whose artifact the node does not already have (the node's own version wins), and compiles the one
launcher both kinds run (engine/NodeLauncher.java) against that lib into the kind's launcher.jar with a JDK 21 or
newer. `lock` rewrites the lock after a version change in pom.xml. A kind's JVM command line (`NodeKind.command`) is
here too. This module's kind is the engine (tests/support/engine); the secured node's is in
tests/support/secured_setup.py.

    python -m tests.support.engine_setup install
    python -m tests.support.engine_setup lock

The JDK: $JAVA_HOME when it is 21 or newer, else the newest JDK 21+ under /usr/lib/jvm.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENGINE_DIR = Path(__file__).resolve().parent / "engine"
LAUNCHER_SOURCE = ENGINE_DIR / "NodeLauncher.java"
LAUNCHER_CLASS = "refdata.engine.NodeLauncher"
LOG_CONFIG = ENGINE_DIR / "log4j2.properties"
HEAP = "512m"
MIN_JAVA = 21
JVM_DIRECTORY = Path("/usr/lib/jvm")
# Artifacts Maven resolves as a zip of jars rather than a jar.
PLUGIN_ZIPS = frozenset({("org.opensearch.plugin", "opensearch-security")})


class EngineSetupError(RuntimeError):
    """The set-up cannot provide the engine; the message says what to do."""


@dataclass(frozen=True)
class NodeKind:
    """One kind of test node: what it is called, where its pom.xml and lock are, and where it is installed."""

    name: str
    directory: Path
    lock_name: str
    cache: Path

    @property
    def pom(self) -> Path:
        return self.directory / "pom.xml"

    @property
    def lock(self) -> Path:
        return self.directory / self.lock_name

    @property
    def lib(self) -> Path:
        return self.cache / "lib"

    @property
    def jar(self) -> Path:
        """The compiled launcher: a jar, not a folder (a class archive refuses a non-empty folder on the classpath)."""
        return self.cache / "launcher.jar"

    @property
    def archive(self) -> Path:
        """The JVM's class archive: recorded by the first node of the kind that starts without a current one, as it
        stops (`EngineNode.stop`), and mapped by every node after."""
        return self.cache / "classes.jsa"

    @property
    def archive_key(self) -> Path:
        """What the archive was recorded against (`key`)."""
        return self.cache / "classes.jsa.key"

    def key(self) -> str:
        """The JDK and the classpath's jars (name, size, time), as the JVM checks an archive against them: another
        JDK or reinstalled jars make the archive stale, and a node records it again."""
        java = java_home().resolve()
        modules = (java / "lib" / "modules").stat()
        jars = sorted([self.jar.resolve(), *self.lib.resolve().glob("*.jar")])
        stats = [(path.name, path.stat().st_size, path.stat().st_mtime_ns) for path in jars]
        text = repr((str(java), modules.st_size, modules.st_mtime_ns, stats))
        return hashlib.sha256(text.encode()).hexdigest()

    def archive_is_current(self) -> bool:
        """Whether an archive was recorded for this JDK and these jars."""
        try:
            return self.archive.is_file() and self.archive_key.read_text() == self.key()
        except OSError:
            return False

    def installed(self) -> bool:
        return self.jar.is_file() and self.lib.is_dir()

    def command(self, home: Path, *, record_into: Path | None = None) -> list[str]:
        """The JVM's command line for a node in `home`: it maps the class archive, or records one into `record_into`
        when it exits. Real paths on the classpath, so the archive a checkout recorded matches in a scratch copy that
        links its .cache/engine. The JVM's own warnings (an archive that does not match is one) go to stderr, the
        node's log: stdout carries only the ready line."""
        if record_into is not None:
            share = [f"-XX:ArchiveClassesAtExit={record_into}"]
        else:
            share = [f"-XX:SharedArchiveFile={self.archive}"] if self.archive.is_file() else []
        return [
            str(java_home() / "bin" / "java"), f"-Xms{HEAP}", f"-Xmx{HEAP}", "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1", "--enable-native-access=ALL-UNNAMED", "-Xlog:disable",
            "-Xlog:all=warning:stderr", *share, f"-Dlog4j2.configurationFile={LOG_CONFIG}",
            "-cp", f"{self.jar.resolve()}:{self.lib.resolve()}/*", LAUNCHER_CLASS, str(home),
        ]  # fmt: skip


ENGINE = NodeKind("test engine", ENGINE_DIR, "engine.lock", ROOT / ".cache" / "engine")
LIB, LOCK = ENGINE.lib, ENGINE.lock


@dataclass(frozen=True, order=True)
class LockedArtifact:
    group: str
    artifact: str
    version: str
    sha256: str

    @property
    def coordinates(self) -> str:
        return f"{self.group}:{self.artifact}:{self.version}"

    @property
    def file_name(self) -> str:
        extension = "zip" if (self.group, self.artifact) in PLUGIN_ZIPS else "jar"
        return f"{self.artifact}-{self.version}.{extension}"


def java_feature_version(home: Path) -> int | None:
    """The feature version (17, 21, 25) of the JDK at `home` from its `release` file; None if it is no JDK."""
    try:
        text = (home / "release").read_text()
    except OSError:
        return None
    match = re.search(r'^JAVA_VERSION="(\d+)', text, re.MULTILINE)
    if match is None or not (home / "bin" / "javac").exists():
        return None
    return int(match[1])


def java_home(environ: dict[str, str] | None = None, jvm_directory: Path = JVM_DIRECTORY) -> Path:
    """$JAVA_HOME when it is a JDK 21+, else the newest JDK 21+ under `jvm_directory`."""
    environ = dict(os.environ) if environ is None else environ
    configured = environ.get("JAVA_HOME")
    if configured and (java_feature_version(Path(configured)) or 0) >= MIN_JAVA:
        return Path(configured)
    found = sorted(
        (version, str(path))
        for path in (jvm_directory.iterdir() if jvm_directory.is_dir() else [])
        if not path.is_symlink() and (version := java_feature_version(path) or 0) >= MIN_JAVA
    )
    if not found:
        said = f"JAVA_HOME={configured} is not" if configured else "JAVA_HOME is not set, and there is no"
        raise EngineSetupError(
            f"The test engine (OpenSearch 3.x) needs a JDK {MIN_JAVA} or newer: {said} a JDK {MIN_JAVA}+ "
            f"and none was found under {jvm_directory}. Install one and set JAVA_HOME to its directory."
        )
    return Path(found[-1][1])


def read_lock(path: Path = LOCK) -> list[LockedArtifact]:
    artifacts = []
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            coordinates, sha256 = line.split()
            group, artifact, version = coordinates.split(":")
            artifacts.append(LockedArtifact(group, artifact, version, sha256))
    return artifacts


def write_lock(artifacts: list[LockedArtifact], path: Path = LOCK) -> None:
    header = (
        "# Every artifact this test node loads: group:artifact:version and SHA-256 (tests/support/engine_setup.py).\n"
        "# Rewrite after changing the pom.xml beside this file: make engine-lock\n"
    )
    path.write_text(header + "".join(f"{a.coordinates} {a.sha256}\n" for a in sorted(artifacts)))


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def resolve(kind: NodeKind, jdk: Path, into: Path) -> dict[str, tuple[LockedArtifact, Path]]:
    """Maven resolves the kind's pom.xml into `into` (repository layout); file name -> (artifact, path)."""
    command = [
        "mvn", "-B", "-q", "-f", str(kind.pom), "dependency:copy-dependencies",
        f"-DoutputDirectory={into}", "-Dmdep.useRepositoryLayout=true", "-DincludeScope=runtime",
    ]  # fmt: skip
    done = subprocess.run(command, env={**os.environ, "JAVA_HOME": str(jdk)}, capture_output=True, text=True)
    if done.returncode != 0:
        raise EngineSetupError(
            f"Maven could not resolve the {kind.name}'s artifacts:\n{done.stdout}{done.stderr}"
        )
    resolved: dict[str, tuple[LockedArtifact, Path]] = {}
    for path in sorted([*into.rglob("*.jar"), *into.rglob("*.zip")]):
        version_dir = path.parent
        group = ".".join(version_dir.parent.parent.relative_to(into).parts)
        artifact = LockedArtifact(group, version_dir.parent.name, version_dir.name, sha256_of(path))
        if path.name != artifact.file_name or path.name in resolved:
            raise EngineSetupError(f"unexpected artifact file {path.relative_to(into)}")
        resolved[path.name] = (artifact, path)
    return resolved


def _artifact_name(jar_name: str) -> str:
    """`netty-codec-http-4.2.7.Final.jar` -> `netty-codec-http`: the name without its version."""
    return re.sub(r"-\d[^-]*(-[A-Za-z0-9_.]+)?\.jar$", "", jar_name)


def bundled_jars(directory: Path, names: Iterable[str]) -> dict[str, Path]:
    """The jars inside the plugin zips among `names` (files in `directory`) whose artifact none of the jars among
    `names` is: jar name -> its zip."""
    names = list(names)
    present = {_artifact_name(name) for name in names if name.endswith(".jar")}
    bundled = {}
    for zip_name in (name for name in names if name.endswith(".zip")):
        with zipfile.ZipFile(directory / zip_name) as archive:
            for jar in archive.namelist():
                if jar.endswith(".jar") and "/" not in jar.strip("/") and _artifact_name(jar) not in present:
                    bundled[jar] = directory / zip_name
    return bundled


def verified_install(locked: list[LockedArtifact], lib: Path = LIB) -> bool:
    """Whether `lib` holds exactly the locked artifacts (checksums verified) and the jars their zips bundle."""
    wanted = {artifact.file_name: artifact for artifact in locked}
    if not all((lib / name).is_file() and sha256_of(lib / name) == a.sha256 for name, a in wanted.items()):
        return False
    return {path.name for path in lib.iterdir()} == set(wanted) | set(bundled_jars(lib, wanted))


def install(kind: NodeKind = ENGINE) -> None:
    jdk = java_home()
    locked = read_lock(kind.lock)
    if not verified_install(locked, kind.lib):
        kind.cache.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=kind.cache) as scratch:
            resolved = resolve(kind, jdk, Path(scratch) / "repository")
            wanted = {artifact.file_name: artifact for artifact in locked}
            unexpected, missing = sorted(set(resolved) - set(wanted)), sorted(set(wanted) - set(resolved))
            differing = sorted(n for n in wanted.keys() & resolved.keys() if resolved[n][0] != wanted[n])
            if unexpected or missing or differing:
                raise EngineSetupError(
                    f"The resolved {kind.name} artifacts differ from {kind.lock.relative_to(ROOT)} "
                    f"(unlocked: {unexpected}, not resolved: {missing}, checksum differs: {differing}). "
                    "After a deliberate version change run `make engine-lock`."
                )
            staging = Path(scratch) / "lib"
            staging.mkdir()
            for name, (_artifact, path) in resolved.items():
                shutil.copy2(path, staging / name)
            for jar, zip_path in bundled_jars(staging, resolved).items():
                with zipfile.ZipFile(zip_path) as archive:
                    (staging / jar).write_bytes(archive.read(jar))
            shutil.rmtree(kind.lib, ignore_errors=True)
            shutil.move(str(staging), kind.lib)
        print(
            f"{kind.name}: {len(locked)} artifacts installed into {kind.lib.relative_to(ROOT)}, checksums verified"
        )
    compile_launcher(jdk, kind)


def compile_launcher(jdk: Path, kind: NodeKind) -> None:
    """javac the launcher against the kind's installed jars into its jar, unless the jar is newer than the source."""
    if kind.jar.exists() and kind.jar.stat().st_mtime >= LAUNCHER_SOURCE.stat().st_mtime:
        return
    with tempfile.TemporaryDirectory() as scratch:
        classes = Path(scratch) / "classes"
        command = [
            str(jdk / "bin" / "javac"), "--release", str(MIN_JAVA), "-d", str(classes),
            "-cp", str(kind.lib / "*"), str(LAUNCHER_SOURCE),
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise EngineSetupError(f"javac failed on {LAUNCHER_SOURCE.name}:\n{done.stdout}{done.stderr}")
        partial = kind.jar.with_suffix(".partial")
        with zipfile.ZipFile(partial, "w") as archive:
            for path in sorted(classes.rglob("*.class")):
                archive.write(path, path.relative_to(classes).as_posix())
        partial.replace(kind.jar)


def lock(kind: NodeKind = ENGINE) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        resolved = resolve(kind, java_home(), Path(scratch))
    write_lock([artifact for artifact, _path in resolved.values()], kind.lock)
    print(f"{kind.name}: {kind.lock.relative_to(ROOT)} now pins {len(resolved)} artifacts")


def main(argv: list[str] | None = None, kind: NodeKind = ENGINE) -> int:
    parser = argparse.ArgumentParser(description=f"Install or lock the {kind.name}'s artifacts.")
    parser.add_argument("action", choices=("install", "lock"))
    arguments = parser.parse_args(argv)
    try:
        install(kind) if arguments.action == "install" else lock(kind)
    except EngineSetupError as error:
        print(f"{kind.name} set-up: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
