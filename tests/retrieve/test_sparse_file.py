"""Saved BM25 postings (issue 18): a new process reads the namespace's postings back instead of
reading and counting every chunk's tokens; a snapshot that is stale, foreign, of another tokenizer,
truncated, corrupt or of another store file is refused (logged) and the postings load from the
store; a save killed at any moment leaves a snapshot that is either exact or refused."""

from __future__ import annotations

import logging
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hybridmem import Memory
from hybridmem.retrieve import sparse_file
from hybridmem.retrieve.sparse import SparseIndex
from hybridmem.retrieve.sparse_file import SparseFile
from hybridmem.text.tokenize import query_tokens

NS = "default"
_R = random.Random(0)
WORDS = ["".join(_R.choices("abcdefghijklmnopqrstuvwxyz", k=6)) for _ in range(1500)]
QUERIES = [" ".join(_R.choices(WORDS[:200], k=3)) for _ in range(20)] + ["T-17", "T-401 ticket"]


@pytest.fixture(autouse=True)
def small_snapshots(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sparse_file, "SNAPSHOT_MIN", 50)


def _docs(rng: random.Random, n: int, start: int = 0) -> list[dict]:
    return [
        {"id": f"d{start + i}", "text": " ".join(rng.choices(WORDS, k=rng.randint(5, 30))) + f" ticket T-{start + i}"}
        for i in range(n)
    ]


def _open(db: Path) -> Memory:
    return Memory(db, embedder="hash", auto_embed=False)


def _bm25(m: Memory) -> dict[str, list[tuple[str, float]]]:
    return {q: [(r.chunk_id, r.rrf_score) for r in m.search(q, mode="bm25", top_k=10).results] for q in QUERIES}


def _from_store(m: Memory) -> SparseIndex:
    idx = SparseIndex()
    idx.load(*m.store.load_tokens(NS))
    return idx


