"""The filter language, one grammar for every list and search: parsed once into a typed tree, then compiled for the
database (a Django Q: parameters only, nothing of the caller's text in the SQL) or evaluated in Python.

Grammar:
    filter    := {"AND": [filter, ...]} | {"OR": [filter, ...]} | {"NOT": filter}
               | {field: value, ...}                       (several fields: all of them)
               | {field: {operator: value, ...}, ...}      (several operators: all of them)
    operator  := eq | ne | in | nin | gt | gte | lt | lte | contains | icontains | exists
    field     := a name the domain declares (category, confidence, created_at, ...) | metadata.<key>[.<key>...]

Meaning, the same in SQL and in Python (tests/search compare the two on random filters):
- A condition on a value that is missing (NULL, an absent metadata key) or of another type is false; `ne` and `nin`
  are the negations of `eq` and `in`, so they hold for a missing value. NOT negates exactly (no third value).
- Metadata values are compared with their JSON type: 1 and true differ, "1" and 1 differ; gt/gte/lt/lte compare
  numbers with numbers and strings with strings (by code point); `contains` holds for a list holding the value, or
  a string holding it as a substring; `icontains` holds for a string holding it ignoring case; `eq` takes a list
  too.
- A date and time without a zone is UTC; a date alone is its midnight, UTC.
- `exists: true` holds when the value is present (a metadata key holding null is present).

Bad input raises FilterError with the path of the offending part ("filters.AND[1].metadata.priority.gte: expected a
number") and what is allowed: an unknown field or operator, a value of the wrong type, more than MAX_DEPTH levels,
more than MAX_CONDITIONS conditions, a value over MAX_VALUE_BYTES.
"""

import functools
import json
import math
import operator
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import connection
from django.db.models import Case, CharField, FloatField, Func, Q, Value, When, lookups
from django.db.models.fields.json import KeyTextTransform, KeyTransform
from django.db.models.functions import Cast, Collate
from django.db.models.lookups import Exact
from django.utils.dateparse import parse_date

from core.timestamps import parse_timestamp

_METADATA_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,99}")
MAX_DEPTH = 8
MAX_CONDITIONS = 100
MAX_VALUE_BYTES = 4096
OPERATORS = ("eq", "ne", "in", "nin", "gt", "gte", "lt", "lte", "contains", "icontains", "exists")
LOGICAL = ("AND", "OR", "NOT")
METADATA = "metadata"
_ORDERED = ("gt", "gte", "lt", "lte")
# What each kind of declared field takes.
_OPERATORS_OF = {
    "text": ("eq", "ne", "in", "nin", "contains", "icontains", "exists"),
    "boolean": ("eq", "ne", "exists"),
    "number": ("eq", "ne", "in", "nin", "gt", "gte", "lt", "lte", "exists"),
    "integer": ("eq", "ne", "in", "nin", "gt", "gte", "lt", "lte", "exists"),
    "datetime": ("eq", "ne", "in", "nin", "gt", "gte", "lt", "lte", "exists"),
    METADATA: OPERATORS,
}


class FilterError(ValidationError):
    """A filter the grammar refuses; `path` names the part ("filters.AND[1].category.in[2]")."""

    def __init__(self, path: str, message: str):
        super().__init__({path: [message]})
        self.path = path
        self.reason = message


@dataclass(frozen=True)
class Field:
    """A field a domain lets callers filter on: its kind and the model field it reads."""

    kind: str  # text | boolean | number | integer | datetime | metadata
    column: str
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class Condition:
    field: str  # the declared name ("category"), or "metadata"
    keys: tuple[str, ...]  # the metadata path (empty for a declared field)
    operator: str
    value: Any


@dataclass(frozen=True)
class All:
    parts: tuple["Node", ...]


@dataclass(frozen=True)
class Any_:
    parts: tuple["Node", ...]


@dataclass(frozen=True)
class Not:
    part: "Node"


Node = Condition | All | Any_ | Not


# --- parsing ---------------------------------------------------------------------------------------------------------


def filter_parse(value, *, fields: Mapping[str, Field], path: str = "filters") -> Node:
    """The typed tree of `value` (decoded JSON), checked against the declared `fields`; FilterError otherwise."""
    counter = [0]
    return _node(value, fields, path, 1, counter)


