"""The embedders one memory runs, and its background embedding worker.

:class:`Embedders` holds the query-side model (loaded on first use, with a cache of query
vectors) and, for the bundled CPU models, a second instance for batch embedding so that queries
never wait behind a batch. :class:`EmbeddingWorker` drains the store's durable embedding queue in
batches on a daemon thread: writes never wait for a model, and a failing model keeps the queue
and retries with backoff.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from ..errors import EmbedderError, EmbedderMismatchError
from ..lru import LRU
from .base import Embedder
from .registry import create_embedder, embedder_name, wants_separate_worker_instance

__all__ = ["Embedders", "EmbeddingWorker"]

log = logging.getLogger(__name__)

#: a batch embedded faster than this is followed by a larger one (a look-up or hashing embedder)
FAST_BATCH_S = 0.05
#: the largest batch that growth reaches
MAX_FAST_BATCH = 1024

#: (chunk rowid, chunk id, text, text hash) of queued chunks, oldest first
PendingRows = Callable[[int], list[tuple[int, str, str, str]]]
#: stores (rowid, text hash, vector) triples; returns when the write is committed and applied
StoreVectors = Callable[[Sequence[tuple[int, str, np.ndarray]]], object]


class _Records(Protocol):
    """The store's record of its embedder (a Store is one)."""

    def embedder_info(self) -> tuple[str | None, int | None]: ...
    def set_embedder(self, name: str, dim: int | None) -> None: ...


class Embedders:
    """The query encoder (``name``, ``vector(text)``) and the worker's model of one memory.
    ``check(embedder)`` refuses a model whose name or dimension the store does not hold."""

    def __init__(self, spec: str | Embedder, check: Callable[[Embedder], None], *, cache_size: int = 512) -> None:
        self._check = check
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self._set(spec)

    def _set(self, spec: str | Embedder) -> None:
        self.spec = spec
        self.name = embedder_name(spec)
        self._query: Embedder | None = None if isinstance(spec, str) else spec
        self._worker: Embedder | None = None
        self._vectors = LRU(self._cache_size)  # query text -> query vector

    @property
    def loaded(self) -> Embedder | None:
        """The query model if it is loaded (an instance given by the caller always is)."""
        return self._query

    @property
    def query_model(self) -> Embedder:
        """The query-side embedder, loaded (and checked against the store) on first use."""
        if self._query is None:
            with self._lock:
                if self._query is None:
                    emb = create_embedder(self.spec)
                    self._check(emb)
                    self._query = emb
        return self._query

    @property
    def worker_model(self) -> Embedder:
        """The batch embedder: a second instance of a bundled CPU model, else the query model."""
        if self._worker is None:
            if wants_separate_worker_instance(self.spec):
                self._worker = create_embedder(self.spec)
            else:
                self._worker = self.query_model
            if self._worker is not self._query:
                self._check(self._worker)
        return self._worker

    def vector(self, text: str) -> np.ndarray:
        """The query vector of ``text`` (cached by text)."""
        v: np.ndarray | None = self._vectors.get(text)
        if v is not None:
            return v
        model = self.query_model
        v = model.embed_query(text)
        if v.shape != (model.dim,):
            raise EmbedderError(f"query vector has shape {v.shape}, expected ({model.dim},)")
        self._vectors.put(text, v)
        return v

    def adopt(self, store: _Records, check: bool) -> None:
        """Record the embedder in a new store; refuse another one than the store's (unless ``check``
        is off). An embedder instance has its dimension checked (or recorded) now."""
        stored, stored_dim = store.embedder_info()
        if stored is None:
            store.set_embedder(self.name, None)
        elif stored != self.name and check:
            raise EmbedderMismatchError(stored, stored_dim, self.name, None)
        given = self.loaded
        if given is not None and getattr(given, "dim", None) and check:
            self._check(given)

    def switch(self, embedder: str | Embedder) -> Embedder:
        """Use another embedder from now on (``Memory.reembed``); returns its loaded model."""
        new = create_embedder(embedder) if isinstance(embedder, str) else embedder
        self._set(embedder)
        self._query = new
        return new


