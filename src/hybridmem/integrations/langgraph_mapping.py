"""How LangGraph's items map onto hybridmem documents: document and marker ids, the namespace's
metadata keys and filters, value fields as metadata, LangGraph's value filters as metadata filters."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote

from langgraph.store.base import MatchCondition

_MAX_TOP_K = 1000  # config.MAX_TOP_K: the most results one query returns (listings page through)
_MAX_ID = 512
_MAX_FIELD_KEY = 126  # a metadata key is at most 128 characters, "v." included
#: LangGraph's filter operators and hybridmem's extras, passed through to the metadata filter
_OPS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists")
#: a listing: the recency leg alone (dense weight 0, a query of no terms), newest first


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat()


def _doc_id(namespace: tuple[str, ...], key: str) -> str:
    return "/".join(quote(part, safe="") for part in (*namespace, key))


def _marker_id(namespace: tuple[str, ...]) -> str:
    # an item id never holds a raw ':' (quoted): no marker can share an item's id
    return "ns:" + "/".join(quote(part, safe="") for part in namespace)


def _ns_meta(namespace: tuple[str, ...]) -> dict[str, Any]:
    return {**{f"lg.ns.{i}": label for i, label in enumerate(namespace)}, "lg.depth": len(namespace)}


def _ns_filter(prefix: tuple[str, ...], exact: bool = False, wildcards: bool = False) -> dict[str, Any]:
    """Namespaces under ``prefix`` (``exact``: that one only); with ``wildcards`` (list_namespaces),
    a ``*`` label matches any label; a search's prefix is literal, as in LangGraph's stores."""
    flt: dict[str, Any] = {f"lg.ns.{i}": label for i, label in enumerate(prefix) if not (wildcards and label == "*")}
    if exact:
        flt["lg.depth"] = len(prefix)
    return flt


def _namespace_of(meta: dict[str, Any]) -> tuple[str, ...]:
    return tuple(str(meta[f"lg.ns.{i}"]) for i in range(int(meta.get("lg.depth", 0))))


def _valid_field(key: Any) -> bool:
    return (
        isinstance(key, str)
        and 0 < len(key) <= _MAX_FIELD_KEY
        and not any(c in key for c in '"\\')
        and not any(ord(c) < 32 for c in key)
    )


def _value_meta(value: dict[str, Any]) -> dict[str, Any]:
    if all(_valid_field(k) for k in value):
        return {f"v.{k}": v for k, v in value.items()}
    return {"lg.value": value}


def _value_of(meta: dict[str, Any]) -> dict[str, Any]:
    if "lg.value" in meta:
        return dict(meta["lg.value"])
    return {k[2:]: v for k, v in meta.items() if k.startswith("v.")}


def _match(cond: MatchCondition, ns: tuple[str, ...]) -> bool:
    path = tuple(cond.path)
    if len(ns) < len(path):
        return False
    part = ns[: len(path)] if cond.match_type == "prefix" else ns[len(ns) - len(path) :]
    return all(p == "*" or p == n for p, n in zip(path, part, strict=True))


def _field_condition(field: str, cond: Any) -> dict[str, Any]:
    if not _valid_field(field) or field.startswith("$"):
        raise ValueError(f"filter field {field!r}: a top-level value field of 1-{_MAX_FIELD_KEY} characters")
    if isinstance(cond, dict):
        if not cond or not all(isinstance(op, str) and op.startswith("$") for op in cond):
            raise ValueError(
                f"filter field {field!r}: nested filters are not supported (filter on a top-level field, "
                f"with a value or operators {', '.join(_OPS)})"
            )
        return {f"v.{field}": dict(cond)}  # unknown operators: hybridmem's FilterError names them
    if isinstance(cond, (list, tuple)):
        raise ValueError(f"filter field {field!r}: list equality is not supported (use $in)")
    return {f"v.{field}": cond}


def _value_filter(flt: dict[str, Any] | None) -> list[dict[str, Any]]:
    """LangGraph's filter on value fields as hybridmem metadata conditions (to be and-ed)."""
    if not flt:
        return []
    if not isinstance(flt, dict):
        raise ValueError(f"a filter is a dict of value fields, got {type(flt).__name__}")
    out: list[dict[str, Any]] = []
    for key, cond in flt.items():
        if key in ("$and", "$or"):
            if not isinstance(cond, list) or not cond:
                raise ValueError(f"filter {key}: a non-empty list of filters")
            parts = [{"$and": _value_filter(sub) or [{"lg.kind": "item"}]} for sub in cond]
            out.append({key: parts})
        else:
            out.append(_field_condition(key, cond))
    return out
