"""The tests' build of refdata-client (tests/support/client.py): workers that build at once wait for each other, and
a failed build says what `make client` said."""

import fcntl
import subprocess
from typing import Any

import pytest

from tests.support import client


def test_a_build_holds_the_lock_the_other_workers_builds_wait_on(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    def make(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        with client.BUILD_LOCK.open("a") as other:  # another worker's attempt
            try:
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
                seen.append("free")
            except BlockingIOError:
                seen.append("held")
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(client.subprocess, "run", make)
    client.built.__wrapped__()

    assert seen == ["held"]


def test_a_failed_build_says_what_make_said(monkeypatch: pytest.MonkeyPatch) -> None:
    def make(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(command, 2, "", "pip: no matching distribution\n")

    monkeypatch.setattr(client.subprocess, "run", make)

    with pytest.raises(RuntimeError, match=r"failed \(2\):\n.*pip: no matching distribution"):
        client.built.__wrapped__()