class EmbeddingWorker:
    """Embeds queued chunks in batches: on a daemon thread (:meth:`start`, :meth:`wake`) or in the
    caller's thread (:meth:`embed_pending`, :meth:`wait`). ``error`` holds the last failure."""

    def __init__(
        self,
        embedders: Embedders,
        pending: PendingRows,
        pending_count: Callable[[], int],
        store_vectors: StoreVectors,
        *,
        batch_size: int,
    ) -> None:
        self.embedders = embedders
        self._pending = pending
        self._pending_count = pending_count
        self._store_vectors = store_vectors
        self.batch_size = batch_size
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()
        self._stop = threading.Event()
        self.error: str | None = None  # the current failure (None once a batch went through again)
        self.last_error: str | None = None
        self.error_at: float | None = None
        #: (monotonic time, vectors stored, seconds the batch took) of the recent batches
        self._batches: deque[tuple[float, int, float]] = deque(maxlen=4096)
        self.stored_total = 0
        self.busy_since: float | None = None  # a batch is being embedded since then
        #: batches taken from the queue and not yet stored, in any thread: another caller skips their
        #: rows and, finding nothing else queued, waits for them, so that when it returns every vector
        #: is stored and applied
        self._taken: set[int] = set()  # chunk rowids of those batches
        self._settled = threading.Condition()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def status(self, window: float = 60.0) -> dict[str, object]:
        """Progress for ``stats`` and ``/healthz``: vectors stored over the last ``window`` seconds
        and their rate, the queue, whether a batch is running (and for how long), the last error."""
        now = time.monotonic()
        recent = [b for b in list(self._batches) if now - b[0] <= window]
        last = self._batches[-1] if self._batches else None
        return {
            "running": self.running,
            "pending": self._pending_count(),
            "vectors_last_minute": sum(b[1] for b in recent),
            "vectors_per_s": round(sum(b[1] for b in recent) / window, 3),
            "stored_total": self.stored_total,
            "last_batch_s_ago": None if last is None else round(now - last[0], 1),
            "last_batch_took_s": None if last is None else round(last[2], 2),
            "batch_running_s": None if self.busy_since is None else round(now - self.busy_since, 1),
            "error": self.error,
            "last_error": self.last_error,
            "last_error_s_ago": None if self.error_at is None else round(now - self.error_at, 1),
        }

    def embed_pending(
        self,
        *,
        limit: int | None = None,
        batch_size: int | None = None,
        progress: Callable[[int], None] | None = None,
        stop: threading.Event | None = None,
    ) -> int:
        """Embed queued chunks (all, or ``limit``) in batches; returns how many vectors were stored.
        A batch that took under :data:`FAST_BATCH_S` is followed by one twice as large (up to
        :data:`MAX_FAST_BATCH`): a cheap embedder stores its vectors in a few transactions rather
        than one per ``batch_size``, a CPU model keeps its batch size."""
        batch_size = step = batch_size or self.batch_size
        emb = self.embedders.worker_model
        done = 0
        while limit is None or done < limit:
            if stop is not None and stop.is_set():
                break
            with self._settled:
                n = step if limit is None else min(step, limit - done)
                queued = self._pending(n + len(self._taken))
                rows = [r for r in queued if r[0] not in self._taken][:n]
                if not rows:
                    # the rows left are another thread's batch (or it has just stored the last ones:
                    # its commit empties the queue before it is applied to this process's indexes):
                    # wait for it rather than embed them twice or return before they are searchable
                    self._settled.wait_for(lambda: not self._taken)
                    if queued:
                        continue
                    break
                self._taken.update(r[0] for r in rows)
            t0 = time.monotonic()
            self.busy_since = t0
            try:
                vecs = emb.embed_documents([r[2] for r in rows])
                if vecs.shape != (len(rows), emb.dim):
                    raise EmbedderError(f"embedder returned {vecs.shape}, expected ({len(rows)}, {emb.dim})")
                self._store_vectors([(r[0], r[3], v) for r, v in zip(rows, vecs)])
            finally:
                self.busy_since = None
                with self._settled:
                    self._taken.difference_update(r[0] for r in rows)
                    self._settled.notify_all()
            now = time.monotonic()
            if now - t0 < FAST_BATCH_S and len(rows) == step:
                step = min(step * 2, max(batch_size, MAX_FAST_BATCH))
            self._batches.append((now, len(rows), now - t0))
            self.stored_total += len(rows)
            done += len(rows)
            if progress:
                progress(len(rows))
        return done

    def wait(self, timeout: float | None = None, progress: Callable[[int], None] | None = None) -> bool:
        """Embed in this thread until the queue is empty. True if done within ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._pending_count() > 0:
            if deadline is not None and time.monotonic() > deadline:
                return False
            self.embed_pending(limit=self.batch_size, progress=progress)
        return True

    def start(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="hybridmem-embed", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """Start the thread if needed and have it look at the queue now."""
        self.start()
        self._wake.set()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout)

    def resume(self) -> None:
        """Allow :meth:`start` again after :meth:`stop` (without starting the thread)."""
        self._stop.clear()

    def _loop(self) -> None:
        backoff = 1.0
        while not self._stop.is_set():
            try:
                n = self.embed_pending(limit=self.batch_size * 4, stop=self._stop)
                self.error = None
                backoff = 1.0
            except Exception as e:  # keep the queue; retry later
                self.error = self.last_error = f"{type(e).__name__}: {e}"
                self.error_at = time.monotonic()
                log.warning("embedding worker: %s (retry in %.0fs)", self.error, backoff)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 60.0)
                continue
            if n == 0:
                self._wake.wait(timeout=2.0)
                self._wake.clear()
