"""The filter language: metadata filters parsed once into a small AST, and evaluated in Python.
Compilation to SQL (SQLite JSON1, PostgreSQL JSONB) lives with the stores: ``store/sql/filters.py``.

Grammar (Mongo-like, as agents already speak it)::

    {"environment": "production", "service": "billing-service"}      implicit $and of equalities
    {"severity": {"$gte": 2}, "date": {"$lt": "2026-06-01"}}         numbers, ISO dates (strings)
    {"service": {"$in": ["a", "b"]}, "environment": {"$ne": "staging"}}
    {"$or": [{...}, {...}]}, {"$and": [...]}, {"tag": {"$exists": true}}

Both compilations implement the same semantics (a hypothesis test checks they agree):
comparisons only hold between values of the same kind (number with number, string with string);
a missing key equals nothing, ``$ne``/``$nin`` hold for it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Union

from .errors import FilterError

__all__ = [
    "Cond",
    "Sys",
    "SYSTEM_COLUMNS",
    "And",
    "Or",
    "Filter",
    "parse_filter",
    "matches",
    "filter_keys",
    "canonical",
    "value_kind",
    "COMPARE_OPS",
    "LOGIC_OPS",
    "MAX_DEPTH",
    "MAX_KEY_LEN",
    "MAX_CONDITIONS",
    "MAX_IN_VALUES",
    "MAX_FILTER_VALUES",
    "MAX_VALUE_CHARS",
]

COMPARE_OPS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists")
LOGIC_OPS = ("$and", "$or")
MAX_DEPTH = 8
MAX_KEY_LEN = 128
#: the cost budget of one filter (a 422 names the limit): conditions (one per key and operator),
#: values of one ``$in``/``$nin`` list, values in the whole filter, characters of a string value
MAX_CONDITIONS = 256
MAX_IN_VALUES = 1024
MAX_FILTER_VALUES = 4096
MAX_VALUE_CHARS = 4096
_KEY = re.compile(r"^[^\x00-\x1f\"\\$][^\x00-\x1f\"\\]*$")

Scalar = Union[str, int, float, bool, None]


@dataclass(frozen=True)
class Cond:
    key: str
    op: str
    value: Any


#: the columns of a memory's time (epoch seconds) a :class:`Sys` condition reads
SYSTEM_COLUMNS = ("occurred_at", "recorded_at", "valid_to")


@dataclass(frozen=True)
class Sys:
    """A condition on a memory's own time column (not its metadata), built by the search from a
    request's ``time_range``, ``as_of`` and visibility, never parsed from a user filter: ``op`` is a
    comparison (``$gt``, ``$gte``, ``$lt``, ``$lte``) with an epoch-seconds ``value``, or
    ``$exists`` (true: the column is set)."""

    column: str
    op: str
    value: Any

    def __post_init__(self) -> None:
        assert self.column in SYSTEM_COLUMNS and self.op in ("$gt", "$gte", "$lt", "$lte", "$exists")


@dataclass(frozen=True)
class And:
    parts: tuple["Filter", ...]


@dataclass(frozen=True)
class Or:
    parts: tuple["Filter", ...]


Filter = Union[Cond, Sys, And, Or]


def _check_int(v: Any, where: str) -> None:
    # SQLite integers are 64-bit: a bigger one cannot be bound as a parameter
    if isinstance(v, int) and not isinstance(v, bool) and not -(2**63) <= v < 2**63:
        raise FilterError(f"{where}: integer {v} is outside the 64-bit range")


def _check_scalar(v: Any, where: str) -> None:
    if not (v is None or isinstance(v, (str, int, float, bool))):
        raise FilterError(f"{where}: expected a string, number, boolean or null, got {type(v).__name__}")
    _check_int(v, where)
    if isinstance(v, str):
        _check_string(v, where)


def _check_string(v: str, where: str) -> None:
    if len(v) > MAX_VALUE_CHARS:
        raise FilterError(
            f"{where}: a string value of {len(v)} characters exceeds the {MAX_VALUE_CHARS}-character limit"
        )
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:
        raise FilterError(f"{where}: text with an unpaired surrogate is not valid Unicode") from None
    if "\x00" in v:
        raise FilterError(f"{where}: a NUL character cannot be in a value (stored metadata cannot hold one)")


def _parse_key(key: str) -> str:
    if not isinstance(key, str) or not key or len(key) > MAX_KEY_LEN or not _KEY.match(key):
        raise FilterError(
            f"invalid metadata key {key!r}: keys are 1-{MAX_KEY_LEN} characters, without quotes, "
            "backslashes or control characters, and may not start with '$'"
        )
    return key


def _parse_field(key: str, spec: Any) -> Filter:
    key = _parse_key(key)
    if not isinstance(spec, dict):
        _check_scalar(spec, key)
        return Cond(key, "$eq", spec)
    if not spec:
        raise FilterError(f"{key}: empty operator object")
    conds = []
    for op, v in spec.items():
        if op not in COMPARE_OPS:
            raise FilterError(f"unknown filter operator {op!r} on key {key!r}; supported: {', '.join(COMPARE_OPS)}")
        if op in ("$in", "$nin"):
            if not isinstance(v, list) or not v:
                raise FilterError(f"{key}.{op}: expected a non-empty list")
            if len(v) > MAX_IN_VALUES:
                raise FilterError(f"{key}.{op}: {len(v)} values exceed the limit of {MAX_IN_VALUES} per list")
            for x in v:
                _check_scalar(x, f"{key}.{op}")
            v = tuple(v)
        elif op == "$exists":
            if not isinstance(v, bool):
                raise FilterError(f"{key}.$exists: expected true or false")
        elif op in ("$gt", "$gte", "$lt", "$lte"):
            if isinstance(v, bool) or not isinstance(v, (int, float, str)):
                raise FilterError(f"{key}.{op}: expected a number or a string (ISO date), got {v!r}")
            _check_scalar(v, f"{key}.{op}")
        else:
            _check_scalar(v, f"{key}.{op}")
        conds.append(Cond(key, op, v))
    return conds[0] if len(conds) == 1 else And(tuple(conds))


def parse_filter(spec: dict[str, Any] | None) -> Filter | None:
    """Validate and parse a filter object; None or {} means no filter. A filter over the budget
    (:data:`MAX_CONDITIONS`, :data:`MAX_FILTER_VALUES`; per list and value in the parser) is refused
    before any store sees it."""
    flt = _parse(spec, 0)
    conds, values = _size(flt)
    if conds > MAX_CONDITIONS:
        raise FilterError(f"a filter of {conds} conditions exceeds the limit of {MAX_CONDITIONS}")
    if values > MAX_FILTER_VALUES:
        raise FilterError(f"a filter of {values} values exceeds the limit of {MAX_FILTER_VALUES}")
    return flt


def _size(f: Filter | None) -> tuple[int, int]:
    """(conditions, values) of a parsed filter."""
    if f is None:
        return 0, 0
    if isinstance(f, (Cond, Sys)):
        return 1, len(f.value) if isinstance(f.value, tuple) else 1
    sizes = [_size(p) for p in f.parts]
    return sum(c for c, _ in sizes), sum(v for _, v in sizes)


def _parse(spec: dict[str, Any] | None, _depth: int) -> Filter | None:
    if spec is None:
        return None
    if not isinstance(spec, dict):
        raise FilterError(f"a filter must be a JSON object, got {type(spec).__name__}")
    if _depth > MAX_DEPTH:
        raise FilterError(f"filter nested deeper than {MAX_DEPTH} levels")
    if len(spec) > MAX_CONDITIONS:
        raise FilterError(f"a filter object of {len(spec)} keys exceeds the condition limit of {MAX_CONDITIONS}")
    parts: list[Filter] = []
    for key, val in spec.items():
        if isinstance(key, str) and key.startswith("$"):
            if key not in LOGIC_OPS:
                raise FilterError(
                    f"unknown filter operator {key!r} at top level; supported: $and, $or "
                    f"(field operators {', '.join(COMPARE_OPS)} go inside a key)"
                )
            if not isinstance(val, list) or not val:
                raise FilterError(f"{key}: expected a non-empty list of filters")
            subs: list[Filter] = []
            for sub in val:
                if len(subs) >= MAX_CONDITIONS:
                    raise FilterError(f"{key}: more than {MAX_CONDITIONS} branches exceed the condition limit")
                p = _parse(sub, _depth + 1)
                if p is None:
                    raise FilterError(f"{key}: empty filter in list")
                subs.append(p)
            parts.append(And(tuple(subs)) if key == "$and" else Or(tuple(subs)))
        else:
            parts.append(_parse_field(key, val))
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else And(tuple(parts))


def filter_keys(f: Filter | None) -> set[str]:
    if f is None:
        return set()
    if isinstance(f, Cond):
        return {f.key}
    if isinstance(f, Sys):
        return set()
    return set().union(*(filter_keys(p) for p in f.parts))


def canonical(spec: dict[str, Any] | None) -> str:
    return json.dumps(spec or {}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# ---------------------------------------------------------------- Python predicate
def value_kind(v: Any) -> str:
    """The kind a filter compares by: null, bool, num or text (1 never equals "1" or true)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "num"
    return "text"


