"""The BM25 index's scoring paths return the same list: ``search_exhaustive`` (every posting of
every term into one array, top-k through a sampled threshold) and ``search`` (the compiled MaxScore
kernel, or the numpy scorer without it; a small allowed set scored chunk by chunk by binary
search); all are BM25 by brute force, ties broken by rowid, with the same float32 scores. On random Zipfian corpora under adds, deletes, replacements and rowid re-use; on adversarial
ones (a term in every chunk, all-equal scores, 64-term queries, filters of every size); on the real
corpora of ../shared/data tokenized as ingest does; and with queries and writes in threads."""

from __future__ import annotations

import random
import threading

import numpy as np
import pytest
from test_sparse import brute  # BM25 by brute force, in float64

from corpora import BEIR_SETS, beir_set
from hybridmem.retrieve import bm25_score, sparse
from hybridmem.retrieve.rwlock import RWLock
from hybridmem.retrieve.sparse import SparseIndex


class Counting:
    """Counts the queries answered by the chunk-by-chunk path, and what the kernel read."""

    def __init__(self, idx: SparseIndex) -> None:
        self.direct = self.kernel = self.pruned = 0
        self.postings = self.scanned = 0
        positions, kernel = idx._score_positions, idx._score_kernel

        def direct(*a):  # type: ignore[no-untyped-def]
            self.direct += 1
            return positions(*a)

        def counted(uniq, k, allowed, rowids, counts):  # type: ignore[no-untyped-def]
            counts = {} if counts is None else counts
            got = kernel(uniq, k, allowed, rowids, counts)
            self.kernel += 1
            n_post = sum(len(p[0]) for _, p, _ in uniq)
            self.postings += n_post
            self.scanned += counts["scanned"]
            self.pruned += counts["scanned"] < n_post
            return got

        idx._score_positions = direct  # type: ignore[method-assign]
        idx._score_kernel = counted  # type: ignore[method-assign]


def test_the_compiled_kernel_is_built() -> None:
    # setup.py builds it optionally (no compiler: numpy, the same results); here it must be there
    assert bm25_score._kernel is not None


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
            # the statistics BM25 scores with (the feedback leg weighs its terms by them)
            want = {t: c for t in dict.fromkeys(terms) if (c := sum(t in d for d in docs.values()))}
            assert idx.doc_freqs([*terms, "absent"]) == (len(docs), want), step
    assert seen.direct > 20 and seen.kernel > 100  # both paths ran
    assert seen.pruned > 20  # and the kernel skipped postings


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
                with pytest.MonkeyPatch.context() as mp:  # no compiled kernel: the numpy scorer
                    mp.setattr(bm25_score, "_kernel", None)
                    assert idx.search(terms, k, arr) == got
                allowed = None if arr is None else set(arr.tolist())
                check_top(got, brute(docs, terms, allowed), k)
    # equal scores: the lowest rowids win, in rowid order
    same = idx.search(["same"], 10)
    assert [r for r, _ in same] == [3 * i for i in range(1, 11)]
    assert len({s for _, s in same}) == 1


