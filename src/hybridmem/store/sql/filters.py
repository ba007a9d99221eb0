"""Filters (:mod:`hybridmem.filters`) compiled to SQL WHERE fragments: SQLite JSON1 for the
embedded store, PostgreSQL JSONB for the server backend. Same semantics as
:func:`hybridmem.filters.matches` (a hypothesis test checks they agree)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from ...errors import FilterError
from ...filters import SYSTEM_COLUMNS, And, Filter, Or, Sys, value_kind

__all__ = ["to_sql", "to_pg_sql"]


def _system(column: str, mark: str, params: list[Any]) -> Callable[[Sys], str]:
    """Conditions on a memory's time columns, on the table of the metadata ``column`` (``d.metadata``
    -> ``d.occurred_at``); the column name is one of :data:`SYSTEM_COLUMNS`, never user text."""
    table = column.rsplit(".", 1)[0] + "." if "." in column else ""

    def system(node: Sys) -> str:
        assert node.column in SYSTEM_COLUMNS
        col = f"{table}{node.column}"
        if node.op == "$exists":
            return f"({col} IS {'NOT ' if node.value else ''}NULL)"
        params.append(float(node.value))
        return f"COALESCE({col} {_SQL_CMP[node.op]} {mark}, {'0' if mark == '?' else 'FALSE'})"

    return system


# ---------------------------------------------------------------- SQL (SQLite JSON1)
_SQL_TYPES = {"null": "('null')", "bool": "('true','false')", "num": "('integer','real')", "text": "('text')"}
_SQL_CMP = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def _sql_value(v: Any) -> Any:
    return int(v) if isinstance(v, bool) else v


def _sql_eq(path_sql: str, v: Any, params: list[Any]) -> str:
    k = value_kind(v)
    # COALESCE: a missing key gives SQL NULL, which must read as "false", never as unknown
    if k == "null":
        return f"COALESCE(json_type({path_sql}) = 'null', 0)"
    if k == "bool":
        return f"COALESCE(json_type({path_sql}) = '{'true' if v else 'false'}', 0)"
    params.append(v)
    return f"COALESCE(json_type({path_sql}) IN {_SQL_TYPES[k]} AND json_extract({path_sql}) = ?, 0)"


def _balanced(parts: list[str], op: str) -> str:
    """``parts`` joined by ``op`` as a balanced tree: a flat chain of n terms is an expression n deep,
    and SQLite refuses one deeper than 1,000 (an ``$in`` of 1,024 values was a 500); balanced, log2(n)."""
    if len(parts) <= 8:
        return "(" + f" {op} ".join(parts) + ")"
    mid = len(parts) // 2
    return f"({_balanced(parts[:mid], op)} {op} {_balanced(parts[mid:], op)})"


def _compile(
    node: Filter,
    eq: Callable[[str, Any], str],
    exists: Callable[[str, bool], str],
    compare: Callable[[str, str, Any], str],
    system: Callable[[Sys], str],
    member: Callable[[str, list[Any]], str],
) -> str:
    """The filter tree as one SQL boolean expression: ``and``/``or``/``not`` here, the leaves from
    the dialect's ``eq`` (kind-aware equality, false for a missing key), ``exists``, ``compare``
    (``$gt``… between values of the same kind) and ``member`` (``$in``: one set lookup per kind, not
    an ``OR`` of equalities: 3 lists of 1,024 values over 5,000 documents took 42 s and ~120 MB of
    SQLite memory per query as equalities)."""
    if isinstance(node, And):
        return _balanced([_compile(p, eq, exists, compare, system, member) for p in node.parts], "AND")
    if isinstance(node, Or):
        return _balanced([_compile(p, eq, exists, compare, system, member) for p in node.parts], "OR")
    if isinstance(node, Sys):
        return system(node)
    op, v = node.op, node.value
    if op == "$eq":
        return eq(node.key, v)
    if op == "$ne":
        return f"NOT {eq(node.key, v)}"
    if op in ("$in", "$nin"):
        ors = member(node.key, list(v)) if v else "(0=1)"
        return ors if op == "$in" else f"NOT {ors}"
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
        return f"COALESCE(json_type({p}) IN {_SQL_TYPES[value_kind(v)]} AND json_extract({p}) {_SQL_CMP[op]} ?, 0)"

    def member(key: str, values: list[Any]) -> str:
        """``$in``: the text values in one ``IN`` list, the numbers in another (SQLite evaluates a
        list of constants once, as a b-tree); booleans and null as equalities (at most three)."""
        p = path(key)
        texts = [x for x in values if value_kind(x) == "text"]
        nums = [x for x in values if value_kind(x) == "num"]
        parts = [_sql_eq(p, x, params) for x in values if value_kind(x) in ("null", "bool")]
        for kind, group in (("text", texts), ("num", nums)):
            if len(group) == 1:
                parts.append(_sql_eq(p, group[0], params))
            elif group:
                params.extend(group)
                marks = ",".join("?" * len(group))
                parts.append(f"COALESCE(json_type({p}) IN {_SQL_TYPES[kind]} AND json_extract({p}) IN ({marks}), 0)")
        return _balanced(parts, "OR")

    if f is None:
        return "1", []
    return _compile(
        f,
        lambda key, v: _sql_eq(path(key), v, params),
        lambda key, v: f"json_type({path(key)}) IS {'NOT ' if v else ''}NULL",
        compare,
        _system(column, "?", params),
        member,
    ), params


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
            return (
                f"COALESCE(jsonb_typeof({column} -> %s) = 'string' AND "
                f'({column} ->> %s) COLLATE "C" {cmp} %s COLLATE "C", FALSE)'
            )
        if isinstance(v, float) and math.isnan(v):
            return "FALSE"
        if isinstance(v, float) and math.isinf(v):  # every finite number is below +inf, above -inf
            params.append(key)
            holds = (v > 0) == (op in ("$lt", "$lte"))
            return f"COALESCE(jsonb_typeof({column} -> %s) = 'number', FALSE)" if holds else "FALSE"
        params.extend([key, key, repr(v) if isinstance(v, float) else str(v)])
        return (
            f"COALESCE(jsonb_typeof({column} -> %s) = 'number' AND ({column} ->> %s)::numeric {cmp} %s::numeric, FALSE)"
        )

    def member(key: str, values: list[Any]) -> str:
        """``$in``: a short list as equalities (each can use the GIN index), a longer one as one
        hashed ``= ANY(jsonb[])`` per row; NaN, infinities and NUL strings equal nothing."""
        if len(values) <= _PG_IN_AS_EQUALITIES:
            return _balanced([eq(key, x) for x in values], "OR")
        kept = [
            json.dumps(x, ensure_ascii=False)
            for x in values
            if not (isinstance(x, float) and not math.isfinite(x)) and not (isinstance(x, str) and "\x00" in x)
        ]
        if not kept:
            return "FALSE"
        params.extend([key, kept])
        return f"COALESCE(({column} -> %s) = ANY(%s::jsonb[]), FALSE)"

    if f is None:
        return "TRUE", []
    return _compile(f, eq, exists, compare, _system(column, "%s", params), member), params


_PG_IN_AS_EQUALITIES = 8
