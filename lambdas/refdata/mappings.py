"""How the search engine maps a schema's documents: the platform's fields, the schema's declared attributes, and
everything else dynamically (strings as text with a keyword subfield, every number as a double), unless the schema
takes no free attributes (`Schema.free_attributes`: then the engine refuses every other name).

The index bootstrap puts this into each schema's index template (search.indices adds the fingerprint); the engine's
document limits (`refdata.limits`) are checked against it by the stream sync on every document and by the writer
before every write, and the writer checks each mapped attribute's value against its mapped type (`refdata.checks`),
so an item the engine could never index is refused before it is stored.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Final

from refdata import limits
from refdata.exact_numbers import EXACT_NUMBERS_FIELD
from refdata.registry import AttributeKind, get_schema

# When a tombstone's item was deleted (epoch seconds): what the tombstone purge compares with its bound.
DELETED_AT_FIELD: Final = "deletedAt"


def _field_mappings() -> dict[str, Any]:
    keyword = {"type": "keyword"}
    return {
        "pk": keyword,
        "sk": keyword,
        "globalId": keyword,
        "schema": keyword,
        "stream_seq": keyword,
        "tombstone": {"type": "boolean"},
        "geometry": {"type": "geo_shape"},
        "geometryUrl": keyword,
        "location": {"type": "geo_point"},
        "bbox": {"type": "double"},
        "expiresAt": {"type": "long"},
        DELETED_AT_FIELD: {"type": "long"},
        EXACT_NUMBERS_FIELD: {"type": "object", "enabled": False},  # kept in _source, never indexed
    }


def _text_with_keyword() -> dict[str, Any]:
    return {"type": "text", "fields": {"keyword": {"type": "keyword", "ignore_above": 256}}}


def attribute_mapping(kind: AttributeKind) -> dict[str, Any]:
    """The explicit mapping of a declared attribute (refdata.registry); `text` as dynamic strings get it."""
    return _text_with_keyword() if kind is AttributeKind.TEXT else {"type": kind.value}


def _mapping_body(free_attributes: bool) -> dict[str, Any]:
    return {
        # A schema without free attributes takes only what it declares: the engine refuses any other name.
        "dynamic": True if free_attributes else "strict",
        # Strings never become dates or numbers by guesswork; geometry is mapped explicitly above.
        "date_detection": False,
        "numeric_detection": False,
        "dynamic_templates": [
            {
                "strings_as_text_and_keyword": {
                    "match_mapping_type": "string",
                    "mapping": _text_with_keyword(),
                }
            },
            # DynamoDB has one number type. Every number is indexed as a double: the default (integers as
            # `long`, fractions as 32-bit `float`) would truncate a later fraction in a field first seen as an
            # integer, refuse integers beyond 64 bits, and round every fraction to 7 digits.
            {"integers_as_double": {"match_mapping_type": "long", "mapping": {"type": "double"}}},
            {"decimals_as_double": {"match_mapping_type": "double", "mapping": {"type": "double"}}},
        ],
        "properties": _field_mappings(),
    }


def document_mappings(schema: str) -> dict[str, Any]:
    """The mappings of `schema`'s documents: the platform's fields and the schema's declared attributes mapped
    explicitly, everything else dynamically (or, for a schema without free attributes, nothing else)."""
    declared = get_schema(schema)
    body = _mapping_body(declared.free_attributes)
    for attribute in declared.attributes:
        body["properties"][attribute.name] = attribute_mapping(attribute.kind)
    return body


@lru_cache(maxsize=64)
def mapped_fields(schema: str) -> tuple[dict[str, Any], int]:
    """The fields `schema`'s mappings map explicitly, as `refdata.limits` walks them."""
    return limits.mapped_tree(document_mappings(schema)["properties"])
