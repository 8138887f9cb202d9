"""The test engine's artifacts and launcher, installed by the set-up (`make test` runs it), never at test time.

tests/support/engine/pom.xml names the OpenSearch core and the modules the platform uses; Maven resolves them with
their transitive dependencies, and engine.lock pins every jar by group:artifact:version and SHA-256. `install`
copies exactly the locked jars into .cache/engine/lib (Maven's own client and its default remote repository; a jar
the lock does not name, or one whose checksum differs, fails the set-up) and compiles the launcher
(EngineLauncher.java) into .cache/engine/launcher.jar with a JDK 21 or newer. `lock` rewrites engine.lock after a
version change in pom.xml. A node's JVM command line (`Launcher.command`) is here too, for both node kinds.

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
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENGINE_DIR = Path(__file__).resolve().parent / "engine"
POM = ENGINE_DIR / "pom.xml"
LOCK = ENGINE_DIR / "engine.lock"
LAUNCHER_SOURCE = ENGINE_DIR / "EngineLauncher.java"
LAUNCHER_CLASS = "refdata.engine.EngineLauncher"
LOG_CONFIG = ENGINE_DIR / "log4j2.properties"
CACHE = ROOT / ".cache" / "engine"
LIB = CACHE / "lib"
LAUNCHER_JAR = (
    CACHE / "launcher.jar"
)  # a jar, not a folder: a class archive refuses a non-empty folder on the classpath
ARCHIVE = CACHE / "classes.jsa"  # tests/support/node_archive.py records it
HEAP = "512m"
MIN_JAVA = 21
JVM_DIRECTORY = Path("/usr/lib/jvm")
_LOCK_HEADER = (
    "# Every jar the test engine loads: group:artifact:version and SHA-256 (tests/support/engine_setup.py).\n"
    "# Rewrite after changing tests/support/engine/pom.xml: make engine-lock\n"
)


class EngineSetupError(RuntimeError):
    """The set-up cannot provide the engine; the message says what to do."""


@dataclass(frozen=True, order=True)
class LockedJar:
    group: str
    artifact: str
    version: str
    sha256: str

    @property
    def coordinates(self) -> str:
        return f"{self.group}:{self.artifact}:{self.version}"

    @property
    def file_name(self) -> str:
        return f"{self.artifact}-{self.version}.jar"


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


@dataclass(frozen=True)
class Launcher:
    """How one kind of node starts: its launcher's main class and jar, the jars it runs on, its class archive."""

    main_class: str
    jar: Path
    lib: Path
    archive: Path

    def installed(self) -> bool:
        return self.jar.is_file() and self.lib.is_dir()

    def command(self, home: Path, *, record_archive: bool = False) -> list[str]:
        """The JVM's command line for a node in `home`: it maps the class archive when there is one, or records it
        when it exits (`record_archive`). Real paths on the classpath, so the archive a checkout recorded matches
        in a scratch copy that links its .cache/engine. The JVM's own warnings (an archive that does not match
        is one) go to stderr, the node's log: stdout carries only the ready line."""
        if record_archive:
            share = [f"-XX:ArchiveClassesAtExit={self.archive}"]
        else:
            share = [f"-XX:SharedArchiveFile={self.archive}"] if self.archive.is_file() else []
        return [
            str(java_home() / "bin" / "java"), f"-Xms{HEAP}", f"-Xmx{HEAP}", "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1", "--enable-native-access=ALL-UNNAMED", "-Xlog:disable",
            "-Xlog:all=warning:stderr", *share, f"-Dlog4j2.configurationFile={LOG_CONFIG}",
            "-cp", f"{self.jar.resolve()}:{self.lib.resolve()}/*", self.main_class, str(home),
        ]  # fmt: skip

    def archive_matches(self) -> bool:
        """Whether the JVM accepts the class archive for this classpath and JDK (it checks each jar's size and
        time, and its own build)."""
        if not self.archive.is_file():
            return False
        command = self.command(Path())
        java, classpath = command[0], command[command.index("-cp") + 1]
        check = [java, "-Xshare:on", f"-XX:SharedArchiveFile={self.archive}", "-cp", classpath, "-version"]
        return subprocess.run(check, capture_output=True, check=False).returncode == 0


ENGINE = Launcher(LAUNCHER_CLASS, LAUNCHER_JAR, LIB, ARCHIVE)


def read_lock(path: Path = LOCK) -> list[LockedJar]:
    jars = []
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        coordinates, sha256 = line.split()
        group, artifact, version = coordinates.split(":")
        jars.append(LockedJar(group, artifact, version, sha256))
    return jars