_MISSING = object()
_COMPARE = {
    "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b,
    "$lt": lambda a, b: a < b,
    "$lte": lambda a, b: a <= b,
}


def _eq(a: Any, b: Any) -> bool:
    if a is _MISSING:
        return False
    ka, kb = value_kind(a) if not isinstance(a, (list, dict)) else "other", value_kind(b)
    return ka == kb and a == b


def matches(f: Filter | None, metadata: dict[str, Any], times: dict[str, float | None] | None = None) -> bool:
    """Evaluate a parsed filter on one metadata dict (same semantics as the SQL compilations);
    ``times``: the memory's time columns, for :class:`Sys` conditions."""
    if f is None:
        return True
    if isinstance(f, And):
        return all(matches(p, metadata, times) for p in f.parts)
    if isinstance(f, Or):
        return any(matches(p, metadata, times) for p in f.parts)
    if isinstance(f, Sys):
        t = (times or {}).get(f.column)
        if f.op == "$exists":
            return (t is not None) == bool(f.value)
        return t is not None and _COMPARE[f.op](t, f.value)
    a = metadata.get(f.key, _MISSING)
    op, v = f.op, f.value
    if op == "$eq":
        return _eq(a, v)
    if op == "$ne":
        return not _eq(a, v)
    if op == "$in":
        return any(_eq(a, x) for x in v)
    if op == "$nin":
        return not any(_eq(a, x) for x in v)
    if op == "$exists":
        return bool((a is not _MISSING) == v)
    if a is _MISSING or isinstance(a, (list, dict)) or value_kind(a) != value_kind(v):
        return False
    if op == "$gt":
        return bool(a > v)
    if op == "$gte":
        return bool(a >= v)
    if op == "$lt":
        return bool(a < v)
    return bool(a <= v)
