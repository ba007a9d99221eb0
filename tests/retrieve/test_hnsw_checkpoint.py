"""A long HNSW build checkpoints its partial graph next to the store (issue 18: the 10M graph takes
hours on 2 cores), so that a process killed mid-build resumes from its last checkpoint instead of
starting over; a checkpoint of other rows, or a corrupt one, is refused (logged), dropped, and the
build starts over: never a graph of the wrong rows.

The build is killed for real (SIGKILL, in a child process, right after its third checkpoint); the
next process's build is counted row by row (``graph_form`` sees every batch it adds)."""

from __future__ import annotations

import json
import logging
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import hybridmem.retrieve.dense as dense
from hybridmem import Memory, config
from hybridmem.retrieve.dense import checkpoint_every

THRESHOLD = 300
BATCH = 200  # rows per usearch add in these builds (4,096 in the product)
N = 1_400
_R = random.Random(0)
WORDS = ["".join(_R.choices("abcdefghijklmnopqrstuvwxyz", k=7)) for _ in range(2000)]
QUERIES = [" ".join(_R.choices(WORDS[:300], k=3)) for _ in range(12)]

#: the child: builds with a checkpoint after every batch and is SIGKILLed right after the third
CHILD = f"""
import os, signal, sys
import hybridmem.retrieve.dense as dense
from hybridmem import Memory
from hybridmem.retrieve.hnsw_file import HnswFile
dense.HNSW_BUILD_BATCH = {BATCH}
save = HnswFile.save_partial
taken = []
def killed_after_three(self, *a, **k):
    ok = save(self, *a, **k)
    taken.append(ok)
    if len(taken) == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    return ok
HnswFile.save_partial = killed_after_three
m = Memory(sys.argv[1], embedder="hash", exact_threshold={THRESHOLD})
m.legs.dense_index("default").wait_ready(timeout=120)
print("finished without being killed", flush=True)
"""


def _docs(n: int, start: int = 0) -> list[dict]:
    rng = random.Random(start)
    return [{"id": f"d{start + i}", "text": " ".join(rng.choices(WORDS, k=12))} for i in range(n)]


def _store(tmp_path: Path) -> Path:
    db = tmp_path / "m.db"
    with Memory(db, embedder="hash", exact_threshold=10**9) as m:  # no graph yet
        m.add_documents(_docs(N))
        m.embed_pending()
    return db


def _kill_a_build(db: Path) -> None:
    env = {**__import__("os").environ, config.HNSW_CHECKPOINT_ENV: "0"}
    child = subprocess.run([sys.executable, "-c", CHILD, str(db)], env=env, capture_output=True, text=True, timeout=300)
    assert child.returncode == -9, child.stderr[-2000:]  # SIGKILLed, mid-build
    assert "finished" not in child.stdout


def _partial(db: Path) -> tuple[Path, dict]:
    metas = list((Path(str(db) + ".hnsw")).glob("*.partial.json"))
    assert len(metas) == 1
    return metas[0].with_name(metas[0].name.replace(".json", ".usearch")), json.loads(metas[0].read_text())


class Counted:
    """Rows each batch of a build adds, per index (every batch goes through graph_form). Per index:
    a build thread another test left running (daemon threads outlive their Memory) adds batches
    of the same size through the same patched function."""

    def __init__(self) -> None:
        self.by_index: dict[int, list[int]] = {}

    def rows(self, idx: object) -> int:
        return sum(self.by_index.get(id(idx), []))


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Counted:
    monkeypatch.setattr(dense, "HNSW_BUILD_BATCH", BATCH)
    seen = Counted()
    real = dense.graph_form

    def counting(x: np.ndarray, dtype: str) -> np.ndarray:
        owner = sys._getframe(1).f_locals.get("self")
        seen.by_index.setdefault(id(owner), []).append(len(x))
        return real(x, dtype)

    monkeypatch.setattr(dense, "graph_form", counting)
    return seen


def _recall(m: Memory, db: Path) -> float:
    with Memory(db, embedder="hash", exact_threshold=10**9) as exact:
        truth = {q: [r.chunk_id for r in exact.search(q, mode="vector", top_k=10).results] for q in QUERIES}
    got = {q: [r.chunk_id for r in m.search(q, mode="vector", top_k=10).results] for q in QUERIES}
    return sum(len(set(got[q]) & set(truth[q][:8])) / 8 for q in QUERIES) / len(QUERIES)


def test_a_build_killed_midway_resumes_from_its_last_checkpoint(
    tmp_path: Path, counted: Counted, caplog: pytest.LogCaptureFixture
) -> None:
    db = _store(tmp_path)
    _kill_a_build(db)
    graph, meta = _partial(db)
    assert meta["done"] == 3 * BATCH and graph.stat().st_size == meta["size"]
    caplog.set_level(logging.INFO, logger="hybridmem.retrieve.dense")
    with Memory(db, embedder="hash", exact_threshold=THRESHOLD) as m:
        idx = m.legs.dense_index("default")
        assert idx.wait_ready(timeout=120) and idx.hnsw_ready and not idx.restored
        assert f"resuming the HNSW build at {3 * BATCH} of {N} rows" in caplog.text
        assert counted.rows(idx) == N - 3 * BATCH  # only the rows the checkpoint did not hold
        assert _recall(m, db) >= 0.9
    hnsw = Path(str(db) + ".hnsw")
    assert not list(hnsw.glob("*.partial.*"))  # the finished graph was saved: the checkpoint is gone
    assert list(hnsw.glob("*.usearch")) and list(hnsw.glob("*.vectors"))


