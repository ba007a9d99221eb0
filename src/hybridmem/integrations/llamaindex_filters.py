"""LlamaIndex ``MetadataFilters`` as hybridmem's ``metadata_filter`` (a pre-filter of every leg)."""

from __future__ import annotations

from typing import Any

from llama_index.core.vector_stores.types import FilterCondition, FilterOperator, MetadataFilter, MetadataFilters

from hybridmem.errors import FilterError

_OPERATORS = {
    FilterOperator.EQ: "$eq",
    FilterOperator.NE: "$ne",
    FilterOperator.GT: "$gt",
    FilterOperator.GTE: "$gte",
    FilterOperator.LT: "$lt",
    FilterOperator.LTE: "$lte",
    FilterOperator.IN: "$in",
    FilterOperator.NIN: "$nin",
}
_SUPPORTED = ", ".join(op.value for op in _OPERATORS)


def _condition(f: MetadataFilter) -> dict[str, Any]:
    op = _OPERATORS.get(f.operator)
    if op is None:
        raise FilterError(
            f"LlamaIndex filter operator {f.operator.value!r} (key {f.key!r}) is not supported by hybridmem; "
            f"supported: {_SUPPORTED}, combined with the conditions and / or"
        )
    if op in ("$in", "$nin") and not isinstance(f.value, list):
        raise FilterError(f"LlamaIndex filter operator {f.operator.value!r} (key {f.key!r}) needs a list of values")
    return {f.key: {op: f.value}}


def to_metadata_filter(filters: MetadataFilters | None) -> dict[str, Any]:
    """LlamaIndex ``MetadataFilters`` as hybridmem's ``metadata_filter`` (``{}``: no filter).

    Operators ``==``, ``!=``, ``>``, ``>=``, ``<``, ``<=``, ``in``, ``nin`` map to ``$eq`` ... ``$nin``;
    the conditions ``and`` / ``or`` to ``$and`` / ``$or``, nested groups included. Others (``any``,
    ``all``, ``contains``, ``text_match``, ``is_empty``, the condition ``not``) raise a FilterError.
    hybridmem's semantics apply: comparisons hold between values of one kind (number with number,
    string with string), and a node without the key matches ``!=`` and ``nin`` only."""
    if filters is None:
        return {}
    condition = filters.condition or FilterCondition.AND
    if condition not in (FilterCondition.AND, FilterCondition.OR):
        raise FilterError(
            f"LlamaIndex filter condition {condition.value!r} is not supported by hybridmem "
            "(its filter language has no negation): use and / or, and the operators != and nin"
        )
    parts = [to_metadata_filter(f) if isinstance(f, MetadataFilters) else _condition(f) for f in filters.filters]
    if condition == FilterCondition.OR and any(not p for p in parts):
        return {}  # an empty group matches everything, and so does any "or" holding one
    parts = [p for p in parts if p]
    if len(parts) <= 1:
        return parts[0] if parts else {}
    return {"$and" if condition == FilterCondition.AND else "$or": parts}


def _all_of(*filters: dict[str, Any] | None) -> dict[str, Any]:
    parts = [f for f in filters if f]
    if len(parts) <= 1:
        return parts[0] if parts else {}
    return {"$and": parts}
