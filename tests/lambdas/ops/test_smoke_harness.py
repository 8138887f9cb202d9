"""The smoke run's virtual clock (tests/lambdas/ops/smoke_harness.py) lets no time pass unpolled: a part that wrote and
then read the clock for its deadline sees that deadline pass only with a poll after its write, whichever part's
sleep moves the clock."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from smoke_harness import VirtualTime


@dataclass
class RecordingPoller:
    """Polls nothing; says, at each poll, whether another thread could read the clock meanwhile."""

    clock: VirtualTime | None = None
    now: object = None
    readable_while_polling: list[bool] = field(default_factory=list)

    def poll_all(self) -> None:
        assert self.clock is not None
        lock = self.clock._lock
        free: list[bool] = []

        # another part reading the clock mid-sleep (non-blocking: no wait on the real clock)
        def read() -> None:
            got = lock.acquire(blocking=False)
            if got:
                lock.release()
            free.append(got)

        reader = threading.Thread(target=read)
        reader.start()
        reader.join()
        self.readable_while_polling.append(free[0])


def test_no_part_reads_the_clock_between_a_sleeps_poll_and_its_advance() -> None:
    poller = RecordingPoller()
    clock = VirtualTime(poller)  # type: ignore[arg-type]
    poller.clock = clock
    clock.sleep(60)
    assert poller.readable_while_polling == [False]
    assert clock.monotonic() == 60
