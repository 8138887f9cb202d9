"""What each configured table and read role was asserted by, for tests/recipes: "table:<env>/<construct id>" or
"role:<env>/<name>" -> test ids. One module object holds it, whichever name a conftest is imported under.

Also a pytest plugin (tests/conftest.py loads it): with REFDATA_COVERAGE_FILE set, the session writes that file once,
merged over every pytest-xdist worker. Each worker holds only the tests it ran, so the controller gathers them from
the workers' output; a worker never writes the file itself.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

COVERAGE: dict[str, set[str]] = defaultdict(set)
TARGET = "REFDATA_COVERAGE_FILE"
OUTPUT_KEY = "refdata_coverage"


def covers(thing: str) -> None:
    COVERAGE[thing].add(os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0])


def recorded() -> dict[str, list[str]]:
    return {thing: sorted(tests) for thing, tests in sorted(COVERAGE.items())}


def merge(other: dict[str, list[str]]) -> None:
    for thing, tests in other.items():
        COVERAGE[thing].update(tests)


def pytest_sessionfinish(session: pytest.Session) -> None:
    target = os.environ.get(TARGET)
    if not target:
        return
    workeroutput: dict[str, Any] | None = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: the controller merges and writes
        workeroutput[OUTPUT_KEY] = recorded()
        return
    Path(target).write_text(json.dumps(recorded()))


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """An xdist worker finished: fold in what its tests covered (runs in the controller before its sessionfinish)."""
    merge(getattr(node, "workeroutput", {}).get(OUTPUT_KEY, {}))
