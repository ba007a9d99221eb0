"""BM25 scoring of a :class:`~.sparse.SparseIndex`: exact top-k by the compiled MaxScore kernel,
by numpy over every posting, or chunk by chunk for a small allowed set, with the same float32
scores and order on every path (FTS5's ``bm25()``; see :mod:`.sparse` for the formula).
:class:`BM25Scoring` is the index's search half: the state it reads is the index's own."""

from __future__ import annotations

import math
import threading
import traceback
from array import array
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import numpy as np

from ..config import BM25_B as B
from ..config import BM25_IDF_FLOOR as _IDF_FLOOR
from ..config import BM25_K1 as K1
from .cache import ArrayKeyedCache
from .positions import Positions
from .rwlock import RWLock

_kernel: ModuleType | None
try:  # the compiled MaxScore kernel (setup.py); without it the numpy scorer gives the same results
    from . import _bm25 as _kernel
except ImportError:  # pragma: no cover - a build without a C compiler
    _kernel = None
if _kernel is not None and (_kernel.K1, _kernel.B) != (K1, B):  # compiled with other BM25 constants
    _kernel = None

SAMPLE_STRIDE = 16  # top-k: every 16th chunk's score gives a threshold for the rest
DIRECT_FACTOR = 8  # an allowed set this much smaller than the postings is scored by binary search
DF_CACHE = 65_536  # terms whose live document frequency is cached while chunks are dead
BOUND_CACHE = 65_536  # terms whose weight bound (max tf / (tf + norm) over their postings) is cached

#: one term's (positions, term frequencies): int32 arrays, or int32 memoryviews of a mapped snapshot
_Postings = tuple["array[int] | memoryview", "array[int] | memoryview"]


