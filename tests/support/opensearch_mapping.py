"""Documents parsed against an index's mappings as OpenSearch's DocumentParser does, for the loopback server.

`parse_document` walks a `_source` the way the engine indexes it: dotted field names split into object paths
(`a..b`, `.a` and `.` are refused), objects follow their `enabled` and `dynamic` settings (inherited from the
root), a field that is not mapped yet gets a mapping from the first matching `dynamic_templates` entry
(`match_mapping_type`, `match`/`unmatch`, `path_match`/`path_unmatch`, `match_pattern`) or from the defaults:
strings become `text` with a `keyword` subfield (or `date` / `long` / `float` by `date_detection` and
`numeric_detection`), integers `long`, fractional numbers `float` (32-bit), booleans `boolean`, objects
`object`. Values are then checked against the field's type the way the field mappers parse them, so a
conflict answers a 400 `mapper_parsing_exception` in the engine's words, with its `caused_by`. The mapping
only changes when the whole document parses (the engine sends the dynamic mapping update afterwards).

Numbers arrive as the engine's JSON parser (Jackson) produces them: a Python int is an INT/LONG/BIG_INTEGER
token, a float a DOUBLE token. Not emulated: `copy_to`, runtime fields, multi-field value checks, the exact
`line:column` of a token in `illegal_state_exception` reasons (always `1:1` here), field types other than the
ones in `_CHECKS` (they answer 400 "not emulated").
"""

from __future__ import annotations

import copy
import math
import re
import struct
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from tests.support.opensearch_errors import OpenSearchError, cause
from tests.support.opensearch_security import matches

_LONG = (-(2**63), 2**63 - 1)
_DEFAULT_STRING = {"type": "text", "fields": {"keyword": {"type": "keyword", "ignore_above": 256}}}
# XContentFieldType -> the mapping type a template without "type" (or no template) gives it.
_DEFAULT_TYPE = {
    "string": "text",
    "long": "long",
    "double": "float",
    "boolean": "boolean",
    "date": "date",
    "object": "object",
}
_STRICT_DATE_OPTIONAL_TIME = re.compile(
    r"[+-]?\d{4,9}(-\d{2}(-\d{2}(T\d{2}(:\d{2}(:\d{2}([.,]\d{1,9})?)?)?(Z|[+-]\d{2}(:?\d{2})?)?)?)?)?"
)
_SLASH_DATE = re.compile(r"\d{4}/\d{2}/\d{2}( \d{2}:\d{2}:\d{2})? [+-]\d{4}")
_JAVA_LONG = re.compile(r"[+-]?\d+")
_JAVA_DOUBLE = re.compile(r"\s*[+-]?(NaN|Infinity|((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)[fFdD]?)\s*")


def _java_double(value: float) -> str:
    """Java's Double.toString: `1.0`, `555.25`, `1.0E20`, `1.0E-5`, `Infinity`, `NaN`."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        text = repr(value)
        if "e" in text:  # repr switches to exponents earlier than Java for some values
            text = f"{Decimal(text):f}"
        return text if "." in text else f"{text}.0"
    mantissa, exponent = f"{Decimal(repr(value)):E}".split("E")
    digits = mantissa.rstrip("0").rstrip(".") if "." in mantissa else mantissa
    if "." not in digits:
        digits += ".0"
    return f"{digits}E{int(exponent)}"


def java_text(value: Any) -> str:
    """A parsed value as Java's toString writes it (how the engine previews a field's value)."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, float):
        return _java_double(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key}={java_text(member)}" for key, member in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(java_text(member) for member in value) + "]"
    return str(value)


def _token(value: Any) -> str:
    if value is True:
        return "VALUE_TRUE"
    if value is False:
        return "VALUE_FALSE"
    if isinstance(value, dict):
        return "START_OBJECT"
    if isinstance(value, int):
        return "VALUE_NUMBER_INT"
    if isinstance(value, float):
        return "VALUE_NUMBER_FLOAT"
    return "VALUE_STRING"