@pytest.mark.parametrize("name", BEIR_SETS)
def test_real_corpora_both_paths_agree(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from hybridmem.text.tokenize import detect_language, index_tokens, query_tokens

    ds = beir_set(name)
    idx = SparseIndex()
    idx.load(1, [(i, " ".join(index_tokens(d["text"], detect_language(d["text"])))) for i, d in enumerate(ds.docs, 1)])
    seen = Counting(idx)
    rng = random.Random(name)
    for q in list(ds.queries.values())[:150]:
        terms = query_tokens(q)
        few = np.array(sorted(rng.sample(range(1, len(ds.docs) + 1), 12)), dtype=np.int64)
        for k, arr in ((10, None), (100, None), (10, np.arange(1, len(ds.docs) + 1, 10)), (5, few)):
            assert idx.search(terms, k, arr) == idx.search_exhaustive(terms, k, arr), q
    # MaxScore skips postings on every corpus (SciFact: ~60 % of them at k = 10)
    assert seen.pruned > 0 and seen.scanned < seen.postings
    monkeypatch.setattr(bm25_score, "DIRECT_FACTOR", 0)  # every filtered query chunk by chunk
    for q in list(ds.queries.values())[:50]:
        terms = query_tokens(q)
        for arr in (np.arange(1, len(ds.docs) + 1, 3), np.array([1, 2, 3, len(ds.docs)])):
            assert idx.search(terms, 10, arr) == idx.search_exhaustive(terms, 10, arr), q
    assert seen.direct >= 100


def test_weight_bounds_hold_under_writes_and_a_moving_average_length() -> None:
    # the cached bound of a term (max tf / (tf + norm) over its postings, taken at some avgdl) must
    # stay >= the true maximum at today's avgdl while chunks of other lengths come and go
    rng = random.Random(11)
    vocab = [f"t{i}" for i in range(30)]
    docs = {r: rng.choices(vocab, k=rng.randint(1, 6)) for r in range(1, 401)}
    idx = SparseIndex()
    idx.load(1, [(r, " ".join(t)) for r, t in docs.items()])
    for step in range(120):
        long = step % 40 < 20  # avgdl climbs, then falls
        for _ in range(5):
            r = max(docs) + 1 if rng.random() < 0.8 else rng.choice(list(docs))
            docs[r] = rng.choices(vocab, k=rng.randint(30, 90) if long else rng.randint(1, 3))
            idx.apply(idx.version + 1, [(r, " ".join(docs[r]))], [])
        if rng.random() < 0.3:
            gone = rng.choice(list(docs))
            del docs[gone]
            idx.apply(idx.version + 1, [], [gone])
        terms = rng.sample(vocab, rng.randint(1, 5))
        for k in (1, 3, 10):
            assert idx.search(terms, k) == idx.search_exhaustive(terms, k), step
        avgdl = sum(len(t) for t in docs.values()) / len(docs)
        assert avgdl == pytest.approx(idx._total_len / len(idx), rel=1e-9)
        for term in idx._bounds:
            want = max(
                tf / (tf + sparse.K1 * (1 - sparse.B + sparse.B * len(t) / avgdl))
                for t in docs.values()
                if (tf := t.count(term))
            )
            with idx._rw.read():
                ps, tfs = idx._post[term]
                assert idx._bound(term, ps, tfs, avgdl) >= want * (1 - 1e-12), (step, term)


def test_the_kernel_refuses_arrays_that_do_not_fit() -> None:
    from array import array

    kernel = bm25_score._kernel
    assert kernel is not None
    ps, tfs, dl, rowids = array("i", [0, 1]), array("i", [1, 1]), array("f", [3.0, 4.0]), array("q", [7, 8])
    assert kernel.topk([(ps, tfs, 1.0, 9.0)], dl, 3.5, rowids, 2, None, None, 5)[0] == [
        (7, pytest.approx(1.0 * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 3 / 3.5)), rel=1e-6)),
        (8, pytest.approx(1.0 * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 4 / 3.5)), rel=1e-6)),
    ]
    with pytest.raises(ValueError, match="tfs"):
        kernel.topk([(ps, array("i", [1]), 1.0, 9.0)], dl, 3.5, rowids, 2, None, None, 5)
    with pytest.raises(ValueError, match="dl"):
        kernel.topk([(ps, tfs, 1.0, 9.0)], array("f", [3.0]), 3.5, rowids, 2, None, None, 5)
    with pytest.raises(ValueError, match="alive"):
        kernel.topk([(ps, tfs, 1.0, 9.0)], dl, 3.5, rowids, 2, bytearray(1), None, 5)
    with pytest.raises(ValueError, match="out of range"):
        kernel.topk([(ps, tfs, 1.0, 9.0)], dl, 3.5, rowids, 2, None, None, -1)
    # a position past the chunks (never in an index's own postings) is skipped, not read
    assert kernel.topk([(array("i", [0, 5]), tfs, 1.0, 9.0)], dl, 3.5, rowids, 2, None, None, 5)[0][0][0] == 7


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


def test_the_kernel_scratch_is_clean_between_queries_indexes_and_threads() -> None:
    """The kernel keeps each thread's accumulator between queries and zeroes only what a query
    touched: queries alternating between a large and a small index (the scratch sized by the
    larger), pruned and not, filtered and not, in four threads at once, each equal to the
    exhaustive scorer."""
    rng = random.Random(5)
    vocab = [f"w{i}" for i in range(300)]
    weights = [1 / (i + 1) for i in range(len(vocab))]
    big, small = SparseIndex(), SparseIndex()
    big.load(1, [(r, " ".join(zipf_doc(rng, vocab, weights))) for r in range(1, 4001)])
    small.load(1, [(r, " ".join(zipf_doc(rng, vocab, weights))) for r in range(1, 301)])
    cases = []
    for _ in range(120):
        idx = rng.choice([big, small])
        terms = rng.choices(vocab, weights, k=rng.randint(1, 8))
        arr = None
        if rng.random() < 0.3:
            arr = np.array(sorted(rng.sample(range(1, len(idx) + 1), min(len(idx), 250))), dtype=np.int64)
        cases.append((idx, terms, rng.choice([1, 10, 50]), arr))
    want = [idx.search_exhaustive(t, k, a) for idx, t, k, a in cases]
    errors: list[str] = []

    def worker(order: list[int]) -> None:
        for i in order:
            idx, t, k, a = cases[i]
            if idx.search(t, k, a) != want[i]:
                errors.append(f"case {i}")

    threads = [threading.Thread(target=worker, args=(rng.sample(range(len(cases)), len(cases)),)) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors[:5]
    worker(list(range(len(cases))))  # and once more in this thread, after the others
    assert not errors
