"""Plugins every test session loads."""

pytest_plugins = ("tests.support.coverage", "tests.support.assembly")
