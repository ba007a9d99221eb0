"""The Legs protocol: the ranked lists a query fuses, as a backend choice.

Two implementations satisfy it: :class:`~hybridmem.retrieve.local.LocalLegs` (in-process BM25
postings and a dense index loaded from the store, kept in step through version counters and a
change log) and the PostgreSQL store's SQL legs (:class:`hybridmem.store.postgres.PostgresLegs`,
BM25 and pgvector in the database). :func:`make_legs` picks one for a store; the searcher and the
facade never ask which one they hold.

A query's filter is evaluated once (:meth:`Legs.allowed`) and the same :class:`Allowed` bounds
every leg (a pre-filter: never a post-filter of a top-k list).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from typing import Protocol

import numpy as np

from ..filters import Filter
from ..store.base import Allowed, Store, WriteResult
from .local import LocalLegs
from .types import LegHit, QueryEncoder

__all__ = ["Legs", "LegHit", "QueryEncoder", "make_legs"]


class Legs(Protocol):
    def prepare(self, namespace: str, mode: str) -> None:
        """Load what a query of ``mode`` needs and this process has not loaded yet, before the legs
        start and outside their timeout (a cold index load is not a slow leg)."""

    def allowed(self, namespace: str, flt: Filter) -> Allowed:
        """What ``flt`` allows in ``namespace``, in the form this backend's legs take."""

    def allowed_rowids(self, namespace: str, allowed: Allowed) -> np.ndarray:
        """The sorted chunk rowids ``allowed`` admits (for legs that need rowids: the graph's)."""

    def sparse(self, namespace: str, terms: Sequence[str], allowed: Allowed | None, k: int) -> list[LegHit]:
        """Top-k BM25 (rowid, score) among the allowed chunks holding a term; ties to the lower rowid."""

    def dense(self, namespace: str, text: str, encoder: QueryEncoder, allowed: Allowed | None, k: int) -> list[LegHit]:
        """Top-k (rowid, cosine similarity) among the allowed embedded chunks. Embeds the query only
        when the namespace holds a vector."""

    def commit(self, write: Callable[[], WriteResult]) -> WriteResult:
        """Run one store write and bring the legs up to date with it before any query of this
        process can see the store's new version."""

    def wait_ready(self, namespace: str, timeout: float | None = None) -> bool:
        """Load the namespace's indexes and wait for a background build. True when ready."""

    def dense_kind(self, namespace: str, n_vectors: int) -> str:
        """The dense index that answers the namespace (``exact``, ``hnsw``, ``pgvector-hnsw``)."""

    def reset_dense(self) -> None:
        """Forget loaded dense indexes (the store switched embedder)."""

    def close(self) -> None:
        """Stop background index work (a running HNSW build) before the store closes."""


def make_legs(store: Store, executor: Executor, *, exact_threshold: int) -> Legs:
    """The legs for ``store``: its own when it runs them (PostgreSQL), else in-process indexes."""
    own = getattr(store, "search_legs", None)
    if own is not None:
        legs: Legs = own()
        return legs
    return LocalLegs(store, executor, exact_threshold=exact_threshold)
