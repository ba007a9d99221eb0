"""The dense index of one namespace: exact cosine search over an in-memory matrix (the SQLite BLOBs
are the truth), with an HNSW graph (usearch) for unfiltered queries above a size threshold.

Filtered queries are a true pre-filter: only rows the filter allows are ranked, and a query returns
``k`` of them whenever ``k`` are allowed. Below the threshold, or for a selective filter, search is
exact over the allowed rows. For a broad filter (at least ``HNSW_FILTER_MIN_SHARE`` of the rows) with
the graph ready, the graph is asked for ``k / share · 2`` neighbours and those the filter allows are
kept; if fewer than ``k`` survive, the query falls back to exact search.

The graph keeps its own copy of the vectors, in ``hnsw_dtype``: ``f32`` (default), ``f16`` (half the
memory) or ``i8`` (a quarter; each component × ``127·√dim / 4``, rounded, clipped). With ``f16`` and
``i8`` the graph only proposes candidates — ``RESCORE_FACTOR`` × k of them — and they are scored again
exactly, in float32, against the matrix: scores are exact cosines whatever the dtype, and only a true
neighbour the compressed graph failed to propose is lost (recall measured in docs/scaling.md).
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import weakref
from typing import TYPE_CHECKING

import numpy as np

from ..config import HNSW_DTYPES
from .blas import query_blas
from .cache import ArrayKeyedCache
from .hnsw_file import HnswFile

if TYPE_CHECKING:
    from usearch.index import Index

__all__ = ["DenseIndex", "HNSW_FILTER_MIN_SHARE", "HNSW_PARAMS"]

#: a filter allowing at least this share of rows may use the HNSW graph with over-fetching
HNSW_FILTER_MIN_SHARE = 0.1
#: how the graph is built (a saved graph built otherwise is not restored); the vectors' dtype is the
#: index's own (``DenseIndex.hnsw_dtype``)
HNSW_PARAMS: dict[str, str | int] = {"metric": "ip", "connectivity": 16, "expansion_add": 128}
#: with a compressed graph (f16, i8), candidates asked of it per result wanted, rescored exactly
RESCORE_FACTOR = 4


def graph_form(x: np.ndarray, dtype: str) -> np.ndarray:
    """Vectors (rows, or one query) as a graph of ``dtype`` holds them: float32 as they are; float16;
    int8 scaled by 127·√dim / 4, so a unit vector's components within ±4/√dim (four standard
    deviations of a random direction's; e5's largest is about half of that) keep 127 levels a side."""
    x = np.asarray(x, np.float32)
    if dtype == "f16":
        return np.ascontiguousarray(x, np.float16)
    if dtype == "i8":
        scale = 127.0 * np.sqrt(x.shape[-1]) / 4.0
        return np.ascontiguousarray(np.clip(np.rint(x * scale), -127, 127), np.int8)
    return np.ascontiguousarray(x)


#: vectors per usearch ``add`` call of a build: between calls the build picks up a raised thread
#: count (a caller started waiting for it) and a cancelled generation (``close`` waits at most one
#: call: ~2 s on one core at 384 dimensions)
HNSW_BUILD_BATCH = 4_096


def build_threads(background: bool) -> int:
    """Threads of an HNSW build: every core when a caller waits for it, all but one when queries are
    being served meanwhile (they are answered exactly during the build and need a core: on 2 cores a
    two-thread build under 16 clients pushed query p99 past 3 s). ``HYBRIDMEM_HNSW_BUILD_THREADS``
    overrides both."""
    env = os.environ.get("HYBRIDMEM_HNSW_BUILD_THREADS", "").strip()
    if env:
        try:
            return max(1, int(env))
        except ValueError:
            log.warning("HYBRIDMEM_HNSW_BUILD_THREADS=%r is not an integer; ignored", env)
    cores = os.cpu_count() or 1
    return max(1, cores - 1) if background else cores


log = logging.getLogger(__name__)

#: indexes whose HNSW build thread was started: cancelled and waited for at interpreter exit, so an
#: index nobody closed does not abort the process either
_BUILDING: weakref.WeakSet[DenseIndex] = weakref.WeakSet()


@atexit.register
def _cancel_builds() -> None:
    for idx in list(_BUILDING):
        idx.close(timeout=10.0)


class DenseIndex:
    def __init__(
        self,
        dim: int,
        exact_threshold: int = 50_000,
        ef: int = 128,
        saved: HnswFile | None = None,
        hnsw_dtype: str = "f32",
    ) -> None:
        if hnsw_dtype not in HNSW_DTYPES:
            raise ValueError(f"hnsw_dtype must be one of {', '.join(HNSW_DTYPES)}, got {hnsw_dtype!r}")
        self.dim = dim
        self.hnsw_dtype = hnsw_dtype
        #: where the graph is saved once built, and restored from instead of rebuilt (retrieve/hnsw_file.py)
        self.saved = saved
        #: the graph in use was restored from ``saved`` (not built in this process)
        self.restored = False
        self.exact_threshold = exact_threshold
        self.ef = ef
        self.version = -1  # vector version of the store this index reflects; -1 = never loaded
        self._lock = threading.Lock()
        self._rowids = np.zeros(0, np.int64)
        self._matrix = np.zeros((0, dim), np.float32)
        self._n = 0
        self._alive = np.zeros(0, bool)
        self._pos: dict[int, int] = {}
        self._hnsw: Index | None = None  # usearch.index.Index, built lazily in a background thread
        self._hnsw_failed = False
        self._building = False
        self._thread: threading.Thread | None = None
        self.build_threads = 0  # threads of the last HNSW build started
        self._generation = 0  # bumped when positions change (load, compaction)
        self._masks = ArrayKeyedCache()  # allowed rowids -> positions of the allowed live rows

    def __len__(self) -> int:
        return int(self._alive[: self._n].sum())

    # ---------------------------------------------------------------- maintenance
    def load(self, version: int, rowids: np.ndarray, matrix: np.ndarray) -> None:
        with self._lock:
            n = len(rowids)
            self._rowids = np.asarray(rowids, np.int64).copy()
            self._matrix = (
                np.asarray(matrix, np.float32).reshape(n, self.dim) if n else np.zeros((0, self.dim), np.float32)
            )
            self._n = n
            self._alive = np.ones(n, bool)
            self._pos = {int(r): i for i, r in enumerate(self._rowids)}
            self._hnsw = None
            self._building = False
            self._generation += 1
            self.version = version

    def apply(self, version: int, add_ids: np.ndarray, add_vecs: np.ndarray, remove_ids: list[int]) -> None:
        """Apply one committed change (vectors added and removed) bringing the index to ``version``."""
        with self._lock:
            for r in remove_ids:
                p = self._pos.pop(int(r), None)
                if p is not None:
                    self._alive[p] = False
                    if self._hnsw is not None:
                        try:
                            self._hnsw.remove(int(r))
                        except Exception:  # pragma: no cover - usearch raises on unknown keys
                            pass
            m = len(add_ids)
            if m:
                need = self._n + m
                if need > len(self._rowids):
                    cap = max(need, int(len(self._rowids) * 1.5) + 64)
                    rowids = np.zeros(cap, np.int64)
                    rowids[: self._n] = self._rowids[: self._n]
                    matrix = np.zeros((cap, self.dim), np.float32)
                    matrix[: self._n] = self._matrix[: self._n]
                    alive = np.zeros(cap, bool)
                    alive[: self._n] = self._alive[: self._n]
                    # readers holding the old arrays keep a consistent (older) view
                    self._rowids, self._matrix, self._alive = rowids, matrix, alive
                replaced = []
                for j, r in enumerate(add_ids):
                    old = self._pos.get(int(r))
                    if old is not None:
                        self._alive[old] = False
                        replaced.append(int(r))
                    p = self._n + j
                    self._rowids[p] = r
                    self._matrix[p] = add_vecs[j]
                    self._alive[p] = True
                    self._pos[int(r)] = p
                if self._hnsw is not None:
                    if replaced:  # a rowid given a new vector: the graph holds the old one under its key
                        self._hnsw.remove(np.asarray(replaced, np.uint64))
                    self._hnsw.add(np.asarray(add_ids, np.uint64), graph_form(add_vecs, self.hnsw_dtype))
                self._n = need
            self.version = version
            dead = self._n - len(self._pos)
            if dead > 1024 and dead > self._n // 4:
                self._compact()

    def _compact(self) -> None:
        self._generation += 1
        keep = np.flatnonzero(self._alive[: self._n])
        self._rowids = self._rowids[keep].copy()
        self._matrix = self._matrix[keep].copy()
        self._n = len(keep)
        self._alive = np.ones(self._n, bool)
        self._pos = {int(r): i for i, r in enumerate(self._rowids)}

    def _start_hnsw_build(self, threads: int) -> None:
        """Build the HNSW graph in the background; queries are answered exactly until it is ready
        (a 100k build takes minutes on 2 cores: no query may wait for it)."""
        if self._building or self._hnsw is not None or self._hnsw_failed:
            return
        self._building = True
        self.build_threads = threads
        n0 = self._n
        rowids, matrix, alive = self._rowids[:n0].copy(), self._matrix[:n0], self._alive[:n0].copy()
        self._thread = threading.Thread(
            target=self._build_hnsw,
            args=(self._generation, n0, rowids, matrix, alive, self.version),
            daemon=True,
            name="hybridmem-hnsw",
        )
        _BUILDING.add(self)
        self._thread.start()

    def close(self, timeout: float | None = 30.0) -> None:
        """Cancel a running HNSW build and wait for it to leave usearch. A process that exits while
        a build thread is inside ``Index.add`` is aborted by the C++ runtime ("terminate called
        without an active exception"); the build stops at its next batch. Queries still work after
        (exactly, as before the build)."""
        with self._lock:
            self._generation += 1
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _build_hnsw(
        self, gen: int, n0: int, rowids: np.ndarray, matrix: np.ndarray, alive: np.ndarray, version: int
    ) -> None:
        """Build (or restore) the graph of the rows ``alive`` marks, as of the store's vector
        ``version``; then catch up with the writes made meanwhile and put it in use."""
        try:
            from usearch.index import Index

            hp = HNSW_PARAMS
            idx = Index(
                ndim=self.dim,
                metric=str(hp["metric"]),
                dtype=self.hnsw_dtype,
                connectivity=int(hp["connectivity"]),
                expansion_add=int(hp["expansion_add"]),
                expansion_search=self.ef,
            )
            live = np.flatnonzero(alive)
            restored = (
                self.saved.restore(self.dim, rowids, matrix, live, lambda x: graph_form(x, self.hnsw_dtype), version)
                if self.saved is not None
                else None
            )
            # inserted in a shuffled (seeded) order: rows arrive in ingest order, grouped by source and
            # language, and a graph built group by group strands some regions (on 19.5k real e5
            # vectors of five sets, in store order, 3 of 300 queries found none of their ten
            # neighbours; shuffled, none: docs/scaling.md)
            order = live[np.random.default_rng(0).permutation(len(live))]
            for s in range(0, len(order) if restored is None else 0, HNSW_BUILD_BATCH):
                if gen != self._generation:  # reloaded or compacted meanwhile: this build is moot
                    break
                part = order[s : s + HNSW_BUILD_BATCH]
                # read per batch: a caller that started waiting may have raised it
                idx.add(
                    rowids[part].astype(np.uint64),
                    graph_form(matrix[part], self.hnsw_dtype),
                    threads=self.build_threads,
                )
            if restored is not None:
                restored.expansion_search = self.ef  # type: ignore[misc]  # not kept in the file (restored: 64)
                idx, self.restored = restored, True
                if self.saved is not None and self.saved.changed * 10 > len(live):
                    self.saved.save(idx, version)  # over a tenth had changed: the next process starts here
            elif self.saved is not None and gen == self._generation:
                self.saved.save(idx, version)  # before it is shared: no write changes it while it is written
        except Exception as e:  # pragma: no cover - exact search keeps answering
            log.warning("HNSW build failed, staying exact: %s", e)
            with self._lock:
                self._hnsw_failed, self._building = True, False
            return
        with self._lock:
            if gen != self._generation:  # reloaded or compacted meanwhile: positions moved, start over
                self._building = False
                return
            # catch up with what changed during the build
            for p in range(n0):
                if alive[p] and not self._alive[p]:
                    try:
                        idx.remove(int(rowids[p]))
                    except Exception:  # pragma: no cover
                        pass
            new = np.flatnonzero(self._alive[n0 : self._n]) + n0
            if len(new):
                idx.add(self._rowids[new].astype(np.uint64), graph_form(self._matrix[new], self.hnsw_dtype))
            self._hnsw, self._building = idx, False

    @property
    def hnsw_ready(self) -> bool:
        return self._hnsw is not None

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Start the HNSW build if this index needs one, and wait for it (queries never wait: they
        are answered exactly meanwhile). True once no build is pending. ``timeout=0`` only starts
        the build, as a server does before taking traffic: it then leaves a core to the queries."""
        with self._lock:
            if len(self._pos) >= self.exact_threshold and self._hnsw is None:
                self._start_hnsw_build(build_threads(background=timeout == 0))
                if self._building and timeout != 0:
                    # a build a query started leaves a core to queries; a caller that waits wants it
                    # done: its next batches use every core
                    self.build_threads = max(self.build_threads, build_threads(background=False))
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._building:
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    @property
    def kind(self) -> str:
        if len(self._pos) < self.exact_threshold:
            return "exact"
        return "hnsw" if self._hnsw is not None else ("exact (hnsw building)" if self._building else "hnsw (not built)")

    # ---------------------------------------------------------------- search
    def search(self, q: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        """Top-k (rowid, cosine) among live rows, restricted to ``allowed`` rowids when given."""
        q = np.asarray(q, np.float32).reshape(-1)
        if q.shape[0] != self.dim:
            raise ValueError(f"query vector has dim {q.shape[0]}, index has {self.dim}")
        with self._lock:
            n, rowids, matrix, alive = self._n, self._rowids, self._matrix, self._alive
            live, gen = len(self._pos), (self._generation, self.version)
            big = live >= self.exact_threshold
            if big and self._hnsw is None:
                self._start_hnsw_build(build_threads(background=True))
            hnsw = self._hnsw if big and allowed is None else None
            filtered_hnsw = self._hnsw if big and allowed is not None else None
        if n == 0 or k <= 0:
            return []
        if hnsw is not None:
            if self.hnsw_dtype == "f32":
                m = hnsw.search(q, k)
                return [(int(key), float(1.0 - dist)) for key, dist in zip(m.keys, m.distances)]
            m = hnsw.search(graph_form(q, self.hnsw_dtype), min(live, k * RESCORE_FACTOR))
            return self._rescored(np.asarray(m.keys, np.int64), q, k, rowids, matrix)
        if allowed is not None and filtered_hnsw is not None:
            hits = self._hnsw_filtered(filtered_hnsw, q, k, allowed, live)
            if hits is not None:
                return hits
        if allowed is None:
            cand = None if alive[:n].all() else np.flatnonzero(alive[:n])
        else:
            cand = self._allowed_positions(allowed, gen, n, rowids, alive)
            if len(cand) == 0:
                return []
        with query_blas():  # one BLAS thread: the other legs and queries hold the other cores
            if cand is None:
                scores = matrix[:n] @ q
            elif len(cand) * 8 < n:
                scores = matrix[cand] @ q  # a selective filter: gather the few allowed rows
            else:
                scores = (matrix[:n] @ q)[cand]  # a broad one: one matmul beats copying most of the matrix
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
        top = top[np.argsort(-scores[top], kind="stable")]
        pos = top if cand is None else cand[top]
        return [(int(rowids[p]), float(scores[t])) for p, t in zip(pos, top)]

    def _allowed_positions(
        self, allowed: np.ndarray, gen: tuple[int, int], n: int, rowids: np.ndarray, alive: np.ndarray
    ) -> np.ndarray:
        """Positions of the live rows ``allowed`` names, cached per allowed array (Memory hands the same
        array for a repeated filter until the chunks change) and index state."""
        hit: np.ndarray | None = self._masks.get(allowed, (gen, n))
        if hit is not None:
            return hit
        cand = np.flatnonzero(np.isin(rowids[:n], allowed) & alive[:n])
        self._masks.put(allowed, (gen, n), cand)
        return cand

    def _hnsw_filtered(
        self, hnsw: Index, q: np.ndarray, k: int, allowed: np.ndarray, live: int
    ) -> list[tuple[int, float]] | None:
        """Over-fetch from the graph and keep allowed rows; None when too few survive (go exact)."""
        share = len(allowed) / max(live, 1)
        if share < HNSW_FILTER_MIN_SHARE:
            return None
        compressed = self.hnsw_dtype != "f32"
        want = min(live, int(np.ceil(k * (RESCORE_FACTOR if compressed else 1) / share * 2)) + 10)
        m = hnsw.search(graph_form(q, self.hnsw_dtype), want)
        keys = np.asarray(m.keys, np.int64)
        srt = allowed if _is_sorted(allowed) else np.sort(allowed)
        at = np.minimum(np.searchsorted(srt, keys), len(srt) - 1)
        ok = srt[at] == keys
        if int(ok.sum()) < min(k, len(allowed)):
            return None
        if compressed:
            with self._lock:
                rowids, matrix = self._rowids, self._matrix
            return self._rescored(keys[ok][: k * RESCORE_FACTOR], q, k, rowids, matrix)
        keys, dists = keys[ok][:k], np.asarray(m.distances)[ok][:k]
        return [(int(key), float(1.0 - d)) for key, d in zip(keys, dists)]

    def _rescored(
        self, keys: np.ndarray, q: np.ndarray, k: int, rowids: np.ndarray, matrix: np.ndarray
    ) -> list[tuple[int, float]]:
        """The candidates a compressed graph proposed, scored exactly against the float32 matrix
        (``rowids`` / ``matrix``: the arrays the query read); the top k by (score, rowid)."""
        pos = self._pos
        found = [(int(key), p) for key in keys if (p := pos.get(int(key))) is not None]
        # a rowid rewritten since the lookup (its position moved) is scored where the arrays hold it
        found = [(r, p) for r, p in found if p < len(rowids) and rowids[p] == r]
        if not found:
            return []
        at = np.fromiter((p for _, p in found), np.int64, len(found))
        scores = matrix[at] @ q
        order = sorted(range(len(found)), key=lambda i: (-float(scores[i]), found[i][0]))[:k]
        return [(found[i][0], float(scores[i])) for i in order]


def _is_sorted(a: np.ndarray) -> bool:
    return len(a) < 2 or bool(np.all(a[1:] >= a[:-1]))
