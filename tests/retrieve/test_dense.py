"""The dense index: exact search, deletes, and the HNSW graph built in the background (queries are
answered exactly until it is ready, then by the graph with high recall on clustered vectors)."""

from __future__ import annotations

import time

import numpy as np

from hybridmem.retrieve.dense import DenseIndex


def clustered(n: int, dim: int = 64, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(20, dim))
    x = centers[rng.integers(0, 20, n)] + 0.3 * rng.normal(size=(n, dim))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def test_exact_search_filters_and_deletes() -> None:
    v = clustered(500)
    idx = DenseIndex(64, exact_threshold=10**9)
    idx.load(1, np.arange(1, 501), v)
    top = idx.search(v[10], 5)
    assert top[0][0] == 11 and abs(top[0][1] - 1.0) < 1e-5
    assert [s for _, s in top] == sorted((s for _, s in top), reverse=True)
    allowed = np.array([3, 4, 5])
    assert {r for r, _ in idx.search(v[10], 5, allowed)} == {3, 4, 5}
    idx.apply(2, np.zeros(0, np.int64), np.zeros((0, 64), np.float32), [11])
    assert 11 not in {r for r, _ in idx.search(v[10], 5)}


def test_hnsw_builds_in_background_and_keeps_up_with_writes() -> None:
    v = clustered(3000)
    exact = DenseIndex(64, exact_threshold=10**9)
    exact.load(1, np.arange(1, 3001), v)
    idx = DenseIndex(64, exact_threshold=0)
    idx.load(1, np.arange(1, 3001), v)
    first = idx.search(v[0], 10)  # starts the build; answered exactly, never blocked
    assert first == exact.search(v[0], 10)
    deadline = time.monotonic() + 60
    while idx._building and time.monotonic() < deadline:
        time.sleep(0.05)
    assert idx.hnsw_ready and idx.kind == "hnsw"
    recall = np.mean(
        [len({r for r, _ in idx.search(q, 10)} & {r for r, _ in exact.search(q, 10)}) / 10 for q in v[:100]]
    )
    assert recall >= 0.95
    # writes after the build reach the graph: a new vector is found, a removed one is not
    new = clustered(1, seed=7)
    idx.apply(2, np.array([5000]), new, [1])
    assert idx.search(new[0], 1)[0][0] == 5000
    assert 1 not in {r for r, _ in idx.search(v[0], 10)}


def _built(idx: DenseIndex, probe: np.ndarray) -> None:
    idx.search(probe, 1)
    deadline = time.monotonic() + 60
    while idx._building and time.monotonic() < deadline:
        time.sleep(0.05)
    assert idx.hnsw_ready


def test_filtered_search_uses_the_graph_for_broad_filters_and_stays_a_pre_filter() -> None:
    v = clustered(3000)
    ids = np.arange(1, 3001)
    exact = DenseIndex(64, exact_threshold=10**9)
    exact.load(1, ids, v)
    idx = DenseIndex(64, exact_threshold=0)
    idx.load(1, ids, v)
    _built(idx, v[0])
    broad = ids[ids % 2 == 0]  # half the rows: over-fetch from the graph
    selective = ids[ids % 50 == 0]  # 2%: exact over the allowed rows
    recall = []
    for q in v[:60]:
        got = idx.search(q, 10, broad)
        assert len(got) == 10 and all(r % 2 == 0 for r, _ in got)
        recall.append(len({r for r, _ in got} & {r for r, _ in exact.search(q, 10, broad)}) / 10)
        assert idx.search(q, 10, selective) == exact.search(q, 10, selective)
    assert np.mean(recall) >= 0.95
    # a delete invalidates what was cached for the same allowed array, on both paths
    victim = idx.search(v[1], 1, broad)[0][0]
    idx.apply(2, np.zeros(0, np.int64), np.zeros((0, 64), np.float32), [victim])
    assert victim not in {r for r, _ in idx.search(v[1], 10, broad)}
    sel_victim = idx.search(v[1], 1, selective)[0][0]
    idx.apply(3, np.zeros(0, np.int64), np.zeros((0, 64), np.float32), [sel_victim])
    assert sel_victim not in {r for r, _ in idx.search(v[1], 60, selective)}
    # a filter allowing fewer rows than k returns all of them
    assert {r for r, _ in idx.search(v[2], 10, np.array([100, 200, 300]))} == {100, 200, 300}


