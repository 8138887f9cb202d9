"""`--dist loadgroup` for this suite: the tests of one `xdist_group` run in one worker (`make test` groups the tests
of each search node kind, tests/support/engine_node.py, so each worker starts one JVM, not one of each kind).

pytest-xdist's own loadgroup reads a test's group from a suffix its worker adds to the test's id, which pytest 9.2's
structured ids no longer take: every test was its own unit and both workers started both nodes. Here each worker
writes the groups it collected to a folder the controller names, and the controller's scheduler (xdist's scope
scheduling, the biggest scope first) reads them as it splits the collection into units. A plugin (tests/conftest.py).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

FOLDER = "refdata_node_groups"  # the workers' input naming the folder


class GroupScheduling(LoadScopeScheduling):
    """xdist's scope scheduling with a test's scope its group (the groups the workers wrote) or, without one, itself."""

    def __init__(self, config: pytest.Config, log: Any = None) -> None:
        super().__init__(config, log)
        self.folder = Path(config.stash[FOLDER_KEY])
        self._groups: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if (
            self._groups is None
        ):  # every worker collected the same tests (the scheduler checked) and wrote them
            written = sorted(self.folder.glob("*.json"))
            self._groups = json.loads(written[0].read_text()) if written else {}
        return self._groups.get(nodeid, nodeid)


FOLDER_KEY = pytest.StashKey[str]()


def groups(items: list[pytest.Item]) -> dict[str, str]:
    """Each grouped test's group (one name; a test in two groups gets both, joined as xdist does)."""
    found = {
        item.nodeid: sorted({str(m.args[0]) for m in item.iter_markers("xdist_group")}) for item in items
    }
    return {nodeid: "_".join(names) for nodeid, names in found.items() if names}


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
    folder = getattr(config, "workerinput", {}).get(FOLDER)
    if folder:
        path = Path(folder) / f"{config.workerinput['workerid']}.json"
        path.with_suffix(".tmp").write_text(json.dumps(groups(items)))
        path.with_suffix(".tmp").replace(path)