class _ValueError(Exception):
    """A field mapper refused a value: the `caused_by` of the mapper_parsing_exception."""

    def __init__(self, error_type: str, reason: str, inner: OpenSearchError | None = None) -> None:
        super().__init__(reason)
        self.error = cause(error_type, reason, inner=inner)


def _not_numeric(value: Any) -> _ValueError:
    return _ValueError(
        "json_parse_exception",
        f"Current token ({_token(value)}) not numeric, can not use numeric value accessors",
    )


def _java_parse_double(text: str) -> float:
    if not _JAVA_DOUBLE.fullmatch(text):
        reason = "empty String" if not text.strip() else f'For input string: "{text}"'
        raise _ValueError("number_format_exception", reason)
    stripped = text.strip().rstrip("fFdD")
    return float(stripped.replace("Infinity", "inf"))


def _check_integer(kind: str, value: Any) -> None:
    bounds = {
        "long": _LONG,
        "integer": (-(2**31), 2**31 - 1),
        "short": (-(2**15), 2**15 - 1),
        "byte": (-128, 127),
    }
    low, high = bounds[kind]
    jackson = {"long": "long", "integer": "int", "short": "Java short", "byte": "Java byte"}[kind]
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise _not_numeric(value)
    if isinstance(value, str):  # coerce: strings are parsed as numbers
        if kind == "long":
            _java_to_long(value)
            return
        number = _java_parse_double(value)
        if not low <= number <= high:
            article = "an integer" if kind == "integer" else f"a {kind}"
            raise _ValueError("illegal_argument_exception", f"Value [{value}] is out of range for {article}")
        return
    truncated = value if isinstance(value, int) else (int(value) if math.isfinite(value) else None)
    if truncated is None or not low <= truncated <= high:
        shown = java_text(value)
        suffix = f" ({low} - {high})" if kind in ("long", "integer") else ""
        raise _ValueError(
            "input_coercion_exception", f"Numeric value ({shown}) out of range of {jackson}{suffix}"
        )


def _java_to_long(text: str) -> None:
    """AbstractXContentParser.toLong with coercion: Long.parseLong, else BigDecimal truncated, range-checked."""
    if _JAVA_LONG.fullmatch(text):
        if _LONG[0] <= int(text) <= _LONG[1]:
            return
        raise _ValueError("illegal_argument_exception", f"Value [{text}] is out of range for a long")
    try:
        exact = Decimal(text)
    except InvalidOperation:
        raise _ValueError("illegal_argument_exception", f'For input string: "{text}"') from None
    if not exact.is_finite() or not _LONG[0] - 1 < exact < _LONG[1] + 1:
        raise _ValueError("illegal_argument_exception", f"Value [{text}] is out of range for a long")


