"""No test waits on the real clock: a pytest plugin (tests/conftest.py loads it first) that replaces ``time.sleep`` for
the whole session with one that counts what each test asked to sleep, in every thread (moto's interpreter, a
poller, a server), and fails the test that slept more than a second in all, unless ``ALLOWED`` names it and why.

Code under test takes its clock and sleep as parameters (HOUSE_STYLE, "Tests that drive time"): a test hands in a
fake clock and advances it, and waits for a thread on an event with a generous timeout, never a fixed sleep. What is
counted is the time asked for, not measured, so the verdict does not depend on the machine's load.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

LIMIT_SECONDS = 1.0
# Test id (or a prefix of one) -> why it must sleep on the real clock. Empty: no test needs to.
ALLOWED: dict[str, str] = {}


class Ledger:
    """The real sleeps asked for since the last reset, from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.seconds = 0.0
        self.calls = 0
        self.longest = 0.0

    def reset(self) -> None:
        with self._lock:
            self.seconds, self.calls, self.longest = 0.0, 0, 0.0

    def record(self, seconds: float) -> None:
        with self._lock:
            self.seconds += max(seconds, 0.0)
            self.calls += 1
            self.longest = max(self.longest, seconds)

    def verdict(self, test_id: str) -> str | None:
        """Why ``test_id`` fails (None: it does not)."""
        if self.seconds <= LIMIT_SECONDS or any(test_id.startswith(allowed) for allowed in ALLOWED):
            return None
        return (
            f"{test_id} slept {self.seconds:.2f} s on the real clock ({self.calls} calls, the longest "
            f"{self.longest:.2f} s; at most {LIMIT_SECONDS:g} s): hand the code under test a clock and a sleep and "
            "advance it, or wait on an event; if it truly must, name it in tests/support/real_sleep.py's ALLOWED "
            "with the reason"
        )


LEDGER = Ledger()
REAL_SLEEP: Callable[[float], None] = time.sleep


def counted_sleep(seconds: float) -> None:
    LEDGER.record(seconds)
    REAL_SLEEP(seconds)


# Installed when the plugin is imported, before the code under test binds `time.sleep` as a default argument.
time.sleep = counted_sleep


@pytest.fixture(autouse=True)
def _no_long_real_sleep(request: pytest.FixtureRequest) -> Iterator[None]:
    LEDGER.reset()
    yield
    failure = LEDGER.verdict(request.node.nodeid)
    if failure:
        pytest.fail(failure)
