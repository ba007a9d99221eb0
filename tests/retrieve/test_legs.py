"""The Legs contract suite: what every legs backend must do, written once and run on the in-process
legs over SQLite (LocalLegs) and on PostgreSQL's SQL legs (PostgresLegs).

Each leg is checked against a brute-force oracle computed here from the store's own token streams
and vectors: same BM25 ranking and scores (k1, b and the idf floor of ``hybridmem.config``), same
cosine top-k, the filter applied inside the leg (never a post-filter), namespaces kept apart, and
the legs caught up after this process's writes and after another process's.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from hybridmem import Memory, config
from hybridmem.errors import EmbedderMismatchError
from hybridmem.filters import matches, parse_filter
from hybridmem.store.base import Allowed

SERVICES = ("billing", "search", "auth")
TOPICS = (
    "connection pool exhausted HEL-4040",
    "cache purge stale entries",
    "token refresh failed HTTP 401",
    "disk full on the primary",
    "slow query max_connections",
    "retry storm after deploy",
)


def corpus(n: int = 48) -> list[dict]:
    docs = []
    for i in range(n):
        topic = TOPICS[i % len(TOPICS)]
        words = " ".join(TOPICS[(i * 7 + j) % len(TOPICS)].split()[j % 3] for j in range(i % 5))
        docs.append(
            {
                "id": f"d{i:02d}",
                "text": f"note {i}: {topic} {words} service {SERVICES[i % 3]}",
                "metadata": {"service": SERVICES[i % 3], "sev": i % 4, "env": "prod" if i % 2 else "dev"},
            }
        )
    return docs


@pytest.fixture
def legs_mem(target: str | Path):
    m = Memory(target, embedder="hash", auto_embed=False)
    m.add_documents(corpus())
    m.add_documents([{"id": "other-1", "text": "connection pool exhausted HEL-4040 in tenant two"}], namespace="two")
    m.wait_for_vectors()
    try:
        yield m
    finally:
        m.close()


def bm25_oracle(m: Memory, terms: list[str], allowed: set[int] | None) -> list[tuple[int, float]]:
    """Exhaustive BM25 over the namespace's token streams (statistics of the whole namespace)."""
    _, rows = m.store.load_tokens(m.namespace)
    docs = {rid: toks.split() for rid, toks in rows}
    n = len(docs)
    avgdl = sum(len(t) for t in docs.values()) / n
    df = Counter(t for toks in docs.values() for t in set(toks))
    out = []
    for rid, toks in docs.items():
        if allowed is not None and rid not in allowed:
            continue
        tf = Counter(toks)
        score = 0.0
        for t in dict.fromkeys(terms):
            if tf[t]:
                idf = math.log((n - df[t] + 0.5) / (df[t] + 0.5))
                idf = idf if idf > 0 else config.BM25_IDF_FLOOR
                k1, b = config.BM25_K1, config.BM25_B
                score += idf * tf[t] * (k1 + 1) / (tf[t] + k1 * (1 - b + b * len(toks) / avgdl))
        if score > 0:
            out.append((rid, score))
    out.sort(key=lambda x: (-x[1], x[0]))
    return out


def assert_same_ranking(got: list[tuple[int, float]], oracle: list[tuple[int, float]], k: int) -> None:
    """``got`` is a top-``k`` of ``oracle``: the same scores in order (to 1e-6), each rowid with its
    own oracle score (rowids whose scores tie within float rounding may come in either order)."""
    score_of = dict(oracle)
    assert len(got) == min(k, len(oracle))
    assert np.allclose([s for _, s in got], [s for _, s in oracle[:k]], atol=1e-6)
    assert all(abs(score_of[r] - s) < 1e-6 for r, s in got)
    assert len({r for r, _ in got}) == len(got)


def dense_oracle(m: Memory, q: np.ndarray, allowed: set[int] | None) -> list[int]:
    _, rowids, matrix = m.store.load_vectors(m.namespace)
    sims = matrix @ q
    order = sorted(range(len(rowids)), key=lambda i: (-sims[i], rowids[i]))
    return [int(rowids[i]) for i in order if allowed is None or int(rowids[i]) in allowed]


