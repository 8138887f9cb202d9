"""The one base of every error refdata raises (`RefdataError`), the errors that belong to no single module, and
the nearest-name advice their messages give. Imports nothing, so every module of the package can use it.

A refusal of an argument, a key, an item or a query also derives from `ValueError` (as every refusal did before
the base existed); an item that is not there also from `KeyError`. docs/client.md lists them all.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class RefdataError(Exception):
    """Every refusal and failure refdata-client raises derives from this."""


class ArgumentError(RefdataError, ValueError):
    """An argument out of its range: a threshold, a page limit, a transport's endpoint, timeout or region."""


class ItemNotFoundError(RefdataError, KeyError):
    """An update or delete of an item the table does not hold (a `KeyError` too)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class TableNotFoundError(RefdataError):
    """A call named a table the account and region do not have: `table` (and the schema it was to hold)."""

    def __init__(self, table: str, schema: str) -> None:
        super().__init__(
            f"table {table!r} (holding schema {schema!r} by SchemaTables) does not exist in this account and "
            "region: check SchemaTables against the environment's stack outputs and the session's region"
        )
        self.table = table
        self.schema = schema


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """` (did you mean 'x'?)` for the nearest of `known` to `name` (case ignored), or '' when none is near."""
    names = sorted(set(known))
    folded = {candidate.casefold(): candidate for candidate in names}
    near = difflib.get_close_matches(name.casefold(), list(folded), n=1, cutoff=0.6)
    return f" (did you mean {folded[near[0]]!r}?)" if near else ""
