"""The HNSW graph's vectors in a compressed dtype (issue 18, "less memory"): ``f16`` or ``i8`` copies
propose candidates, rescored exactly against the float32 matrix. Scores stay exact cosines, recall
stays that of a float32 graph, writes reach the graph, a saved graph of another dtype is not restored,
and a bad choice is refused naming where it came from."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from test_dense import _built, clustered  # clustered unit vectors; wait for a graph build

from hybridmem import Memory
from hybridmem.errors import ValidationError
from hybridmem.retrieve.dense import RESCORE_FACTOR, DenseIndex, graph_form


def _loaded(v: np.ndarray, threshold: int, dtype: str) -> DenseIndex:
    """An index of 64-d ``v`` under rowids 1..n: exact below ``threshold`` vectors, else a graph of ``dtype``."""
    idx = DenseIndex(64, exact_threshold=threshold, hnsw_dtype=dtype)
    idx.load(1, np.arange(1, len(v) + 1), v)
    return idx


def _ids(hits: list[tuple[int, float]]) -> set[int]:
    return {r for r, _ in hits}


def test_graph_form_of_each_dtype() -> None:
    x = clustered(5)
    assert graph_form(x, "f32").dtype == np.float32 and np.array_equal(graph_form(x, "f32"), x)
    assert graph_form(x, "f16").dtype == np.float16
    q = graph_form(x, "i8")
    assert q.dtype == np.int8 and q.flags.c_contiguous
    # 127 levels for ±4/√dim: a unit vector's components of that size reach the end of the range
    edge = np.zeros((1, 64), np.float32)
    edge[0, 0], edge[0, 1] = 4 / 8, -1.0
    assert graph_form(edge, "i8")[0, :2].tolist() == [127, -127]
    # the dot products keep their order (up to rounding) on ordinary vectors
    dots = x @ x[0]
    idots = q.astype(np.int64) @ q[0].astype(np.int64)
    assert np.argmax(dots) == np.argmax(idots) == 0


@pytest.mark.parametrize("dtype", ["f16", "i8"])
def test_a_compressed_graph_returns_exact_scores_with_a_float32_graphs_recall(dtype: str) -> None:
    v = clustered(4000)
    exact, full, idx = (_loaded(v, threshold, d) for threshold, d in ((10**9, "f32"), (0, "f32"), (0, dtype)))
    _built(full, v[0])
    _built(idx, v[0])
    queries = clustered(150, seed=9)
    recall, recall_f32 = [], []
    for q in queries:
        truth = exact.search(q, 10)
        got = idx.search(q, 10)
        # exact float32 cosines, best first, whatever the graph's dtype
        for r, s in got:
            assert s == pytest.approx(float(v[r - 1] @ q), abs=1e-6)
        assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)
        recall.append(len(_ids(got) & _ids(truth)) / 10)
        recall_f32.append(len(_ids(full.search(q, 10)) & _ids(truth)) / 10)
    assert np.mean(recall) >= 0.99 * np.mean(recall_f32)
    # a broad filter over-fetches from the graph (RESCORE_FACTOR more) and stays a pre-filter
    allowed = np.arange(1, 4001, 2)
    for q in queries[:30]:
        got = idx.search(q, 10, allowed)
        assert len(got) == 10 and all(r % 2 == 1 for r, _ in got)
        for r, s in got:
            assert s == pytest.approx(float(v[r - 1] @ q), abs=1e-6)
    assert RESCORE_FACTOR >= 2


def test_writes_after_the_build_reach_a_compressed_graph() -> None:
    v = clustered(3000)
    idx = _loaded(v, 0, "i8")
    _built(idx, v[0])
    new = clustered(1, seed=7)
    idx.apply(2, np.array([5000]), new, [1])
    top = idx.search(new[0], 1)
    assert top[0][0] == 5000 and top[0][1] == pytest.approx(1.0, abs=1e-6)
    assert 1 not in _ids(idx.search(v[0], 10))
    # a rowid written again with another vector is scored with the new one (the graph's copy replaced)
    idx.apply(3, np.array([2]), new, [])
    assert {r for r, _ in idx.search(new[0], 2)} == {2, 5000}


def _docs(n: int) -> list[dict]:
    rng = random.Random(1)
    words = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=6)) for _ in range(1500)]
    return [{"id": f"d{i}", "text": " ".join(rng.choices(words, k=12))} for i in range(n)]


CHUNK = "d7_p1"  # chunk_size None: one chunk a document


def _graph(m: Memory) -> DenseIndex:
    idx = m.legs.dense_index("default")
    assert idx.wait_ready(timeout=120) and idx.hnsw_ready
    return idx


def test_a_saved_graph_is_restored_only_by_an_index_of_its_dtype(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with Memory(db, embedder="hash", exact_threshold=300, hnsw_dtype="i8", chunk_size=None) as m:
        docs = _docs(500)
        m.add_documents(docs)
        m.embed_pending()
        assert _graph(m).hnsw_dtype == "i8" and not _graph(m).restored
        text = docs[7]["text"]
    with Memory(db, embedder="hash", exact_threshold=300, hnsw_dtype="i8", chunk_size=None) as m:
        idx = _graph(m)
        assert idx.restored  # same dtype: restored, every vector compared in the graph's form
        assert m.search(text, mode="vector", top_k=1).results[0].chunk_id == CHUNK
    with Memory(db, embedder="hash", exact_threshold=300, chunk_size=None) as m:  # float32 now: rebuilt, not restored
        idx = _graph(m)
        assert idx.hnsw_dtype == "f32" and not idx.restored
        assert m.search(text, mode="vector", top_k=1).results[0].chunk_id == CHUNK


def test_an_unknown_dtype_is_refused_naming_its_source(tmp_path: Path, monkeypatch) -> None:
    with pytest.raises(ValidationError) as e:
        Memory(tmp_path / "a.db", embedder="hash", hnsw_dtype="f64")
    assert e.value.field == "hnsw_dtype" and "f64" in str(e.value)
    monkeypatch.setenv("HYBRIDMEM_HNSW_DTYPE", "bf16")
    with pytest.raises(ValidationError) as e:
        Memory(tmp_path / "b.db", embedder="hash")
    assert e.value.field == "HYBRIDMEM_HNSW_DTYPE" and "bf16" in str(e.value)
    assert not (tmp_path / "a.db").exists() and not (tmp_path / "b.db").exists()  # refused before opening
    monkeypatch.setenv("HYBRIDMEM_HNSW_DTYPE", " F16 ")
    with Memory(tmp_path / "c.db", embedder="hash", exact_threshold=10) as m:
        assert m.legs.hnsw_dtype == "f16"
    with pytest.raises(ValueError, match="hnsw_dtype"):
        DenseIndex(8, hnsw_dtype="f64")
