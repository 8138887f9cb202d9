"""The guard against real sleeps: it counts what every thread asks to sleep and fails a test past a second in all,
unless the allow-list names it (no test here sleeps: the ledger is fed directly)."""

from __future__ import annotations

import threading
import time

import pytest

from tests.support import real_sleep
from tests.support.real_sleep import Ledger


def test_a_test_that_sleeps_more_than_a_second_in_all_fails_with_what_it_slept() -> None:
    ledger = Ledger()
    for _ in range(3):
        ledger.record(0.5)
    failure = ledger.verdict("tests/x.py::test_waits")
    said = "tests/x.py::test_waits slept 1.50 s on the real clock (3 calls, the longest 0.50 s"
    assert failure is not None and failure.startswith(said), failure


def test_a_second_or_less_passes_and_the_allow_list_names_its_exceptions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ledger = Ledger()
    ledger.record(0.6)
    ledger.record(0.4)
    assert ledger.verdict("tests/x.py::test_waits") is None
    ledger.record(0.5)
    monkeypatch.setitem(real_sleep.ALLOWED, "tests/x.py::test_waits", "a real server's start-up")
    assert ledger.verdict("tests/x.py::test_waits[param]") is None
    assert ledger.verdict("tests/x.py::test_other") is not None


def test_every_threads_sleep_is_counted_through_time_sleep() -> None:
    assert time.sleep is real_sleep.counted_sleep
    before = real_sleep.LEDGER.calls
    thread = threading.Thread(target=time.sleep, args=(0,))
    thread.start()
    thread.join(10)
    time.sleep(0)
    assert real_sleep.LEDGER.calls == before + 2
