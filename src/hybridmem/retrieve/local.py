"""LocalLegs: the BM25 and dense legs over in-process indexes loaded from the store.

Each namespace's BM25 postings (:class:`SparseIndex`) and dense index (:class:`DenseIndex`) are
loaded on first use and kept in step with the store through its version counters: a write of this
process is applied to them before its lock is released (:meth:`LocalLegs.commit`); a change the
process did not make (another process, a server sharing a PostgreSQL database) is seen as a version
gap and replayed from the store's change logs (``store.sql.changelog``): the chunks or vectors it
added and removed, read again. Only a gap the log does not cover (a reindex, a log pruned past the index's
version) reloads the index. A filter's allowed rowids are cached per (namespace, filter) and caught
up from the same changes instead of re-running the filter over every chunk.
"""

from __future__ import annotations

import logging
import tempfile
import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from pathlib import Path
from typing import Protocol, TypeVar

import numpy as np

from ..errors import EmbedderMismatchError
from ..filters import Filter
from ..lru import LRU
from ..store.base import Allowed, Store, WriteResult
from ..store.sql import changelog as changelog_sql
from ..text.tokenize import TOKENIZER_VERSION
from . import sparse_file
from .dense import HNSW_PARAMS, DenseIndex
from .hnsw_file import HnswFile
from .sparse import SparseIndex
from .sparse_file import PROBE, SparseFile
from .types import LegHit, QueryEncoder

__all__ = ["LocalLegs", "CHUNK_LOG_LEN", "ALLOWED_LOCK_STRIPES"]

log = logging.getLogger(__name__)

#: committed chunk changes remembered per namespace for catching up cached filter results
CHUNK_LOG_LEN = 256
ALLOWED_LOCK_STRIPES = 16


class _Versioned(Protocol):
    version: int


_I = TypeVar("_I", bound=_Versioned)


