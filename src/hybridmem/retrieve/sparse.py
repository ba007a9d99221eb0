"""In-memory BM25 over the store's token stream: the same scores as SQLite FTS5's ``bm25()``,
computed from compact posting arrays with numpy instead of scoring every matching row in SQL.

    idf(t) = ln((N - n_t + 0.5) / (n_t + 0.5)), floored at 1e-6 as FTS5 does
    score(d) = Σ_t idf(t) · tf·(k1 + 1) / (tf + k1·(1 - b + b·|d| / avgdl)),  k1 = 1.2, b = 0.75

(Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond", 2009; FTS5 docs.)
The FTS5 table stays the durable truth; this index is rebuilt from it and kept in step with writes.
"""

from __future__ import annotations

import gc
import itertools
import threading
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from types import ModuleType
from typing import Any, cast

import numpy as np

from ..config import BM25_B as B
from ..config import BM25_K1 as K1
from . import bm25_score
from .bm25_score import BM25Scoring, _Postings
from .cache import ArrayKeyedCache
from .positions import Positions
from .rwlock import RWLock

_scan: ModuleType | None
try:  # the tokenizer's compiled scans: term ids of a block of chunks in one call
    from ..text import _scan as _compiled_scan

    _scan = _compiled_scan
except ImportError:  # pragma: no cover - a build without a C compiler
    _scan = None

__all__ = ["SparseIndex", "K1", "B"]

LOAD_BLOCK = 65_536  # rows per numpy block when an index is loaded whole


@contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic garbage collector off while an index is built: it makes a few objects per term,
    none in a cycle, and each collection they set off walks every object of the process (a third
    of loading SciFact's postings; more in a process holding more)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _views(
    posts: dict[str, _Postings], names: list[str], runs: list[tuple[int, int, int]], pos: Any, tf: Any
) -> list[int]:
    """``posts[names[t]] = (pos[a:b], tf[a:b])`` for each run (t, a, b) whose term ``posts`` does
    not hold yet (views: one object per term, made in C when it is built); returns the indexes into
    ``runs`` of those it held, left as they were."""
    if _scan is not None:
        return cast(list[int], _scan.postings_views(posts, names, runs, pos, tf))
    taken = []
    for k, (tid, a, b) in enumerate(runs):
        if names[tid] in posts:
            taken.append(k)
        else:
            posts[names[tid]] = (pos[a:b], tf[a:b])
    return taken


def _owned(post: _Postings) -> tuple[array[int], array[int]]:
    """``post`` as arrays a write may append to (a mapped term's views copied)."""
    if isinstance(post[0], array) and isinstance(post[1], array):
        return post[0], post[1]
    ps, tf = array("i"), array("i")
    ps.frombytes(memoryview(post[0]).cast("B"))
    tf.frombytes(memoryview(post[1]).cast("B"))
    return ps, tf