def test_wait_for_indexes_builds_the_hnsw_graph(tmp_path) -> None:
    from hybridmem import Memory

    with Memory(tmp_path / "w.db", embedder="hash", auto_embed=False, exact_threshold=50) as m:
        m.add_documents([{"id": f"d{i}", "text": f"note {i} about graph readiness"} for i in range(120)])
        m.embed_pending()
        assert m.wait_for_indexes(timeout=60)
        assert m.stats().dense_index == "hnsw"
        assert m.search("note 7 about graph readiness", mode="vector", top_k=1).results[0].doc_id == "d7"


def test_a_build_started_while_serving_leaves_a_core_to_the_queries(monkeypatch) -> None:
    """A build a query (or a server's start-up, ``wait_ready(timeout=0)``) starts runs on all cores
    but one, so queries answered exactly meanwhile still get a core; a caller that waits for the
    build gets every core. The environment variable overrides both."""
    from hybridmem.retrieve import dense

    monkeypatch.delenv("HYBRIDMEM_HNSW_BUILD_THREADS", raising=False)
    monkeypatch.setattr(dense.os, "cpu_count", lambda: 4)
    assert (dense.build_threads(background=True), dense.build_threads(background=False)) == (3, 4)
    monkeypatch.setattr(dense.os, "cpu_count", lambda: 1)
    assert (dense.build_threads(background=True), dense.build_threads(background=False)) == (1, 1)
    monkeypatch.setattr(dense.os, "cpu_count", lambda: 2)
    v = clustered(300)
    by_query, by_server, waited = (DenseIndex(64, exact_threshold=0) for _ in range(3))
    for idx in (by_query, by_server, waited):
        idx.load(1, np.arange(1, 301), v)
    by_query.search(v[0], 5)
    by_server.wait_ready(timeout=0)
    assert waited.wait_ready(timeout=60) and waited.hnsw_ready
    assert (by_query.build_threads, by_server.build_threads, waited.build_threads) == (1, 1, 2)
    monkeypatch.setenv("HYBRIDMEM_HNSW_BUILD_THREADS", "5")
    assert dense.build_threads(background=True) == dense.build_threads(background=False) == 5
    monkeypatch.setenv("HYBRIDMEM_HNSW_BUILD_THREADS", "many")
    assert dense.build_threads(background=True) == 1  # not an integer: ignored, with a warning
    for idx in (by_query, by_server):
        assert idx.wait_ready(timeout=60) and idx.hnsw_ready


