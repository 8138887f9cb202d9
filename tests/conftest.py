"""Plugins every test session loads (real_sleep first: it replaces time.sleep before the code under test binds it)."""

pytest_plugins = (
    "tests.support.real_sleep",
    "tests.support.coverage",
    "tests.support.assembly",
    "tests.support.iam_oracle",
    "tests.support.engine_node",
    "tests.support.secured_node",
)

# Property tests draw the same examples on every run: a proof loop that passes or fails by the draw is flaky. (A
# random draw of the engine comparison in refdata's limits found a field name the check lets through and the engine
# refuses, `{"a.": {"a.b": []}}`, in CI; it is recorded as an open defect, not left to chance.)
from hypothesis import settings  # noqa: E402

settings.register_profile("deterministic", derandomize=True)
settings.load_profile("deterministic")
