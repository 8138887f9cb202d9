"""Schema registry: which datatypes exist, how their keys are shaped, which are indexed, and what readers see.

Adding a schema is one `Schema(...)` entry in `SHIPPED`. Everything else (key builders and parsers,
the stream filter, the search indices and their mappings, the read roles' document- and field-level security,
the query helpers, the conventions table in docs/data-model.md) reads this registry.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date
from enum import Enum
from types import MappingProxyType

from refdata.exceptions import RefdataError, did_you_mean

SEPARATOR = "::"

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*")


class KeyConventionError(RefdataError, ValueError):
    """A key, key value or schema declaration breaks the key conventions."""


class Kind(Enum):
    """How one key segment is written, which fixes how it sorts."""

    TEXT = "text"  # free text without separators; sorts as text
    DATE = "date"  # datetime.date as YYYY-MM-DD; sorts chronologically
    NUMBER = "number"  # non-negative int zero-padded to `width` digits; text order == numeric order
    UUID = "uuid"  # canonical lower-case UUID string
    KEY = "key"  # a whole partition key of another schema (last pk segment only)


@dataclass(frozen=True)
class Field:
    """One named segment of a pk or sk."""

    name: str
    kind: Kind = Kind.TEXT
    width: int = 0

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise KeyConventionError(f"field name {self.name!r} must be alphanumeric")
        if (self.kind is Kind.NUMBER) != (self.width > 0):
            raise KeyConventionError(f"field {self.name!r}: a width is required for NUMBER fields only")

    @property
    def pattern(self) -> str:
        """How the segment reads in docs: <name>, <name:YYYY-MM-DD>, <name:000000>."""
        if self.kind is Kind.DATE:
            return f"<{self.name}:YYYY-MM-DD>"
        if self.kind is Kind.NUMBER:
            return f"<{self.name}:{'0' * self.width}>"
        if self.kind is Kind.UUID:
            return f"<{self.name}:uuid>"
        if self.kind is Kind.KEY:
            return f"<{self.name}: a data pk>"
        return f"<{self.name}>"


@dataclass(frozen=True)
class CounterSk:
    """sk is an atomically incremented sequence number, zero-padded so it sorts in creation order."""

    width: int = 10
    field_name: str = "seq"


@dataclass(frozen=True)
class FieldsSk:
    """sk is made of natural key segments (dates, ids, numbers, UUIDs) joined by `::`."""

    fields: tuple[Field, ...]


@dataclass(frozen=True)
class PartsSk:
    """sk names one vertical part of an entity: `META`, `TEXT` or `COMMENT#<epoch ms, 13 digits>`."""

    timestamp_width: int = 13


@dataclass(frozen=True)
class FixedSk:
    """sk is one constant: the partition holds exactly one item."""

    value: str


SortKey = CounterSk | FieldsSk | PartsSk | FixedSk


class AttributeKind(Enum):
    """How a declared document attribute is indexed (its explicit mapping in the schema's index template)."""

    TEXT = "text"  # full text (standard analyzer), with an exact `.keyword` subfield for filters and sorting
    KEYWORD = "keyword"  # exact strings: filters and sorting
    DATE = "date"  # ISO-8601 date or date-time (or epoch milliseconds): range filters and sorting
    BOOLEAN = "boolean"


class Visibility(Enum):
    """Who may see a declared attribute in search results."""

    PUBLIC = "public"  # every read role
    INTERNAL = "internal"  # hidden from read roles by field-level security: the admin and the ops tools only


# Attributes the platform maps or writes itself (search.indices, search.documents): never declared by a schema.
PLATFORM_ATTRIBUTES = frozenset(
    {
        "pk",
        "sk",
        "schema",
        "globalId",
        "stream_seq",
        "tombstone",
        "exactNumbers",
        "geometry",
        "geometryUrl",
        "location",
        "bbox",
        "expiresAt",
        "deletedAt",  # a tombstone's deletion time (the sync writes it, the tombstone purge compares it)
    }
)


@dataclass(frozen=True)
class Attribute:
    """One top-level attribute of a schema's items, as search indexes and shows it.

    Attributes not declared are indexed dynamically (strings as text with a keyword subfield, numbers as
    doubles) and are public.
    """

    name: str
    kind: AttributeKind
    visibility: Visibility = Visibility.PUBLIC
    description: str = ""

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise KeyConventionError(f"attribute name {self.name!r} must be alphanumeric")
        if self.name in PLATFORM_ATTRIBUTES:
            raise KeyConventionError(f"attribute {self.name!r} is written or mapped by the platform itself")


@dataclass(frozen=True)
class Sharding:
    """Write sharding: pk gets a trailing `shard` segment = sha256(attribute) mod `shards`."""

    attribute: str
    shards: int

    def __post_init__(self) -> None:
        if self.shards < 2:
            raise KeyConventionError(f"sharding on {self.attribute!r} needs at least 2 shards")

    @property
    def field(self) -> Field:
        return Field("shard", Kind.NUMBER, width=len(str(self.shards - 1)))


@dataclass(frozen=True)
class Schema:
    """One datatype: pk = `<name>::<scope fields...>[::<shard>]`, sk per its strategy."""

    name: str
    scope: tuple[Field, ...]
    sk: SortKey
    indexable: bool
    global_id: bool = False
    sharding: Sharding | None = None
    description: str = ""
    # Key values for the docs' example column; left out of the hash so schemas stay hashable.
    example: Mapping[str, object] = field(default_factory=dict, hash=False)
    attributes: tuple[Attribute, ...] = ()
    # A public BOOLEAN attribute: items where it is true are not visible to read roles (document-level security).
    hidden_flag: str | None = None
    # Undeclared attributes are indexed dynamically (strings as text, numbers as doubles); False maps the schema's
    # documents strictly: the engine refuses, and the writer before it, every name the schema does not declare.
    free_attributes: bool = True

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise KeyConventionError(f"schema name {self.name!r} must be alphanumeric")
        names = [f.name for f in self.pk_fields] + [f.name for f in self.sk_fields]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise KeyConventionError(f"schema {self.name!r}: field names repeat: {duplicates}")
        keys = [i for i, f in enumerate(self.pk_fields) if f.kind is Kind.KEY]
        if keys and keys != [len(self.pk_fields) - 1]:
            raise KeyConventionError(f"schema {self.name!r}: only the last pk field may be a KEY")
        if any(f.kind is Kind.KEY for f in self.sk_fields):
            raise KeyConventionError(f"schema {self.name!r}: sk fields may not be KEY fields")
        self._check_attributes()
        if self.indexable and (not self.scope or self.scope[0].kind is not Kind.TEXT):
            # refdata.reserved: the platform's heartbeat and canaries live under reserved values of it.
            raise KeyConventionError(
                f"schema {self.name!r}: an indexable schema's first scope field must be text"
            )

    def _check_attributes(self) -> None:
        names = [a.name for a in self.attributes]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise KeyConventionError(f"schema {self.name!r}: attributes repeat: {repeated}")
        if self.attributes and not self.indexable:
            raise KeyConventionError(
                f"schema {self.name!r}: attributes describe search documents, and the schema is not indexable"
            )
        if self.hidden_flag is None:
            return
        flag = next((a for a in self.attributes if a.name == self.hidden_flag), None)
        if flag is None or flag.kind is not AttributeKind.BOOLEAN:
            raise KeyConventionError(
                f"schema {self.name!r}: hidden_flag {self.hidden_flag!r} must name a declared BOOLEAN attribute"
            )
        if flag.visibility is not Visibility.PUBLIC:
            # Document-level security reads the flag; field-level security must not hide what it reads.
            raise KeyConventionError(f"schema {self.name!r}: hidden_flag {self.hidden_flag!r} must be public")

    @property
    def pk_fields(self) -> tuple[Field, ...]:
        return self.scope + ((self.sharding.field,) if self.sharding else ())

    @property
    def sk_fields(self) -> tuple[Field, ...]:
        if isinstance(self.sk, CounterSk):
            return (Field(self.sk.field_name, Kind.NUMBER, width=self.sk.width),)
        if isinstance(self.sk, FieldsSk):
            return self.sk.fields
        return ()

    @property
    def pk_prefix(self) -> str:
        """Every pk of this schema starts with this; the stream filter matches on it."""
        return self.name + SEPARATOR

    def attributes_of(
        self, kind: AttributeKind | None = None, visibility: Visibility | None = None
    ) -> tuple[str, ...]:
        """Names of the declared attributes of one kind and/or visibility, in declaration order."""
        return tuple(
            a.name
            for a in self.attributes
            if (kind is None or a.kind is kind) and (visibility is None or a.visibility is visibility)
        )


COUNTER = "counter"

SHIPPED: tuple[Schema, ...] = (
    Schema(
        name="geozone",
        scope=(Field("collectionId"),),
        sk=CounterSk(),
        indexable=True,
        description="Geographic zones of a collection; sk allocated by an atomic counter.",
        example={"collectionId": "bcparks_1", "seq": 1},
        attributes=(
            Attribute("name", AttributeKind.TEXT),
            Attribute("description", AttributeKind.TEXT),
            Attribute("adminNotes", AttributeKind.TEXT, Visibility.INTERNAL, "staff notes, never published"),
            Attribute("hidden", AttributeKind.BOOLEAN, description="true: not shown to read roles"),
        ),
        hidden_flag="hidden",
    ),
    Schema(
        name="productDate",
        scope=(Field("collectionId"), Field("activityType"), Field("activityId")),
        sk=FieldsSk((Field("productId"), Field("date", Kind.DATE))),
        indexable=True,
        description="At most one item per product per day: natural keys (seed 000).",
        example={
            "collectionId": "bcparks_1",
            "activityType": "dayuse",
            "activityId": "1",
            "productId": "1",
            "date": date(2025, 12, 31),
        },
        attributes=(
            Attribute("name", AttributeKind.TEXT),
            Attribute("description", AttributeKind.TEXT),
            Attribute("date", AttributeKind.DATE, description="the sk's date, repeated for date filters"),
            Attribute("adminNotes", AttributeKind.TEXT, Visibility.INTERNAL, "staff notes, never published"),
            Attribute("hidden", AttributeKind.BOOLEAN, description="true: not shown to read roles"),
        ),
        hidden_flag="hidden",
    ),
    Schema(
        name="booking",
        scope=(Field("collectionId"),),
        sk=FieldsSk((Field("startDate", Kind.DATE), Field("bookingId", Kind.UUID))),
        indexable=True,
        global_id=True,
        sharding=Sharding(attribute="bookingId", shards=4),
        description="Bookings of a collection, write-sharded; looked up alone by globalId.",
        example={
            "collectionId": "bcparks_1",
            "startDate": date(2026, 7, 1),
            "bookingId": "0b9a3c1e-6f1d-4c8e-9a51-3c2f0e4d5a6b",
        },
        attributes=(
            Attribute(
                "startDate", AttributeKind.DATE, description="the sk's date, repeated for date filters"
            ),
            Attribute("guestName", AttributeKind.TEXT, Visibility.INTERNAL, "personal data"),
            Attribute("adminNotes", AttributeKind.TEXT, Visibility.INTERNAL, "staff notes, never published"),
        ),
    ),
    Schema(
        name="thread",
        scope=(Field("collectionId"), Field("threadId")),
        sk=PartsSk(),
        indexable=False,
        description="Vertically partitioned entity (seed 004): META, TEXT and one item per comment.",
        example={
            "collectionId": "bcparks_1",
            "threadId": "0000000009",
            "part": "COMMENT",
            "ts": 1234567890000,
        },
    ),
    Schema(
        name=COUNTER,
        scope=(Field("partition", Kind.KEY),),
        sk=FixedSk("counter"),
        indexable=False,
        description="Sequence counter of one data partition, kept out of that partition.",
        example={"partition": "geozone::bcparks_1"},
    ),
)


def build_registry(schemas: Iterable[Schema]) -> Mapping[str, Schema]:
    """Index schemas by name, refusing names that collide case-insensitively."""
    registry: dict[str, Schema] = {}
    seen: dict[str, str] = {}
    for schema in schemas:
        folded = schema.name.casefold()
        if folded in seen:
            raise KeyConventionError(
                f"schema name {schema.name!r} collides with {seen[folded]!r} (names are case-insensitive)"
            )
        seen[folded] = schema.name
        registry[schema.name] = schema
    return MappingProxyType(registry)


REGISTRY: Mapping[str, Schema] = build_registry(SHIPPED)


def get_schema(name: str) -> Schema:
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyConventionError(
            f"unknown schema {name!r}{did_you_mean(name, REGISTRY)}: the registry declares {sorted(REGISTRY)}"
        ) from None


def indexable_schemas() -> tuple[Schema, ...]:
    """Schemas whose items are synced to OpenSearch, in registry order."""
    return tuple(s for s in REGISTRY.values() if s.indexable)


def schema_of_pk(pk: str) -> Schema:
    """The schema a partition key belongs to (its first segment)."""
    name = pk.split(SEPARATOR, 1)[0]
    if name not in REGISTRY or not pk.startswith(name + SEPARATOR):
        raise KeyConventionError(
            f"pk {pk!r} does not start with a registered schema name and '::'{did_you_mean(name, REGISTRY)}"
        )
    return REGISTRY[name]
