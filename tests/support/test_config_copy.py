"""The scratch copies of infra/environments.py the config-mistake tests load."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.support.config_copy import load


def test_each_copy_loads_its_own_text_even_where_byte_code_is_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two copies written to one path within a second, of one size: a .pyc cached for the first (mtime and size
    match) must not run for the second (it did once byte code could be written: a config-mistake test read the
    mistake planted in another environment)."""
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    assert load(tmp_path, "VALUE = 'first'\n").VALUE == "first"
    assert load(tmp_path, "VALUE = 'other'\n").VALUE == "other"
