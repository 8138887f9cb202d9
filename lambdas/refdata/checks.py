"""What an application write must satisfy before it is sent (pure, no I/O): the checks behind `refdata.writer`.

An item passes when its keys follow the conventions of a registered data schema (not the counters' own schema,
not a reserved scope), it sets no attribute the platform writes itself, and its values are values DynamoDB stores
(numbers in DynamoDB's range and precision, no floats, sets of one kind, at most 32 levels) within 400 KB
(`refdata.item_size`). Everything the stream sync would refuse later (a key too long for a document id, a
document the engine could never index) is refused here, so an item that could never be searched is never written:
each attribute the schema's index template maps (`refdata.mappings`) takes a value of its mapped type
(`FIELD_VALUES`: text a str, a boolean a bool, a date ISO-8601 text), and a schema whose template maps nothing
dynamically refuses the names it does not declare.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Set
from datetime import date, datetime, timedelta
from decimal import Decimal
from functools import lru_cache
from typing import Any, Final

from refdata import limits
from refdata.exceptions import RefdataError, did_you_mean
from refdata.globalid import schema_of
from refdata.mappings import document_mappings, mapped_fields
from refdata.registry import COUNTER, PLATFORM_ATTRIBUTES, KeyConventionError, Schema
from refdata.reserved import is_reserved

GEOMETRY: Final = "geometry"
# Platform attributes an application item may carry: its keys, the GeoJSON geometry (the writer offloads it and
# derives bbox and location) and its expiry time (the table's TTL attribute).
WRITABLE_PLATFORM_ATTRIBUTES: Final = frozenset({"pk", "sk", GEOMETRY, "expiresAt"})
# What a stored item carries besides: its globalId and what the writer derived; a replacement keeps them.
STORED_PLATFORM_ATTRIBUTES: Final = frozenset({"globalId", "geometryUrl", "bbox", "location"})


class WriteError(RefdataError, ValueError):
    """An item or a change the writer refuses before any call; the message names the item and the reason."""


def check_key(item: Mapping[str, Any]) -> Schema:
    """The schema of an application item's key (`refdata.globalid.schema_of`: the conventions, and a document id
    for an indexable schema); also refuses the counters' own items and the platform's reserved scopes."""
    try:
        schema = schema_of(item)
    except KeyConventionError as error:
        raise WriteError(f"{item.get('pk')!r} {item.get('sk')!r}: {error}") from None
    if schema.name == COUNTER:
        raise WriteError(f"{item['pk']!r}: counter items are written by the writer's counter only")
    if is_reserved(item["pk"]):
        raise WriteError(
            f"{item['pk']!r}: the scope is reserved for the platform's own items (heartbeat, canaries)"
        )
    return schema


def check_attributes(pk: str, names: Mapping[str, Any], *, allowed: frozenset[str]) -> None:
    """Refuse the platform's own attributes outside `allowed`."""
    owned = sorted((set(names) & PLATFORM_ATTRIBUTES) - allowed)
    if owned:
        raise WriteError(f"{pk!r}: {owned} are written by the platform, not by application items")


def check_indexable(pk: str, schema: Schema, attributes: Mapping[str, Any]) -> None:
    """The schema's mappings against the item: undeclared names where the template maps nothing dynamically, values
    the mapped type cannot parse (`check_values`), and the search engine's document limits (`refdata.limits`): what
    the stream sync would dead-letter as the engine's refusal, `document-limit` or `invalid-field-name` is refused
    before it is stored."""
    if not schema.indexable:
        return
    check_values(pk, schema, attributes)
    try:
        limits.check_item(attributes, tree=mapped_fields(schema.name))
    except limits.DocumentLimitError as error:
        raise WriteError(f"{pk!r}: search could never index it: {error}") from None


# ISO-8601 text a date field takes: a calendar date, optionally a time of day (minutes, seconds, up to nine decimals)
# and an offset. It is the part of the date mapping's default format (`strict_date_optional_time||epoch_millis`,
# refdata.mappings sets none) that says what it means; the engine's other forms (a year alone, epoch milliseconds)
# are refused as ambiguous.
ISO_DATE: Final = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(?:Z|([+-])(\d{2}):(\d{2}))?)?"
)
MAX_OFFSET: Final = timedelta(hours=18)  # java.time.ZoneOffset's range
DATE_EXAMPLE: Final = "an ISO-8601 date such as '2026-07-01' or date-time such as '2026-07-01T09:30:00Z'"
LONG_RANGE: Final = range(-(2**63), 2**63)