def test_a_caller_waiting_for_a_build_a_query_started_gives_it_every_core(monkeypatch) -> None:
    """A query starts the build on all cores but one; once a caller waits for it (eval, a benchmark,
    ``Memory.wait_for_indexes()``), the build's next batches use every core."""
    import threading

    from hybridmem.retrieve import dense

    monkeypatch.delenv("HYBRIDMEM_HNSW_BUILD_THREADS", raising=False)
    monkeypatch.setattr(dense.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(dense, "HNSW_BUILD_BATCH", 100)
    used: list[int] = []
    gate = threading.Event()
    from usearch.index import Index

    real_add = Index.add

    def add(self, keys, vectors, **kw):
        if "threads" in kw:  # the build's batches (catch-up adds pass no thread count)
            used.append(kw["threads"])
            gate.wait(timeout=30)  # hold the build until the caller below has started waiting
        return real_add(self, keys, vectors, **kw)

    monkeypatch.setattr(Index, "add", add)
    v = clustered(1000)
    idx = DenseIndex(64, exact_threshold=0)
    idx.load(1, np.arange(1, 1001), v)
    idx.search(v[0], 5)  # starts the build, one core left to queries
    assert idx.build_threads == 1
    deadline = time.monotonic() + 10
    while not used and time.monotonic() < deadline:  # the first batch has begun (held at the gate)
        time.sleep(0.01)
    waiter = threading.Thread(target=idx.wait_ready, kwargs={"timeout": 60})
    waiter.start()
    deadline = time.monotonic() + 10
    while idx.build_threads != 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    gate.set()
    waiter.join(timeout=60)
    assert idx.hnsw_ready and len(used) == 10
    assert used[0] == 1 and used[-1] == 2  # the batches after the caller started waiting use both cores
    top = idx.search(v[3], 1)
    assert top[0][0] == 4


def test_exact_scans_run_with_one_blas_thread_and_restore_it(monkeypatch) -> None:
    """numpy's OpenBLAS runs an exact scan on one thread (the other legs and queries hold the other
    cores) and gets its previous thread count back when the last concurrent scan ends."""
    import threading

    import pytest

    from hybridmem.retrieve import blas

    ctl = blas.numpy_openblas()
    if ctl is None:
        pytest.skip("numpy is not linked with its bundled OpenBLAS here: query_blas leaves BLAS alone")
    before = ctl.get_num_threads()
    ctl.set_num_threads(2)
    try:
        monkeypatch.delenv(blas.ENV, raising=False)
        seen: list[int] = []

        inside = threading.Barrier(2)
        release = threading.Event()

        def scan() -> None:
            with blas.query_blas():
                seen.append(ctl.get_num_threads())
                inside.wait(timeout=10)
                release.wait(timeout=10)

        ts = [threading.Thread(target=scan) for _ in range(2)]
        for t in ts:
            t.start()
        deadline = time.monotonic() + 10
        while len(seen) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert seen == [1, 1]
        release.set()
        for t in ts:
            t.join(timeout=10)
        assert ctl.get_num_threads() == 2  # restored once, by the last scan out

        # the index's exact search runs inside the scope
        v = clustered(100)
        idx = DenseIndex(64, exact_threshold=10**9)
        idx.load(1, np.arange(1, 101), v)
        calls: list[int] = []
        real = blas.query_blas

        def spy():
            calls.append(1)
            return real()

        monkeypatch.setattr("hybridmem.retrieve.dense.query_blas", spy)
        assert idx.search(v[7], 5)[0][0] == 8
        assert calls == [1]

        monkeypatch.setenv(blas.ENV, "keep")
        with blas.query_blas():
            assert ctl.get_num_threads() == 2
        monkeypatch.setenv(blas.ENV, "two")
        with pytest.raises(ValueError, match=blas.ENV):
            blas.scan_threads()
    finally:
        ctl.set_num_threads(before)


def test_the_server_process_limit_respects_the_users_openblas_setting(monkeypatch) -> None:
    """``hybridmem serve`` sets numpy's OpenBLAS to one thread, unless OPENBLAS_NUM_THREADS says otherwise."""
    import pytest

    from hybridmem.retrieve import blas

    ctl = blas.numpy_openblas()
    if ctl is None:
        pytest.skip("numpy is not linked with its bundled OpenBLAS here: limit_process_blas leaves BLAS alone")
    before = ctl.get_num_threads()
    try:
        ctl.set_num_threads(2)
        monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
        assert blas.limit_process_blas(1) is None and ctl.get_num_threads() == 2
        monkeypatch.delenv("OPENBLAS_NUM_THREADS")
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
        assert blas.limit_process_blas(1) == 1 and ctl.get_num_threads() == 1
        with blas.query_blas():  # a scan finds one thread already and leaves it so
            assert ctl.get_num_threads() == 1
        assert ctl.get_num_threads() == 1
    finally:
        ctl.set_num_threads(before)


def test_close_cancels_a_running_build_and_waits_for_it() -> None:
    v = clustered(30_000, dim=128)
    exact = DenseIndex(128, exact_threshold=10**9)
    exact.load(1, np.arange(1, 30_001), v)
    idx = DenseIndex(128, exact_threshold=0)
    idx.load(1, np.arange(1, 30_001), v)
    idx.build_threads = 1
    idx.search(v[0], 1)  # starts the build (several batches of HNSW_BUILD_BATCH)
    assert idx._building
    idx.close()
    assert idx._thread is not None and not idx._thread.is_alive()
    assert not idx._building and not idx.hnsw_ready  # cancelled, not finished behind our back
    assert idx.search(v[5], 10) == exact.search(v[5], 10)  # still answers, exactly


def test_a_process_closing_memory_during_a_build_exits_cleanly(tmp_path) -> None:
    """Without the join, the interpreter exits while the build thread is inside usearch and the C++
    runtime aborts the process ("terminate called without an active exception", exit -6)."""
    import subprocess
    import sys

    code = f"""
import numpy as np
from hybridmem import Memory
m = Memory({str(tmp_path / "b.db")!r}, embedder="hash", auto_embed=False, exact_threshold=100)
m.add_documents([{{"id": f"d{{i}}", "text": f"note {{i}} about pool {{i % 97}}"}} for i in range(20000)])
m.embed_pending()
m.search("pool 5", mode="vector")  # starts the HNSW build in the background
m.close()
"""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "terminate called" not in p.stderr
