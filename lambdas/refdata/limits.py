"""The search engine's document limits, checked on an item before it is indexed (pure, no I/O).

DynamoDB accepts items OpenSearch can never index. The engine refuses, for every document of an index:
- an object nested deeper than `index.mapping.depth.limit` (20; the root object is level 1, so at most 19 objects
  deep), and arrays nested deeper than the same limit (DynamoDB allows 32 levels of maps and lists);
- more fields in the index's mapping than `index.mapping.total_fields.limit` (1,000): every object is a field, a
  number or a boolean is one, and a string is two, because the templates map a dynamic string as `text` with a
  `keyword` subfield (search.indices);
- a field name longer than its JSON parser allows (50,000 characters, Jackson's `StreamReadConstraints` as
  OpenSearch configures it: the whole request is refused; DynamoDB allows 64 KB names);
- names the document parser cannot split into an object path: empty, `.`, `.a`, `a..b`, a part of only spaces
  (a trailing dot is dropped, as Java's `String.split` drops it: `a.` is `a`);
- one path used both as a value and as an object (`label` beside `label.sub`, `[{"a": 1}, {"a": {"b": 1}}]`);
- one new path given values of two kinds in one document (`["555", 1]`, `[{"a": true}, {"a": 2}]`): each value asks
  the dynamic mapping for its own type (a string `text`, a number `double`, a boolean `boolean`), and the engine
  refuses the document ("mapper [phones] cannot be changed from type [text] to [double]"). A field the template maps
  explicitly, or that earlier documents mapped, coerces instead; this check sees only the template.

`check_item` walks an item (plain JSON or the boto3 resource API's values: Decimal, sets, bytes) the way the engine's
document parser maps it dynamically, against the fields an index template maps explicitly (`mapped`, the template's
`properties`), and raises `DocumentLimitError` naming the limit. The total is counted for the item alone, as a
fresh index would see it; fields other documents added to the index count against the same limit, which the
engine enforces when the mapping grows. The stream sync runs this check on every document, and `refdata.writer`
before every write (against `refdata.mappings.mapped_fields(schema)`), so an item that could never be indexed is
refused at write time rather than found in the dead-letter queue.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final

from refdata.exceptions import RefdataError

DEPTH_LIMIT: Final = 20  # index.mapping.depth.limit
TOTAL_FIELDS_LIMIT: Final = 1000  # index.mapping.total_fields.limit
NAME_LENGTH_LIMIT: Final = 50_000  # opensearch.xcontent.name.length.max (Jackson StreamReadConstraints)
# Fields a dynamically mapped string costs: `text` plus its `keyword` subfield (search.indices' dynamic template).
STRING_FIELDS: Final = 2
# Mapped types whose field mapper parses the whole value itself (objects and arrays included): never walked.
_OPAQUE_TYPES: Final = frozenset({"geo_shape", "geo_point", "flat_object"})

DOCUMENT_LIMIT: Final = "document-limit"
INVALID_FIELD_NAME: Final = "invalid-field-name"
FIELD_CONFLICT: Final = "field-conflict"


class DocumentLimitError(RefdataError, ValueError):
    """An item the engine would refuse; `kind` is document-limit, invalid-field-name or field-conflict."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail


@dataclass(frozen=True)
class Limits:
    depth: int = DEPTH_LIMIT
    total_fields: int = TOTAL_FIELDS_LIMIT
    name_length: int = NAME_LENGTH_LIMIT


ENGINE_LIMITS: Final = Limits()


# Nodes of a mapping tree: a leaf field, a value its mapper parses whole (or a disabled object), an object as
# (its template children, the children this item adds), and "not mapped yet".
class _Marker:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


