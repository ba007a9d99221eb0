"""What the parts of the PostgreSQL store share: the HNSW build parameters, the join of a chunk
to its document, the pending-count recount, and small SQL helpers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..sql.common import DOC_JOIN as _DOC_JOIN
from ..sql.common import now_text as _now

__all__ = ["HNSW_EF_CONSTRUCTION", "HNSW_M", "PENDING_RECOUNT", "_DOC_JOIN", "_by_ids", "_now", "_one"]

HNSW_M = 16
HNSW_EF_CONSTRUCTION = 64


#: every namespace's ``n_pending`` counted afresh (a reset of every vector)
PENDING_RECOUNT = (
    "UPDATE namespace_stats SET n_pending = (SELECT count(*) FROM embed_queue q WHERE q.ns_id = namespace_stats.ns_id)"
)


def _by_ids(
    column: str, ns: int | None, rowids: Sequence[int], ns_column: str = "ns_id"
) -> tuple[str, tuple[Any, ...]]:
    """The WHERE clause of a by-id statement: ``column = ANY(rowids)``, led by the namespace when
    known, so that a distributed PostgreSQL (Citus, docs/scaling.md) routes it to one shard."""
    ids = [int(r) for r in rowids]
    if ns is None:
        return f"{column} = ANY(%s)", (ids,)
    return f"{ns_column}=%s AND {column} = ANY(%s)", (ns, ids)


def _one(row: tuple[Any, ...] | None) -> tuple[Any, ...]:
    """The row of a ``fetchone()`` that always returns one (an aggregate, ``RETURNING``, a known id)."""
    assert row is not None
    return row