def allowed_of(m: Memory, spec: dict) -> tuple[Allowed, set[int]]:
    flt = parse_filter(spec)
    assert flt is not None
    return m.legs.allowed(m.namespace, flt), set(m.store.filter_rowids(m.namespace, flt).tolist())


@pytest.mark.parametrize("query", ["connection pool exhausted", "hel-4040", "max_connections slow", "note"])
@pytest.mark.parametrize("spec", [None, {"service": "billing"}, {"$or": [{"sev": {"$gte": 3}}, {"env": "dev"}]}])
def test_sparse_leg_equals_exhaustive_bm25_inside_the_filter(legs_mem: Memory, query: str, spec: dict | None) -> None:
    from hybridmem.text.tokenize import query_tokens

    terms = query_tokens(query)
    allowed, rows = allowed_of(legs_mem, spec) if spec else (None, None)
    got = legs_mem.legs.sparse(legs_mem.namespace, terms, allowed, 10)
    assert_same_ranking(got, bm25_oracle(legs_mem, terms, rows), 10)
    if rows is not None:
        assert {r for r, _ in got} <= rows


@pytest.mark.parametrize("spec", [None, {"service": "auth"}, {"sev": 2, "env": "dev"}])
def test_dense_leg_equals_exact_cosine_inside_the_filter(legs_mem: Memory, spec: dict | None) -> None:
    allowed, rows = allowed_of(legs_mem, spec) if spec else (None, None)
    q = legs_mem.embedders.vector("token refresh failed")
    got = legs_mem.legs.dense(legs_mem.namespace, "token refresh failed", legs_mem.embedders, allowed, 8)
    assert [r for r, _ in got] == dense_oracle(legs_mem, q, rows)[:8]
    if rows is not None:
        assert len(got) == min(8, len(rows)) and {r for r, _ in got} <= rows


def test_a_selective_filter_is_a_pre_filter_not_a_post_filter(legs_mem: Memory) -> None:
    """One allowed chunk among many better-scoring ones: every leg still returns it."""
    allowed, rows = allowed_of(legs_mem, {"sev": 3, "service": "billing", "env": "prod"})
    assert 0 < len(rows) < 8
    sparse = legs_mem.legs.sparse(legs_mem.namespace, ["note"], allowed, 3)
    dense = legs_mem.legs.dense(legs_mem.namespace, "note", legs_mem.embedders, allowed, 3)
    assert_same_ranking(sparse, bm25_oracle(legs_mem, ["note"], rows), 3)
    assert [r for r, _ in dense] == dense_oracle(legs_mem, legs_mem.embedders.vector("note"), rows)[:3]
    assert len(sparse) == min(3, len(rows)) and len(dense) == min(3, len(rows))


def test_allowed_agrees_with_the_python_predicate(legs_mem: Memory) -> None:
    spec = {"$or": [{"service": {"$in": ["auth", "search"]}}, {"sev": {"$lt": 1}}]}
    allowed, _ = allowed_of(legs_mem, spec)
    rows = legs_mem.legs.allowed_rowids(legs_mem.namespace, allowed)
    flt = parse_filter(spec)
    fetched = legs_mem.store.fetch(legs_mem.store.filter_rowids(legs_mem.namespace, None).tolist())
    want = sorted(r for r, row in fetched.items() if matches(flt, row.metadata))
    assert rows.tolist() == want and not allowed.empty
    none, _ = allowed_of(legs_mem, {"service": "nobody"})
    assert legs_mem.legs.allowed_rowids(legs_mem.namespace, none).tolist() == []
    assert legs_mem.legs.sparse(legs_mem.namespace, ["note"], none, 10) == []
    assert legs_mem.legs.dense(legs_mem.namespace, "note", legs_mem.embedders, none, 10) == []