class LocalLegs:
    """The legs of the embedded backend. Thread-safe: queries run concurrently with one writer."""

    def __init__(self, store: Store, executor: Executor, *, exact_threshold: int, hnsw_dtype: str = "f32") -> None:
        self.store = store
        self.executor = executor
        self.exact_threshold = exact_threshold
        self.hnsw_dtype = hnsw_dtype
        self.dense_indexes: dict[str, DenseIndex] = {}
        self.sparse_indexes: dict[str, SparseIndex] = {}
        # one load at a time per kind of index (a BM25 and a dense load may run at once)
        self._sparse_lock = threading.Lock()
        self._dense_lock = threading.Lock()
        #: held from a write's commit until its change is applied to the loaded indexes
        self.write_lock = threading.RLock()
        self._allowed_cache = LRU(64)  # (namespace, filter) -> (chunk version, sorted allowed rowids)
        # one evaluation of a filter at a time (striped by key): concurrent queries with the same
        # filter wait for it and reuse its result instead of all scanning every chunk at once
        self._allowed_locks = [threading.Lock() for _ in range(ALLOWED_LOCK_STRIPES)]
        # namespace -> recent committed chunk changes (version, rowids added, rowids removed), in order:
        # a cached allowed set catches up from them instead of re-running its filter over every chunk
        self._chunk_log: dict[str, deque[tuple[int, np.ndarray, np.ndarray]]] = {}
        self._sparse_files: dict[str, SparseFile] = {}

    # ------------------------------------------------------------------ the legs
    def sparse(self, namespace: str, terms: Sequence[str], allowed: Allowed | None, k: int) -> list[LegHit]:
        if not terms:
            return []
        return self.sparse_index(namespace).search(list(terms), k, None if allowed is None else allowed.rowids)

    def dense(self, namespace: str, text: str, encoder: QueryEncoder, allowed: Allowed | None, k: int) -> list[LegHit]:
        idx = self.dense_index(namespace)
        if len(idx) == 0:
            return []  # nothing embedded yet: do not even load the model
        q = encoder.vector(text)
        if q.shape[0] != idx.dim:
            raise EmbedderMismatchError(self.store.embedder_info()[0] or "?", idx.dim, encoder.name, q.shape[0])
        return idx.search(q, k, None if allowed is None else allowed.rowids)

    def holding(self, namespace: str, terms: Sequence[str], rowids: Sequence[int]) -> set[int]:
        return self.sparse_index(namespace).holding(terms, rowids) if terms and rowids else set()

    def doc_freqs(self, namespace: str, terms: Sequence[str]) -> tuple[int, dict[str, int]]:
        return self.sparse_index(namespace).doc_freqs(terms)

    def allowed(self, namespace: str, flt: Filter) -> Allowed:
        return Allowed(flt, rowids=self._allowed_rowids(namespace, flt))

    def allowed_rowids(self, namespace: str, allowed: Allowed) -> np.ndarray:
        return allowed.rowids if allowed.rowids is not None else self._allowed_rowids(namespace, allowed.flt)

    # ------------------------------------------------------------------ loading and readiness
    def prepare(self, namespace: str, mode: str) -> None:
        """Load the indexes a query of ``mode`` needs that this process has never loaded, before its
        legs start and outside their timeout, the two at once. At 1M chunks the BM25 postings take
        ~30 s to load: a first query whose BM25 leg ran into the 30 s leg timeout meanwhile answered
        without BM25 (bench/latency.py's probe). Later queries find them loaded."""
        jobs: list[Callable[[], object]] = []
        if mode in ("bm25", "hybrid") and namespace not in self.sparse_indexes:
            jobs.append(lambda: self.sparse_index(namespace))
        if mode in ("vector", "hybrid") and namespace not in self.dense_indexes:
            jobs.append(lambda: self.dense_index(namespace))
        if not jobs:
            return
        try:
            others = [self.executor.submit(job) for job in jobs[1:]]
            jobs[0]()
            for f in others:
                f.result()
        except Exception as e:  # the legs load again and report it as their error
            log.warning("loading the indexes of %r before the query failed: %s: %s", namespace, type(e).__name__, e)

    def wait_ready(self, namespace: str, timeout: float | None = None) -> bool:
        self.prepare(namespace, "hybrid")  # both at once when neither is loaded yet
        self.sparse_index(namespace)
        return self.dense_index(namespace).wait_ready(timeout)

    def dense_kind(self, namespace: str, n_vectors: int) -> str:
        idx = self.dense_indexes.get(namespace)
        return idx.kind if idx is not None else ("hnsw" if n_vectors >= self.exact_threshold else "exact")

    def reset_dense(self) -> None:
        with self.write_lock:
            gone = list(self.dense_indexes.values())
            self.dense_indexes.clear()
        for idx in gone:
            idx.close()

    def close(self) -> None:
        self.save_sparse()
        for idx in list(self.dense_indexes.values()):
            idx.close()

    def dense_index(self, namespace: str) -> DenseIndex:
        def load(idx: DenseIndex | None) -> DenseIndex:
            if idx is not None and idx.version >= 0 and self._replay_dense(namespace, idx) is not None:
                return idx  # another process's vectors, applied from the change log
            if idx is None and (mapped := self._mapped_dense(namespace)) is not None:
                return mapped  # this process's first load: the saved graph and vectors, mapped
            v, rowids, matrix = self.store.load_vectors(namespace, alloc=self._vector_rows)
            dim = matrix.shape[1] if matrix.size else (self.store.embedder_info()[1] or 0)
            if idx is None or idx.dim != dim:
                idx = DenseIndex(
                    dim,
                    exact_threshold=self.exact_threshold,
                    saved=self._hnsw_file(namespace, dim),
                    hnsw_dtype=self.hnsw_dtype,
                )
            idx.load(v, rowids, matrix)
            return idx

        return self._synced(
            self.dense_indexes, self._dense_lock, namespace, lambda: self.store.vector_version(namespace), load
        )

    def _vector_rows(self, n: int, dim: int) -> np.ndarray:
        """Where a namespace's ``n`` vectors are read to be indexed: in memory below the graph's
        threshold; from it on, beside a store file, a memory-mapped file of their own (unlinked at
        once: it lives as long as the map), so that the rows are pages the kernel can evict while
        the graph is built. At 10M chunks of 384 dimensions they are 15.4 GB, and the graph another
        ~6 GB: in memory, beside the graph, they did not fit on a 24 GB machine."""
        path = self._store_file()
        if n < self.exact_threshold or path is None:
            return np.empty((n, dim), np.float32)
        where = Path(path + ".hnsw")
        where.mkdir(exist_ok=True)
        f = tempfile.TemporaryFile(dir=where, prefix=".load-")
        f.truncate(n * dim * 4)
        rows = np.memmap(f, dtype=np.float32, mode="r+", shape=(n, dim))
        f.close()  # the map keeps the file
        return rows

    def _mapped_dense(self, namespace: str) -> DenseIndex | None:
        """The namespace's dense index over its saved graph and vectors, memory-mapped and brought to
        the store's vector version through the change log, without reading a vector but the writes
        since (at 1M: the checksums, instead of 1.5 GB of vectors read and a graph restored); None
        when there is no such saved pair, it is refused (logged), or the log does not reach it."""
        info = self.store.embedder_info()
        dim = info[1] or 0
        saved = self._hnsw_file(namespace, dim) if dim else None
        if saved is None:
            return None
        version = self.store.vector_version(namespace)
        opened = saved.open(version, min_count=self.exact_threshold)
        if opened is None:
            return None
        idx = DenseIndex(dim, exact_threshold=self.exact_threshold, saved=saved, hnsw_dtype=self.hnsw_dtype)
        idx.load_mapped(opened)
        if self._replay_dense(namespace, idx) is None:
            log.warning(
                "the saved HNSW graph of %r is older than the store's vector log; loading the vectors", namespace
            )
            return None
        rowids, rows = idx.sample_mapped(PROBE, seed=len(idx))
        ids, vecs = self.store.vectors_for(rowids.tolist(), namespace) if len(rowids) else (np.zeros(0, np.int64), None)
        order = np.argsort(ids)
        if not np.array_equal(ids[order], rowids) or (vecs is not None and not np.array_equal(vecs[order], rows)):
            log.warning("the saved vectors of %r differ from the store's; loading the vectors", namespace)
            return None
        return idx

    def _store_file(self) -> str | None:
        """The store's file, or None (in memory, or not a file: PostgreSQL)."""
        return self.store.capabilities.file

    def _writable(self) -> bool:
        return self._store_file() is not None and not self.store.capabilities.read_only

    def _sparse_dir(self) -> tuple[Path, str | None, bool] | None:
        """Where BM25 postings are saved, the identity of the store they belong to, and whether
        this process saves there: beside an SQLite file (``<db>.bm25/``; saved unless the store is
        read-only); for a database server, the directory its ``bm25_snapshot_dir`` option names,
        shared by every database saved there (hence the identity: its masked URL and schema);
        None when neither."""
        path = self._store_file()
        if path is not None:
            return Path(path + ".bm25"), None, self._writable()
        caps = self.store.capabilities
        if not caps.snapshot_dir:
            return None
        return Path(caps.snapshot_dir), caps.snapshot_key, True

    def _saves_sparse(self) -> bool:
        where = self._sparse_dir()
        return where is not None and where[2]

    def _sparse_file(self, namespace: str) -> SparseFile | None:
        """Where the namespace's BM25 postings are saved (:meth:`_sparse_dir`), described by the
        tokenizer that produced them; None in memory, read-only, or on a server without the option."""
        where = self._sparse_dir()
        if where is None:
            return None
        f = self._sparse_files.get(namespace)
        if f is None:
            f = self._sparse_files[namespace] = SparseFile(
                where[0],
                namespace,
                {"tokenizer": TOKENIZER_VERSION},
                lambda version: self.store.chunk_mark(namespace, version),
                identity=where[1],
            )
        return f

    def save_sparse(self) -> None:
        """Save every loaded BM25 index that is current and changed since its last save (at close:
        the next process starts from here instead of reading every chunk's tokens)."""
        if not self._saves_sparse():
            return
        for ns, sp in list(self.sparse_indexes.items()):
            saved = self._sparse_file(ns)
            if saved is None or len(sp) < sparse_file.SNAPSHOT_MIN or sp.version in (-1, saved.saved_version):
                continue
            try:
                if sp.version == self.store.chunk_version(ns):
                    saved.save(sp)
            except Exception as e:  # closing must not fail for a snapshot
                log.warning("could not save the BM25 postings of %r: %s: %s", ns, type(e).__name__, e)

    def _hnsw_file(self, namespace: str, dim: int) -> HnswFile | None:
        """Where the namespace's HNSW graph is saved: beside a writable store file (``<db>.hnsw/``),
        described by the embedder, dimension and graph parameters it was built with; None in memory."""
        path = self._store_file()
        if path is None or not self._writable():
            return None
        describe = {"embedder": self.store.embedder_info()[0], "dim": dim, **HNSW_PARAMS, "dtype": self.hnsw_dtype}
        return HnswFile(
            Path(path + ".hnsw"),
            namespace,
            describe,
            mark_of=lambda version: self.store.vector_mark(namespace, version),
            changes_since=lambda version: self.store.vector_changes_since(namespace, version),
        )

    def sparse_index(self, namespace: str) -> SparseIndex:
        def load(sp: SparseIndex | None) -> SparseIndex:
            saved = self._sparse_file(namespace)
            if sp is None and saved is not None:  # this process's first load: the snapshot, if current
                got = saved.restore(
                    self.store.chunk_version(namespace),
                    self.store.chunk_count(namespace),
                    lambda rowids: self.store.tokens_for(namespace, rowids),
                    lambda idx: self._replay(namespace, idx),
                )
                if got is not None:
                    return got
            if sp is not None and sp.version >= 0 and self._replay(namespace, sp) is not None:
                return sp  # another process's writes, applied from the change log
            sp = sp or SparseIndex()
            sp.load(*self.store.load_tokens(namespace))
            if saved is not None and self._saves_sparse() and len(sp) >= sparse_file.SNAPSHOT_MIN:
                # for the next process; in the background, the query does not wait for the disk
                saved.save_in_background(sp)
            return sp

        return self._synced(
            self.sparse_indexes, self._sparse_lock, namespace, lambda: self.store.chunk_version(namespace), load
        )

    def _synced(
        self,
        cache: dict[str, _I],
        lock: threading.Lock,
        ns: str,
        version: Callable[[], int],
        load: Callable[[_I | None], _I],
    ) -> _I:
        """The cached index of ``ns`` if it reflects the store's ``version()``, else (re)loaded from
        the store by ``load(old_index_or_None)``; double-checked so concurrent queries load it once.

        An index one step behind is nearly always this process's own write, committed and about
        to be applied (the writer holds the write lock from commit to apply): the query waits for
        that apply — milliseconds — instead of reloading the namespace, which at 50k chunks costs
        seconds and restarts a background HNSW build. Only a change the writer could not apply
        (another process wrote the file, the index was marked stale) leads to a reload."""
        idx = cache.get(ns)
        if idx is not None and idx.version == version():
            return idx
        if idx is not None and idx.version >= 0:
            with self.write_lock:
                pass  # an in-flight write of ours has applied its change once this is free
            if idx.version == version():
                return idx
        with lock:
            idx = cache.get(ns)
            v = version()
            if idx is None or idx.version != v:
                idx = cache[ns] = load(idx)
        return idx

    # ------------------------------------------------------------------ writes
    def commit(self, write: Callable[[], WriteResult]) -> WriteResult:
        with self.write_lock:
            res = write()
            self._apply(res)
        return res

    def _apply(self, res: WriteResult) -> None:
        """Bring loaded indexes up to date with a committed write (or mark them stale). The write
        is committed: a failure here must not reach its caller, only force a reload."""
        for ns, version, added, removed in res.chunk_changes:
            log_ = self._chunk_log.setdefault(ns, deque(maxlen=CHUNK_LOG_LEN))
            log_.append((version, np.asarray(added, np.int64), np.asarray(removed, np.int64)))
        try:
            self._apply_changes(res)
        except Exception as e:
            log.warning("in-memory index update failed (%s: %s); reloading from the store", type(e).__name__, e)
            for ns, *_ in res.chunk_changes:
                if (sp := self.sparse_indexes.get(ns)) is not None:
                    sp.version = -1
            for ns, *_ in res.vec_changes:
                if (idx := self.dense_indexes.get(ns)) is not None:
                    idx.version = -1

    def _apply_changes(self, res: WriteResult) -> None:
        for ns, version, added, removed in res.chunk_changes:
            sp = self.sparse_indexes.get(ns)
            if sp is None:
                continue
            if sp.version >= version:
                continue  # already replayed from the change log by a query meanwhile
            if sp.version != version - 1:
                # another process wrote in between: its change and ours, from the change log
                if sp.version < 0 or self._replay(ns, sp) is None:
                    sp.version = -1
                continue
            sp.apply(version, self.store.tokens_for(ns, added) if added else [], removed)
            if (saved := self._sparse_files.get(ns)) is not None and self._saves_sparse():
                saved.unsaved += len(added) + len(removed)
                if len(sp) >= sparse_file.SNAPSHOT_MIN and saved.due(len(sp)):
                    saved.save_in_background(sp)
        for ns, version, added, removed in res.vec_changes:
            idx = self.dense_indexes.get(ns)
            if idx is None:
                continue
            if idx.version >= version:
                continue  # already replayed from the change log by a query meanwhile
            if idx.version != version - 1:
                # another writer got in between: its change and ours, from the change log
                if idx.version < 0 or self._replay_dense(ns, idx) is None:
                    idx.version = -1  # reload on next query
                continue
            ids, vecs = self.store.vectors_for(added, ns) if added else (np.zeros(0, np.int64), None)
            if vecs is not None and len(ids) and vecs.shape[1] != idx.dim:
                idx.version = -1  # loaded empty before the dimension was known: reload on next query
                continue
            idx.apply(version, ids, vecs if vecs is not None else np.zeros((0, idx.dim), np.float32), removed)

    def _replay(self, ns: str, sp: SparseIndex) -> int | None:
        """Bring ``sp`` to the store's current chunk version through the change log: the chunks the
        changes since its version added (those still there, read again) and removed, applied as one
        change (``changelog_sql.net``). Returns the number of chunks changed, or None when the log
        does not hold every change (``sp`` untouched: the caller reloads)."""

        def apply(version: int, added: np.ndarray, removed: np.ndarray) -> bool:
            sp.apply(version, self.store.tokens_for(ns, added.tolist()) if len(added) else [], removed.tolist())
            return True

        return _replayed(self.store.chunk_changes_since(ns, sp.version), apply, f"chunk changes of {ns!r}")

    def _replay_dense(self, ns: str, idx: DenseIndex) -> int | None:
        """``idx`` brought to the store's current vector version through its change log, as
        :meth:`_replay` does for BM25; None (``idx`` untouched) when the log does not hold every
        change or the vectors are of another dimension (the caller reloads)."""

        def apply(version: int, added: np.ndarray, removed: np.ndarray) -> bool:
            ids, vecs = self.store.vectors_for(added.tolist(), ns) if len(added) else (np.zeros(0, np.int64), None)
            if vecs is None or not len(ids):
                vecs = np.zeros((0, idx.dim), np.float32)
            elif vecs.shape[1] != idx.dim:
                return False
            idx.apply(version, ids, vecs, removed.tolist())
            return True

        return _replayed(self.store.vector_changes_since(ns, idx.version), apply, f"vector changes of {ns!r}")

    # ------------------------------------------------------------------ filters
    def _allowed_rowids(self, ns: str, flt: Filter) -> np.ndarray:
        """Sorted rowids a filter allows at the store's current chunk version, cached per (namespace,
        filter): agents repeat filters. A cached set a few writes behind catches up from those
        writes' changes (their added chunks alone are tested against the filter) instead of
        re-running the filter over every chunk: at 50k chunks with writes arriving several times a
        second, a full re-run per write made every filtered query cost a ~100 ms scan."""
        key = (ns, repr(flt))  # repr: a filter's equality has 0 == False and 1 == 1.0
        version = self.store.chunk_version(ns)
        hit = self._allowed_cache.get(key)
        if hit is not None and hit[0] == version:
            rows: np.ndarray = hit[1]
            return rows
        # the first queries of a filter, and those after each write, arrive together under load: one
        # evaluates or catches up, the others find its result (16 clients on a warm 50k-chunk server:
        # the start-up burst of first evaluations went from 0.92 to 0.50 s, docs/server.md)
        with self._allowed_locks[hash(key) % ALLOWED_LOCK_STRIPES]:
            version = self.store.chunk_version(ns)
            hit = self._allowed_cache.get(key)
            if hit is not None and hit[0] >= version:
                rows = hit[1]
                return rows
            caught = self._allowed_catch_up(ns, flt, hit, version) if hit is not None else None
            if caught is None:
                caught = self.store.filter_rowids(ns, flt)
                caught.sort()
            self._allowed_cache.put(key, (version, caught))
        return caught

    def _allowed_catch_up(self, ns: str, flt: Filter, hit: tuple[int, np.ndarray], version: int) -> np.ndarray | None:
        """``hit``'s allowed set brought from its version to ``version`` through the change log, or
        None when the log does not hold every change in between (another process wrote, a reindex)."""
        since = hit[0]
        for attempt in (0, 1):
            changes = [c for c in list(self._chunk_log.get(ns, ())) if since < c[0] <= version]
            if [c[0] for c in changes] == list(range(since + 1, version + 1)):
                break
            if attempt == 0:  # a write of ours committed, not yet logged: it logs before releasing the lock
                with self.write_lock:
                    pass
        else:  # not all ours: another process wrote, and the store's change log has every change
            logged = self.store.chunk_changes_since(ns, since)
            if logged is None:
                return None
            changes = [c for c in logged if c[0] <= version]
            if [c[0] for c in changes] != list(range(since + 1, version + 1)):
                return None
        added = np.concatenate([c[1] for c in changes])
        removed = np.concatenate([c[2] for c in changes] + [added])  # re-test added rows, keep none twice
        rows = hit[1][~np.isin(hit[1], removed)] if len(removed) else hit[1]
        if len(added):
            rows = np.union1d(rows, self.store.filter_rowids(ns, flt, among=np.unique(added)))
        return rows


def _replayed(
    changes: list[changelog_sql.ChunkChange] | None,
    apply: Callable[[int, np.ndarray, np.ndarray], bool],
    what: str,
) -> int | None:
    """``apply(version, added, removed)`` of ``changes`` taken as one; the rowids touched, or None
    when there is no complete log (``changes`` None) or ``apply`` declined."""
    if changes is None:
        return None
    if not changes:
        return 0
    version, added, removed = changelog_sql.net(changes)
    if not apply(version, added, removed):
        return None
    log.debug("replayed %d %s from the store's change log", len(changes), what)
    return len(added) + len(removed)
