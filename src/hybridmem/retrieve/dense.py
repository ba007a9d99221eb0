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
import hashlib
import logging
import math
import os
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import config
from ..config import HNSW_DTYPES
from .blas import query_blas
from .cache import ArrayKeyedCache
from .dense_graph import HNSW_FILTER_MIN_SHARE, RESCORE_FACTOR, GraphSearch
from .dense_rows import PREAD_ROWS, Rows, graph_form
from .hnsw_file import HnswFile, Mapped
from .positions import Positions

if TYPE_CHECKING:
    from usearch.index import Index

__all__ = ["DenseIndex", "HNSW_FILTER_MIN_SHARE", "HNSW_PARAMS", "PREAD_ROWS", "RESCORE_FACTOR", "Rows", "graph_form"]

#: how the graph is built (a saved graph built otherwise is not restored); the vectors' dtype is the
#: index's own (``DenseIndex.hnsw_dtype``)
HNSW_PARAMS: dict[str, str | int] = {"metric": "ip", "connectivity": 16, "expansion_add": 128}


#: writes since a mapped graph was opened (vectors it lacks + keys it holds stale) past which it is
#: merged in the background (read into memory, brought up to date, saved, used): the writes are
#: scored exactly meanwhile, and a graph whose stale keys are many is over-fetched
MAPPED_DELTA_MIN = 10_000
#: ... or past this share of the graph's vectors
MAPPED_DELTA_SHARE = 0.05


#: vectors per usearch ``add`` call of a build: between calls the build picks up a raised thread
#: count (a caller started waiting for it) and a cancelled generation (``close`` waits at most one
#: call: ~2 s on one core at 384 dimensions)
HNSW_BUILD_BATCH = 4_096


def checkpoint_every() -> float:
    """Seconds between a build's checkpoints: ``HYBRIDMEM_HNSW_CHECKPOINT_S`` (0 = after every
    batch), else :data:`config.HNSW_CHECKPOINT_S`; a value that is not a number ≥ 0 is logged and
    the default used."""
    raw = os.environ.get(config.HNSW_CHECKPOINT_ENV, "").strip()
    if not raw:
        return config.HNSW_CHECKPOINT_S
    try:
        value = float(raw)
        if not math.isfinite(value) or value < 0:
            raise ValueError(raw)
    except ValueError:
        log.warning(
            "%s=%r is not a number of seconds ≥ 0: checkpointing every %.0f s",
            config.HNSW_CHECKPOINT_ENV,
            raw,
            config.HNSW_CHECKPOINT_S,
        )
        return config.HNSW_CHECKPOINT_S
    return value


def rows_digest(rowids: np.ndarray) -> str:
    """A digest of a build's rows (their rowids in order): a checkpoint resumes only the build of
    the very same rows, whose seeded order is then the same."""
    return hashlib.sha1(np.ascontiguousarray(rowids, np.int64).tobytes()).hexdigest()


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