LEAF: Final = _Marker("leaf")
OPAQUE: Final = _Marker("opaque")
_ABSENT: Final = _Marker("absent")
# A value this item maps dynamically, by the type the index templates give it (refdata.mappings).
_TEXT: Final = _Marker("text")
_DOUBLE: Final = _Marker("double")
_BOOLEAN: Final = _Marker("boolean")
Node = Any  # LEAF | OPAQUE | _TEXT | _DOUBLE | _BOOLEAN | dict[str, Node] (a mapped object's children)


def mapped_tree(properties: Mapping[str, Any]) -> tuple[dict[str, Node], int]:
    """Template `properties` as a tree of nodes, and the number of fields they map (multi-fields included)."""
    tree: dict[str, Node] = {}
    count = 0
    for name, spec in properties.items():
        count += 1 + len(spec.get("fields") or {})
        kind = spec.get("type", "object")
        if spec.get("enabled", True) in (False, "false") or kind in _OPAQUE_TYPES:
            tree[name] = OPAQUE
        elif kind in ("object", "nested") or "properties" in spec:
            children, inner = mapped_tree(spec.get("properties") or {})
            tree[name] = children
            count += inner
        else:
            tree[name] = LEAF
    return tree, count


def _utf16_length(name: str) -> int:
    """Java's String.length(): UTF-16 code units (a character beyond the BMP counts two)."""
    return len(name) if name.isascii() else len(name.encode("utf-16-le")) // 2


def split_path(name: str) -> list[str]:
    """DocumentParser.splitAndValidatePath: a field name as its object path; DocumentLimitError if it has none."""
    if "." not in name:
        if not name:
            raise DocumentLimitError(INVALID_FIELD_NAME, "field name cannot be an empty string")
        return [name]
    parts = name.split(".")
    while parts and parts[-1] == "":
        parts.pop()
    if not parts:
        raise DocumentLimitError(INVALID_FIELD_NAME, f"field name {name!r:.80} is only dots")
    for part in parts:
        if not part.strip():
            why = (
                "a part of only whitespace" if part else "an empty part (a leading dot or two dots in a row)"
            )
            raise DocumentLimitError(
                INVALID_FIELD_NAME, f"field name {name!r:.80} has {why}: it names no object path"
            )
    return parts


_SCALARS: Final = frozenset({str, int, float, bool, Decimal})
_DYNAMIC: Final = {str: _TEXT, int: _DOUBLE, float: _DOUBLE, Decimal: _DOUBLE, bool: _BOOLEAN}


def _maps_nothing(value: Any) -> bool:
    """An array holding no value and no object at any depth (only nulls and arrays like it)."""
    return (type(value) is list or isinstance(value, tuple | Set)) and all(
        element is None or _maps_nothing(element) for element in value
    )


def _dotted(path: tuple[str, ...]) -> str:
    return ".".join(path)[:200]