class SparseIndex(BM25Scoring):
    """A namespace's BM25 postings: built, kept in step with writes, saved and restored here; scored
    by :class:`~.bm25_score.BM25Scoring`."""

    def __init__(self) -> None:
        # never replaced: a reload swaps the state, not the locks. Queries read (shared), writes and
        # reloads write (exclusive): a query scores on views of the arrays, which a write appending
        # to them must not meet (BufferError), so writes wait for the queries in flight.
        self._rw = RWLock()
        self._cache_lock = threading.Lock()  # the caches queries fill (filter masks, live df)
        self.version = -1
        # term -> (positions, term frequencies): arrays, or read-only int32 views of a mapped snapshot
        # (``undump(mapped=True)``) until a write to the term copies them (:meth:`_own`)
        self._post: dict[str, _Postings] = {}
        self._mapping: object = None  # the snapshot's memory map the views read, while any is used
        self._rowids = array("q")
        self._dl = array("f")
        self._alive = bytearray()
        self._pos = Positions()
        self._total_len = 0.0
        self._sorted = True  # rowids non-decreasing: SQLite may re-use the rowid of a deleted last row
        self._masks = ArrayKeyedCache()  # allowed rowids -> boolean mask of allowed live positions
        self._allowed_at = ArrayKeyedCache()  # allowed rowids -> their live positions
        self._df: dict[str, tuple[int, int, int]] = {}  # term -> (postings, removals, live postings)
        self._removals = 0  # chunks removed so far: a cached live document frequency is stale
        # term -> (postings covered, max over them of tf / (tf + norm), the avgdl it was taken at):
        # the term's weight bound for MaxScore; still a bound after removals (and, grown by
        # avgdl / that avgdl, at any later avgdl), extended over postings added since
        self._bounds: dict[str, tuple[int, float, float]] = {}

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
            got = self._post.get(term)
            post = self._post[term] = (array("i"), array("i")) if got is None else _owned(got)
            post[0].append(p)
            post[1].append(tf)

    def _bulk_add(self, rows: Iterable[tuple[int, str]]) -> None:
        """``_add`` for many rows, the same state, about twice as fast: each block of rows gets its
        postings from one numpy sort of (term id, chunk) keys instead of a Counter and two appends
        per term per chunk (a 1M-chunk load took ~30 s, the leg timeout). A block holding a rowid
        seen before goes through ``_add``, which replaces it."""
        with paused_gc():
            self._bulk_blocks(rows)

    def _bulk_blocks(self, rows: Iterable[tuple[int, str]]) -> None:
        vocab: dict[str, Any] = {}
        it = iter(rows)
        while block := list(itertools.islice(it, LOAD_BLOCK)):
            rids = [int(r) for r, _ in block]
            if len(set(rids)) != len(rids) or self._pos.holds_any(rids):
                for r, (_, tokens) in zip(rids, block):
                    self._add(r, tokens)
                continue
            base, n = len(self._rowids), len(block)
            ids: Any
            if _scan is not None:
                ids, dls = _scan.term_ids([tokens for _, tokens in block], vocab)  # the loop below, in C
            else:
                ids, dls = array("q"), []
                get = vocab.setdefault
                for _, tokens in block:
                    toks = tokens.split()
                    dls.append(len(toks))
                    ids.extend([get(t, len(vocab)) for t in toks])
            if len(ids):
                pos: Any
                tf: Any
                if _scan is not None:  # grouped by term, then position, in two linear passes
                    pb, tb, ob = _scan.group_postings(ids, dls, len(vocab), base)
                    pos, tf = np.frombuffer(pb, dtype=np.int32), np.frombuffer(tb, dtype=np.int32)
                    off = np.frombuffer(ob, dtype=np.int64)
                    present = np.flatnonzero(np.diff(off))  # the terms of this block
                    runs = list(zip(present.tolist(), off[present].tolist(), off[present + 1].tolist()))
                else:
                    key = np.frombuffer(ids, dtype=np.int64) * n + np.repeat(np.arange(n, dtype=np.int64), dls)
                    uniq, tf = np.unique(key, return_counts=True)  # by term id, then chunk: positions ascend
                    term = uniq // n
                    pos = (uniq - term * n + base).astype(np.int32)
                    tf = tf.astype(np.int32)
                    starts = np.flatnonzero(np.diff(term)) + 1  # each term's run of (position, tf)
                    ends = np.append(starts, len(term))
                    starts = np.insert(starts, 0, 0)
                    runs = list(zip(term[starts].tolist(), starts.tolist(), ends.tolist()))
                names = list(vocab)  # insertion order is id order
                pv, tv, posts = pos.data, tf.data, self._post
                # a new term's postings are views of the block's arrays (copied once a write appends
                # to them, as a mapped snapshot's are; a pass over the terms in Python was a third
                # of a load)
                for k in _views(posts, names, runs, pv, tv):  # the terms held before this block: appended to
                    tid, a, b = runs[k]
                    post = posts[names[tid]] = _owned(posts[names[tid]])
                    post[0].frombytes(pv[a:b].cast("B"))
                    post[1].frombytes(tv[a:b].cast("B"))
            if (base and rids[0] < self._rowids[-1]) or any(y < x for x, y in zip(rids, rids[1:])):
                self._sorted = False
            self._rowids.extend(rids)
            self._dl.extend([float(d) for d in dls])
            self._alive.extend(b"\x01" * n)
            self._pos.add_new(rids, base)
            self._total_len += sum(dls)

    def _remove(self, rowid: int) -> None:
        p = self._pos.pop(rowid, None)
        if p is not None:
            self._alive[p] = 0
            self._total_len -= self._dl[p]
            self._removals += 1

    def load(self, version: int, rows: Iterable[tuple[int, str]]) -> None:
        """Replace the contents with ``rows`` at ``version``. The new state is built aside (queries go
        on meanwhile) and swapped in under the lock; the lock itself stays the same object, or a
        query and a write holding different locks would touch the arrays at once."""
        fresh = SparseIndex()
        fresh._bulk_add(rows)
        fresh.version = version
        state = vars(fresh)
        del state["_rw"], state["_cache_lock"]
        with self._rw.write():
            self.__dict__.update(state)

    def apply(self, version: int, added: Sequence[tuple[int, str]], removed: Sequence[int]) -> None:
        with self._rw.write():
            for r in removed:
                self._remove(int(r))
            if len(added) >= 64:
                self._bulk_add((int(r), tokens) for r, tokens in added)  # a rowid seen before: _add
            else:
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
        post: dict[str, _Postings] = {}
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
        rowids = [r for r, _ in live]
        self._rowids = array("q", rowids)
        self._dl = dl
        self._alive = bytearray(b"\x01" * len(live))
        self._pos = Positions(np.array(rowids, np.int64))
        self._sorted = True
        self._df.clear()
        self._bounds.clear()  # positions moved

    # ------------------------------------------------------------------------------------ snapshot
    def dump(self, write: Callable[[Any], object]) -> dict[str, Any]:
        """Write the whole state through ``write`` (bytes-like pieces, in order): rowids, lengths,
        liveness, the terms, their postings offsets, every positions list, every tf list, and (with
        the kernel) each term's MaxScore bound at the current avgdl. Returns
        what :meth:`undump` needs to read it back. Holds the read lock: writes wait meanwhile."""
        with self._rw.read():
            terms = list(self._post)
            lens = np.fromiter((len(self._post[t][0]) for t in terms), np.int64, len(terms))
            off = np.concatenate(([0], np.cumsum(lens))).astype(np.int64)
            blob = "\n".join(terms).encode("utf-8")  # a token never holds whitespace
            n_total = len(self._rowids)
            sizes = [n_total * 8, n_total * 4, n_total, len(blob), len(off) * 8, int(off[-1]) * 4, int(off[-1]) * 4]
            # each section padded to 8 bytes: a mapped snapshot's int32 postings are aligned views
            write(memoryview(self._rowids).cast("B"))
            write(memoryview(self._dl).cast("B"))
            write(bytes(-n_total * 4 % 8))
            write(bytes(self._alive[:n_total]) + bytes(-n_total % 8))
            write(blob + bytes(-len(blob) % 8))
            write(off.tobytes())
            for t in terms:
                write(memoryview(self._post[t][0]).cast("B"))
            write(bytes(-int(off[-1]) * 4 % 8))
            for t in terms:
                write(memoryview(self._post[t][1]).cast("B"))
            write(bytes(-int(off[-1]) * 4 % 8))
            meta = {
                "version": self.version,
                "chunks": n_total,
                "live": len(self._pos),
                "terms": len(terms),
                "total_len": self._total_len,
                "sorted": self._sorted,
                "sizes": sizes,
            }
            if bm25_score._kernel is not None and len(self._pos):
                # each term's MaxScore bound at this avgdl: a new process would otherwise compute it
                # over all of a term's postings at its first use (at 10M, 817 ms of a fresh
                # process's first 200 BM25 queries). A section readers of the 7 before it skip.
                # (taken afresh, not from the cache: a cached bound scaled to this avgdl is looser)
                avgdl, dl, mr = self._total_len / len(self._pos), self._dl, bm25_score._kernel.max_ratio
                bounds = np.fromiter((mr(*self._post[t], dl, 0, avgdl) for t in terms), np.float64, len(terms))
                write(bounds.tobytes())
                sizes.append(len(terms) * 8)
                meta["bounds_avgdl"] = avgdl
            return meta

    @classmethod
    def undump(cls, buf: memoryview, meta: dict[str, Any], mapping: object = None) -> SparseIndex:
        """The index :meth:`dump` wrote (``buf`` holds exactly its bytes; ``meta`` is what it returned).
        ``mapping``: ``buf`` is a memory map of the snapshot file (kept alive through the index):
        the postings are read-only views of it, not copies — a 1M-chunk index keeps ~400 MB of
        postings in the page cache, shared, instead of in the process — and a term is copied
        only when a write adds to it."""
        n_total, n_terms = int(meta["chunks"]), int(meta["terms"])
        spans = [int(n) + (-int(n) % 8) for n in meta["sizes"]]  # each section padded to 8 bytes
        cuts = np.concatenate(([0], np.cumsum(spans))).tolist()
        part = [buf[a : a + int(n)] for a, n in zip(cuts, meta["sizes"])]
        idx = cls()
        idx._rowids.frombytes(part[0])
        idx._dl.frombytes(part[1])
        idx._alive = bytearray(part[2])
        terms = bytes(part[3]).decode("utf-8").split("\n") if n_terms else []
        offsets = np.frombuffer(part[4], dtype=np.int64)
        off = offsets.tolist()
        if len(idx._rowids) != n_total or len(idx._dl) != n_total or len(terms) != n_terms or len(off) != n_terms + 1:
            raise ValueError("the snapshot's sections do not match its description")
        pos, tfs = part[5], part[6]
        if mapping is not None:
            idx._mapping = mapping
            pos_i, tfs_i = pos.cast("i"), tfs.cast("i")
            with paused_gc():
                _views(idx._post, terms, list(zip(range(n_terms), off[:-1], off[1:])), pos_i, tfs_i)
        else:
            for i, t in enumerate(terms):
                a, b = off[i] * 4, off[i + 1] * 4
                ps, tf = array("i"), array("i")
                ps.frombytes(pos[a:b])
                tf.frombytes(tfs[a:b])
                idx._post[t] = (ps, tf)
        rowids = np.frombuffer(idx._rowids, dtype=np.int64)
        live = np.flatnonzero(np.frombuffer(idx._alive, dtype=np.uint8))
        # the rows as the arrays they are: a 10M-entry dict took ~2 s and ~0.9 GB before the first answer
        idx._pos = Positions(rowids[live], None if len(live) == n_total else live)
        if len(idx._pos) != int(meta["live"]):
            raise ValueError("the snapshot's live chunks do not match its description")
        idx._total_len = float(meta["total_len"])
        if len(part) > 7 and meta.get("bounds_avgdl"):  # the saved MaxScore bounds, most postings first
            bounds = np.frombuffer(part[7], dtype=np.float64)
            counts = np.diff(offsets)
            top = (
                np.argsort(-counts, kind="stable")[: bm25_score.BOUND_CACHE]
                if n_terms > bm25_score.BOUND_CACHE
                else range(n_terms)
            )
            avgdl = float(meta["bounds_avgdl"])
            idx._bounds = {terms[i]: (int(counts[i]), float(bounds[i]), avgdl) for i in top}
        idx._sorted = bool(meta["sorted"])
        idx.version = int(meta["version"])
        return idx

    def sample_rowids(self, n: int, seed: int) -> list[int]:
        """Up to ``n`` live rowids drawn at random (reproducibly by ``seed``)."""
        with self._rw.read():
            live = np.flatnonzero(np.frombuffer(self._alive, dtype=np.uint8))
            pick = np.random.default_rng(seed).choice(live, size=min(n, len(live)), replace=False)
            return [int(r) for r in np.frombuffer(self._rowids, dtype=np.int64)[np.sort(pick)]]

    def differs(self, rowid: int, tokens: str) -> str | None:
        """None when the index holds chunk ``rowid`` with exactly ``tokens`` (its length, and each
        term's tf at its position), else what differs."""
        toks = tokens.split()
        with self._rw.read():
            p = self._pos.get(rowid)
            if p is None:
                return "not in the index"
            if self._dl[p] != len(toks):
                return f"{len(toks)} tokens, {int(self._dl[p])} in the index"
            for term, tf in Counter(toks).items():
                post = self._post.get(term)
                if post is None:
                    return f"term {term!r} is not in the index"
                ps = np.frombuffer(post[0], dtype=np.int32)
                j = int(np.searchsorted(ps, p))
                found = j < len(ps) and ps[j] == p and post[1][j] == tf
                del ps  # a view: never kept past the read lock
                if not found:
                    return f"term {term!r} is not there {tf} times"
        return None
