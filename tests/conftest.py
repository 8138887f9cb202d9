"""Plugins every test session loads (real_sleep first: it replaces time.sleep before the code under test binds it)."""

pytest_plugins = (
    "tests.support.real_sleep",
    "tests.support.coverage",
    "tests.support.assembly",
    "tests.support.iam_oracle",
    "tests.support.engine_node",
    "tests.support.secured_node",
)