def write_lock(jars: list[LockedJar], path: Path = LOCK) -> None:
    lines = [f"{jar.coordinates} {jar.sha256}" for jar in sorted(jars)]
    path.write_text(_LOCK_HEADER + "\n".join(lines) + "\n")


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def resolve(jdk: Path, into: Path) -> dict[str, tuple[LockedJar, Path]]:
    """Maven resolves pom.xml's dependencies into `into` (repository layout); file name -> (jar, path)."""
    command = [
        "mvn", "-B", "-q", "-f", str(POM), "dependency:copy-dependencies",
        f"-DoutputDirectory={into}", "-Dmdep.useRepositoryLayout=true", "-DincludeScope=runtime",
    ]  # fmt: skip
    done = subprocess.run(command, env={**os.environ, "JAVA_HOME": str(jdk)}, capture_output=True, text=True)
    if done.returncode != 0:
        raise EngineSetupError(f"Maven could not resolve the engine's artifacts:\n{done.stdout}{done.stderr}")
    resolved: dict[str, tuple[LockedJar, Path]] = {}
    for path in sorted(into.rglob("*.jar")):
        version_dir = path.parent
        artifact, version = version_dir.parent.name, version_dir.name
        group = ".".join(version_dir.parent.parent.relative_to(into).parts)
        jar = LockedJar(group, artifact, version, sha256_of(path))
        if jar.file_name in resolved or path.name != jar.file_name:
            raise EngineSetupError(f"unexpected artifact file {path.relative_to(into)}")
        resolved[jar.file_name] = (jar, path)
    return resolved


def verified_install(locked: list[LockedJar], lib: Path = LIB) -> bool:
    """Whether `lib` holds exactly the locked jars with their checksums."""
    if not lib.is_dir():
        return False
    present = {path.name for path in lib.glob("*.jar")}
    if present != {jar.file_name for jar in locked}:
        return False
    return all(sha256_of(lib / jar.file_name) == jar.sha256 for jar in locked)


def install() -> None:
    jdk = java_home()
    locked = read_lock()
    if not verified_install(locked):
        with tempfile.TemporaryDirectory(dir=CACHE.parent if CACHE.parent.is_dir() else None) as scratch:
            resolved = resolve(jdk, Path(scratch) / "repository")
            wanted = {jar.file_name: jar for jar in locked}
            unexpected = sorted(set(resolved) - set(wanted))
            missing = sorted(set(wanted) - set(resolved))
            differing = sorted(
                name for name in wanted.keys() & resolved.keys() if resolved[name][0] != wanted[name]
            )
            if unexpected or missing or differing:
                raise EngineSetupError(
                    "The resolved engine artifacts differ from tests/support/engine/engine.lock "
                    f"(unlocked: {unexpected}, not resolved: {missing}, checksum differs: {differing}). "
                    "After a deliberate version change run `make engine-lock`."
                )
            staging = Path(scratch) / "lib"
            staging.mkdir()
            for name, (_jar, path) in resolved.items():
                shutil.copy2(path, staging / name)
            shutil.rmtree(LIB, ignore_errors=True)
            LIB.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(staging), LIB)
        print(f"engine: {len(locked)} jars installed into {LIB.relative_to(ROOT)}, checksums verified")
    compile_launcher(jdk)


def compile_launcher(
    jdk: Path,
    *,
    source: Path = LAUNCHER_SOURCE,
    jar: Path = LAUNCHER_JAR,
    lib: Path = LIB,
) -> None:
    """javac a node's launcher against its installed jars into its jar, unless the jar is newer than its source
    (the secured node's set-up compiles its own with this too)."""
    if jar.exists() and jar.stat().st_mtime >= source.stat().st_mtime:
        return
    with tempfile.TemporaryDirectory() as scratch:
        classes = Path(scratch) / "classes"
        command = [
            str(jdk / "bin" / "javac"), "--release", str(MIN_JAVA), "-d", str(classes),
            "-cp", str(lib / "*"), str(source),
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise EngineSetupError(f"javac failed on {source.name}:\n{done.stdout}{done.stderr}")
        partial = jar.with_suffix(".partial")
        with zipfile.ZipFile(partial, "w") as archive:
            for path in sorted(classes.rglob("*.class")):
                archive.write(path, path.relative_to(classes).as_posix())
        partial.replace(jar)


def lock() -> None:
    jdk = java_home()
    with tempfile.TemporaryDirectory() as scratch:
        resolved = resolve(jdk, Path(scratch))
    write_lock([jar for jar, _path in resolved.values()])
    print(f"engine: {LOCK.relative_to(ROOT)} now pins {len(resolved)} jars")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("install", "lock"))
    arguments = parser.parse_args(argv)
    try:
        install() if arguments.action == "install" else lock()
    except EngineSetupError as error:
        print(f"engine set-up: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