def _no_store_load(m: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(ns: str):  # type: ignore[no-untyped-def]
        raise AssertionError("the postings were loaded from the store, not from the snapshot")

    monkeypatch.setattr(m.store, "load_tokens", refuse)


def _built(db: Path, n: int = 600) -> dict[str, list[tuple[str, float]]]:
    """A store whose snapshot reflects it: loaded, written to (replacements, deletes), closed."""
    rng = random.Random(1)
    with _open(db) as m:
        m.add_documents(_docs(rng, n))
        _bm25(m)  # loads the postings (and saves them in the background)
        m.add_documents(_docs(rng, 40, start=5))  # replaces d5..d44
        m.delete("d7")
        m.add_documents(_docs(rng, 30, start=n))
        want = _bm25(m)
    return want  # closing saved the postings at the last version


def test_a_new_process_reads_the_saved_postings_and_answers_the_same(tmp_path: Path, monkeypatch) -> None:
    db = tmp_path / "m.db"
    want = _built(db)
    assert list((tmp_path / "m.db.bm25").glob("*.postings"))
    m = _open(db)
    fresh = _from_store(m)  # the reference, read before the store's load is refused
    _no_store_load(m, monkeypatch)
    try:
        assert _bm25(m) == want
        idx = m.legs.sparse_index(NS)
        for q in QUERIES + [" ".join(WORDS[:64])]:
            terms = query_tokens(q)
            assert idx.search(terms, 50) == fresh.search(terms, 50)
        assert len(idx) == len(fresh) == 600 + 30 - 1
        # it keeps taking writes like an index loaded from the store
        m.add("a note about zebrafish quotas", id="z")
        assert m.search("zebrafish", mode="bm25").results[0].chunk_id.startswith("z_")
    finally:
        m.close()


def test_restored_postings_are_views_of_the_file_and_writes_copy_only_their_terms(tmp_path: Path, monkeypatch) -> None:
    """The snapshot's postings are read in place (int32 views of its memory map, shared by every
    process on the store); a write copies the terms it adds to and nothing else, and the index then
    answers exactly as one loaded from the store."""
    db = tmp_path / "m.db"
    _built(db)
    m = _open(db)
    try:
        _no_store_load(m, monkeypatch)
        _bm25(m)
        idx = m.legs.sparse_index(NS)
        assert idx._mapping is not None and all(isinstance(p[0], memoryview) for p in idx._post.values())
        m.add_documents([{"id": "w1", "text": f"{WORDS[3]} {WORDS[3]} zebrafish ticket T-9999"}])
        m.delete("d11")
        copied = {t for t, p in idx._post.items() if not isinstance(p[0], memoryview)}
        assert {"zebrafish", "t-9999"} <= copied and len(copied) <= 8  # the new chunk's terms only
        monkeypatch.undo()  # the reference reads the store
        fresh = _from_store(m)
        for q in QUERIES + [WORDS[3], "zebrafish", " ".join(WORDS[:64])]:
            terms = query_tokens(q)
            assert idx.search(terms, 50) == fresh.search(terms, 50)
    finally:
        m.close()
    with _open(db) as m:  # saved again at close, from views and arrays alike: read back the same
        assert m.search("zebrafish", mode="bm25").results[0].chunk_id == "w1_p1"


def test_the_snapshot_carries_each_terms_maxscore_bound(tmp_path: Path, monkeypatch) -> None:
    """A fresh process finds every term's weight bound in the snapshot (at 10M, computing them on
    first use cost 817 ms of the first 200 queries): each is the bound the postings give, the most
    frequent terms first when the cache is smaller than the vocabulary, and a snapshot without them
    (written by an older hybridmem) loads and answers the same."""
    from hybridmem.retrieve import bm25_score

    db = tmp_path / "m.db"
    want = _built(db)
    with _open(db) as m:
        _no_store_load(m, monkeypatch)
        idx = m.legs.sparse_index(NS)
        assert idx._bounds and set(idx._bounds) == set(idx._post)
        avgdl = idx._total_len / len(idx)
        for t, (n, bound, at) in idx._bounds.items():
            ps, tfs = idx._post[t]
            assert n == len(ps) and at == pytest.approx(avgdl)
            assert bound == pytest.approx(bm25_score._kernel.max_ratio(ps, tfs, idx._dl, 0, avgdl), abs=1e-12)
        assert _bm25(m) == want
    monkeypatch.undo()
    monkeypatch.setattr(sparse_file, "SNAPSHOT_MIN", 50)
    monkeypatch.setattr(bm25_score, "BOUND_CACHE", 40)
    with _open(db) as m:
        idx = m.legs.sparse_index(NS)
        common = sorted(idx._post, key=lambda t: -len(idx._post[t][0]))[:40]
        assert set(idx._bounds) == set(common)  # the terms with the most postings
        assert _bm25(m) == want
    # an older snapshot: the seven sections, no bounds (saved where the kernel is missing)
    monkeypatch.undo()
    monkeypatch.setattr(sparse_file, "SNAPSHOT_MIN", 50)
    kernel = bm25_score._kernel
    with _open(db) as m:
        idx = m.legs.sparse_index(NS)
        saved = m.legs._sparse_file(NS)
        monkeypatch.setattr(bm25_score, "_kernel", None)
        assert saved._save(idx)  # the same version written again, without the bounds section
        monkeypatch.setattr(bm25_score, "_kernel", kernel)
        m.legs.save_sparse = lambda: None  # nothing saved again at close
    with _open(db) as m:
        _no_store_load(m, monkeypatch)
        idx = m.legs.sparse_index(NS)
        assert idx._bounds == {} and _bm25(m) == want


def test_a_snapshot_newer_than_the_store_is_refused_and_the_store_answers(tmp_path: Path, caplog) -> None:
    """The store file put back from a backup while the snapshot beside it went on: a snapshot of a
    version the store has not reached (an older one is brought forward: tests/store/test_changelog.py)."""
    import shutil
    import sqlite3

    db, backup = tmp_path / "m.db", tmp_path / "backup.db"
    _built(db)
    with sqlite3.connect(db) as src, sqlite3.connect(backup) as dst:
        src.backup(dst)
    with _open(db) as m:
        _bm25(m)  # the postings loaded (restored): closing saves them at the newer version
        m.add("written after the backup: quokka", id="late")
    for side in ("", "-wal", "-shm"):
        Path(f"{db}{side}").unlink(missing_ok=True)
    shutil.copyfile(backup, db)
    with caplog.at_level(logging.WARNING, logger="hybridmem.retrieve.sparse_file"), _open(db) as m:
        assert not m.search("quokka", mode="bm25").results
        assert _bm25(m) == {q: [(h.chunk_id, h.rrf_score) for h in _ref(m, q)] for q in QUERIES}
    assert "reflects chunk version" in caplog.text


def _ref(m: Memory, q: str):  # type: ignore[no-untyped-def]
    return m.search(q, mode="bm25", top_k=10).results


def _damage(path: Path, how: str) -> None:
    data = bytearray(path.read_bytes())
    if how == "truncate":
        path.write_bytes(bytes(data[: len(data) // 2]))
    elif how == "flip":
        data[len(data) // 3] ^= 0x55
        path.write_bytes(bytes(data))
    elif how == "garbage":
        path.write_bytes(b"not a snapshot at all")


@pytest.mark.parametrize(
    "how, reason",
    [
        ("truncate", "truncated"),
        ("flip", "checksum"),
        ("garbage", "not a postings snapshot"),
        ("tokenizer", "another tokenizer"),
    ],
)
def test_a_damaged_or_foreign_snapshot_is_refused(tmp_path: Path, caplog, monkeypatch, how: str, reason: str) -> None:
    db = tmp_path / "m.db"
    want = _built(db)
    (path,) = (tmp_path / "m.db.bm25").glob("*.postings")
    if how == "tokenizer":
        from hybridmem.retrieve import local

        monkeypatch.setattr(local, "TOKENIZER_VERSION", "tokenizer-of-another-release")
    else:
        _damage(path, how)
    with caplog.at_level(logging.WARNING, logger="hybridmem.retrieve.sparse_file"), _open(db) as m:
        assert _bm25(m) == want
    assert reason in caplog.text


@pytest.mark.parametrize("caught_by", ["mark", "probe"])
def test_another_store_at_the_same_version_is_caught(tmp_path: Path, caplog, monkeypatch, caught_by: str) -> None:
    """The store file replaced by another that reached the same chunk version with as many chunks:
    the snapshot's description matches; the change-log mark of that version does not, and, for a
    snapshot saved without one, neither do the sampled chunks' tokens."""
    if caught_by == "probe":
        monkeypatch.setattr(SparseFile, "_mark", lambda self, version: None)
    db = tmp_path / "m.db"
    rng = random.Random(5)
    with _open(db) as m:
        m.add_documents(_docs(rng, 300))
        _bm25(m)
        m.add("one more", id="extra")  # a change since the load: closing saves
    for f in tmp_path.glob("m.db*"):
        if f.is_file():
            f.unlink()
    with _open(db) as m:  # same calls, other texts: same version, same count
        m.add_documents(_docs(random.Random(99), 300))
        m.add("one more", id="extra")
    with caplog.at_level(logging.WARNING, logger="hybridmem.retrieve.sparse_file"), _open(db) as m:
        got = _bm25(m)
        want = {q: [(h.chunk_id, h.rrf_score) for h in _ref(m, q)] for q in QUERIES}
        fresh = _from_store(m)
        assert got == want and len(m.legs.sparse_index(NS)) == len(fresh)
    if caught_by == "mark":
        assert "another history of the store" in caplog.text
    else:
        assert "differ from the snapshot" in caplog.text or "is not in the store" in caplog.text


CHILD = r"""
import sys
from hybridmem import Memory
from hybridmem.retrieve import sparse_file
m = Memory(sys.argv[1], embedder="hash", auto_embed=False)
idx = m.legs.sparse_index("default")
f = sparse_file.SparseFile(__import__("pathlib").Path(sys.argv[1] + ".bm25"), "default", {"tokenizer": "t"})
n = 0
while True:
    f.saved_version = -1  # write again (a save of the version already saved is skipped)
    f.save(idx)
    n += 1
    if n == 1:
        print("saved", flush=True)
"""


def test_sigkill_during_saves_leaves_an_exact_or_refused_snapshot(tmp_path: Path) -> None:
    """SIGKILL at random moments of repeated saves, 20 times: what is on disk restores to exactly
    the store's postings, or is refused; never a wrong index, never an exception."""
    db = tmp_path / "m.db"
    with _open(db) as m:
        m.add_documents(_docs(random.Random(2), 3000))
        version, live = m.store.chunk_version(NS), m.store.chunk_count(NS)
        truth = _from_store(m)
    restored = refused = 0
    store = Memory(db, embedder="hash", auto_embed=False)
    try:
        for i in range(20):
            child = subprocess.Popen([sys.executable, "-c", CHILD, str(db)], stdout=subprocess.PIPE, text=True)
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "saved"
            time.sleep(random.Random(i).uniform(0.0, 0.2))
            os.kill(child.pid, signal.SIGKILL)
            child.wait()
            f = SparseFile(Path(str(db) + ".bm25"), NS, {"tokenizer": "t"})
            idx = f.restore(version, live, lambda r: store.store.tokens_for(NS, r))
            if idx is None:
                refused += 1
                continue
            restored += 1
            for terms in (["ticket"], [WORDS[3], WORDS[9]], WORDS[:30]):
                assert idx.search(terms, 20) == truth.search(terms, 20)
            assert len(idx) == len(truth)
        leftovers = list(Path(str(db) + ".bm25").glob("*.tmp"))
    finally:
        store.close()
    assert restored >= 15, (restored, refused)  # the rename is atomic: the old file stays whole
    assert all(p.name.endswith(".tmp") for p in leftovers)


def test_no_snapshot_below_the_threshold(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(sparse_file, "SNAPSHOT_MIN", 1000)
    db = tmp_path / "m.db"
    with _open(db) as m:
        m.add_documents(_docs(random.Random(4), 200))
        assert _bm25(m)["T-17"][0][0].startswith("d17_")
    assert not (tmp_path / "m.db.bm25").exists()


def test_a_long_running_process_saves_again_after_a_tenth_changed(tmp_path: Path, monkeypatch) -> None:
    """Without a close (a crash, a kill): the snapshot is at most a tenth of the namespace behind,
    here exactly current, and the next process reads it."""
    monkeypatch.setattr(sparse_file, "RESAVE_MIN", 10)
    db, rng = tmp_path / "m.db", random.Random(8)
    m = _open(db)
    m.add_documents(_docs(rng, 600))
    _bm25(m)
    saved = m.legs._sparse_files[NS]

    def settled(version: int) -> bool:
        deadline = time.time() + 30
        while saved.saved_version != version and time.time() < deadline:
            time.sleep(0.02)
        with saved._saving:  # no save still running
            return saved.saved_version == version

    assert settled(m.store.chunk_version(NS))  # the save after the load
    m.add_documents(_docs(rng, 70, start=600))  # 70 >= 600 // 10
    assert settled(m.store.chunk_version(NS))
    want = _bm25(m)
    monkeypatch.setattr(m.legs, "save_sparse", lambda: None)  # as if killed: no save at close
    m.close()
    m2 = _open(db)
    _no_store_load(m2, monkeypatch)
    try:
        assert _bm25(m2) == want
    finally:
        m2.close()
