"""The BM25 index's two scoring paths return the same list: ``search_exhaustive`` (every posting
of every term into one array, top-k through a sampled threshold) and ``search`` (which scores a
small allowed set chunk by chunk by binary search); both are BM25 by brute force, ties broken by
rowid. On random Zipfian corpora under adds, deletes, replacements and rowid re-use; on adversarial
ones (a term in every chunk, all-equal scores, 64-term queries, filters of every size); on the real
corpora of ../shared/data tokenized as ingest does; and with queries and writes in threads."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import numpy as np
import pytest

from hybridmem.retrieve import sparse
from hybridmem.retrieve.rwlock import RWLock
from hybridmem.retrieve.sparse import SparseIndex
from test_sparse import brute  # BM25 by brute force, in float64

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


class Counting:
    """Counts the queries answered by the chunk-by-chunk path."""

    def __init__(self, idx: SparseIndex) -> None:
        self.direct = 0
        real = idx._score_positions

        def wrapped(*a):  # type: ignore[no-untyped-def]
            self.direct += 1
            return real(*a)

        idx._score_positions = wrapped  # type: ignore[method-assign]


def check_top(got: list[tuple[int, float]], want: dict[int, float], k: int) -> None:
    """``got`` is the top-k of ``want`` (float64 brute force): same size, scores match, and every
    chunk left out scores no higher than the last one kept (up to float32 rounding)."""
    assert len(got) == min(k, len(want))
    for r, s in got:
        assert s == pytest.approx(want[r], rel=1e-5, abs=1e-6)
    if len(got) == k:
        kept = {r for r, _ in got}
        floor = min(s for _, s in got)
        assert all(s <= floor * (1 + 1e-5) + 1e-6 for r, s in want.items() if r not in kept)


def zipf_doc(rng: random.Random, vocab: list[str], weights: list[float]) -> list[str]:
    return rng.choices(vocab, weights, k=rng.randint(1, 40))


@pytest.mark.parametrize("seed", range(4))
def test_both_paths_equal_brute_force_under_writes(seed: int) -> None:
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(600)]
    weights = [1 / (i + 1) for i in range(len(vocab))]
    docs = {r: zipf_doc(rng, vocab, weights) for r in range(1, 1501)}
    idx = SparseIndex()
    idx.load(1, [(r, " ".join(t)) for r, t in docs.items()])
    seen = Counting(idx)
    for step in range(500):
        roll = rng.random()
        if roll < 0.15 and len(docs) > 10:  # delete
            r = rng.choice(list(docs))
            del docs[r]
            idx.apply(idx.version + 1, [], [r])
        elif roll < 0.3:  # add (max + 1: SQLite re-uses a deleted last rowid) or replace
            r = max(docs) + 1 if rng.random() < 0.7 else rng.choice(list(docs))
            docs[r] = zipf_doc(rng, vocab, weights)
            idx.apply(idx.version + 1, [(r, " ".join(docs[r]))], [])
        if rng.random() < 0.5:
            terms = rng.choices(vocab, weights, k=rng.randint(1, 8))
        else:
            terms = rng.sample(vocab[:50], rng.randint(1, 4)) + rng.sample(vocab, rng.randint(0, 4))
        k = rng.choice([1, 5, 10, 50])
        allowed = arr = None
        if rng.random() < 0.3:
            allowed = set(rng.sample(sorted(docs), min(len(docs), rng.choice([3, 40, 900]))))
            arr = np.array(sorted(allowed), dtype=np.int64)
        got = idx.search(terms, k, arr)
        assert got == idx.search_exhaustive(terms, k, arr), (step, terms, k)
        if step % 10 == 0:
            check_top(got, brute(docs, terms, allowed), k)
    assert seen.direct > 20  # both paths ran


def test_adversarial_corpora() -> None:
    rng = random.Random(3)
    # every chunk holds "the" (idf at its floor), chunks of equal text (equal scores: ties by rowid),
    # and a sprinkling of rare terms
    docs: dict[int, list[str]] = {}
    for r in range(1, 3001):
        if r % 3 == 0:
            docs[r] = ["the", "same", "text", "here"]
        else:
            docs[r] = ["the"] * rng.randint(1, 5) + rng.choices([f"r{i}" for i in range(2000)], k=rng.randint(0, 6))
    idx = SparseIndex()
    idx.load(1, [(r, " ".join(t)) for r, t in docs.items()])
    queries = [
        ["the"],
        ["same"],
        ["the", "same", "text"],
        ["the", "r7", "r8"],
        [f"r{i}" for i in range(64)],  # a long query
        ["the"] + [f"r{i}" for i in range(0, 2000, 31)],
        ["absent"],
    ]
    filters = [None, np.array([5], dtype=np.int64), np.arange(1, 3001, 2), np.arange(1, 30)]
    for terms in queries:
        for k in (1, 10, 200, 5000):
            for arr in filters:
                got = idx.search(terms, k, arr)
                assert got == idx.search_exhaustive(terms, k, arr), (terms, k)
                allowed = None if arr is None else set(arr.tolist())
                check_top(got, brute(docs, terms, allowed), k)
    # equal scores: the lowest rowids win, in rowid order
    same = idx.search(["same"], 10)
    assert [r for r, _ in same] == [3 * i for i in range(1, 11)]
    assert len({s for _, s in same}) == 1


@pytest.mark.parametrize("name", ["scifact", "piaf-fr", "xquad-zh", "xquad-de", "hotpotqa-hipporag-train100"])
def test_real_corpora_both_paths_agree(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from hybridmem.eval.datasets import load_dataset
    from hybridmem.text.tokenize import detect_language, index_tokens, query_tokens

    root = DATA / "beir" / name
    if not root.is_dir():
        pytest.skip(f"{root} not present")
    ds = load_dataset(str(root))
    idx = SparseIndex()
    idx.load(1, [(i, " ".join(index_tokens(d["text"], detect_language(d["text"])))) for i, d in enumerate(ds.docs, 1)])
    seen = Counting(idx)
    rng = random.Random(name)
    for q in list(ds.queries.values())[:150]:
        terms = query_tokens(q)
        few = np.array(sorted(rng.sample(range(1, len(ds.docs) + 1), 12)), dtype=np.int64)
        for k, arr in ((10, None), (100, None), (10, np.arange(1, len(ds.docs) + 1, 10)), (5, few)):
            assert idx.search(terms, k, arr) == idx.search_exhaustive(terms, k, arr), q
    monkeypatch.setattr(sparse, "DIRECT_FACTOR", 0)  # every filtered query chunk by chunk
    for q in list(ds.queries.values())[:50]:
        terms = query_tokens(q)
        for arr in (np.arange(1, len(ds.docs) + 1, 3), np.array([1, 2, 3, len(ds.docs)])):
            assert idx.search(terms, 10, arr) == idx.search_exhaustive(terms, 10, arr), q
    assert seen.direct >= 100


def test_readers_share_and_writers_wait_for_them() -> None:
    """Queries on both paths (filter masks and live df cached as they go) in four threads while a
    writer adds, replaces and deletes: no error (a view of an array being appended to would raise
    BufferError), and the index ends equal to a fresh load."""
    rng = random.Random(11)
    vocab = [f"w{i}" for i in range(300)]
    weights = [1 / (i + 1) for i in range(len(vocab))]
    docs = {r: " ".join(zipf_doc(rng, vocab, weights)) for r in range(1, 3001)}
    idx = SparseIndex()
    idx.load(1, sorted(docs.items()))
    errors: list[BaseException] = []
    stop = threading.Event()
    flt = np.arange(1, 6000, 3, dtype=np.int64)
    few = np.arange(1, 6000, 400, dtype=np.int64)

    def reader(seed: int) -> None:
        q = random.Random(seed)
        try:
            while not stop.is_set():
                terms = q.choices(vocab, weights, k=q.randint(1, 6))
                idx.search(terms, 10, q.choice([flt, few, None]))
        except BaseException as e:  # noqa: BLE001 - collected and asserted below
            errors.append(e)

    threads = [threading.Thread(target=reader, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    try:
        for v in range(2, 402):
            victim = rng.choice(list(docs))
            new = max(docs) + 1
            docs.pop(victim)
            docs[new] = " ".join(zipf_doc(rng, vocab, weights))
            idx.apply(v, [(new, docs[new])], [victim])
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert errors == []
    fresh = SparseIndex()
    fresh.load(401, sorted(docs.items()))
    for terms in (["w0"], ["w1", "w5"], vocab[:20]):
        assert idx.search(terms, 20) == fresh.search(terms, 20) == fresh.search_exhaustive(terms, 20)


def test_rwlock_writer_waits_for_readers_and_goes_before_new_ones() -> None:
    lock = RWLock()
    order: list[str] = []
    reading = threading.Event()
    release = threading.Event()

    def first_reader() -> None:
        with lock.read():
            reading.set()
            release.wait(5)
            order.append("reader-1 done")

    def writer() -> None:
        with lock.write():
            order.append("writer")

    def late_reader() -> None:
        with lock.read():
            order.append("reader-2")

    r1 = threading.Thread(target=first_reader)
    r1.start()
    assert reading.wait(5)
    w = threading.Thread(target=writer)
    w.start()
    while not lock._waiting:  # the writer is queued
        threading.Event().wait(0.001)
    r2 = threading.Thread(target=late_reader)
    r2.start()
    threading.Event().wait(0.05)
    assert order == []  # the writer waits for reader 1; reader 2 waits behind the writer
    release.set()
    for t in (r1, w, r2):
        t.join(5)
    assert order == ["reader-1 done", "writer", "reader-2"]
