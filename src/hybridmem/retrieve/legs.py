"""The Legs protocol: the ranked lists a query fuses, as a backend choice.

Three implementations satisfy it: :class:`~hybridmem.retrieve.local.LocalLegs` (in-process BM25
postings and a dense index loaded from the store, kept in step through version counters and the
store's change log), the PostgreSQL store's SQL legs (:class:`~hybridmem.retrieve.pg_legs.PostgresLegs`,
BM25 and pgvector in the database), and :class:`ProcessBM25Legs` (PostgreSQL's dense leg with
in-process BM25 postings). :func:`make_legs` picks one for a store; the searcher and the
facade never ask which one they hold.

A query's filter is evaluated once (:meth:`Legs.allowed`) and the same :class:`Allowed` bounds
every leg (a pre-filter: never a post-filter of a top-k list).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from typing import Protocol

import numpy as np

from ..filters import Filter
from ..store.base import Allowed, Store, WriteResult, has_native_search
from .local import LocalLegs
from .pg_legs import PostgresLegs
from .types import LegHit, QueryEncoder

__all__ = ["Legs", "LegHit", "ProcessBM25Legs", "QueryEncoder", "make_legs"]

log = logging.getLogger(__name__)


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

    def holding(self, namespace: str, terms: Sequence[str], rowids: Sequence[int]) -> set[int]:
        """The chunks among ``rowids`` whose indexed tokens include at least one of ``terms``."""

    def doc_freqs(self, namespace: str, terms: Sequence[str]) -> tuple[int, dict[str, int]]:
        """(chunks, {term: document frequency}) of the namespace, as its BM25 leg counts them, for
        the ``terms`` it holds (absent terms left out)."""

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


class ProcessBM25Legs:
    """A database store's legs with BM25 from in-process postings (PostgreSQL's ``bm25_leg="process"``):
    the postings are loaded from the store's tokens and kept in step with every process's writes
    through the store's change log (:class:`LocalLegs`, the embedded design with the database as
    the truth); the dense leg, and the filter it joins on, stay in the database. Scores are the
    embedded backend's, computed by the same code."""

    def __init__(self, own: Legs, local: LocalLegs) -> None:
        self.own, self.local = own, local

    def prepare(self, namespace: str, mode: str) -> None:
        if mode in ("bm25", "hybrid"):
            self.local.prepare(namespace, "bm25")
        self.own.prepare(namespace, mode)

    def allowed(self, namespace: str, flt: Filter) -> Allowed:
        # the rowids only when the BM25 leg asks (inside the leg, beside the dense one): a vector
        # query never pays for them
        return self.own.allowed(namespace, flt)

    def allowed_rowids(self, namespace: str, allowed: Allowed) -> np.ndarray:
        return self.local.allowed_rowids(namespace, allowed)  # cached per filter and chunk version

    def sparse(self, namespace: str, terms: Sequence[str], allowed: Allowed | None, k: int) -> list[LegHit]:
        if allowed is not None and allowed.rowids is None:
            allowed = self.local.allowed(namespace, allowed.flt)
        return self.local.sparse(namespace, terms, allowed, k)

    def dense(self, namespace: str, text: str, encoder: QueryEncoder, allowed: Allowed | None, k: int) -> list[LegHit]:
        return self.own.dense(namespace, text, encoder, allowed, k)

    def holding(self, namespace: str, terms: Sequence[str], rowids: Sequence[int]) -> set[int]:
        return self.local.holding(namespace, terms, rowids)

    def doc_freqs(self, namespace: str, terms: Sequence[str]) -> tuple[int, dict[str, int]]:
        return self.local.doc_freqs(namespace, terms)

    def commit(self, write: Callable[[], WriteResult]) -> WriteResult:
        return self.local.commit(write)

    def wait_ready(self, namespace: str, timeout: float | None = None) -> bool:
        self.local.sparse_index(namespace)
        return self.own.wait_ready(namespace, timeout)

    def dense_kind(self, namespace: str, n_vectors: int) -> str:
        return self.own.dense_kind(namespace, n_vectors)

    def reset_dense(self) -> None:
        self.own.reset_dense()

    def close(self) -> None:
        self.local.close()
        self.own.close()


def make_legs(store: Store, executor: Executor, *, exact_threshold: int, hnsw_dtype: str = "f32") -> Legs:
    """The legs for ``store``: its own when it runs them (PostgreSQL; with ``bm25_leg="process"`` the
    BM25 leg over in-process postings), else in-process indexes."""
    if has_native_search(store):
        if hnsw_dtype != "f32":
            log.warning(
                "hnsw_dtype %s applies to the embedded backend's graph; this store's own index is used", hnsw_dtype
            )
        legs: Legs = PostgresLegs(store)
        if store.capabilities.bm25_in_process:
            return ProcessBM25Legs(legs, LocalLegs(store, executor, exact_threshold=exact_threshold))
        return legs
    return LocalLegs(store, executor, exact_threshold=exact_threshold, hnsw_dtype=hnsw_dtype)
