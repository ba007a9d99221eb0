"""Search through the HNSW graph: over-fetching for a broad filter or a mapped graph's stale keys,
the writes since a mapped graph was opened scored exactly, a compressed graph's candidates
rescored in float32. :class:`GraphSearch` is :class:`~.dense.DenseIndex`'s graph half."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .positions import Positions

if TYPE_CHECKING:
    from usearch.index import Index
from .dense_rows import Rows, graph_form

#: a filter allowing at least this share of rows may use the HNSW graph with over-fetching
HNSW_FILTER_MIN_SHARE = 0.1
#: with a compressed graph (f16, i8), candidates asked of it per result wanted, rescored exactly
RESCORE_FACTOR = 4


class GraphSearch:
    """The graph half of :class:`~.dense.DenseIndex` (its ``__init__`` sets the state below)."""

    hnsw_dtype: str
    _pos: Positions

    def _graph_search(
        self,
        hnsw: Index,
        q: np.ndarray,
        k: int,
        allowed: np.ndarray | None,
        live: int,
        rowids: np.ndarray,
        matrix: Rows,
        alive: np.ndarray,
        delta: np.ndarray | None,
        stale: np.ndarray | None,
    ) -> list[tuple[int, float]] | None:
        """The top k through the graph, or None (answer exactly). Unfiltered, the graph is asked for
        k (a compressed graph: ``RESCORE_FACTOR`` × k, rescored). A broad filter over-fetches
        ``k / share · 2`` and keeps the allowed; too few left means None. A mapped graph also drops
        its stale keys (over-fetching for their share) and adds the delta's rows, scored exactly."""
        share = 1.0 if allowed is None else len(allowed) / max(live, 1)
        if share < HNSW_FILTER_MIN_SHARE:
            return None
        compressed = self.hnsw_dtype != "f32"
        per = RESCORE_FACTOR if compressed else 1
        gone = len(stale) / max(len(hnsw), 1) if stale is not None else 0.0
        if gone > 0.5:
            return None  # most of a mapped graph replaced: exact until its merge
        if allowed is None and stale is None:
            want = k if not compressed else min(live, k * per)
        else:
            scale = (1.0 if allowed is None else 2.0 / share) / (1.0 - gone)
            want = int(np.ceil(k * per * scale)) + 10
            want = min(len(hnsw) if stale is not None else live, want)
        m = hnsw.search(graph_form(q, self.hnsw_dtype), want)
        keys = np.asarray(m.keys, np.int64)
        ok = np.ones(len(keys), bool)
        if stale is not None and len(stale):
            ok &= ~_in_sorted(stale, keys)
        srt = None
        if allowed is not None:
            srt = allowed if _is_sorted(allowed) else np.sort(allowed)
            ok &= _in_sorted(srt, keys)
        extra: list[tuple[int, float]] = []
        if delta is not None and len(delta):
            d = delta[alive[delta]]
            if srt is not None and len(d):
                d = d[_in_sorted(srt, rowids[d])]
            if len(d):
                scores = matrix[d] @ q
                extra = [(int(r), float(x)) for r, x in zip(rowids[d], scores)]
        if allowed is not None or stale is not None:
            wanted = min(k, len(allowed)) if allowed is not None else min(k, live)
            if int(ok.sum()) + len(extra) < wanted:
                return None
        if compressed:
            hits = self._rescored(keys[ok][: k * per], q, k, rowids, matrix)
        else:
            hits = [(int(key), float(1.0 - d)) for key, d in zip(keys[ok][:k], np.asarray(m.distances)[ok][:k])]
        if not extra:
            return hits
        return sorted(hits + extra, key=lambda h: (-h[1], h[0]))[:k]

    def _rescored(
        self, keys: np.ndarray, q: np.ndarray, k: int, rowids: np.ndarray, matrix: Rows
    ) -> list[tuple[int, float]]:
        """The candidates a compressed graph proposed, scored exactly against the float32 matrix
        (``rowids`` / ``matrix``: the arrays the query read); the top k by (score, rowid)."""
        at_all = self._pos.positions(np.asarray(keys, np.int64))
        found = [(int(key), int(p)) for key, p in zip(keys, at_all) if p >= 0]
        # a rowid rewritten since the lookup (its position moved) is scored where the arrays hold it
        found = [(r, p) for r, p in found if p < len(rowids) and rowids[p] == r]
        if not found:
            return []
        at = np.fromiter((p for _, p in found), np.int64, len(found))
        scores = matrix[at] @ q
        order = sorted(range(len(found)), key=lambda i: (-float(scores[i]), found[i][0]))[:k]
        return [(found[i][0], float(scores[i])) for i in order]


def _in_sorted(srt: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Which of ``keys`` the sorted array ``srt`` holds."""
    if not len(srt):
        return np.zeros(len(keys), bool)
    at = np.minimum(np.searchsorted(srt, keys), len(srt) - 1)
    return np.asarray(srt[at] == keys)


def _is_sorted(a: np.ndarray) -> bool:
    return len(a) < 2 or bool(np.all(a[1:] >= a[:-1]))
