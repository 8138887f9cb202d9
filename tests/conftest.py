"""Plugins every test session loads (real_sleep first: it replaces time.sleep before the code under test binds it)."""

import gc
import sys

# pytest keeps each test module it rewrites for its assertions in __pycache__, but only where byte code may be written.
# With PYTHONDONTWRITEBYTECODE (set in many CI runners and images, and on these machines) every worker of every run
# rewrote all ~150 test modules again: 6 of the 11 s of CPU each worker spends collecting. The set-up byte-compiles
# everything else (Makefile, `setup`), so this only lets the rewriter keep its work.
sys.dont_write_bytecode = False

# A worker's heap grows to ~700,000 objects (templates, moto's backends, jsii's references), and with CPython's
# default young generation (700 allocations) it ran ~30 full collections of it: 8-9 s of each worker's CPU. With a
# young generation of 10,000, 3-5 s, at the same peak memory. Collection still happens, only less often.
gc.set_threshold(10_000, 10, 10)

pytest_plugins = (
    "tests.support.real_sleep",
    "tests.support.coverage",
    "tests.support.assembly",
    "tests.support.iam_oracle",
    "tests.support.node_groups",  # before the node plugins, which import it
    "tests.support.engine_node",
    "tests.support.secured_node",
)

# Property tests draw the same examples on every run: a proof loop that passes or fails by the draw is flaky. (A
# random draw of the engine comparison in refdata's limits once found a field name the check let through and the
# engine refused, `{"a.": {"a.b": []}}`, in CI: the check was fixed, and the draw is kept as an explicit example.)
import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

from infra.config import EnvironmentConfig  # noqa: E402
from infra.environments import environments  # noqa: E402

settings.register_profile("deterministic", derandomize=True)
settings.load_profile("deterministic")


@pytest.fixture(scope="module", params=sorted(environments()))
def each_config(request: pytest.FixtureRequest) -> EnvironmentConfig:
    """Each environment's config in turn. Module-scoped, so pytest runs a module's tests one environment after the
    other: a search node set up for one environment (`EngineNode.prepared`) is kept from test to test."""
    return environments()[request.param]


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """The session is over and the process is about to exit: nothing on its heap needs collecting any more. Frozen,
    the heap is left out of the full collection the interpreter runs as it exits, which took a worker 1.7 s (its
    ~700,000 objects and their finalizers) after its last test, on the run's critical path."""
    gc.freeze()