class DenseIndex(GraphSearch):
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
        self._matrix = Rows(dim)
        self._n = 0
        self._alive = np.zeros(0, bool)
        self._pos = Positions()
        self._hnsw: Index | None = None  # usearch.index.Index, built lazily in a background thread
        #: the graph is a read-only view of the saved file (:meth:`load_mapped`); writes since are
        #: ``_delta`` (positions the graph lacks, scored exactly) and ``_stale`` (keys it holds that
        #: are removed or replaced: dropped from its answers) until a merge
        self.mapped = False
        self._delta: list[int] = []
        self._stale: list[int] = []
        self._stale_sorted = np.zeros(0, np.int64)
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
        """The store's vectors; a memory-mapped ``matrix`` (a large namespace's, LocalLegs) is kept
        as the rows' read-only base, writes going to the in-memory tail."""
        with self._lock:
            n = len(rowids)
            self._rowids = np.asarray(rowids, np.int64).copy()
            if n and isinstance(matrix, np.memmap):
                self._matrix = Rows(self.dim, base=matrix.reshape(n, self.dim))
            else:
                self._matrix = Rows(
                    self.dim,
                    tail=np.asarray(matrix, np.float32).reshape(n, self.dim) if n else None,
                )
            self._n = n
            self._alive = np.ones(n, bool)
            self._pos = Positions(self._rowids)
            self._hnsw = None
            self._unmap()
            self._building = False
            self._generation += 1
            self.version = version

    def load_mapped(self, mapped: Mapped) -> None:
        """Use a saved graph and its vectors in place (``HnswFile.open``): the rows a memory map, the
        graph a read-only view, both as of ``mapped.version``; the caller then applies the writes
        made since (:meth:`apply`: they go to the delta)."""
        with self._lock:
            n = len(mapped.rowids)
            self._rowids = np.asarray(mapped.rowids, np.int64)
            self._matrix = Rows(self.dim, base=mapped.matrix, file=mapped.file)
            self._n = n
            self._alive = np.ones(n, bool)
            self._pos = Positions(self._rowids)  # no 10M-entry dict before the first answer
            mapped.index.expansion_search = self.ef  # type: ignore[misc]  # not kept in the file
            self._hnsw, self.restored, self._building = mapped.index, True, False
            self._unmap()
            self.mapped = True
            self._generation += 1
            self.version = mapped.version

    def sample_mapped(self, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """Up to ``n`` live rowids of the mapped rows, drawn reproducibly, ascending, with their rows
        (a new process compares them with the store's before trusting the file)."""
        with self._lock:
            nb = self._matrix.nb
            live = np.flatnonzero(self._alive[:nb])
            pick = np.sort(np.random.default_rng(seed).choice(live, size=min(n, len(live)), replace=False))
            rowids = self._rowids[pick]
            order = np.argsort(rowids, kind="stable")
            return rowids[order], self._matrix[pick[order]]

    def _unmap(self) -> None:
        self.mapped = False
        self._delta, self._stale = [], []
        self._stale_sorted = np.zeros(0, np.int64)

    def apply(self, version: int, add_ids: np.ndarray, add_vecs: np.ndarray, remove_ids: list[int]) -> None:
        """Apply one committed change (vectors added and removed) bringing the index to ``version``."""
        with self._lock:
            for r in remove_ids:
                p = self._pos.pop(int(r), None)
                if p is not None:
                    self._alive[p] = False
                    if self.mapped:
                        self._stale.append(int(r))
                    elif self._hnsw is not None:
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
                    alive = np.zeros(cap, bool)
                    alive[: self._n] = self._alive[: self._n]
                    # readers holding the old arrays keep a consistent (older) view
                    self._rowids, self._alive = rowids, alive
                    self._matrix.reserve(cap, self._n)
                replaced = []
                for j, r in enumerate(add_ids):
                    old = self._pos.get(int(r))
                    if old is not None:
                        self._alive[old] = False
                        replaced.append(int(r))
                    p = self._n + j
                    self._rowids[p] = r
                    self._matrix.put(p, add_vecs[j])
                    self._alive[p] = True
                    self._pos[int(r)] = p
                if self.mapped:  # the view cannot change: the new rows are the delta, replaced keys stale
                    self._stale.extend(replaced)
                    self._delta.extend(range(self._n, need))
                elif self._hnsw is not None:
                    if replaced:  # a rowid given a new vector: the graph holds the old one under its key
                        self._hnsw.remove(np.asarray(replaced, np.uint64))
                    self._hnsw.add(np.asarray(add_ids, np.uint64), graph_form(add_vecs, self.hnsw_dtype))
                self._n = need
            self.version = version
            if self.mapped:  # dead rows of the map cost no memory; a merge rewrites the file
                self._stale_sorted = np.unique(np.asarray(self._stale, np.int64))
                hnsw = self._hnsw
                if hnsw is not None and len(self._delta) + len(self._stale) > max(
                    MAPPED_DELTA_MIN, MAPPED_DELTA_SHARE * len(hnsw)
                ):
                    self._start_hnsw_build(build_threads(background=True), merge=True)
                return
            dead = self._n - len(self._pos)
            if dead > 1024 and dead > self._n // 4:
                self._compact()

    def _compact(self) -> None:
        self._generation += 1
        keep = np.flatnonzero(self._alive[: self._n])
        self._rowids = self._rowids[keep].copy()
        self._matrix = Rows(self.dim, tail=self._matrix[keep])
        self._n = len(keep)
        self._alive = np.ones(self._n, bool)
        self._pos = Positions(self._rowids)

    def _start_hnsw_build(self, threads: int, merge: bool = False) -> None:
        """Build the HNSW graph in the background; queries are answered exactly until it is ready
        (a 100k build takes minutes on 2 cores: no query may wait for it). ``merge``: the graph in
        use is a mapped view; the saved graph is read into memory and brought up to date with the
        writes since (its delta), saved, and used instead (the view answers meanwhile)."""
        if self._building or (self._hnsw is not None and not merge) or self._hnsw_failed:
            return
        self._building = True
        self.build_threads = threads
        n0 = self._n
        # the rows object itself: rows below n0 never change in place (writes append; a compaction
        # makes a new one and bumps the generation, which cancels this build)
        rowids, matrix, alive = self._rowids[:n0].copy(), self._matrix, self._alive[:n0].copy()
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

    def _build_hnsw(self, gen: int, n0: int, rowids: np.ndarray, matrix: Rows, alive: np.ndarray, version: int) -> None:
        """Build (or restore) the graph of the rows ``alive`` marks, as of the store's vector
        ``version``; then catch up with the writes made meanwhile and put it in use."""
        try:
            idx = self._new_graph()
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
            start, digest = 0, ""
            if restored is None and self.saved is not None:
                # a checkpoint of a build of these very rows (a process stopped mid-build) resumes
                digest = rows_digest(rowids[live])
                resumed = self.saved.resume_partial(version, digest)
                if resumed is not None:
                    idx, start = resumed
                    idx.expansion_search = self.ef  # type: ignore[misc]  # not kept in the file
                    log.info("resuming the HNSW build at %d of %d rows", start, len(live))
            every, last = checkpoint_every(), time.monotonic()
            for s in range(start, len(order) if restored is None else 0, HNSW_BUILD_BATCH):
                if gen != self._generation:  # reloaded or compacted meanwhile: this build is moot
                    break
                part = order[s : s + HNSW_BUILD_BATCH]
                # read per batch: a caller that started waiting may have raised it
                idx.add(
                    rowids[part].astype(np.uint64),
                    graph_form(matrix[part], self.hnsw_dtype),
                    threads=self.build_threads,
                )
                done = s + len(part)
                if self.saved is not None and done < len(order) and time.monotonic() - last >= every:
                    self.saved.save_partial(idx, version, digest, done)
                    last = time.monotonic()
            # the graph's vectors in its file's order (the next process maps them), written a block at a time
            rows = (rowids[live], lambda i, j: matrix[live[i:j]])
            if restored is not None:
                restored.expansion_search = self.ef  # type: ignore[misc]  # not kept in the file (restored: 64)
                idx, self.restored = restored, True
                if self.saved is not None and (self.saved.changed * 10 > len(live) or self.mapped):
                    # over a tenth had changed, or a mapped graph's delta merged: the next process starts here
                    self.saved.save(idx, version, rows)
            elif self.saved is not None and gen == self._generation:
                if self.saved.save(idx, version, rows):  # before it is shared: no write changes it while it is written
                    self.saved.drop_partial()
        except Exception as e:  # pragma: no cover - exact search keeps answering
            log.warning("HNSW build failed, staying exact: %s", e)
            with self._lock:
                self._hnsw_failed, self._building = True, False
            return
        self._adopt_graph(idx, gen, n0, rowids, alive)

    def _new_graph(self) -> Any:
        """An empty usearch graph of this index's dimension, dtype and HNSW parameters."""
        from usearch.index import Index

        hp = HNSW_PARAMS
        return Index(
            ndim=self.dim,
            metric=str(hp["metric"]),
            dtype=self.hnsw_dtype,
            connectivity=int(hp["connectivity"]),
            expansion_add=int(hp["expansion_add"]),
            expansion_search=self.ef,
        )

    def _adopt_graph(self, idx: Any, gen: int, n0: int, rowids: np.ndarray, alive: np.ndarray) -> None:
        """Put a graph built of the first ``n0`` rows in use, after the writes made during the build
        (unless the index was reloaded or compacted meanwhile: then the build is dropped)."""
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
            self._unmap()

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
            hnsw = self._hnsw if big else None
            # a mapped graph's writes since: what it lacks, what it holds stale (snapshots: apply appends)
            delta = np.asarray(self._delta, np.int64) if self.mapped else None
            stale = self._stale_sorted if self.mapped else None
        if n == 0 or k <= 0:
            return []
        if hnsw is not None:
            hits = self._graph_search(hnsw, q, k, allowed, live, rowids, matrix, alive, delta, stale)
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
                scores = matrix.dot(q, n)
            elif len(cand) * 8 < n:
                scores = matrix[cand] @ q  # a selective filter: gather the few allowed rows
            else:
                scores = matrix.dot(q, n)[cand]  # a broad one: one matmul beats copying most of the matrix
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