def is_iso_date(text: str) -> bool:
    """`text` is a real calendar date (and time) written as `ISO_DATE`."""
    match = ISO_DATE.fullmatch(text)
    if match is None:
        return False
    year, month, day, hour, minute, second, sign, zone_hours, zone_minutes = match.groups()
    try:
        datetime(int(year), int(month), int(day), int(hour or 0), int(minute or 0), int(second or 0))
    except ValueError:
        return False
    if sign is None:
        return True
    offset = timedelta(hours=int(zone_hours), minutes=int(zone_minutes))
    return int(zone_minutes) < 60 and offset <= MAX_OFFSET


def _text(value: Any) -> str | None:
    return None if isinstance(value, str) else "takes text (a str)"


def _boolean(value: Any) -> str | None:
    return None if isinstance(value, bool) else "takes a bool (True or False)"


def _date(value: Any) -> str | None:
    if isinstance(value, date):  # a datetime too: DynamoDB has no type for either
        return f"takes ISO-8601 text: pass {type(value).__name__}.isoformat() ({value.isoformat()!r})"
    if isinstance(value, str) and is_iso_date(value):
        return None
    return f"takes {DATE_EXAMPLE}"


def _number(value: Any) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        return None
    number = Decimal(value)
    return number if number.is_finite() else None


def _double(value: Any) -> str | None:
    return None if _number(value) is not None else "takes a number (an int or a Decimal)"


def _long(value: Any) -> str | None:
    number = _number(value)
    if number is not None and number == number.to_integral_value() and int(number) in LONG_RANGE:
        return None
    return "takes a whole number (an int or a whole Decimal) within a signed 64-bit integer"


# What a field of each mapped type takes (the type its mapping names, refdata.mappings): a value of the type itself,
# never one the engine would coerce (a number into text, "true" into a boolean). A reason, or None when it takes it.
# Geometry (geo_shape) is refdata.geometry's; a type not here takes whatever the engine's limits allow.
FIELD_VALUES: Final[Mapping[str, Callable[[Any], str | None]]] = {
    "text": _text,
    "keyword": _text,
    "boolean": _boolean,
    "date": _date,
    "long": _long,
    "double": _double,
}


@lru_cache(maxsize=64)
def _template(schema: str) -> tuple[Mapping[str, Any], bool]:
    """The fields `schema`'s template maps, and whether it maps other names dynamically."""
    body = document_mappings(schema)
    return body["properties"], body["dynamic"] is True


def _refusal(kind: str, value: Any) -> str | None:
    """Why a field of mapped type `kind` cannot take `value` (each member of a list or set), or None."""
    if value is None:
        return None
    if isinstance(value, list | tuple | Set):
        return next((reason for member in value if (reason := _refusal(kind, member))), None)
    return FIELD_VALUES[kind](value)


def check_values(pk: str, schema: Schema, attributes: Mapping[str, Any]) -> None:
    """Each attribute `schema`'s template maps takes a value of its mapped type (`FIELD_VALUES`); a name the
    template does not map is refused when the template maps nothing dynamically (`Schema.free_attributes`)."""
    properties, dynamic = _template(schema.name)
    for name, value in attributes.items():
        spec = properties.get(name)
        if spec is None:
            if not dynamic and name not in WRITABLE_PLATFORM_ATTRIBUTES | STORED_PLATFORM_ATTRIBUTES:
                declared = schema.attributes_of()
                raise WriteError(
                    f"{pk!r}: schema {schema.name!r} declares no attribute {name!r}"
                    f"{did_you_mean(str(name), declared)} and takes no other (it declares {list(declared)})"
                )
            continue
        kind = spec.get("type", "object")
        reason = _refusal(kind, value) if kind in FIELD_VALUES else None
        if reason is not None:
            raise WriteError(f"{pk!r}: attribute {name!r} (mapped as {kind}) {reason}; got {value!r:.80}")