class BM25Scoring:
    """The search half of :class:`~.sparse.SparseIndex` (the state below is set by its ``__init__``)."""

    _rw: RWLock
    _cache_lock: threading.Lock
    version: int
    _post: dict[str, _Postings]
    _rowids: array[int]
    _dl: array[float]
    _alive: bytearray
    _pos: Positions
    _total_len: float
    _sorted: bool
    _masks: ArrayKeyedCache
    _allowed_at: ArrayKeyedCache
    _df: dict[str, tuple[int, int, int]]
    _removals: int
    _bounds: dict[str, tuple[int, float, float]]

    # ------------------------------------------------------------------------------------ search
    def search(self, terms: Sequence[str], k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        """Top-k (rowid, bm25) over chunks holding at least one term, best first, ties by rowid;
        ``allowed`` rowids restrict the candidates (a pre-filter: ranking happens among allowed
        chunks only). An allowed set much smaller than the terms' postings (a session, a user) is
        scored chunk by chunk (:meth:`_score_positions`), else every posting is (:meth:`_score_all`):
        the same chunks and the same float32 scores either way."""
        return self._read(self._search, terms, k, allowed)

    def doc_freqs(self, terms: Sequence[str]) -> tuple[int, dict[str, int]]:
        """(live chunks, {term: live document frequency}) for the ``terms`` the index holds (the
        statistics its BM25 scores use; absent terms are left out)."""
        with self._rw.read():
            n_total = len(self._rowids)
            dead = n_total > len(self._pos)
            alive = np.frombuffer(self._alive, dtype=np.uint8)[:n_total].view(bool) if dead else None
            return len(self._pos), {t: n_t for t, _, n_t in self._terms(terms, alive)}

    def holding(self, terms: Sequence[str], rowids: Sequence[int]) -> set[int]:
        """The chunks among ``rowids`` (live ones) that hold at least one of ``terms``: a binary
        search of each term's postings for the chunks' positions, so a few hundred candidates cost
        the same in any index size."""
        with self._rw.read():
            pos = {p: r for r in rowids if (p := self._pos.get(r)) is not None}
            if not pos:
                return set()
            want = np.fromiter(sorted(pos), np.int64, len(pos))
            hit = np.zeros(len(want), dtype=bool)
            for t in dict.fromkeys(terms):
                post = self._post.get(t)
                if post is None or not len(post[0]):
                    continue
                ps = np.frombuffer(post[0], dtype=np.int32)
                at = np.minimum(np.searchsorted(ps, want), len(ps) - 1)
                hit |= ps[at] == want
            return {pos[int(p)] for p in want[hit]}

    def search_exhaustive(
        self, terms: Sequence[str], k: int, allowed: np.ndarray | None = None
    ) -> list[tuple[int, float]]:
        """:meth:`search` scoring every posting of every term: the reference the other path equals."""
        return self._read(self._score_all, terms, k, allowed)

    def _read(self, fn: Callable[..., list[tuple[int, float]]], *args: Any) -> list[tuple[int, float]]:
        with self._rw.read():
            try:
                return fn(*args)
            except BaseException as e:
                # the failed frames hold numpy views of arrays a write appends to (BufferError there)
                traceback.clear_frames(e.__traceback__)
                raise

    def search_counted(
        self, terms: Sequence[str], k: int, allowed: np.ndarray | None = None
    ) -> tuple[list[tuple[int, float]], dict[str, Any]]:
        """:meth:`search`, with what it read: ``postings`` (the query terms' postings), ``scanned``
        (postings scored in full), ``looked_up`` (chunks looked up in a term's postings instead),
        ``path`` (``kernel``, ``numpy`` or ``direct``)."""
        counts: dict[str, Any] = {}
        return self._read(self._search, terms, k, allowed, counts), counts

    def _terms(self, terms: Sequence[str], alive: np.ndarray | None) -> list[tuple[str, _Postings, int]]:
        """The query's distinct terms the index holds, with their live document frequencies, in the
        order every path adds a chunk's weights: rarest first, ties in the query's order. One
        order keeps the paths' float32 scores the same bits; rarest first lets MaxScore stop early."""
        got = []
        for t in dict.fromkeys(terms):
            if (p := self._post.get(t)) is None:
                continue
            if n_t := self._live_df(t, np.frombuffer(p[0], dtype=np.int32), alive):
                got.append((t, p, n_t))
        got.sort(key=lambda x: x[2])  # stable
        return got

    def _search(
        self, terms: Sequence[str], k: int, allowed: np.ndarray | None, counts: dict[str, Any] | None = None
    ) -> list[tuple[int, float]]:
        n_total = len(self._rowids)
        n_live = len(self._pos)
        if not n_live or k <= 0:
            return []
        dead = n_total > n_live
        alive = np.frombuffer(self._alive, dtype=np.uint8)[:n_total].view(bool) if dead else None
        uniq = self._terms(terms, alive)
        rowids = np.frombuffer(self._rowids, dtype=np.int64)[:n_total]
        n_post = sum(len(p[0]) for _, p, _ in uniq)
        if counts is not None:
            counts.update(postings=n_post, scanned=n_post, looked_up=0, path="numpy")
        # the positions of the allowed live chunks: a binary search per allowed rowid and term
        # costs ~log2(postings) where a scan costs one; so only a much smaller set goes this way
        if allowed is not None and len(allowed) * max(len(uniq), 1) * DIRECT_FACTOR <= n_post:
            cand = self._allowed_positions(allowed, self._allowed_mask(allowed, rowids, n_total))
            dl = np.frombuffer(self._dl, dtype=np.float32)[:n_total]
            if counts is not None:
                counts.update(scanned=0, looked_up=len(cand) * len(uniq), path="direct")
            return self._score_positions(uniq, cand, dl, rowids, self._total_len / n_live, n_live, k)
        if _kernel is None:
            return self._score_all(terms, k, allowed)
        return self._score_kernel(uniq, k, allowed, rowids, counts)

    def _score_kernel(
        self,
        uniq: list[tuple[str, _Postings, int]],
        k: int,
        allowed: np.ndarray | None,
        rowids: np.ndarray,
        counts: dict[str, Any] | None,
    ) -> list[tuple[int, float]]:
        """Top-k by the compiled MaxScore kernel (``_bm25.c``): the terms whose bounds cannot bring
        a new chunk into the top k are only looked up for the chunks that can still get there.
        The same list, the same float32 scores, as :meth:`_score_all`. The kernel reads the
        arrays in place without the GIL (the read lock keeps writers out meanwhile)."""
        assert _kernel is not None
        n_total, n_live = len(self._rowids), len(self._pos)
        avgdl = self._total_len / n_live
        items = []
        for t, (pa, ta), n_t in uniq:
            idf = _idf(n_live, n_t)
            items.append((pa, ta, idf, float(np.float32(idf)) * (K1 + 1.0) * self._bound(t, pa, ta, avgdl)))
        alive = self._alive if n_total > n_live else None
        mask = None if allowed is None else self._allowed_mask(allowed, rowids, n_total)
        hits: list[tuple[int, float]]
        hits, scanned, looked_up = _kernel.topk(items, self._dl, avgdl, self._rowids, n_total, alive, mask, k)
        if counts is not None:
            counts.update(scanned=scanned, looked_up=looked_up, path="kernel")
        return hits

    def _bound(self, term: str, ps: array[int] | memoryview, tfs: array[int] | memoryview, avgdl: float) -> float:
        """max over the term's postings of tf / (tf + norm) at ``avgdl``, or more (a bound): its
        weight is at most idf·(K1 + 1) times it. Cached per term; a bound taken at avgdl a0 holds
        at avgdl a times max(1, a / a0) (norm's length part shrinks by at most a0 / a), so only
        postings added since are read. Takes the cache lock."""
        assert _kernel is not None
        n = len(ps)
        with self._cache_lock:
            hit = self._bounds.get(term)
        start, prev = 0, 0.0
        if hit is not None and hit[0] <= n:
            start, prev = hit[0], hit[1] * max(1.0, avgdl / hit[2])
            if start == n:
                return prev
        got: float = max(prev, _kernel.max_ratio(ps, tfs, self._dl, start, avgdl))
        with self._cache_lock:
            if len(self._bounds) >= BOUND_CACHE:
                self._bounds.pop(next(iter(self._bounds)))
            self._bounds[term] = (n, got, avgdl)
        return got

    def _score_all(self, terms: Sequence[str], k: int, allowed: np.ndarray | None) -> list[tuple[int, float]]:
        """Every posting of every term scored into one float32 array, in :meth:`_terms`' order;
        then the top-k by (score, rowid). Caller holds the read lock: the arrays are views."""
        n_total = len(self._rowids)
        n_live = len(self._pos)
        if not n_live or k <= 0:
            return []
        dead = n_total > n_live
        alive = np.frombuffer(self._alive, dtype=np.uint8)[:n_total].view(bool) if dead else None
        dl = np.frombuffer(self._dl, dtype=np.float32)[:n_total]
        rowids = np.frombuffer(self._rowids, dtype=np.int64)[:n_total]
        avgdl = self._total_len / n_live
        scores = np.zeros(n_total, np.float32)
        for _, p, n_t in self._terms(terms, alive):
            ps = np.frombuffer(p[0], dtype=np.int32)
            tfs = np.frombuffer(p[1], dtype=np.int32)
            if alive is not None:
                live = alive[ps]
                ps, tfs = ps[live], tfs[live]
            # a weight is > 0 (idf is floored above 0, tf >= 1): a score > 0 is a chunk with a term
            scores[ps] += _weight(_idf(n_live, n_t), tfs.astype(np.float32), dl[ps], avgdl)
        if allowed is not None:  # (a dead chunk has no score: its postings were skipped)
            scores *= self._allowed_mask(allowed, rowids, n_total)
        # a threshold no higher than the k-th best: the k-th best of a sample (any subset's k-th best
        # is at most the whole's), then only the chunks reaching it are ranked
        tau = 0.0
        sample = scores[::SAMPLE_STRIDE] if n_total >= k * SAMPLE_STRIDE * 4 else None
        if sample is not None:
            tau = float(np.partition(sample, len(sample) - k)[len(sample) - k])
        cand = np.flatnonzero(scores >= tau) if tau > 0 else np.flatnonzero(scores)
        s = scores[cand]
        top = _top_k(s, rowids[cand], k)
        return [(int(rowids[cand[t]]), float(s[t])) for t in top]

    def _live_df(self, term: str, ps: np.ndarray, alive: np.ndarray | None) -> int:
        """Live postings of ``term`` (its BM25 document frequency), cached until a posting is added
        to it or any chunk is removed. Takes the cache lock."""
        if alive is None:  # no dead position anywhere
            return len(ps)
        with self._cache_lock:
            hit = self._df.get(term)
            if hit is not None and hit[0] == len(ps) and hit[1] == self._removals:
                return hit[2]
            n = int(np.count_nonzero(alive[ps]))
            if len(self._df) >= DF_CACHE:
                self._df.pop(next(iter(self._df)))
            self._df[term] = (len(ps), self._removals, n)
            return n

    def _allowed_positions(self, allowed: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """The positions of the live chunks ``allowed`` names, cached like the mask."""
        with self._cache_lock:
            key = (self.version, len(self._rowids))
            hit: np.ndarray | None = self._allowed_at.get(allowed, key)
            if hit is None:
                hit = np.flatnonzero(mask)
                self._allowed_at.put(allowed, key, hit)
            return hit

    def _score_positions(
        self,
        uniq: list[tuple[str, _Postings, int]],
        cand: np.ndarray,
        dl: np.ndarray,
        rowids: np.ndarray,
        avgdl: float,
        n_live: int,
        k: int,
    ) -> list[tuple[int, float]]:
        """A small allowed set scored directly: each term's postings looked up by binary search
        (positions ascend in every list), weights summed in the terms' order as :meth:`_score_all`
        does, so the scores are the same bits."""
        acc = np.zeros(len(cand), np.float32)
        hit = np.zeros(len(cand), bool)
        for _, (pa, ta), n_t in uniq:
            ps = np.frombuffer(pa, dtype=np.int32)
            if not len(cand):
                break
            j = np.searchsorted(ps, cand)
            j[j >= len(ps)] = 0
            there = np.flatnonzero(ps[j] == cand)
            if not len(there):
                continue
            tf = np.frombuffer(ta, dtype=np.int32)[j[there]].astype(np.float32)
            acc[there] += _weight(_idf(n_live, n_t), tf, dl[cand[there]], avgdl)
            hit[there] = True
        got = np.flatnonzero(hit)
        pos, sc = cand[got], acc[got]
        top = _top_k(sc, rowids[pos], k)
        return [(int(rowids[pos[t]]), float(sc[t])) for t in top]

    def _allowed_mask(self, allowed: np.ndarray, rowids: np.ndarray, n_total: int) -> np.ndarray:
        """Boolean mask of live positions ``allowed`` names; cached per allowed array (Memory hands the
        same array for a repeated filter until chunks change) and index state. Takes the cache lock
        (queries share the read lock)."""
        with self._cache_lock:
            key = (self.version, n_total)  # every committed change bumps the version
            hit: np.ndarray | None = self._masks.get(allowed, key)
            if hit is not None:
                return hit
            # rowids are appended in increasing order (a re-used rowid repeats: its last entry is the live
            # one), so positions come from a vectorised binary search
            want = np.asarray(allowed, dtype=np.int64)
            if self._sorted:
                pos = np.searchsorted(rowids, want, side="right") - 1
                ok = pos >= 0
                pos, want = pos[ok], want[ok]
                pos = pos[rowids[pos] == want]
                mask = np.zeros(n_total, bool)
                mask[pos] = True
            else:
                mask = np.isin(rowids, want)
            mask &= np.frombuffer(self._alive, dtype=np.uint8)[:n_total].view(bool)
            self._masks.put(allowed, key, mask)
            return mask


def _idf(n_live: int, n_t: int) -> float:
    idf = math.log((n_live - n_t + 0.5) / (n_t + 0.5))
    return idf if idf > 0 else _IDF_FLOOR


def _weight(idf: float, tf: np.ndarray, dl: np.ndarray, avgdl: float) -> np.ndarray:
    """A term's BM25 weight in each chunk, in float32: one expression for both scoring paths, so
    their scores are the same bits."""
    norm = K1 * (1.0 - B + B * dl / avgdl)
    return idf * tf * (K1 + 1.0) / (tf + norm)


def _top_k(scores: np.ndarray, rowids: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k best by (score descending, rowid ascending), in that order: one total
    order, so every path that scores the same chunks returns the same list."""
    if k < len(scores):
        kth = np.partition(scores, len(scores) - k)[len(scores) - k]  # the k-th largest
        above = np.flatnonzero(scores > kth)
        tied = np.flatnonzero(scores == kth)
        tied = tied[np.argsort(rowids[tied], kind="stable")][: k - len(above)]
        top = np.concatenate((above, tied))
    else:
        top = np.arange(len(scores))
    return top[np.lexsort((rowids[top], -scores[top]))]