def _node(value, fields: Mapping[str, Field], path: str, depth: int, counter: list[int]) -> Node:
    if depth > MAX_DEPTH:
        raise FilterError(path, f"nested deeper than {MAX_DEPTH} levels")
    if not isinstance(value, dict) or not value:
        raise FilterError(path, "expected an object: {field: value}, {field: {operator: value}}, or AND / OR / NOT")
    parts: list[Node] = []
    for key, item in value.items():
        here = f"{path}.{key}"
        if key in ("AND", "OR"):
            if not isinstance(item, list) or not item:
                raise FilterError(here, "expected a non-empty list of filters")
            children = tuple(_node(child, fields, f"{here}[{n}]", depth + 1, counter) for n, child in enumerate(item))
            parts.append(All(children) if key == "AND" else Any_(children))
        elif key == "NOT":
            child = item[0] if isinstance(item, list) and len(item) == 1 else item
            parts.append(Not(_node(child, fields, here, depth + 1, counter)))
        else:
            parts += _conditions(key, item, fields, here, counter)
    return parts[0] if len(parts) == 1 else All(tuple(parts))


def _conditions(name: str, item, fields: Mapping[str, Field], path: str, counter: list[int]) -> list[Condition]:
    keys: tuple[str, ...] = ()
    if name == METADATA or name.startswith(METADATA + "."):
        keys = tuple(name.split(".")[1:])
        if not keys or not all(_METADATA_KEY.fullmatch(key) and "__" not in key for key in keys):
            raise FilterError(
                path,
                "name a metadata key: metadata.<key>, or metadata.<key>.<key> for nested keys; a key is letters, "
                "digits, _ and - (not starting with a digit, without __)",
            )
        kind = METADATA
    elif name in fields:
        kind = fields[name].kind
    else:
        known = ", ".join([*(field for field in fields if field != METADATA), "metadata.<key>"])
        raise FilterError(path, f"unknown field or operator; the fields are {known}, joined with AND / OR / NOT")
    if kind == METADATA and isinstance(item, dict) and item and not _operator_object(item):
        unknown = next(key for key in item if key not in OPERATORS)
        raise FilterError(
            f"{path}.{unknown}",
            f"unknown operator; {name} takes {', '.join(OPERATORS)} (an object is not a value: name a nested key as "
            "metadata.<key>.<key>)",
        )
    with_operators = isinstance(item, dict)
    if with_operators and not item:
        raise FilterError(path, "expected a value or {operator: value}")
    conditions = []
    for op, value in item.items() if with_operators else [("eq", item)]:
        here = f"{path}.{op}" if with_operators else path
        if op not in _OPERATORS_OF[kind]:
            raise FilterError(here, f"unknown operator; {name} takes {', '.join(_OPERATORS_OF[kind])}")
        counter[0] += 1
        if counter[0] > MAX_CONDITIONS:
            raise FilterError(here, f"more than {MAX_CONDITIONS} conditions")
        field = fields.get(name)
        value = _value(op, value, kind, field, here)
        conditions.append(Condition(METADATA if kind == METADATA else name, keys, op, value))
    return conditions


def _operator_object(item) -> bool:
    """A metadata value that is an object of operators ({"gte": 3}); any other object is refused (only scalars and
    lists are compared)."""
    return isinstance(item, dict) and bool(item) and all(key in OPERATORS for key in item)


def _value(operator: str, value, kind: str, field: Field | None, path: str):
    if len(json.dumps(value, default=str).encode()) > MAX_VALUE_BYTES:
        raise FilterError(path, f"the value is over {MAX_VALUE_BYTES} bytes")
    if operator == "exists":
        if not isinstance(value, bool):
            raise FilterError(path, "expected true or false")
        return value
    if operator in ("in", "nin"):
        if not isinstance(value, list) or not value:
            raise FilterError(path, "expected a non-empty list")
        return tuple(_scalar(item, kind, field, f"{path}[{n}]") for n, item in enumerate(value))
    if operator in _ORDERED:
        scalar = _scalar(value, kind, field, path)
        if kind == METADATA and not (_is_number(scalar) or isinstance(scalar, str)):
            raise FilterError(path, "expected a number or a string")
        return scalar
    if operator in ("contains", "icontains"):  # a part of a value: no need to be one of the field's choices
        scalar = _scalar(value, kind, None, path)
        if operator == "icontains" and not isinstance(scalar, str):
            raise FilterError(path, "expected a string")
        return scalar
    if kind == METADATA and isinstance(value, list):  # eq / ne of a whole list
        return tuple(_scalar(item, kind, field, f"{path}[{n}]") for n, item in enumerate(value))
    return _scalar(value, kind, field, path)


