"""The server's query-embedding coalescer: same vectors as the model, one model call for the queries
that arrive together, errors reach every waiting query, and Memory accepts it as its embedder."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from hybridmem import Memory
from hybridmem.embed import create_embedder
from hybridmem.errors import EmbedderError
from hybridmem.server.embedding import CoalescingEmbedder


def test_vectors_equal_the_models_own() -> None:
    co, raw = CoalescingEmbedder("hash:64"), create_embedder("hash:64")
    try:
        assert (co.name, co.dim) == (raw.name, raw.dim)
        for text in ("HEL-4040", "pool exhausted", "数据库连接池"):
            assert np.array_equal(co.embed_query(text), raw.embed_query(text))
        docs = ["a b c", "d e f"]
        assert np.array_equal(co.embed_documents(docs), raw.embed_documents(docs))
        co.warm_up()
        assert co.queries == 4 and co.batches == 4  # one at a time: nothing to coalesce
    finally:
        co.close()


def test_concurrent_queries_share_model_calls() -> None:
    co = CoalescingEmbedder("hash:64")
    calls: list[int] = []
    inner = co._query
    gate = threading.Event()
    original = inner._embed

    def slow_embed(texts: list[str], *, is_query: bool) -> np.ndarray:
        calls.append(len(texts))
        gate.wait(2)  # the first call blocks until every thread has queued its query
        return original(texts, is_query=is_query)

    inner._embed = slow_embed  # type: ignore[method-assign]
    out: dict[int, np.ndarray] = {}
    threads = [threading.Thread(target=lambda i=i: out.__setitem__(i, co.embed_query(f"query {i}"))) for i in range(12)]
    try:
        for t in threads:
            t.start()
        deadline = time.monotonic() + 10
        # the first (blocked) call holds one or a few queries; wait until every other one is queued
        while not calls or calls[0] + co._queue.qsize() < 12:
            assert time.monotonic() < deadline, (calls, co._queue.qsize())
            time.sleep(0.01)
        gate.set()
        for t in threads:
            t.join(timeout=10)
    finally:
        co.close()
    assert sorted(out) == list(range(12))
    raw = create_embedder("hash:64")
    assert all(np.array_equal(out[i], raw.embed_query(f"query {i}")) for i in range(12))
    # 12 queries, at most 2 model calls (the first call's batch, then every query that waited behind it)
    assert len(calls) <= 2 and sum(calls) == 12 and co.batches == len(calls) and co.queries == 12


def test_a_failing_model_fails_every_waiting_query() -> None:
    co = CoalescingEmbedder("hash:64")

    def broken(texts: list[str], *, is_query: bool) -> np.ndarray:
        raise EmbedderError("model crashed")

    co._query._embed = broken  # type: ignore[method-assign]
    try:
        with pytest.raises(EmbedderError, match="model crashed"):
            co.embed_query("x")
        with pytest.raises(EmbedderError):
            co.embed_query("y")  # the batching thread survived the first failure
    finally:
        co.close()


def test_memory_runs_on_it(tmp_path: Path) -> None:
    co = CoalescingEmbedder("hash")
    with Memory(tmp_path / "m.db", embedder=co, auto_embed=False) as mem:
        mem.add("PostgreSQL pool exhaustion causes HTTP 504.", id="pool")
        mem.wait_for_vectors()
        resp = mem.search("pool exhaustion", mode="vector")
        assert resp.results[0].doc_id == "pool" and resp.legs["dense"].status == "ok"
    co.close()
    # the store records the model's own name: a plain Memory opens it afterwards
    with Memory(tmp_path / "m.db", embedder="hash", auto_embed=False) as mem:
        assert mem.search("pool", mode="vector").results[0].doc_id == "pool"
