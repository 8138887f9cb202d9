"""Document- and field-level security (the security plugin's DLS and FLS) for the loopback server (tests only).

A role's `index_permissions` entry may carry `dls` (a query, as a JSON string) and `fls` (field patterns, `~` or
`!` excluding). For a read of one concrete index, the rules of every entry of the caller's roles whose index
pattern matches the index or one of its aliases apply (AbstractRuleBasedPrivileges collects an index's rules and
its parent aliases'), with `plugins.security.dfm_empty_overrides_all` at its default (false):

- DLS: the documents matching any of the rules' queries (DocumentPrivileges joins them with `should`); an entry
  without `dls` lifts the restriction only when no matching entry has one;
- FLS: the rules' patterns merged (FieldPrivileges.FlsRule.merge): if any pattern excludes, only the exclusions
  count and a field is hidden when one matches it; otherwise only fields an inclusion matches are visible (and the
  objects leading to them). Patterns match dotted field paths with `*`/`?` wildcards or `/regex/`; a query's
  `.keyword` subfield counts as its parent. A hidden field is gone from `_source` and from everything the query
  sees; DLS queries are evaluated on the whole document.

The master user is unrestricted. Not emulated: field masking (`masked_fields`, refused when put), user-attribute
placeholders in DLS queries and patterns, `dfm_empty_overrides_all: true`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tests.support.domain_principals import Subject
from tests.support.opensearch_errors import OpenSearchError
from tests.support.opensearch_security import matches


@dataclass(frozen=True)
class FieldRule:
    """Merged FLS patterns: `excluding` hides fields a pattern matches; otherwise only matched fields show."""

    excluding: bool
    patterns: tuple[str, ...]

    @classmethod
    def merge(cls, rules: Sequence[Sequence[str]]) -> FieldRule:
        every = [pattern for rule in rules for pattern in rule]
        exclusions = tuple(p[1:] for p in every if p.startswith(("~", "!")))
        if exclusions:
            return cls(True, exclusions)
        return cls(False, tuple(every))

    def allows(self, path: str) -> bool:
        matched = any(matches(pattern, path.removesuffix(".keyword")) for pattern in self.patterns)
        return not matched if self.excluding else matched

    def leads_to_allowed(self, path: str) -> bool:
        """An object on the way to an included field (`a` for the inclusion `a.b`)."""
        return any(pattern.startswith(f"{path}.") for pattern in self.patterns)

    def visible(self, source: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
        """`source` with the hidden fields removed."""
        kept: dict[str, Any] = {}
        for name, value in source.items():
            path = f"{prefix}{name}"
            if self.allows(path):
                kept[name] = self._below(value, path) if self.excluding else value
            elif not self.excluding and self.leads_to_allowed(path):
                below = self._below(value, path)
                if below not in ({}, []):
                    kept[name] = below
        return kept

    def _below(self, value: Any, path: str) -> Any:
        if isinstance(value, Mapping):
            return self.visible(value, f"{path}.")
        if isinstance(value, list):
            return [self._below(member, path) for member in value]
        return value


@dataclass(frozen=True)
class ReadRestriction:
    """What a caller may read of one index: `documents` (None: all; else any of these queries must match) and
    `fields` (None: all)."""

    documents: tuple[Mapping[str, Any], ...] | None
    fields: FieldRule | None

    def document_filter(self) -> Mapping[str, Any] | None:
        if self.documents is None:
            return None
        return {"bool": {"should": list(self.documents), "minimum_should_match": 1}}

    def visible(self, source: Mapping[str, Any]) -> Mapping[str, Any]:
        return source if self.fields is None else self.fields.visible(source)


UNRESTRICTED = ReadRestriction(None, None)


def read_restriction(
    subject: Subject, roles: Sequence[Mapping[str, Any]], index: str, aliases: Sequence[str]
) -> ReadRestriction:
    """The DLS and FLS of `subject` (mapped to `roles`) on `index`, whose aliases are `aliases`."""
    if subject.master:
        return UNRESTRICTED
    entries = [
        entry
        for role in roles
        for entry in role.get("index_permissions") or []
        if any(matches(p, name) for p in entry.get("index_patterns") or [] for name in (index, *aliases))
    ]
    queries = tuple(json.loads(entry["dls"]) for entry in entries if entry.get("dls"))
    patterns = [entry["fls"] for entry in entries if entry.get("fls")]
    return ReadRestriction(
        documents=queries or None,
        fields=FieldRule.merge(patterns) if patterns else None,
    )


def check_role(body: Mapping[str, Any]) -> None:
    """What the security API refuses in a role's DLS and FLS (400), and what is not emulated."""
    for entry in body.get("index_permissions") or []:
        dls = entry.get("dls")
        if dls not in (None, ""):
            try:
                query = json.loads(dls) if isinstance(dls, str) else None
            except ValueError:
                query = None
            if not isinstance(query, dict):
                raise OpenSearchError(
                    400, "bad_request", f"Invalid DLS query {dls!r}: a query as a JSON string"
                )
        fls = entry.get("fls")
        if fls is not None and not (isinstance(fls, list) and all(isinstance(p, str) and p for p in fls)):
            raise OpenSearchError(400, "bad_request", f"Invalid FLS {fls!r}: a list of field patterns")
        if entry.get("masked_fields"):
            raise OpenSearchError(400, "bad_request", "masked_fields are not emulated by the loopback server")