def _check_floating(kind: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise _not_numeric(value)
    if isinstance(value, str):
        number = _java_parse_double(value)
    else:
        try:
            number = float(value)
        except OverflowError:
            number = math.inf
    if kind == "float" and math.isfinite(number):
        try:
            number = struct.unpack("f", struct.pack("f", number))[0]
        except OverflowError:
            number = math.inf
    elif kind == "half_float" and abs(number) > 65504:
        number = math.inf
    if not math.isfinite(number):
        raise _ValueError(
            "illegal_argument_exception",
            f"[{kind}] supports only finite values, but got [{java_text(number)}]",
        )


def _check_text(_kind: str, value: Any) -> None:
    if isinstance(value, dict):
        raise _ValueError("illegal_state_exception", "Can't get text on a START_OBJECT at 1:1")


def _check_boolean(_kind: str, value: Any) -> None:
    if value is True or value is False:
        return
    if isinstance(value, str):
        if value not in ("true", "false", ""):
            raise _ValueError(
                "illegal_argument_exception",
                f"Failed to parse value [{value}] as only [true] or [false] are allowed.",
            )
        return
    raise _ValueError("json_parse_exception", f"Current token ({_token(value)}) not of boolean type")


def _check_date(_kind: str, value: Any, date_format: str = "strict_date_optional_time||epoch_millis") -> None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return
    if isinstance(value, str) and (
        _STRICT_DATE_OPTIONAL_TIME.fullmatch(value) or _JAVA_LONG.fullmatch(value)
    ):
        return
    raise _ValueError(
        "illegal_argument_exception",
        f"failed to parse date field [{java_text(value)}] with format [{date_format}]",
        cause("date_time_parse_exception", "Failed to parse with all enclosed parsers"),
    )


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return _java_parse_double(value)
        except _ValueError:
            return None
    return None


def _check_geo_point(_kind: str, value: Any, field: str = "") -> None:
    if isinstance(value, dict):
        lat, lon = _number(value.get("lat")), _number(value.get("lon"))
        if lat is None or lon is None:
            missing = "lat" if lat is None else "lon"
            raise _ValueError("parse_exception", f"field [{missing}] missing")
    elif isinstance(value, list) and len(value) in (2, 3) and all(_number(v) is not None for v in value):
        lon, lat = float(value[0]), float(value[1])
    elif isinstance(value, str) and "," in value:
        parts = [_number(part.strip()) for part in value.split(",")]
        if len(parts) not in (2, 3) or any(part is None for part in parts):
            raise _ValueError("parse_exception", f"failed to parse [{value}]")
        lat, lon = float(parts[0] or 0.0), float(parts[1] or 0.0)
    else:
        raise _ValueError("parse_exception", "geo_point expected")
    if not -90.0 <= lat <= 90.0:
        raise _ValueError(
            "illegal_argument_exception", f"illegal latitude value [{java_text(lat)}] for {field}"
        )
    if not -180.0 <= lon <= 180.0:
        raise _ValueError(
            "illegal_argument_exception", f"illegal longitude value [{java_text(lon)}] for {field}"
        )


def _check_geo_shape(_kind: str, value: Any) -> None:
    if isinstance(value, str):
        return  # WKT is not parsed here
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise _ValueError("parse_exception", "shape must be an object consisting of type and coordinates")
    if "coordinates" not in value and "geometries" not in value:
        raise _ValueError("parse_exception", "coordinates not included")


def _check_anything(_kind: str, _value: Any) -> None:
    return


_CHECKS: dict[str, Callable[[str, Any], None]] = {
    "keyword": _check_text,
    "text": _check_text,
    "match_only_text": _check_text,
    "wildcard": _check_text,
    "ip": _check_text,
    "binary": _check_text,
    "long": _check_integer,
    "integer": _check_integer,
    "short": _check_integer,
    "byte": _check_integer,
    "double": _check_floating,
    "float": _check_floating,
    "half_float": _check_floating,
    "scaled_float": _check_floating,
    "boolean": _check_boolean,
    "date": _check_date,
    "geo_point": _check_geo_point,
    "geo_shape": _check_geo_shape,
    "flat_object": _check_anything,
}
_PARSES_ARRAYS = frozenset({"geo_point", "geo_shape", "flat_object"})


def _dynamic(value: Any) -> str:
    text = str(value).lower() if not isinstance(value, str) else value
    if text not in ("true", "false", "strict"):
        raise OpenSearchError(
            400, "illegal_argument_exception", f"dynamic [{value}] is not emulated by the loopback server"
        )
    return text


def _is_object(spec: Mapping[str, Any]) -> bool:
    return spec.get("type", "object") in ("object", "nested") or "properties" in spec


def _disabled(spec: Mapping[str, Any]) -> bool:
    return spec.get("enabled", True) in (False, "false")


def _split_path(name: str) -> list[str]:
    """DocumentParser.splitAndValidatePath (Java's split drops trailing empty parts: `a.` is `a`)."""
    if "." not in name:
        if not name:
            raise _PathError("field name cannot be an empty string")
        return [name]
    parts = name.split(".")
    while parts and parts[-1] == "":
        parts.pop()
    if not parts:
        raise _PathError("field name cannot contain only the character [.]")
    for part in parts:
        if not part.strip():
            if part:
                raise _PathError(f"object field cannot contain only whitespace: ['{name}']")
            raise _PathError(
                f"object field starting or ending with a [.] makes object resolution ambiguous: [{name}]"
            )
    return parts


class _PathError(Exception):
    pass


def _mapper_error(reason: str, inner: OpenSearchError | None = None) -> OpenSearchError:
    return OpenSearchError(400, "mapper_parsing_exception", reason, cause=inner)


_EMPTY: Mapping[str, Any] = {}
# index.mapping.depth.limit and index.mapping.total_fields.limit, as the engine defaults them.
DEFAULT_DEPTH_LIMIT = 20
DEFAULT_TOTAL_FIELDS_LIMIT = 1000


class _DepthError(Exception):
    def __init__(self, error: OpenSearchError) -> None:
        super().__init__(error.reason)
        self.error = error


def _depth_exceeded(what: str, limit: int) -> _DepthError:
    """ParseContext.checkFieldDepthLimit / checkFieldArrayDepthLimit (OpenSearchParseException)."""
    return _DepthError(
        cause(
            "parse_exception",
            f"The depth of the {what} has exceeded the allowed limit of [{limit}]. This limit can be set by "
            "changing the [index.mapping.depth.limit] index level setting.",
        )
    )


_TEXTUAL = frozenset({"keyword", "text", "match_only_text", "wildcard"})
_DOUBLES = frozenset({"double", "scaled_float"})


class _DocumentParser:
    """One document's walk. Fields the document adds are kept apart (`added`, by the path of the object they
    belong to) and merged into a copy of the mappings only at the end, so a refused document changes nothing.

    Like ParseContext, it counts the objects (the document's own is 1) and the arrays it is inside while parsing,
    and refuses either beyond `index.mapping.depth.limit`."""

    def __init__(
        self, mappings: Mapping[str, Any], doc_id: str, depth_limit: int = DEFAULT_DEPTH_LIMIT
    ) -> None:
        self.mappings = mappings
        self.doc_id = doc_id
        self.date_detection = mappings.get("date_detection", True) not in (False, "false")
        self.numeric_detection = mappings.get("numeric_detection", False) in (True, "true")
        self.templates: list[Mapping[str, Any]] = list(mappings.get("dynamic_templates") or [])
        self.added: dict[tuple[str, ...], dict[str, dict[str, Any]]] = {}
        self.depth_limit = depth_limit
        self.depth = 0
        self.arrays = 0

    def enter_object(self) -> None:
        self.depth += 1
        if self.depth > self.depth_limit:
            raise _depth_exceeded("field", self.depth_limit)

    def enter_array(self) -> None:
        self.arrays += 1
        if self.arrays > self.depth_limit:
            raise _depth_exceeded("nested array field", self.depth_limit)

    # --- walking --------------------------------------------------------------------------------------

    def parse_object(
        self, properties: Mapping[str, Any], path: tuple[str, ...], value: Mapping[str, Any], dynamic: str
    ) -> None:
        """The members of an object whose mapped children are `properties` (plus any added meanwhile)."""
        self.enter_object()
        added = self.added.get(path) if self.added else None  # a name occurs once per object
        for name, member in value.items():
            if "." in name or not name:
                parts = _split_path(name)
                if len(parts) > 1:
                    self.parse_dotted(properties, path, parts, member, dynamic)
                    continue
                name = parts[0]
            # Fast paths (mapped field, valid value of the usual kinds): the engine accepts these as they are.
            spec = properties.get(name)
            if spec is None and added is not None:
                spec = added.get(name)
            if spec is not None:
                kind = spec.get("type")
                member_type = type(member)
                if kind in _TEXTUAL:
                    if member_type is str:
                        continue
                elif kind in _DOUBLES:
                    if member_type is float or (member_type is int and -(2**1000) < member < 2**1000):
                        continue
                elif kind == "boolean" and member_type is bool:
                    continue
            self.parse_value(properties, path, name, member, dynamic)
        self.depth -= 1

    def _child(
        self, properties: Mapping[str, Any], path: tuple[str, ...], name: str
    ) -> Mapping[str, Any] | None:
        spec = properties.get(name)
        if spec is None and self.added:
            spec = self.added.get(path, _EMPTY).get(name)
        return spec

    def parse_dotted(
        self, properties: Mapping[str, Any], path: tuple[str, ...], parts: list[str], value: Any, dynamic: str
    ) -> None:
        """`a.b.c`: objects `a` and `b` (mapped, or added as the dynamic setting allows), then field `c`."""
        for part in parts[:-1]:
            spec = self._child(properties, path, part)
            if spec is None:
                if dynamic == "strict":
                    raise self._strict(path, part)
                if dynamic == "false":
                    return
                spec = self._new_object(path, part)
            elif not _is_object(spec):
                raise _mapper_error(
                    f"Could not dynamically add mapping for field [{'.'.join((*path, *parts))}]. Existing mapping "
                    f"for [{'.'.join((*path, part))}] must be of type object but found [{spec.get('type')}]."
                )
            if _disabled(spec):
                return
            dynamic = _dynamic(spec.get("dynamic", dynamic))
            properties = spec.get("properties") or _EMPTY
            path = (*path, part)
        self.parse_value(properties, path, parts[-1], value, dynamic)

    def parse_value(
        self, properties: Mapping[str, Any], path: tuple[str, ...], name: str, value: Any, dynamic: str
    ) -> None:
        spec = self._child(properties, path, name)
        if spec is not None:
            kind = spec.get("type")
            if kind is None or kind == "object" or kind == "nested":
                self.parse_into_object(spec, (*path, name), value, dynamic)
                return
            self.parse_leaf((*path, name), spec, value)
            return
        if value is None or dynamic != "true":
            if dynamic == "strict":
                raise self._strict(path, name)
            return
        if isinstance(value, dict):
            self.parse_into_object(self._new_object(path, name), (*path, name), value, dynamic)
        elif isinstance(value, list):
            template = self._template("object", (*path, name))
            if template is not None and template.get("type") in _PARSES_ARRAYS:
                self.added.setdefault(path, {})[name] = template
                self.parse_leaf((*path, name), template, value)
                return
            self.enter_array()
            for element in value:
                self.parse_value(properties, path, name, element, dynamic)
            self.arrays -= 1
        else:
            self.parse_leaf((*path, name), self._new_leaf(path, name, value), value)

    def parse_into_object(
        self, spec: Mapping[str, Any], path: tuple[str, ...], value: Any, dynamic: str
    ) -> None:
        if _disabled(spec) or value is None:
            return
        if isinstance(value, dict):
            self.parse_object(
                spec.get("properties") or _EMPTY, path, value, _dynamic(spec.get("dynamic", dynamic))
            )
        elif isinstance(value, list):
            self.enter_array()
            for element in value:
                self.parse_into_object(spec, path, element, dynamic)
            self.arrays -= 1
        else:
            raise _mapper_error(
                f"object mapping for [{'.'.join(path)}] tried to parse field [{path[-1]}] as object, but found a "
                "concrete value"
            )

    def parse_leaf(self, path: tuple[str, ...], spec: Mapping[str, Any], value: Any) -> None:
        kind = str(spec.get("type"))
        if isinstance(value, list) and kind not in _PARSES_ARRAYS:
            self.enter_array()
            for element in value:
                self.parse_leaf(path, spec, element)
            self.arrays -= 1
            return
        if value is None:
            return
        check = _CHECKS.get(kind)
        if check is None:
            raise OpenSearchError(
                400,
                "illegal_argument_exception",
                f"field type [{kind}] is not emulated by the loopback server",
            )
        try:
            if kind == "date" and "format" in spec:
                _check_date(kind, value, str(spec["format"]))
            elif kind == "geo_point":
                if spec.get("ignore_malformed") not in (True, "true"):
                    single = not isinstance(value, list) or not value or _number(value[0]) is not None
                    points = [value] if single else value
                    for point in points:
                        _check_geo_point(kind, point, path[-1])
            else:
                check(kind, value)
        except _ValueError as refused:
            raise _mapper_error(
                f"failed to parse field [{'.'.join(path)}] of type [{kind}] in document with id '{self.doc_id}'. "
                f"Preview of field's value: '{java_text(value)}'",
                refused.error,
            ) from None

    # --- dynamic mappings -----------------------------------------------------------------------------

    def _strict(self, owner: tuple[str, ...], name: str) -> OpenSearchError:
        return OpenSearchError(
            400,
            "strict_dynamic_mapping_exception",
            f"mapping set to strict, dynamic introduction of [{name}] within [{'.'.join(owner) or '_doc'}] is not "
            "allowed",
        )

    def _field_type(self, value: Any) -> str:
        if value is True or value is False:
            return "boolean"
        if isinstance(value, int):
            return "long"
        if isinstance(value, float):
            return "double"
        text = str(value)
        if self.numeric_detection:
            if _JAVA_LONG.fullmatch(text) and _LONG[0] <= int(text) <= _LONG[1]:
                return "long"
            if _JAVA_DOUBLE.fullmatch(text):
                return "double"
        numeric = _JAVA_LONG.fullmatch(text) or _JAVA_DOUBLE.fullmatch(text)  # never taken for dates
        dated = _STRICT_DATE_OPTIONAL_TIME.fullmatch(text) or _SLASH_DATE.fullmatch(text)
        if self.date_detection and not numeric and dated:
            return "date"
        return "string"

    def _template(self, field_type: str, path: tuple[str, ...]) -> dict[str, Any] | None:
        name, dotted = path[-1], ".".join(path)
        for entry in self.templates:
            ((_, spec),) = entry.items()
            regex = spec.get("match_pattern") == "regex"

            def hit(pattern: Any, text: str, regex: bool = regex) -> bool:
                patterns = pattern if isinstance(pattern, list) else [pattern]
                return any(re.fullmatch(p, text) if regex else matches(p, text) for p in patterns)

            wanted = spec.get("match_mapping_type", "*")
            if wanted != "*" and wanted != field_type:
                continue
            if "path_match" in spec and not hit(spec["path_match"], dotted):
                continue
            if "match" in spec and not hit(spec["match"], name):
                continue
            if "path_unmatch" in spec and hit(spec["path_unmatch"], dotted):
                continue
            if "unmatch" in spec and hit(spec["unmatch"], name):
                continue
            mapping: dict[str, Any] = _placeholders(
                copy.deepcopy(dict(spec.get("mapping", {}))), name, field_type
            )
            mapping.setdefault("type", _DEFAULT_TYPE[field_type])
            return mapping
        return None

    def _new_leaf(self, path: tuple[str, ...], name: str, value: Any) -> dict[str, Any]:
        field_type = self._field_type(value)
        spec = self._template(field_type, (*path, name))
        if spec is None:
            spec = (
                copy.deepcopy(_DEFAULT_STRING)
                if field_type == "string"
                else {"type": _DEFAULT_TYPE[field_type]}
            )
        self.added.setdefault(path, {})[name] = spec
        return spec

    def _new_object(self, path: tuple[str, ...], name: str) -> dict[str, Any]:
        spec = self._template("object", (*path, name)) or {"type": "object"}
        self.added.setdefault(path, {})[name] = spec
        return spec

    def merged(self) -> dict[str, Any]:
        mappings = copy.deepcopy(dict(self.mappings))
        for path in sorted(self.added, key=len):
            properties = mappings.setdefault("properties", {})
            for part in path:
                node = properties[part]
                if node.get("type") == "object":
                    del node["type"]
                properties = node.setdefault("properties", {})
            properties.update(copy.deepcopy(self.added[path]))
        return mappings


def _placeholders(value: Any, name: str, field_type: str) -> Any:
    if isinstance(value, str):
        return value.replace("{name}", name).replace("{dynamic_type}", _DEFAULT_TYPE[field_type])
    if isinstance(value, dict):
        return {key: _placeholders(member, name, field_type) for key, member in value.items()}
    if isinstance(value, list):
        return [_placeholders(member, name, field_type) for member in value]
    return value


def parse_document(
    mappings: Mapping[str, Any],
    source: Any,
    doc_id: str,
    *,
    depth_limit: int = DEFAULT_DEPTH_LIMIT,
    total_fields_limit: int = DEFAULT_TOTAL_FIELDS_LIMIT,
) -> dict[str, Any] | None:
    """Index `source` against `mappings`: the mappings with the fields it adds (a new dict), or None when it adds
    none. Raises OpenSearchError (400 mapper_parsing_exception or strict_dynamic_mapping_exception while parsing,
    illegal_argument_exception when the grown mapping breaks an index limit) for a document the engine refuses;
    nothing changes then."""
    if not isinstance(source, dict):
        raise _mapper_error("Malformed content, must start with an object")
    if _disabled(mappings):
        return None
    parser = _DocumentParser(mappings, doc_id, depth_limit)
    try:
        parser.parse_object(
            mappings.get("properties") or _EMPTY, (), source, _dynamic(mappings.get("dynamic", True))
        )
    except _PathError as refused:
        raise _mapper_error("failed to parse", cause("illegal_argument_exception", str(refused))) from None
    except _DepthError as refused:
        raise _mapper_error("failed to parse", refused.error) from None
    if not parser.added:
        return None
    merged = parser.merged()
    check_mapping_limits(merged, depth_limit=depth_limit, total_fields_limit=total_fields_limit)
    return merged


def _fields(properties: Mapping[str, Any], prefix: str, objects: list[str]) -> int:
    """Fields of `properties` as MappingLookup counts them (objects, leaves and their multi-fields); the object
    paths go into `objects`."""
    count = 0
    for name, spec in properties.items():
        count += 1 + len(spec.get("fields") or {})
        if _is_object(spec):
            objects.append(f"{prefix}{name}")
            count += _fields(spec.get("properties") or _EMPTY, f"{prefix}{name}.", objects)
    return count


def check_mapping_limits(
    mappings: Mapping[str, Any],
    *,
    depth_limit: int = DEFAULT_DEPTH_LIMIT,
    total_fields_limit: int = DEFAULT_TOTAL_FIELDS_LIMIT,
) -> None:
    """MappingLookup.checkLimits on a mapping about to be merged (the preflight of a dynamic update): a 400
    illegal_argument_exception when it maps more fields than `index.mapping.total_fields.limit` or an object
    deeper than `index.mapping.depth.limit` (an object's depth is its path's dots plus 2)."""
    objects: list[str] = []
    if _fields(mappings.get("properties") or _EMPTY, "", objects) > total_fields_limit:
        raise OpenSearchError(
            400,
            "illegal_argument_exception",
            f"Limit of total fields [{total_fields_limit}] has been exceeded",
        )
    for path in objects:
        if path.count(".") + 2 > depth_limit:
            raise OpenSearchError(
                400,
                "illegal_argument_exception",
                f"Limit of mapping depth [{depth_limit}] has been exceeded due to object field [{path}]",
            )