def _scalar(value, kind: str, field: Field | None, path: str):
    if kind in ("text", METADATA) and isinstance(value, str):
        if field is not None and field.choices and value not in field.choices:
            raise FilterError(path, f"expected one of {', '.join(field.choices)}")
        return value
    if kind == METADATA and (isinstance(value, bool) or _is_number(value)):
        return value
    if kind == "boolean" and isinstance(value, bool):
        return value
    if kind == "number" and _is_number(value):
        return value
    if kind == "integer" and isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**63:
        return value
    if kind == "datetime" and isinstance(value, str):
        try:
            return parse_timestamp(value, field=path)
        except ValidationError:
            day = _date(value)
            if day is None:
                raise FilterError(path, "expected an ISO 8601 date and time, e.g. 2024-05-01T14:30:00Z") from None
            return datetime(day.year, day.month, day.day, tzinfo=UTC)
    expected = {
        "text": "a string", "boolean": "true or false", "number": "a number", "integer": "an integer",
        "datetime": "an ISO 8601 date and time", METADATA: "a string, a number or true / false",
    }[kind]  # fmt: skip
    raise FilterError(path, f"expected {expected}")


def _date(value: str) -> date | None:
    try:
        return parse_date(value)
    except ValueError:  # well formed but impossible: month 13
        return None


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


# --- the database ----------------------------------------------------------------------------------------------------


def filter_q(node: Node, *, fields: Mapping[str, Field]) -> Q:
    """The tree as a Q over the model the fields belong to. Every condition is guarded by what it reads being
    present and of its type, so no part is ever NULL and NOT negates exactly."""
    if isinstance(node, All | Any_):
        combine = operator.and_ if isinstance(node, All) else operator.or_
        return functools.reduce(combine, (filter_q(part, fields=fields) for part in node.parts))
    if isinstance(node, Not):
        return ~filter_q(node.part, fields=fields)
    if node.operator in _NEGATIONS:
        return ~filter_q(Condition(node.field, node.keys, _NEGATIONS[node.operator], node.value), fields=fields)
    if node.field == METADATA:
        return _metadata_q(node, fields[METADATA].column if METADATA in fields else METADATA)
    column = fields[node.field].column
    if node.operator == "exists":
        return Q(**{f"{column}__isnull": not node.value})
    value = list(node.value) if node.operator == "in" else node.value
    return Q(**{f"{column}__isnull": False}) & Q(**{f"{column}__{_LOOKUPS[node.operator]}": value})


def filter_sql(node: Node, *, fields: Mapping[str, Field], model, prefix: str = "filter") -> tuple[str, dict]:
    """The tree as an SQL condition over `model`'s table (its columns named with the table's name), for a raw
    statement with named parameters: the condition's values are parameters `prefix0`, `prefix1`, ... in the dict."""
    query = model._default_manager.filter(filter_q(node, fields=fields)).query
    condition, values = query.where.as_sql(query.get_compiler(connection=connection), connection)
    names = iter(range(len(values)))
    named = _PLACEHOLDER.sub(lambda found: "%%" if found[0] == "%%" else f"%({prefix}{next(names)})s", condition)
    return named, {f"{prefix}{n}": value for n, value in enumerate(values)}


_PLACEHOLDER = re.compile(r"%%|%s")
_NEGATIONS = {"ne": "eq", "nin": "in"}
_LOOKUPS = {
    "eq": "exact", "in": "in", "gt": "gt", "gte": "gte", "lt": "lt", "lte": "lte", "contains": "contains",
    "icontains": "icontains",
}  # fmt: skip
_ORDERING_LOOKUPS = {
    "gt": lookups.GreaterThan,
    "gte": lookups.GreaterThanOrEqual,
    "lt": lookups.LessThan,
    "lte": lookups.LessThanOrEqual,
}


