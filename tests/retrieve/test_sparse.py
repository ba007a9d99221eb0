"""The in-memory BM25 index under random adds, deletes and SQLite rowid re-use, against a brute-force
BM25 computed from the same tokens (FTS5's formula, k1=1.2, b=0.75, idf floored at 1e-6)."""

from __future__ import annotations

import math
import random
from collections import Counter

import numpy as np
import pytest

from hybridmem.retrieve.sparse import SparseIndex

VOCAB = "a b c d e f g h".split()


def brute(docs: dict[int, list[str]], terms: list[str], allowed: set[int] | None) -> dict[int, float]:
    n = len(docs)
    avgdl = sum(len(t) for t in docs.values()) / n
    out: dict[int, float] = {}
    for t in dict.fromkeys(terms):
        df = sum(1 for toks in docs.values() if t in toks)
        if not df:
            continue
        idf = math.log((n - df + 0.5) / (df + 0.5))
        idf = idf if idf > 0 else 1e-6
        for r, toks in docs.items():
            tf = Counter(toks)[t]
            if tf and (allowed is None or r in allowed):
                out[r] = out.get(r, 0.0) + idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len(toks) / avgdl))
    return out


@pytest.mark.parametrize("seed", range(5))
def test_random_writes_match_brute_force(seed: int) -> None:
    rnd = random.Random(seed)
    docs: dict[int, list[str]] = {}
    idx = SparseIndex()
    version = 0
    fixed = np.arange(1, 400, 3)
    for _ in range(400):
        version += 1
        if docs and rnd.random() < 0.35:
            r = rnd.choice(list(docs))
            del docs[r]
            idx.apply(version, [], [r])
        else:
            # like SQLite: max + 1, which re-uses the rowid of a deleted last row
            r = max(docs, default=0) + 1
            toks = [rnd.choice(VOCAB) for _ in range(rnd.randint(1, 12))]
            docs[r] = toks
            idx.apply(version, [(r, " ".join(toks))], [])
        if not docs:
            continue
        terms = rnd.sample(VOCAB, rnd.randint(1, 3))
        roll = rnd.random()
        if roll < 0.25:  # the same array object across writes: the cached mask must follow them
            allowed, arr = set(fixed.tolist()), fixed
        elif roll < 0.5:
            allowed = set(rnd.sample(range(1, max(docs) + 5), k=min(len(docs), 10)))
            arr = np.array(sorted(allowed))
        else:
            allowed = arr = None
        got = dict(idx.search(terms, 10_000, arr))
        want = brute(docs, terms, allowed)
        assert set(got) == set(want)
        for r, s in want.items():
            assert got[r] == pytest.approx(s, rel=1e-4, abs=1e-6)
    assert len(idx) == len(docs)


def test_reloads_writes_and_queries_at_once_leave_it_exact() -> None:
    """As Memory uses it: a query reloads the index (it saw a newer store version) while the writer
    applies its change if the index is at the version before (else leaves it for a reload) and other
    queries score. Every call must succeed, and an index claiming the last version must score
    exactly as a fresh load. (A reload that re-created the lock let a write and a query touch the
    arrays at once: BufferError, or postings pointing at the wrong rows.)"""
    import threading

    rnd = random.Random(7)
    docs: dict[int, str] = {r: " ".join(rnd.choices(VOCAB, k=rnd.randint(1, 12))) for r in range(1, 3001)}
    version = 0
    idx = SparseIndex()
    idx.load(version, sorted(docs.items()))
    store_lock = threading.Lock()  # the store: a snapshot is (version, rows) read together
    errors: list[BaseException] = []
    stop = threading.Event()

    def snapshot() -> tuple[int, list[tuple[int, str]]]:
        with store_lock:
            return version, sorted(docs.items())

    def guard(fn):  # type: ignore[no-untyped-def]
        def run() -> None:
            try:
                fn()
            except BaseException as e:  # noqa: BLE001 - collected and asserted below
                errors.append(e)
                stop.set()

        return run

    def reloader() -> None:
        while not stop.is_set():
            idx.load(*snapshot())

    def querier() -> None:
        q = random.Random(threading.get_ident())
        while not stop.is_set():
            idx.search(q.sample(VOCAB, 2), 10, np.arange(1, 3001, 7) if q.random() < 0.3 else None)

    threads = [threading.Thread(target=guard(f)) for f in (reloader, querier, querier)]
    for t in threads:
        t.start()
    try:
        for _ in range(600):  # the writer: a row replaced by a new one, committed, then applied
            new = " ".join(rnd.choices(VOCAB, k=rnd.randint(1, 12)))
            with store_lock:
                r, victim = max(docs) + 1, rnd.choice(list(docs))
                docs.pop(victim)
                docs[r] = new
                version += 1
            if idx.version == version - 1:
                idx.apply(version, [(r, new)], [victim])
            if stop.is_set():
                break
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert errors == []
    if idx.version != version:  # what the next query would do
        idx.load(*snapshot())
    fresh = SparseIndex()
    fresh.load(version, sorted(docs.items()))
    for terms in (["a"], ["b", "c"], ["d", "e", "f"], VOCAB):
        assert idx.search(terms, 50) == fresh.search(terms, 50)
    assert len(idx) == len(fresh) == len(docs)


def test_a_whole_load_builds_the_same_index_as_adding_rows_one_by_one(monkeypatch) -> None:
    """``load`` counts postings with numpy per block; its state equals ``_add`` row by row, across
    blocks, with unsorted and repeated rowids, empty chunks and non-ASCII terms."""
    import random

    from hybridmem.retrieve import sparse

    monkeypatch.setattr(sparse, "LOAD_BLOCK", 7)  # many blocks
    rng = random.Random(5)
    words = ["pool", "max_connections", "hel-4040", "été", "连接池", "x"] + [f"w{i}" for i in range(30)]
    rows = [
        (r, " ".join(rng.choice(words) for _ in range(rng.randint(0, 12))))
        for r in list(range(1, 40)) + [100, 50, 51, 7, 300, 301]
    ]  # 7 again: replaced, as _add does
    one = SparseIndex()
    for r, t in rows:
        one._add(r, t)
    bulk = SparseIndex()
    bulk.load(1, rows)
    for attr in ("_rowids", "_dl", "_alive", "_pos", "_total_len", "_sorted"):
        assert getattr(bulk, attr) == getattr(one, attr), attr
    assert bulk._post.keys() == one._post.keys()
    for t in one._post:
        assert bulk._post[t] == one._post[t], t
    assert not bulk._sorted
    q = ["pool", "max_connections", "连接池", "w3"]
    assert bulk.search(q, 10) == one.search(q, 10) and len(bulk.search(q, 10)) == 10
