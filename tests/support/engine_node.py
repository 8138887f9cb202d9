"""The real search engine of a test session: one OpenSearch node (the version tests/support/engine/engine.lock pins)
per pytest process that runs tests, on 127.0.0.1 at an ephemeral port, from the jars `make test`'s set-up installed
(tests/support/engine_setup.py); nothing is fetched here.

A pytest plugin (tests/conftest.py loads it). The tests that use a node kind's fixtures are one pytest-xdist group
(`make test` runs `--dist loadgroup`, tests/support/node_groups.py): one worker, known at collection, runs them all
and starts that kind's node in the background as it collects, so two workers start two JVMs, not four. (Nodes are
not shared between processes: stored scripts, index templates and cluster settings are cluster-wide, and the
product's names for them come from config, so tests in two workers would overwrite each other's.) Any other process
(no xdist, or another `--dist`) starts its node when collection finds a test that uses it. The ``engine`` fixture
wipes what a test left (indices, index templates, stored scripts, points in time, cluster settings) before each test,
and the node stops with the process.

Most tests that use a node first set it up as a deployment's index bootstrap does, test after test, and that set-up
(an index, template or role per schema: one cluster-state change each) cost more of the node's CPU than the tests
themselves. Their fixtures take the node as the last test left it (``engine_as_left``) and set it up through
`EngineNode.prepared`, which keeps the set-up of the test before when nothing but documents changed since.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Self, TypeVar

import pytest
from refdata.transport import NDJSON_CONTENT_TYPE

from tests.support.engine_setup import ENGINE, EngineSetupError
from tests.support.node_groups import runs_here

# Writing a class archive takes a few seconds of CPU after the node stops; a loaded machine stretches it.
RECORD_TIMEOUT_SECONDS = 600.0
# A cold JVM on two busy cores takes 10-20 s; the margin is for a loaded machine.
START_TIMEOUT_SECONDS = 180.0


class EngineError(RuntimeError):
    """The node did not start, or answered a housekeeping request with an error."""


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any


@dataclass
class Layout:
    indices: dict[str, Any]  # each index's metadata, by name
    # templates, stored scripts, cluster settings (and on the secured node, roles and role mappings)
    rest: list[Any]


@dataclass
class Kept:
    key: str
    layout: Layout
    definitions: dict[str, Any]  # the body that makes each of the tests' indices again as it was


_MADE_BY_THE_ENGINE = ("uuid", "creation_date", "provided_name", "version")


def _definition(index: dict[str, Any]) -> dict[str, Any]:
    """The create-index body of an index as `GET /<index>` shows it."""
    settings = {k: v for k, v in index["settings"]["index"].items() if k not in _MADE_BY_THE_ENGINE}
    return {"settings": {"index": settings}, "mappings": index["mappings"], "aliases": index["aliases"]}


class EngineNode:
    """One node in a child JVM; it stops when its standard input closes (here, or because this process died)."""

    kind, launcher = "engine", ENGINE

    def __init__(self) -> None:
        self.directory = Path()
        self.log_path = Path()
        self.port: int | None = None
        self.version: str | None = None
        self._ready = threading.Event()
        self._failure: str | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._kept: Kept | None = None  # what `prepared` last built
        self.recording: Path | None = None  # where the JVM records its kind's class archive as it exits

    def start(self) -> Self:
        """Start the JVM: mapping its kind's class archive, or recording one as it stops when there is none for this
        JDK and these jars (a fresh clone's first session, a JDK or jar change)."""
        if not self.launcher.installed():
            raise EngineSetupError(
                f"the {self.launcher.name} is not installed: run `make engine` (or `make test`)"
            )
        # In memory where the machine has it: every cluster-state change (an index, a template, a script) is fsynced.
        # The launcher deletes it when it stops, even after this process was killed.
        shm = Path("/dev/shm")
        self.directory = Path(
            tempfile.mkdtemp(prefix=f"refdata-{self.kind}-", dir=shm if shm.is_dir() else None)
        )
        self.log_path = self.directory / "node.log"
        self.prepare_home()
        archive = self.launcher.archive
        recording = archive.with_name(f"{archive.name}.{os.getpid()}.tmp")
        self.recording = None if self.launcher.archive_is_current() else recording
        log = self.log_path.open("wb")
        self._process = subprocess.Popen(
            self.launcher.command(self.directory, record_into=self.recording),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            start_new_session=True,
        )
        log.close()
        threading.Thread(target=self._read_ready_line, name=f"{self.kind}-ready", daemon=True).start()
        return self

    def prepare_home(self) -> None:
        """What the node reads from its home before it starts: nothing for the engine."""

    def _read_ready_line(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        line = self._process.stdout.readline().decode()
        fields = dict(part.split("=", 1) for part in line.split()[1:] if "=" in part)
        if line.startswith("ready ") and "port" in fields:
            self.port, self.version = int(fields["port"]), fields.get("version")
        else:
            self._failure = f"the engine exited before it was ready; its log:\n{self._log_tail()}"
        self._ready.set()

    def _log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def wait_ready(self, timeout: float = START_TIMEOUT_SECONDS) -> Self:
        if self._process is None:
            self.start()
        if not self._ready.wait(timeout):
            raise EngineError(f"the engine was not ready after {timeout:.0f} s; its log:\n{self._log_tail()}")
        if self._failure is not None:
            raise EngineError(self._failure)
        return self

    @property
    def pid(self) -> int:
        """The JVM's process id (its CPU is the engine's)."""
        assert self._process is not None, "the node was not started"
        return self._process.pid

    def cpu_seconds(self) -> float:
        """The JVM's user + system CPU so far (the kernel's count for the process)."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def maps_class_archive(self) -> bool:
        """Whether the JVM mapped its kind's class archive: the kernel lists each file a process maps."""
        archive = str(self.launcher.archive.resolve())
        with Path(f"/proc/{self.pid}/maps").open() as maps:
            return any(line.rstrip().endswith(archive) for line in maps)

    def class_archive_problem(self) -> str | None:
        """Why the JVM neither records nor maps its kind's class archive (None: it does one of them)."""
        if self.recording is not None or self.maps_class_archive():
            return None
        return (
            f"the {self.launcher.name}'s JVM did not map {self.launcher.archive}, recorded for this JDK and these "
            "jars, and started at twice the CPU: its log says why it refused it; delete the archive and the next "
            "session records it again"
        )

    @property
    def endpoint(self) -> str:
        self.wait_ready()
        return f"http://127.0.0.1:{self.port}"

    def request(self, method: str, path: str, body: Any = None) -> Answer:
        """One request to the node, not signed and through no proxy (the suite's own housekeeping). A body of bytes
        goes as written, as NDJSON (a `_bulk` body); any other as JSON."""
        connection = self.connect(timeout=60)
        try:
            headers = self.proxy_headers(None)
            if isinstance(body, bytes):
                headers["Content-Type"] = NDJSON_CONTENT_TYPE
            elif body is not None:
                body, headers["Content-Type"] = json.dumps(body).encode(), "application/json"
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            raw = response.read()
        finally:
            connection.close()
        return Answer(response.status, json.loads(raw) if raw else None)

    def connect(self, timeout: float) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.wait_ready().port, timeout=timeout)

    def proxy_headers(self, principal: str | None) -> dict[str, str]:
        """Headers telling the node whom a request acts for (`principal`, or None for the suite's housekeeping):
        none here, the engine has no security plugin (tests/support/secured_node.py's node has)."""
        return {}

    def _checked(self, method: str, path: str, body: Any = None) -> Any:
        answer = self.request(method, path, body)
        if answer.status >= 300:
            raise EngineError(f"{method} {path} answered {answer.status}: {answer.body}")
        return answer.body

    def wipe(self) -> None:
        """Back to an empty cluster: no index, index or component template, stored script, point in time or
        cluster setting that a test made. One look at the cluster's metadata first, and each kind is cleared only
        where there is some: a request that changes nothing still costs the node a cluster-state update."""
        self._kept = None
        layout = EngineNode.layout(self)  # the engine's part only, whatever the node's kind
        metadata, settings = layout.rest
        if names := [name for name in layout.indices if not name.startswith(".")]:
            self._checked("DELETE", "/" + ",".join(names) + "?expand_wildcards=all")
        for kind in ("index_template", "component_template"):
            if metadata.get(kind, {}).get(kind):
                self._checked("DELETE", f"/_{kind}/*")
        for script_id in metadata.get("stored_scripts", {}):
            self._checked("DELETE", f"/_scripts/{script_id}")
        self._checked("DELETE", "/_search/point_in_time/_all")
        if settings.get("persistent") or settings.get("transient"):
            self._checked("PUT", "/_cluster/settings", {"persistent": {"*": None}, "transient": {"*": None}})

    def prepared(self, key: str, build: Callable[[], object]) -> bool:
        """The state `build` makes on an empty node, for the test about to run; whether `build` ran. `key` names
        everything `build`'s result depends on. When the last call had the same key and since then only documents
        changed, and the mappings documents added (`layout`), the documents are deleted and each index whose metadata
        changed is made again as `build` left it; otherwise the node is wiped and `build` runs."""
        kept = self._kept if self._kept is not None and self._kept.key == key else None
        if kept is not None and self._restored(kept):
            return False
        self.wipe()
        build()
        layout = self.layout()
        names = ",".join(name for name in layout.indices if not name.startswith("."))
        made = self._checked("GET", f"/{names}") if names else {}
        self._kept = Kept(key, layout, {name: _definition(index) for name, index in made.items()})
        return True

    def layout(self) -> Layout:
        """Everything a test may change on the node but documents: each index's metadata (its settings with its
        uuid, mappings, aliases and state), index and component templates, stored scripts, cluster settings."""
        parts = ("indices", "templates", "index_template", "component_template", "stored_scripts")
        state = self._checked(
            "GET", "/_cluster/state/metadata?filter_path=" + ",".join(f"metadata.{part}" for part in parts)
        )
        metadata = state.get("metadata", {})
        return Layout(metadata.pop("indices", {}), [metadata, self._checked("GET", "/_cluster/settings")])

    def _restored(self, kept: Kept) -> bool:
        """Back to what `prepared` kept, if nothing but the tests' indices changed: the documents of each index
        that did not change are deleted, an index that changed (a mapped field, a setting, an alias) or went is made
        again, and an index a test made goes."""
        now = self.layout()
        ours = {name for name in now.indices.keys() | kept.layout.indices.keys() if not name.startswith(".")}
        engines = now.indices.keys() - ours
        if now.rest != kept.layout.rest or any(now.indices[n] != kept.layout.indices.get(n) for n in engines):
            return False
        changed = sorted(name for name in ours if now.indices.get(name) != kept.layout.indices.get(name))
        if unchanged := sorted(ours - set(changed)):
            indices = ",".join(unchanged)
            # what was written but not yet refreshed is found too
            self._checked("POST", f"/{indices}/_refresh")
            query = {"query": {"match_all": {}}}
            done = self._checked("POST", f"/{indices}/_delete_by_query?conflicts=proceed&refresh=true", query)
            if done.get("failures"):
                raise EngineError(f"deleting the documents a test left failed: {done['failures']}")
        if gone := [name for name in changed if name in now.indices]:
            # first: an alias it holds is free for the kept index
            self._checked("DELETE", "/" + ",".join(gone))
        for name in changed:
            if name in kept.definitions:
                self._checked("PUT", f"/{name}", kept.definitions[name])
        self._checked("DELETE", "/_search/point_in_time/_all")
        if changed:
            kept.layout = self.layout()
        return True

    def stop(self, timeout: float = 30) -> None:
        """Stop the JVM; one that records the class archive writes it as it exits (seconds of CPU), and it takes the
        archive's place with what it was recorded against."""
        process, self._process = self._process, None
        if process is not None:
            if process.stdin is not None:
                process.stdin.close()
            try:
                recorded = process.wait(timeout=RECORD_TIMEOUT_SECONDS if self.recording else timeout) == 0
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                recorded = False  # a JVM killed while it wrote leaves half an archive
            if process.stdout is not None:
                process.stdout.close()
            shutil.rmtree(self.directory, ignore_errors=True)
            if self.recording is not None and self.recording.is_file():
                if recorded:
                    self.recording.replace(self.launcher.archive)
                    self.launcher.archive_key.write_text(self.launcher.key())
                else:
                    self.recording.unlink()


N = TypeVar("N", bound=EngineNode)


class SessionNode(Generic[N]):
    """A pytest process's one node of a kind, for the tests that use one of the kind's fixtures (`name`,
    `<name>_as_left`, and any `others`): one xdist group, the node started in the background at collection by the
    process that will run them, stopped with the process. Its hooks are the plugin's."""

    def __init__(self, kind: type[N], name: str, *others: str) -> None:
        self.kind, self.name, self.fixtures = kind, name, {name, f"{name}_as_left", *others}
        self._node: N | None = None

    def node(self) -> N:
        if self._node is None:
            self._node = self.kind().start()
        return self._node

    def empty(self) -> N:
        """The node once it is ready, wiped: what an earlier test made is gone."""
        node = self.node().wait_ready()
        node.wipe()
        return node

    def as_left(self, request: pytest.FixtureRequest) -> N:
        """The node as the last test left it, for a fixture that sets it up through `prepared` before any other use."""
        if self.name in request.fixturenames:  # its wipe would undo the set-up, or come before it
            raise pytest.UsageError(
                f"{request.node.nodeid} takes both `{self.name}` and `{self.name}_as_left`: take one"
            )
        return self.node().wait_ready()

    def uses(self, item: pytest.Item) -> bool:
        return bool(self.fixtures & set(getattr(item, "fixturenames", ())))

    @pytest.hookimpl(tryfirst=True)  # before node_groups' (trylast), which reads the groups
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            if self.uses(item):
                item.add_marker(pytest.mark.xdist_group(self.name))

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        # A grouped run's worker starts the node of the group it will run; any other process, the nodes it collected.
        here = runs_here(session.config, self.name)
        if here is None:
            here = any(map(self.uses, session.items))
        if here:
            # Not installed, or no JDK 21+: each test that needs the node fails saying so; the others run.
            with contextlib.suppress(EngineSetupError):
                self.node()

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        node, self._node = self._node, None
        if node is not None:
            node.stop()


SESSION = SessionNode(EngineNode, "engine")
pytest_collection_modifyitems = SESSION.pytest_collection_modifyitems
pytest_collection_finish, pytest_unconfigure = SESSION.pytest_collection_finish, SESSION.pytest_unconfigure


@pytest.fixture
def engine() -> EngineNode:
    """The real OpenSearch node, empty."""
    return SESSION.empty()


@pytest.fixture
def engine_as_left(request: pytest.FixtureRequest) -> EngineNode:
    """The real OpenSearch node as the last test left it (`SessionNode.as_left`)."""
    return SESSION.as_left(request)