class _Walk:
    """One item's walk. The mapped tree is shared between items and never changed: what this item adds lives in
    `own` dicts beside it (an added object is a pair: no mapped children, and its own). Paths are tuples, joined
    only for an error message."""

    def __init__(self, limits: Limits, mapped_count: int) -> None:
        self.limits = limits
        self.mapped_count = mapped_count
        self.added = 0
        self.short = limits.name_length // 2  # a name this long or shorter cannot be over the limit
        self.trailing_dots = (
            0  # enclosing objects named with a trailing dot (the engine keeps it in their path)
        )

    def object(
        self, value: Mapping[Any, Any], mapped: Mapping[str, Node], own: dict[str, Any], path: tuple[str, ...],
        arrays: int,
    ) -> None:  # fmt: skip
        """The members of the object at `path` (the document's is ()); `arrays` enclose it. The common cases (a
        plain name holding a value, an object or a list of values) are handled inline: this runs on every document
        the sync sends."""
        short = self.short
        added = 0
        for name, member in value.items():
            if type(name) is not str or not name or "." in name or len(name) > short:
                self.named(name, member, mapped, own, path, arrays)
                continue
            kind = type(member)
            node = mapped.get(name, _ABSENT)
            if node is _ABSENT:
                node = own.get(name, _ABSENT)
                if node is _ABSENT:
                    if kind in _SCALARS:
                        own[name] = _DYNAMIC[kind]
                        added += STRING_FIELDS if kind is str else 1
                        continue
                    if kind is dict:
                        child = (*path, name)
                        child_mapped, child_own = self.as_object(_ABSENT, name, own, child, child)
                        self.object(member, child_mapped, child_own, child, arrays)
                        continue
                elif kind in _SCALARS and node is _DYNAMIC[kind]:
                    continue
            elif node is OPAQUE or (node is LEAF and kind in _SCALARS):
                continue
            elif type(node) is dict:
                node = (node, own.setdefault(name, {}))
            self.value(name, member, node, own, path, arrays)
        self.added += added
        if self.mapped_count + self.added > self.limits.total_fields:
            self.too_many_fields()

    def value(
        self, name: str, value: Any, node: Node, own: dict[str, Any], path: tuple[str, ...], arrays: int
    ) -> None:
        """`value` as the field `name` (its `node`) of the object at `path`."""
        kind = type(value)
        if kind in _SCALARS:
            if node is _ABSENT:
                own[name] = _DYNAMIC[kind]
                self.added += STRING_FIELDS if kind is str else 1
            elif node is _TEXT or node is _DOUBLE or node is _BOOLEAN:
                if node is not _DYNAMIC[kind]:
                    raise DocumentLimitError(
                        FIELD_CONFLICT,
                        f"[{_dotted((*path, name))}] is given a {node} value and a {_DYNAMIC[kind]} value: its "
                        "dynamic mapping cannot be both",
                    )
            elif node is not LEAF and node is not OPAQUE:
                raise DocumentLimitError(
                    FIELD_CONFLICT, f"[{_dotted((*path, name))}] is an object, so it cannot also hold a value"
                )
        elif node is OPAQUE or value is None:
            return
        elif kind is dict or isinstance(value, Mapping):
            child = (*path, name)
            child_mapped, child_own = self.as_object(node, name, own, child, child)
            self.object(value, child_mapped, child_own, child, arrays)
        elif kind is list or isinstance(value, tuple | Set):
            if arrays >= self.limits.depth:
                raise DocumentLimitError(
                    DOCUMENT_LIMIT,
                    f"index.mapping.depth.limit [{self.limits.depth}]: arrays nest more than {self.limits.depth} "
                    f"deep at [{_dotted((*path, name))}]",
                )
            for element in value:  # every element is the same field; the first to map it decides its kind
                if type(element) in _SCALARS and (
                    node is LEAF or node is OPAQUE or node is _DYNAMIC[type(element)]
                ):
                    continue
                self.value(name, element, node, own, path, arrays + 1)
                if node is _ABSENT:
                    node = own.get(name, _ABSENT)
        else:  # bytes, boto3's Binary and anything else an item holds: indexed as strings
            self.value(name, "", node, own, path, arrays)

    def named(
        self, name: Any, member: Any, mapped: Mapping[str, Node], own: dict[str, Any], path: tuple[str, ...],
        arrays: int,
    ) -> None:  # fmt: skip
        """A member whose name needs checking: not a string, empty, dotted or long."""
        limit = self.limits.name_length
        if type(name) is not str:
            raise DocumentLimitError(INVALID_FIELD_NAME, f"field name {name!r:.80} is not a string")
        if len(name) > limit // 2 and _utf16_length(name) > limit:
            raise DocumentLimitError(
                DOCUMENT_LIMIT,
                f"field name of {_utf16_length(name)} characters ({name[:40]!r}...) is longer than the engine's "
                f"JSON parser allows ({limit}): it refuses the whole request",
            )
        parts = split_path(name)
        if (
            member is None
        ):  # the engine maps nothing for a null: no object on its path, so no conflict or depth
            return
        if self.trailing_dots and len(parts) > 1 and _maps_nothing(member):
            # The engine adds the objects of a dotted name whose array maps nothing beneath the enclosing path as
            # written, and refuses the doubled dot that gives ("object field starting or ending with a [.] makes
            # object resolution ambiguous").
            raise DocumentLimitError(
                INVALID_FIELD_NAME,
                f"field name {name!r:.80} holds an empty array inside an object whose name ends with a dot: the "
                "engine cannot resolve the objects it names",
            )
        wanted = (*path, *parts)
        for part in parts[:-1]:  # `a.b.c`: objects a and b (mapped, added before, or added now), then field c
            node = _Walk.node(part, mapped, own)
            if node is OPAQUE:
                return
            path = (*path, part)
            mapped, own = self.as_object(node, part, own, path, wanted)
        last = parts[-1]
        trailing = name.endswith(".")
        self.trailing_dots += trailing
        try:
            self.value(last, member, _Walk.node(last, mapped, own), own, path, arrays)
        finally:
            self.trailing_dots -= trailing

    @staticmethod
    def node(name: str, mapped: Mapping[str, Node], own: dict[str, Any]) -> Node:
        """The field `name` as mapped or as this item added it: LEAF, OPAQUE, an object pair, or _ABSENT."""
        node = mapped.get(name, _ABSENT)
        if type(node) is dict:
            return (node, own.setdefault(name, {}))
        return own.get(name, _ABSENT) if node is _ABSENT else node

    def as_object(
        self, node: Node, name: str, own: dict[str, Any], path: tuple[str, ...], wanted: tuple[str, ...]
    ) -> tuple[Mapping[str, Node], dict[str, Any]]:
        """The object at `path` that `node` stands for (added now when absent); a conflict when it is a value's."""
        if node is LEAF or node is _TEXT or node is _DOUBLE or node is _BOOLEAN:
            beneath = (
                "so it cannot also be an object"
                if wanted == path
                else f"so [{_dotted(wanted)}] cannot be an object beneath it"
            )
            raise DocumentLimitError(FIELD_CONFLICT, f"[{_dotted(path)}] holds a value, {beneath}")
        if node is _ABSENT:
            depth = len(path) + 1  # the document itself is depth 1
            if depth > self.limits.depth:
                raise DocumentLimitError(
                    DOCUMENT_LIMIT,
                    f"index.mapping.depth.limit [{self.limits.depth}]: object field [{_dotted(path)}] is at depth "
                    f"{depth} (the document itself is depth 1)",
                )
            self.added += 1
            node = own[name] = ({}, {})
        children: tuple[Mapping[str, Node], dict[str, Any]] = node
        return children

    def too_many_fields(self) -> None:
        raise DocumentLimitError(
            DOCUMENT_LIMIT,
            f"index.mapping.total_fields.limit [{self.limits.total_fields}]: the document needs "
            f"{self.mapped_count + self.added} fields ({self.mapped_count} mapped by the index template, the rest "
            f"its own; every object, number and boolean is one field, every string {STRING_FIELDS}: text and "
            "keyword)",
        )


def check_item(
    item: Mapping[str, Any],
    mapped: Mapping[str, Any] | None = None,
    *,
    limits: Limits = ENGINE_LIMITS,
    tree: tuple[dict[str, Node], int] | None = None,
) -> None:
    """Raise DocumentLimitError if the engine could never index `item` into an index whose template maps
    `mapped` (its `properties`; or `tree`, `mapped_tree(mapped)` precomputed by callers that check many items)."""
    mapped_nodes, mapped_count = tree if tree is not None else mapped_tree(mapped or {})
    walk = _Walk(limits, mapped_count)
    try:
        walk.object(item, mapped_nodes, {}, (), 0)
    except RecursionError:  # nested beyond Python's recursion limit: far beyond the depth limit
        raise DocumentLimitError(
            DOCUMENT_LIMIT, f"index.mapping.depth.limit [{limits.depth}]: the item nests far deeper"
        ) from None
