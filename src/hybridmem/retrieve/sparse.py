"""In-memory BM25 over the store's token stream: the same scores as SQLite FTS5's ``bm25()``,
computed from compact posting arrays with numpy instead of scoring every matching row in SQL.

    idf(t) = ln((N - n_t + 0.5) / (n_t + 0.5)), floored at 1e-6 as FTS5 does
    score(d) = Σ_t idf(t) · tf·(k1 + 1) / (tf + k1·(1 - b + b·|d| / avgdl)),  k1 = 1.2, b = 0.75

(Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond", 2009; FTS5 docs.)
The FTS5 table stays the durable truth; this index is rebuilt from it and kept in step with writes.
"""

from __future__ import annotations

import itertools
import math
import threading
from array import array
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

from ..config import BM25_B as B
from ..config import BM25_IDF_FLOOR as _IDF_FLOOR
from ..config import BM25_K1 as K1
from .cache import ArrayKeyedCache

__all__ = ["SparseIndex", "K1", "B"]

LOAD_BLOCK = 65_536  # rows per numpy block when an index is loaded whole


class SparseIndex:
    def __init__(self) -> None:
        self._lock = threading.Lock()  # never replaced: a reload swaps the state, not the lock
        self.version = -1
        self._post: dict[str, tuple[array[int], array[int]]] = {}  # term -> (positions, term frequencies)
        self._rowids = array("q")
        self._dl = array("f")
        self._alive = bytearray()
        self._pos: dict[int, int] = {}
        self._total_len = 0.0
        self._sorted = True  # rowids non-decreasing: SQLite may re-use the rowid of a deleted last row
        self._masks = ArrayKeyedCache()  # allowed rowids -> boolean mask of allowed live positions

    def __len__(self) -> int:
        return len(self._pos)

    def _add(self, rowid: int, tokens: str) -> None:
        old = self._pos.get(rowid)
        if old is not None:
            self._remove(rowid)
        p = len(self._rowids)
        toks = tokens.split()
        if p and rowid < self._rowids[-1]:
            self._sorted = False
        self._rowids.append(rowid)
        self._dl.append(float(len(toks)))
        self._alive.append(1)
        self._pos[rowid] = p
        self._total_len += len(toks)
        for term, tf in Counter(toks).items():
            post = self._post.get(term)
            if post is None:
                post = self._post[term] = (array("i"), array("i"))
            post[0].append(p)
            post[1].append(tf)

    def _bulk_add(self, rows: Iterable[tuple[int, str]]) -> None:
        """``_add`` for many rows, the same state, about twice as fast: each block of rows gets its
        postings from one numpy sort of (term id, chunk) keys instead of a Counter and two appends
        per term per chunk (a 1M-chunk load took ~30 s, the leg timeout). A block holding a rowid
        seen before goes through ``_add``, which replaces it."""
        vocab: dict[str, int] = {}
        it = iter(rows)
        while block := list(itertools.islice(it, LOAD_BLOCK)):
            rids = [int(r) for r, _ in block]
            if len(set(rids)) != len(rids) or any(r in self._pos for r in rids):
                for r, (_, tokens) in zip(rids, block):
                    self._add(r, tokens)
                continue
            base, n = len(self._rowids), len(block)
            ids, dls = array("q"), []
            get = vocab.setdefault
            for _, tokens in block:
                toks = tokens.split()
                dls.append(len(toks))
                ids.extend([get(t, len(vocab)) for t in toks])
            if len(ids):
                key = np.frombuffer(ids, dtype=np.int64) * n + np.repeat(np.arange(n, dtype=np.int64), dls)
                uniq, tf = np.unique(key, return_counts=True)  # by term id, then chunk: positions ascend
                term = uniq // n
                pos = (uniq - term * n + base).astype(np.int32)
                tf = tf.astype(np.int32)
                cuts = (np.flatnonzero(np.diff(term)) + 1).tolist()
                names = list(vocab)  # insertion order is id order
                for a, b in zip([0, *cuts], [*cuts, len(term)]):
                    t = names[int(term[a])]
                    post = self._post.get(t)
                    if post is None:
                        post = self._post[t] = (array("i"), array("i"))
                    post[0].frombytes(pos[a:b].tobytes())
                    post[1].frombytes(tf[a:b].tobytes())
            if (base and rids[0] < self._rowids[-1]) or any(y < x for x, y in zip(rids, rids[1:])):
                self._sorted = False
            self._rowids.extend(rids)
            self._dl.extend([float(d) for d in dls])
            self._alive.extend(b"\x01" * n)
            self._pos.update(zip(rids, range(base, base + n)))
            self._total_len += sum(dls)

    def _remove(self, rowid: int) -> None:
        p = self._pos.pop(rowid, None)
        if p is not None:
            self._alive[p] = 0
            self._total_len -= self._dl[p]

    def load(self, version: int, rows: Iterable[tuple[int, str]]) -> None:
        """Replace the contents with ``rows`` at ``version``. The new state is built aside (queries go
        on meanwhile) and swapped in under the lock; the lock itself stays the same object, or a
        query and a write holding different locks would touch the arrays at once."""
        fresh = SparseIndex()
        fresh._bulk_add(rows)
        fresh.version = version
        state = vars(fresh)
        del state["_lock"]
        with self._lock:
            self.__dict__.update(state)

    def apply(self, version: int, added: Sequence[tuple[int, str]], removed: Sequence[int]) -> None:
        with self._lock:
            for r in removed:
                self._remove(int(r))
            for rowid, tokens in added:
                self._add(int(rowid), tokens)
            self.version = version
            dead = len(self._rowids) - len(self._pos)
            if dead > 1024 and dead > len(self._rowids) // 4:
                live = sorted((int(self._rowids[p]), p) for p in range(len(self._rowids)) if self._alive[p])
                self._compact(live)

    def _compact(self, live: list[tuple[int, int]]) -> None:
        remap = np.full(len(self._rowids), -1, np.int64)
        for new, (_, old) in enumerate(live):
            remap[old] = new
        post: dict[str, tuple[array[int], array[int]]] = {}
        for term, (ps, tfs) in self._post.items():
            pa = remap[np.frombuffer(ps, dtype=np.int32)]
            keep = pa >= 0
            if keep.any():
                post[term] = (
                    array("i", pa[keep].astype(np.int32).tobytes()),
                    array("i", np.frombuffer(tfs, dtype=np.int32)[keep].tobytes()),
                )
        dl = array("f", [self._dl[old] for _, old in live])
        self._post = post
        self._rowids = array("q", [r for r, _ in live])
        self._dl = dl
        self._alive = bytearray(b"\x01" * len(live))
        self._pos = {r: i for i, (r, _) in enumerate(live)}
        self._sorted = True

    def _allowed_mask(self, allowed: np.ndarray, rowids: np.ndarray, alive: np.ndarray, n_total: int) -> np.ndarray:
        """Boolean mask of live positions ``allowed`` names; cached per allowed array (Memory hands the
        same array for a repeated filter until chunks change) and index state. Caller holds the lock."""
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
        mask &= alive
        self._masks.put(allowed, key, mask)
        return mask

    def search(self, terms: Sequence[str], k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        """Top-k (rowid, bm25) over chunks holding at least one term; ``allowed`` rowids restrict the
        candidates (a pre-filter: ranking happens among allowed chunks only)."""
        with self._lock:
            n_total = len(self._rowids)
            n_live = len(self._pos)
            if not n_live or k <= 0:
                return []
            alive = np.frombuffer(self._alive, dtype=np.uint8)[:n_total].astype(bool)
            # copies, not views: a view exports the array's buffer, and a concurrent apply() would then
            # fail to append to it (BufferError) while this query scores outside the lock
            dl = np.frombuffer(self._dl, dtype=np.float32)[:n_total].copy()
            rowids = np.frombuffer(self._rowids, dtype=np.int64)[:n_total].copy()
            avgdl = self._total_len / n_live
            postings = [
                (np.frombuffer(p[0], dtype=np.int32).copy(), np.frombuffer(p[1], dtype=np.int32).copy())
                for t in dict.fromkeys(terms)
                if (p := self._post.get(t)) is not None
            ]
            mask = alive if allowed is None else self._allowed_mask(allowed, rowids, alive, n_total)
        scores = np.zeros(n_total, np.float32)
        hit = np.zeros(n_total, bool)
        for ps, tfs in postings:
            live = alive[ps]
            ps, tf = ps[live], tfs[live].astype(np.float32)
            n_t = len(ps)
            if not n_t:
                continue
            idf = math.log((n_live - n_t + 0.5) / (n_t + 0.5))
            idf = idf if idf > 0 else _IDF_FLOOR
            norm = K1 * (1.0 - B + B * dl[ps] / avgdl)
            scores[ps] += idf * tf * (K1 + 1.0) / (tf + norm)
            hit[ps] = True
        cand = np.flatnonzero(hit & mask)
        if not len(cand):
            return []
        s = scores[cand]
        if k < len(cand):
            top = np.argpartition(-s, k - 1)[:k]
        else:
            top = np.arange(len(cand))
        top = top[np.lexsort((rowids[cand[top]], -s[top]))]
        return [(int(rowids[cand[t]]), float(s[t])) for t in top]