def test_namespaces_are_apart_in_every_leg(legs_mem: Memory) -> None:
    ours = set(legs_mem.store.filter_rowids(legs_mem.namespace, None).tolist())
    theirs = set(legs_mem.store.filter_rowids("two", None).tolist())
    assert theirs and not ours & theirs
    for ns, own in ((legs_mem.namespace, ours), ("two", theirs)):
        sparse = legs_mem.legs.sparse(ns, ["hel-4040", "pool"], None, 100)
        dense = legs_mem.legs.dense(ns, "connection pool exhausted", legs_mem.embedders, None, 100)
        assert sparse and {r for r, _ in sparse} <= own
        assert dense and {r for r, _ in dense} <= own


def test_the_legs_catch_up_after_this_process_writes(legs_mem: Memory) -> None:
    m = legs_mem
    m.legs.sparse(m.namespace, ["note"], None, 5)  # indexes loaded (LocalLegs) before the writes
    m.legs.dense(m.namespace, "note", m.embedders, None, 5)
    m.add("zebrafish quokka outage", id="new")
    m.update("d00", "quokka migration finished")
    m.delete("d01")
    m.wait_for_vectors()
    rows = m.store.rowids_for(m.namespace, ["new_p1", "d00_p1"])
    hits = m.legs.sparse(m.namespace, ["quokka"], None, 10)
    assert {r for r, _ in hits} == {rows["new_p1"], rows["d00_p1"]}
    assert_same_ranking(hits, bm25_oracle(m, ["quokka"], None), 10)
    q = m.embedders.vector("zebrafish quokka outage")
    dense = [r for r, _ in m.legs.dense(m.namespace, "zebrafish quokka outage", m.embedders, None, 60)]
    assert dense[0] == rows["new_p1"] and dense == dense_oracle(m, q, None)[:60]
    gone = m.store.rowids_for(m.namespace, ["d01_p1"])
    assert not gone  # deleted: no leg may return its old rowid
    allowed, want = allowed_of(m, {"env": "prod"})
    assert m.legs.allowed_rowids(m.namespace, allowed).tolist() == sorted(want)


def test_the_legs_see_another_process_write(legs_mem: Memory, target: str | Path) -> None:
    m = legs_mem
    allowed, _ = allowed_of(m, {"env": "prod"})  # cached (LocalLegs) at this version
    m.legs.sparse(m.namespace, ["note"], None, 5)
    with Memory(target, embedder="hash", auto_embed=False) as other:
        other.add("wombat sighting in prod", id="w", metadata={"env": "prod"})
        other.wait_for_vectors()
    w = m.store.rowids_for(m.namespace, ["w_p1"])["w_p1"]
    assert [r for r, _ in m.legs.sparse(m.namespace, ["wombat"], None, 5)] == [w]
    assert w in [r for r, _ in m.legs.dense(m.namespace, "wombat sighting in prod", m.embedders, None, 3)]
    again, want = allowed_of(m, {"env": "prod"})
    assert w in m.legs.allowed_rowids(m.namespace, again).tolist() and w in want


class _Refusing:
    name = "hash:256"

    def vector(self, text: str) -> np.ndarray:
        raise AssertionError("the dense leg embedded a query for a namespace without vectors")


class _WrongDim:
    name = "hash:256"

    def vector(self, text: str) -> np.ndarray:
        return np.ones(7, np.float32) / math.sqrt(7)


def test_dense_leg_without_vectors_never_embeds_and_a_wrong_dimension_is_refused(legs_mem: Memory) -> None:
    legs_mem.add("queued only", id="q", namespace="empty")  # no vectors in "empty"
    assert legs_mem.legs.dense("empty", "anything", _Refusing(), None, 5) == []
    with pytest.raises(EmbedderMismatchError):
        legs_mem.legs.dense(legs_mem.namespace, "note", _WrongDim(), None, 5)


def test_readiness_and_index_kind(legs_mem: Memory) -> None:
    assert legs_mem.legs.wait_ready(legs_mem.namespace, timeout=30) is True
    kind = legs_mem.legs.dense_kind(legs_mem.namespace, legs_mem.stats().vectors)
    assert kind in ("exact", "hnsw", "pgvector-hnsw")
    assert legs_mem.stats().dense_index == kind
