"""The in-process ports every sync unit test starts from (stream_sync_fakes.Harness)."""

import pytest
from stream_sync_fakes import Harness


@pytest.fixture
def harness() -> Harness:
    return Harness()
