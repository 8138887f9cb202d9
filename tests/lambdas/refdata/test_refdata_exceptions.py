"""refdata.exceptions: one documented base for every error the package defines, the nearest-name advice, and the
errors that belong to no single module."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest
import refdata
from refdata.exceptions import ItemNotFoundError, RefdataError, TableNotFoundError, did_you_mean

ROOT = Path(__file__).resolve().parents[3]
GUIDE = ROOT / "docs" / "client.md"


def defined_errors() -> dict[str, type[BaseException]]:
    """Every exception class a module of the package defines, by name."""
    found: dict[str, type[BaseException]] = {}
    for module_info in pkgutil.iter_modules(refdata.__path__, "refdata."):
        module = importlib.import_module(module_info.name)
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__
            ):
                found[name] = value
    return found


def test_the_package_defines_errors_and_every_one_derives_from_the_base() -> None:
    errors = defined_errors()
    assert len(errors) > 1, errors
    strays = sorted(name for name, error in errors.items() if not issubclass(error, RefdataError))
    assert not strays, f"not RefdataErrors: {strays}"


def test_every_module_raises_only_the_packages_own_errors() -> None:
    """No bare ValueError, KeyError or Exception raised: a caller catching RefdataError catches every refusal."""
    builtin = re.compile(r"raise (ValueError|KeyError|TypeError|LookupError|Exception|RuntimeError)\(")
    offenders = [
        f"{path.name}:{number}: {line.strip()}"
        for path in sorted(Path(refdata.__path__[0]).glob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if builtin.search(line)
    ]
    assert not offenders, "\n".join(offenders)


def test_the_guide_lists_every_error() -> None:
    text = GUIDE.read_text()
    missing = sorted(name for name in defined_errors() if f"`{name}`" not in text)
    assert not missing, f"docs/client.md does not list {missing}"


def test_refusals_stay_value_errors_and_a_missing_item_a_key_error() -> None:
    """Callers that caught ValueError or KeyError before the base existed still catch them."""
    errors = defined_errors()
    for name, error in errors.items():
        if name.endswith(("TransportError", "TimeoutError", "ConnectionError", "CredentialsError")):
            continue
        if error in (RefdataError, ItemNotFoundError, TableNotFoundError) or name == "SearchError":
            continue
        assert issubclass(error, ValueError), name
    missing = ItemNotFoundError("no item 'a' 'b'")
    assert isinstance(missing, KeyError) and str(missing) == "no item 'a' 'b'"


@pytest.mark.parametrize(
    ("name", "known", "advice"),
    [
        ("prodctDate", ["productDate", "geozone"], " (did you mean 'productDate'?)"),
        ("GEOZONE", ["productDate", "geozone"], " (did you mean 'geozone'?)"),
        ("somethingElse", ["productDate", "geozone"], ""),
        ("x", [], ""),
    ],
)
def test_did_you_mean_names_the_nearest_known_name_or_nothing(
    name: str, known: list[str], advice: str
) -> None:
    assert did_you_mean(name, known) == advice


def test_a_missing_table_is_named_with_the_schema_it_was_to_hold() -> None:
    error = TableNotFoundError("refdata-tabel", "geozone")
    assert (error.table, error.schema) == ("refdata-tabel", "geozone")
    assert "'refdata-tabel'" in str(error) and "'geozone'" in str(error) and "SchemaTables" in str(error)
