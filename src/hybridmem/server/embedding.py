"""Query embeddings of concurrent requests, computed together: one model call per batch.

A served memory embeds one query per dense leg, and a bundled model pays a large fixed cost per
call: USE takes ~180 ms for one query but ~23 ms a query in a batch of 16 (measured on the 2-core
machine, see docs/server.md). Queries that arrive while a batch runs wait for the next batch (no
fixed delay: a lone query goes at once). The wrapper is an ``Embedder`` handed to ``Memory``.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

import numpy as np

from ..embed.base import BaseEmbedder, Embedder
from ..embed.registry import create_embedder, wants_separate_worker_instance

__all__ = ["CoalescingEmbedder"]

_STOP = object()


class CoalescingEmbedder:
    """``spec``: an embedder spec (``use``, ``e5``, ...). Documents (the background embedding
    worker) go to a second model instance for the bundled models, as ``Memory`` does, so queries
    never wait behind a document batch."""

    def __init__(self, spec: str, max_batch: int = 64) -> None:
        self.spec = spec
        self._query: Embedder = create_embedder(spec)
        self.name, self.dim = self._query.name, self._query.dim
        self.max_batch = max_batch
        self._docs: Embedder | None = None
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()  # (text, future) items and _STOP
        self._thread: threading.Thread | None = None
        #: how many query batches and queries were embedded (the mean batch size is the gain)
        self.batches = 0
        self.queries = 0

    # ------------------------------------------------------------------ Embedder protocol
    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if self._docs is None:
            with self._lock:
                if self._docs is None:
                    bundled = wants_separate_worker_instance(self.spec)
                    self._docs = create_embedder(self.spec) if bundled else self._query
        return self._docs.embed_documents(texts)

    def embed_query(self, text: str) -> np.ndarray:
        fut: Future[np.ndarray] = Future()
        self._start()
        self._queue.put((text, fut))
        return fut.result()

    def warm_up(self) -> None:
        """Load the model(s) now (bundled models load lazily, ~1-2 s each) rather than in a request."""
        self.embed_query("warm up")
        self.embed_documents(["warm up"])

    # ------------------------------------------------------------------ batching
    def _start(self) -> None:
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._loop, name="hybridmem-query-embed", daemon=True)
                    self._thread.start()

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            batch = [item]
            stop = False
            while len(batch) < self.max_batch:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is _STOP:
                    stop = True
                    break
                batch.append(nxt)
            self._run(batch)
            if stop:
                return

    def _run(self, batch: list[tuple[str, Future[np.ndarray]]]) -> None:
        texts = [t for t, _ in batch]
        try:
            vecs = self._embed_queries(texts)
        except BaseException as e:  # every waiting query gets the error (its dense leg reports it)
            for _, fut in batch:
                fut.set_exception(e)
            return
        self.batches += 1
        self.queries += len(batch)
        for (_, fut), v in zip(batch, vecs):
            fut.set_result(v)

    def _embed_queries(self, texts: list[str]) -> np.ndarray:
        q = self._query
        if not isinstance(q, BaseEmbedder):
            return np.stack([q.embed_query(t) for t in texts])
        # BaseEmbedder's own steps for a batch of queries (query role, shape check, normalisation)
        step = max(1, q.batch_size)
        parts = [
            q._checked(q._embed(texts[i : i + step], is_query=True), len(texts[i : i + step]))
            for i in range(0, len(texts), step)
        ]
        return np.vstack(parts)

    def close(self) -> None:
        if self._thread is not None:
            self._queue.put(_STOP)
            self._thread.join(timeout=5)
            self._thread = None

    def __repr__(self) -> str:
        return f"<CoalescingEmbedder {self.name} dim={self.dim}>"
