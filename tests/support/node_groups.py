"""`--dist loadgroup` for this suite: the tests of one `xdist_group` run in one worker, chosen before the run starts
(`make test` groups the tests of each search node kind, tests/support/engine_node.py, so each worker starts one JVM,
not one of each kind, and starts it while it collects).

pytest-xdist's own loadgroup reads a test's group from a suffix its worker adds to the test's id, which pytest 9.2's
structured ids no longer take (pytest-dev/pytest-xdist#1386): every test was its own unit and both workers started
both nodes. Here each worker writes the groups it collected to a folder the controller names, and the controller's
scheduler (xdist's scope scheduling) reads them as it splits the collection into units. Which worker runs which
group is `reservations`' rule, which the workers apply to their own collection too: a worker knows at collection
which node it will need. A plugin (tests/conftest.py).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

FOLDER = "refdata_node_groups"  # the workers' input naming the folder
FOLDER_KEY = pytest.StashKey[str]()
HERE_KEY = pytest.StashKey[frozenset[str]]()  # a worker's: the groups it will run


def groups(items: list[pytest.Item]) -> dict[str, str]:
    """Each grouped test's group (a test in two groups gets both names, joined with `_` as xdist does)."""
    found = {i.nodeid: sorted({str(m.args[0]) for m in i.iter_markers("xdist_group")}) for i in items}
    return {nodeid: "_".join(names) for nodeid, names in found.items() if names}


def reservations(grouped: Mapping[str, str], workers: int) -> dict[str, str]:
    """The worker (`gw<n>`) each group runs in: the biggest group in gw0, the next in gw1, and so on around."""
    sizes = Counter(grouped.values())
    ordered = sorted(sizes, key=lambda group: (-sizes[group], group))
    return {group: f"gw{number % workers}" for number, group in enumerate(ordered)}


def runs_here(config: pytest.Config, name: str) -> bool | None:
    """Whether this worker will run the tests of group `name` (None: no worker of a grouped run)."""
    if HERE_KEY not in config.stash:
        return None
    return any(name in group.split("_") for group in config.stash[HERE_KEY])


class GroupScheduling(LoadScopeScheduling):
    """xdist's scope scheduling with a test's scope its group (the groups the workers wrote) or, without one, itself,
    and each group's unit sent to the worker `reservations` names."""

    def __init__(self, config: pytest.Config, log: Any = None) -> None:
        super().__init__(config, log)
        self.folder = Path(config.stash[FOLDER_KEY])
        self._groups: dict[str, str] | None = None
        self._reserved: dict[str, str] = {}
        self._modules: dict[str, str] = {}  # each worker's module of the unit it was handed last

    def _split_scope(self, nodeid: str) -> str:
        if self._groups is None:  # every worker collected the same tests (the scheduler checked), wrote them
            written = sorted(self.folder.glob("*.json"))
            self._groups = json.loads(written[0].read_text()) if written else {}
            self._reserved = reservations(self._groups, len(self.nodes))
        return self._groups.get(nodeid, nodeid)

    def _assign_work_unit(self, node: Any) -> None:
        """The node's own group first; else a unit no other live worker is reserved for: of the module the node ran
        last, else of a module no other worker is running, else the first; else the first unit. A module's fixtures
        are built once in each worker that runs some of its tests: handed out one after the other, both workers drew
        from the same modules and built each module's fixtures twice (in-process synths, replayed alarm timelines)."""
        me = node.gateway.id
        live = {each.gateway.id for each in self.nodes}
        elsewhere = {module for worker, module in self._modules.items() if worker != me and worker in live}

        def rank(scope: str) -> int:
            reserved = self._reserved.get(scope)
            if reserved == me:
                return 0
            if reserved in live:
                return 4
            module = _module(scope)
            return 1 if module == self._modules.get(me) else 2 if module not in elsewhere else 3

        chosen = min(self.workqueue, key=rank)  # the first unit of the best rank: one pass over the queue
        self._modules[me] = _module(chosen)
        self.workqueue.move_to_end(chosen, last=False)
        super()._assign_work_unit(node)


def _module(scope: str) -> str:
    """The test module of a unit (a group's name for a group)."""
    return scope.split("::", 1)[0]


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("dist", "no") == "loadgroup" and not hasattr(config, "workerinput"):
        config.stash[FOLDER_KEY] = tempfile.mkdtemp(prefix="node-groups-")


def pytest_unconfigure(config: pytest.Config) -> None:
    if FOLDER_KEY in config.stash:
        shutil.rmtree(config.stash[FOLDER_KEY], ignore_errors=True)


def pytest_configure_node(node: Any) -> None:
    if FOLDER_KEY in node.config.stash:
        node.workerinput[FOLDER] = node.config.stash[FOLDER_KEY]


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> GroupScheduling | None:
    return GroupScheduling(config, log) if FOLDER_KEY in config.stash else None


@pytest.hookimpl(trylast=True)  # after the node plugins have marked their tests
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    worker = getattr(config, "workerinput", {})
    if FOLDER in worker:
        grouped = groups(items)
        path = Path(worker[FOLDER]) / f"{worker['workerid']}.json"
        path.with_suffix(".tmp").write_text(json.dumps(grouped))
        path.with_suffix(".tmp").replace(path)
        reserved = reservations(grouped, worker["workercount"])
        config.stash[HERE_KEY] = frozenset(g for g, w in reserved.items() if w == worker["workerid"])