def test_a_checkpoint_of_other_rows_is_dropped(
    tmp_path: Path, counted: Counted, caplog: pytest.LogCaptureFixture
) -> None:
    db = _store(tmp_path)
    _kill_a_build(db)
    with Memory(db, embedder="hash", exact_threshold=10**9) as m:  # a write after the crash
        m.add_documents(_docs(1, start=N))
        m.embed_pending()
    with Memory(db, embedder="hash", exact_threshold=THRESHOLD) as m:
        idx = m.legs.dense_index("default")
        assert idx.wait_ready(timeout=120)
        assert "not resuming the HNSW build" in caplog.text and "another version, rows" in caplog.text
        assert counted.rows(idx) == N + 1  # started over
        assert _recall(m, db) >= 0.9
    assert not list(Path(str(db) + ".hnsw").glob("*.partial.*"))


def test_a_corrupt_checkpoint_is_refused(tmp_path: Path, counted: Counted, caplog: pytest.LogCaptureFixture) -> None:
    db = _store(tmp_path)
    _kill_a_build(db)
    graph, _ = _partial(db)
    data = bytearray(graph.read_bytes())
    data[len(data) // 2] ^= 0xFF
    graph.write_bytes(bytes(data))
    with Memory(db, embedder="hash", exact_threshold=THRESHOLD) as m:
        idx = m.legs.dense_index("default")
        assert idx.wait_ready(timeout=120)
        assert "its checksum does not match" in caplog.text
        assert counted.rows(idx) == N
        assert _recall(m, db) >= 0.9


def test_a_short_build_takes_no_checkpoint(tmp_path: Path, counted: Counted) -> None:
    db = _store(tmp_path)
    with Memory(db, embedder="hash", exact_threshold=THRESHOLD) as m:  # 10 minutes between checkpoints
        assert m.legs.dense_index("default").wait_ready(timeout=120)
    hnsw = Path(str(db) + ".hnsw")
    assert list(hnsw.glob("*.usearch")) and not list(hnsw.glob("*.partial.*"))


@pytest.mark.parametrize(
    ("raw", "every"),
    [
        ("", config.HNSW_CHECKPOINT_S),
        ("0", 0.0),
        ("30", 30.0),
        ("-1", config.HNSW_CHECKPOINT_S),
        ("soon", config.HNSW_CHECKPOINT_S),
        ("nan", config.HNSW_CHECKPOINT_S),
    ],
)
def test_the_checkpoint_interval(monkeypatch: pytest.MonkeyPatch, raw: str, every: float) -> None:
    monkeypatch.setenv(config.HNSW_CHECKPOINT_ENV, raw)
    assert checkpoint_every() == every


CHECKPOINTER = """
import sys, numpy as np
from pathlib import Path
from usearch.index import Index
from hybridmem.retrieve.hnsw_file import HnswFile
rng = np.random.default_rng(int(sys.argv[2]))
f = HnswFile(Path(sys.argv[1]), "default", {"embedder": "test", "dim": 32})
m = rng.standard_normal((8000, 32)).astype(np.float32)
m /= np.linalg.norm(m, axis=1, keepdims=True)
np.save(Path(sys.argv[1]) / "rows.npy", m)
idx = Index(ndim=32, metric="ip", dtype="f32", connectivity=16, expansion_add=128)
for j in range(0, 8000, 100):  # a build's batches, a checkpoint after each, until killed
    idx.add(np.arange(j, j + 100, dtype=np.uint64), m[j : j + 100])
    f.save_partial(idx, 7, "digest", j + 100)
    print(j + 100, flush=True)
"""


def test_sigkill_during_checkpoints_leaves_the_last_one_or_none(tmp_path: Path) -> None:
    """SIGKILL at random moments of a build's checkpoints, 20 times: what a resume finds is a
    checkpoint whose graph holds exactly the rows its description says (the first ``done`` of the
    order, each found by its own vector), or nothing; never a torn graph, never an exception."""
    from test_hnsw_file import kill_mid_save

    from hybridmem.retrieve.hnsw_file import HnswFile

    resumed = 0
    for i in range(20):
        d = tmp_path / f"c{i}"
        d.mkdir()
        kill_mid_save(CHECKPOINTER, d, i)
        got = HnswFile(d, "default", {"embedder": "test", "dim": 32}).resume_partial(7, "digest")
        if got is None:
            continue
        resumed += 1
        idx, done = got
        rows = np.load(d / "rows.npy")
        assert len(idx) == done and done % 100 == 0
        assert sorted(int(k) for k in idx.keys) == list(range(done))
        for r in (0, done // 2, done - 1):
            assert int(idx.search(rows[r], 1).keys[0]) == r
    assert resumed > 0
