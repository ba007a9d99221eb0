"""Metadata filters: parsed once into a small AST, compiled to SQL (store legs) or a predicate.

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
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Union

from ..errors import FilterError

__all__ = ["Cond", "And", "Or", "Filter", "parse_filter", "to_sql", "to_pg_sql", "matches", "filter_keys", "canonical"]

COMPARE_OPS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists")
LOGIC_OPS = ("$and", "$or")
MAX_DEPTH = 8
MAX_KEY_LEN = 128
_KEY = re.compile(r"^[^\x00-\x1f\"\\$][^\x00-\x1f\"\\]*$")

Scalar = Union[str, int, float, bool, None]


@dataclass(frozen=True)
class Cond:
    key: str
    op: str
    value: Any


@dataclass(frozen=True)
class And:
    parts: tuple["Filter", ...]


@dataclass(frozen=True)
class Or:
    parts: tuple["Filter", ...]


Filter = Union[Cond, And, Or]


def _check_int(v: Any, where: str) -> None:
    # SQLite integers are 64-bit: a bigger one cannot be bound as a parameter
    if isinstance(v, int) and not isinstance(v, bool) and not -(2**63) <= v < 2**63:
        raise FilterError(f"{where}: integer {v} is outside the 64-bit range")


def _check_scalar(v: Any, where: str) -> None:
    if not (v is None or isinstance(v, (str, int, float, bool))):
        raise FilterError(f"{where}: expected a string, number, boolean or null, got {type(v).__name__}")
    _check_int(v, where)


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
            raise FilterError(
                f"unknown filter operator {op!r} on key {key!r}; supported: {', '.join(COMPARE_OPS)}"
            )
        if op in ("$in", "$nin"):
            if not isinstance(v, list) or not v:
                raise FilterError(f"{key}.{op}: expected a non-empty list")
            for x in v:
                _check_scalar(x, f"{key}.{op}")
            v = tuple(v)
        elif op == "$exists":
            if not isinstance(v, bool):
                raise FilterError(f"{key}.$exists: expected true or false")
        elif op in ("$gt", "$gte", "$lt", "$lte"):
            if isinstance(v, bool) or not isinstance(v, (int, float, str)):
                raise FilterError(f"{key}.{op}: expected a number or a string (ISO date), got {v!r}")
            _check_int(v, f"{key}.{op}")
        else:
            _check_scalar(v, f"{key}.{op}")
        conds.append(Cond(key, op, v))
    return conds[0] if len(conds) == 1 else And(tuple(conds))


def parse_filter(spec: dict[str, Any] | None, _depth: int = 0) -> Filter | None:
    """Validate and parse a filter object; None or {} means no filter."""
    if spec is None:
        return None
    if not isinstance(spec, dict):
        raise FilterError(f"a filter must be a JSON object, got {type(spec).__name__}")
    if _depth > MAX_DEPTH:
        raise FilterError(f"filter nested deeper than {MAX_DEPTH} levels")
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
            subs = []
            for sub in val:
                p = parse_filter(sub, _depth + 1)
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
    return set().union(*(filter_keys(p) for p in f.parts))


def canonical(spec: dict[str, Any] | None) -> str:
    return json.dumps(spec or {}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# ---------------------------------------------------------------- SQL (SQLite JSON1)
def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "num"
    return "text"


_SQL_TYPES = {"null": "('null')", "bool": "('true','false')", "num": "('integer','real')", "text": "('text')"}
_SQL_CMP = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def _sql_value(v: Any) -> Any:
    return int(v) if isinstance(v, bool) else v


def _sql_eq(path_sql: str, v: Any, params: list[Any]) -> str:
    k = _kind(v)
    # COALESCE: a missing key gives SQL NULL, which must read as "false", never as unknown
    if k == "null":
        return f"COALESCE(json_type({path_sql}) = 'null', 0)"
    if k == "bool":
        return f"COALESCE(json_type({path_sql}) = '{'true' if v else 'false'}', 0)"
    params.append(v)
    return f"COALESCE(json_type({path_sql}) IN {_SQL_TYPES[k]} AND json_extract({path_sql}) = ?, 0)"


def _compile(node: Filter, eq: Callable[[str, Any], str], exists: Callable[[str, bool], str],
             compare: Callable[[str, str, Any], str]) -> str:
    """The filter tree as one SQL boolean expression: ``and``/``or``/``not`` and the list operators
    here, the leaves from the dialect's ``eq`` (kind-aware equality, false for a missing key),
    ``exists`` and ``compare`` (``$gt``… between values of the same kind)."""
    if isinstance(node, And):
        return "(" + " AND ".join(_compile(p, eq, exists, compare) for p in node.parts) + ")"
    if isinstance(node, Or):
        return "(" + " OR ".join(_compile(p, eq, exists, compare) for p in node.parts) + ")"
    op, v = node.op, node.value
    if op == "$eq":
        return eq(node.key, v)
    if op == "$ne":
        return f"NOT {eq(node.key, v)}"
    if op in ("$in", "$nin"):
        ors = " OR ".join(eq(node.key, x) for x in v)
        return f"({ors})" if op == "$in" else f"NOT ({ors})"
    if op == "$exists":
        return exists(node.key, v)
    return compare(node.key, op, v)


def to_sql(f: Filter | None, column: str = "metadata") -> tuple[str, list[Any]]:
    """A WHERE fragment over a JSON column and its parameters. Values are bound parameters; keys
    (validated by the parser: no quotes, backslashes or control characters) become quoted JSON-path
    literals, with SQL quotes doubled."""
    params: list[Any] = []

    def path(key: str) -> str:
        literal = f'$."{key}"'.replace("'", "''")
        return f"{column}, '{literal}'"

    def compare(key: str, op: str, v: Any) -> str:
        p = path(key)
        params.append(_sql_value(v))
        return f"COALESCE(json_type({p}) IN {_SQL_TYPES[_kind(v)]} AND json_extract({p}) {_SQL_CMP[op]} ?, 0)"

    if f is None:
        return "1", []
    return _compile(f, lambda key, v: _sql_eq(path(key), v, params),
                    lambda key, v: f"json_type({path(key)}) IS {'NOT ' if v else ''}NULL", compare), params


# ---------------------------------------------------------------- SQL (PostgreSQL JSONB)

def to_pg_sql(f: Filter | None, column: str = "metadata") -> tuple[str, list[Any]]:
    """A WHERE fragment over a JSONB column for psycopg (``%s`` placeholders) and its parameters.
    Keys *and* values are bound parameters (``column -> %s`` takes the key as one literal object
    key: no JSON-path syntax is ever interpreted), so nothing the user sends is spliced into the SQL.
    Same semantics as :func:`to_sql` and :func:`matches`: kinds must agree (JSONB equality never
    equates ``1`` with ``"1"`` or ``true``), a missing key equals nothing, strings order by code
    point (``COLLATE "C"``, as SQLite and Python do), numbers compare exactly (``numeric``)."""
    params: list[Any] = []

    def eq(key: str, v: Any) -> str:
        if isinstance(v, float) and not math.isfinite(v):
            return "FALSE"  # NaN/inf equal nothing (and are not JSON)
        if isinstance(v, str) and "\x00" in v:
            return "FALSE"  # PostgreSQL stores no NUL character: no stored value can equal it
        # containment first: a GIN (jsonb_path_ops) index on the column can answer it; the exact
        # comparison after it keeps the semantics (containment would also match inside arrays)
        params.extend([json.dumps({key: v}, ensure_ascii=False), key, json.dumps(v, ensure_ascii=False)])
        return f"({column} @> %s::jsonb AND COALESCE(({column} -> %s) = %s::jsonb, FALSE))"

    def exists(key: str, v: bool) -> str:
        params.append(key)
        return f"(({column} -> %s) IS {'NOT ' if v else ''}NULL)"

    def compare(key: str, op: str, v: Any) -> str:
        cmp = _SQL_CMP[op]
        if isinstance(v, str):
            if "\x00" in v:
                raise FilterError(f"{key}.{op}: NUL characters are not supported by the PostgreSQL backend")
            params.extend([key, key, v])
            return (f"COALESCE(jsonb_typeof({column} -> %s) = 'string' AND "
                    f"({column} ->> %s) COLLATE \"C\" {cmp} %s COLLATE \"C\", FALSE)")
        if isinstance(v, float) and math.isnan(v):
            return "FALSE"
        if isinstance(v, float) and math.isinf(v):  # every finite number is below +inf, above -inf
            params.append(key)
            holds = (v > 0) == (op in ("$lt", "$lte"))
            return f"COALESCE(jsonb_typeof({column} -> %s) = 'number', FALSE)" if holds else "FALSE"
        params.extend([key, key, repr(v) if isinstance(v, float) else str(v)])
        return (f"COALESCE(jsonb_typeof({column} -> %s) = 'number' AND "
                f"({column} ->> %s)::numeric {cmp} %s::numeric, FALSE)")

    if f is None:
        return "TRUE", []
    return _compile(f, eq, exists, compare), params


# ---------------------------------------------------------------- Python predicate
_MISSING = object()


def _eq(a: Any, b: Any) -> bool:
    if a is _MISSING:
        return False
    ka, kb = _kind(a) if not isinstance(a, (list, dict)) else "other", _kind(b)
    return ka == kb and a == b


def matches(f: Filter | None, metadata: dict[str, Any]) -> bool:
    """Evaluate a parsed filter on one metadata dict (same semantics as :func:`to_sql`)."""
    if f is None:
        return True
    if isinstance(f, And):
        return all(matches(p, metadata) for p in f.parts)
    if isinstance(f, Or):
        return any(matches(p, metadata) for p in f.parts)
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
        return (a is not _MISSING) == v
    if a is _MISSING or isinstance(a, (list, dict)) or _kind(a) != _kind(v):
        return False
    if op == "$gt":
        return a > v
    if op == "$gte":
        return a >= v
    if op == "$lt":
        return a < v
    return a <= v
