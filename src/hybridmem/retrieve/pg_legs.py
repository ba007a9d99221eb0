"""The legs of the PostgreSQL backend: BM25 and dense search run in the database, through what the
store offers for it (:class:`~hybridmem.store.base.NativeSearchStore`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import EmbedderMismatchError
from ..filters import Filter
from ..store.base import Allowed, NativeSearchStore, WriteResult

__all__ = ["PostgresLegs"]


class PostgresLegs:
    """The legs of the PostgreSQL backend (the ``Legs`` protocol of ``hybridmem.retrieve``): BM25
    from the store's own postings and pgvector HNSW, both in SQL, the filter compiled once per query
    into the WHERE fragment every leg joins on. No in-process index, so nothing to keep in step."""

    def __init__(self, store: NativeSearchStore) -> None:
        self.store = store

    def prepare(self, namespace: str, mode: str) -> None:
        return None

    def allowed(self, namespace: str, flt: Filter) -> Allowed:
        return self.store.compile_filter(flt)

    def allowed_rowids(self, namespace: str, allowed: Allowed) -> np.ndarray:
        return allowed.rowids if allowed.rowids is not None else self.store.filter_rowids(namespace, allowed)

    def sparse(self, namespace: str, terms: Sequence[str], allowed: Allowed | None, k: int) -> list[tuple[int, float]]:
        return self.store.search_sparse(namespace, terms, allowed, k) if terms else []

    def dense(
        self, namespace: str, text: str, encoder: Any, allowed: Allowed | None, k: int
    ) -> list[tuple[int, float]]:
        if self.store.vector_version(namespace) == 0:
            return []  # nothing ever embedded in this namespace: do not even load the model
        q = encoder.vector(text)
        _, dim = self.store.embedder_info_cached()  # no round trip per query
        if dim and q.shape[0] != dim:
            raise EmbedderMismatchError(self.store.embedder_info()[0] or "?", dim, encoder.name, q.shape[0])
        return self.store.search_dense(namespace, q, allowed, k)

    def holding(self, namespace: str, terms: Sequence[str], rowids: Sequence[int]) -> set[int]:
        return self.store.holding(namespace, terms, rowids)

    def doc_freqs(self, namespace: str, terms: Sequence[str]) -> tuple[int, dict[str, int]]:
        return self.store.doc_freqs(namespace, terms)

    def commit(self, write: Callable[[], WriteResult]) -> WriteResult:
        return write()

    def wait_ready(self, namespace: str, timeout: float | None = None) -> bool:
        return True  # the server keeps its indexes

    def dense_kind(self, namespace: str, n_vectors: int) -> str:
        return "pgvector-hnsw" if n_vectors >= self.store.exact_threshold else "exact"

    def reset_dense(self) -> None:
        return None

    def close(self) -> None:
        return None