def _metadata_q(node: Condition, column: str) -> Q:
    path = f"{column}__{'__'.join(node.keys)}"
    present = Q(**{f"{path}__isnull": False})  # the key is there (holding null counts)
    if node.operator == "exists":
        return present if node.value else ~present
    value_at = _json_at(column, node.keys)
    json_type = Func(value_at, function="jsonb_typeof", output_field=CharField())
    if node.operator == "eq":  # jsonb equality, type for type (true is not 1)
        return present & _contained(column, node.keys, node.value) & Q(**{path: _jsonable(node.value)})
    if node.operator == "in":  # one equality each: Django's IN drops 1 after True (they hash alike in Python)
        return present & functools.reduce(
            operator.or_,
            (_contained(column, node.keys, item) & Q(**{path: _jsonable(item)}) for item in node.value),
        )
    if node.operator in _ORDERED:
        compare = _ORDERING_LOOKUPS[node.operator]
        if isinstance(node.value, str):  # strings by code point, whatever the database's collation
            text = Collate(_text_at(column, node.keys), "C")
            return present & Q(Exact(json_type, "string")) & Q(compare(text, Collate(Value(node.value), "C")))
        # Cast only when it is a number: a string cast to a number would fail the whole statement.
        number = Case(When(Exact(json_type, "number"), then=Cast(value_at, FloatField())), default=None)
        return present & Q(Exact(json_type, "number")) & Q(compare(number, node.value))
    if node.operator == "icontains":
        return present & Q(Exact(json_type, "string")) & Q(lookups.IContains(_text_at(column, node.keys), node.value))
    holds = Q(Exact(json_type, "array")) & Q(**{f"{path}__contains": [node.value]})
    if isinstance(node.value, str):
        holds |= Q(Exact(json_type, "string")) & Q(lookups.Contains(_text_at(column, node.keys), node.value))
    return present & holds


def _contained(column: str, keys: tuple[str, ...], value) -> Q:
    """`column @> {key: {key: value}}`: implied by the equality it goes with, and what a GIN index on the column
    (jsonb_path_ops) finds without reading the rows."""
    document = _jsonable(value)
    for key in reversed(keys):
        document = {key: document}
    return Q(**{f"{column}__contains": document})


def _jsonable(value):
    """A parsed value as Django's JSON lookups take it: a tuple (a whole list) as a list."""
    return list(value) if isinstance(value, tuple) else value


def _json_at(column: str, keys: tuple[str, ...]) -> KeyTransform:
    value = KeyTransform(keys[0], column)
    for key in keys[1:]:
        value = KeyTransform(key, value)
    return value


def _text_at(column: str, keys: tuple[str, ...]) -> KeyTextTransform:
    return (
        KeyTextTransform(keys[-1], _json_at(column, keys[:-1])) if len(keys) > 1 else KeyTextTransform(keys[0], column)
    )


# --- Python ----------------------------------------------------------------------------------------------------------


def filter_matches(node: Node, row: Mapping[str, Any]) -> bool:
    """Whether a row ({field name: value, "metadata": dict}) passes the filter, as the database would answer."""
    if isinstance(node, All):
        return all(filter_matches(part, row) for part in node.parts)
    if isinstance(node, Any_):
        return any(filter_matches(part, row) for part in node.parts)
    if isinstance(node, Not):
        return not filter_matches(node.part, row)
    if node.operator in _NEGATIONS:
        return not filter_matches(Condition(node.field, node.keys, _NEGATIONS[node.operator], node.value), row)
    present, value = _read(row, node)
    if node.operator == "exists":
        return present == node.value
    if not present:
        return False
    if node.operator == "eq":
        return _same(value, node.value)
    if node.operator == "in":
        return any(_same(value, candidate) for candidate in node.value)
    if node.operator in _ORDERED:
        if isinstance(node.value, str) != isinstance(value, str) or not (
            isinstance(value, str) or _is_number(value) or isinstance(value, datetime)
        ):
            return False
        return {"gt": value > node.value, "gte": value >= node.value, "lt": value < node.value,
                "lte": value <= node.value}[node.operator]  # fmt: skip
    if node.operator == "icontains":  # as PostgreSQL's UPPER compares
        return isinstance(value, str) and node.value.upper() in value.upper()
    if isinstance(value, list):
        return any(_same(item, node.value) for item in value)
    return isinstance(value, str) and isinstance(node.value, str) and node.value in value


def _read(row: Mapping[str, Any], node: Condition) -> tuple[bool, Any]:
    if node.field != METADATA:
        value = row.get(node.field)
        return value is not None, value
    value = row.get(METADATA) or {}
    for key in node.keys:
        if not isinstance(value, dict) or key not in value:
            return False, None
        value = value[key]
    return True, value


def _same(a, b) -> bool:
    """Equality with JSON's types: a boolean is not a number; numbers compare by value; lists item by item."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, list | tuple) or isinstance(b, list | tuple):
        return (
            isinstance(a, list | tuple)
            and isinstance(b, list | tuple)
            and len(a) == len(b)
            and all(_same(x, y) for x, y in zip(a, b, strict=True))
        )
    if _is_number(a) and _is_number(b):
        return a == b
    return type(a) is type(b) and a == b
