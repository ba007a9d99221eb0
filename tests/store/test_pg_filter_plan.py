"""The PostgreSQL dense leg's plan under a filter (store/postgres/plan.py): a selective filter is
searched exactly over its allowed rows, an unselective one through HNSW with ef_search and
max_scan_tuples from the estimated selectivity; both agree with the exact top-k, neither crosses
namespaces, and the leg's report names the plan."""

from __future__ import annotations

import random
from collections.abc import Iterator

import numpy as np
import pytest

from hybridmem import Memory
from hybridmem.filters import parse_filter
from hybridmem.store.postgres.plan import COSTS, choose_plan, crossover_rows

pytestmark = pytest.mark.postgres

N = 4000
WORDS = "alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega river stone cloud".split()
QUERIES = ["alpha omega river", "stone cloud kappa", "beta gamma item", "sigma lambda zeta delta", "theta epsilon"]
RARE = {"tag": "rare"}  # 1 in 200 documents: 0.5 %
HALF = {"half": 0}  # 50 %
ALL = {"kind": "note"}  # every document


def _docs(prefix: str, n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    return [
        {
            "id": f"{prefix}{i}",
            "text": " ".join(rng.choice(WORDS) for _ in range(10)) + f" item {i}",
            "metadata": {"tag": "rare" if i % 200 == 0 else "common", "half": i % 2, "kind": "note"},
        }
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def pg() -> Iterator[Memory]:
    from pg_utils import server

    srv = server()
    url = srv.new_database()
    # exact_threshold=0: the namespace's size alone never decides, the filter's plan does
    m = Memory(url, embedder="hash", auto_embed=False, exact_threshold=0, chunk_size=None)
    try:
        m.add_documents(_docs("a", N, 1), batch_size=1000, namespace="a")
        m.add_documents(_docs("b", N // 2, 2), batch_size=1000, namespace="b")
        m.embed_pending()
        with m.store._conn() as conn:
            conn.execute("VACUUM ANALYZE")
        yield m
    finally:
        m.close()
        srv.drop_database(url)


def _exact_top(m: Memory, ns: str, spec: dict | None, qv: np.ndarray, k: int = 10) -> list[int]:
    """The exact top-k over the allowed rows, in numpy."""
    _, rowids, vecs = m.store.load_vectors(ns)
    allowed = set(m.store.filter_rowids(ns, parse_filter(spec) if spec else None).tolist())
    sims = vecs @ qv / (np.linalg.norm(vecs, axis=1) * np.linalg.norm(qv))
    return [int(r) for r in rowids[np.argsort(-sims, kind="stable")] if int(r) in allowed][:k]


def _recall(m: Memory, ns: str, spec: dict, plan: str | None = None) -> tuple[float, set[str]]:
    rec, plans = [], set()
    for q in QUERIES:
        qv = m.embedder.embed_query(q)
        got = m.store.search_dense(ns, qv, parse_filter(spec), 10, plan=plan)
        plans.add((got.plan or "").split(":")[0])
        exact = _exact_top(m, ns, spec, qv)
        rec.append(len({r for r, _ in got} & set(exact)) / len(exact))
    return float(np.mean(rec)), plans


def test_the_model_prefers_exact_when_few_rows_pass_and_hnsw_when_many_do():
    assert choose_plan(100, 100_000, 10, 64).kind == "exact"
    assert choose_plan(100_000, 100_000, 10, 64).kind == "hnsw"
    few, many = choose_plan(1_000, 100_000, 10, 64), choose_plan(50_000, 100_000, 10, 64)
    assert few.ef_search > many.ef_search >= 64  # ef grows as the filter narrows, bounded by pgvector's 1,000
    assert choose_plan(10, 100_000, 10, 64).ef_search == 1000
    assert many.max_scan_tuples >= 20_000
    # the crossover is where the modelled costs meet, not a constant: cheaper exact rows move it up
    cheap = COSTS.__class__(
        COSTS.exact_fixed_ms, COSTS.exact_ms_per_row / 10, COSTS.hnsw_fixed_ms, COSTS.hnsw_ms_per_tuple
    )
    at = crossover_rows(100_000, 64)
    assert choose_plan(at - 1, 100_000, 10, 64).kind == "exact" and choose_plan(at, 100_000, 10, 64).kind == "hnsw"
    assert crossover_rows(100_000, 64, cheap) > 2 * at


def test_a_selective_filter_is_searched_exactly_and_returns_the_exact_top_k(pg):
    for q in QUERIES:
        qv = pg.embedder.embed_query(q)
        got = pg.store.search_dense("a", qv, parse_filter(RARE), 10)
        assert got.plan is not None and got.plan.startswith("exact:"), got.plan
        assert [r for r, _ in got] == _exact_top(pg, "a", RARE, qv)


def test_an_unselective_filter_goes_through_hnsw(pg):
    qv = pg.embedder.embed_query(QUERIES[0])
    got = pg.store.search_dense("a", qv, parse_filter(ALL), 10)
    assert got.plan is not None and got.plan.startswith("hnsw:"), got.plan
    assert "ef_search" in got.plan and "max_scan_tuples" in got.plan
    assert len(got) == 10


@pytest.mark.parametrize("spec", [RARE, HALF, ALL], ids=["0.5%", "50%", "100%"])
@pytest.mark.parametrize("plan", ["exact", "hnsw", None])
def test_every_plan_finds_the_exact_top_k(pg, spec, plan):
    recall, plans = _recall(pg, "a", spec, plan)
    assert recall >= 0.95, (spec, plan, recall)
    if plan is not None:
        assert plans == {plan}


@pytest.mark.parametrize("plan", ["exact", "hnsw"])
def test_a_namespace_never_sees_another_ones_chunks(pg, plan):
    own = set(pg.store.filter_rowids("b", None).tolist())
    for spec in (RARE, HALF, ALL):
        for q in QUERIES:
            got = pg.store.search_dense("b", pg.embedder.embed_query(q), parse_filter(spec), 10, plan=plan)
            assert got and {r for r, _ in got} <= own
    resp = pg.search(QUERIES[0], namespace="b", mode="hybrid", top_k=10, metadata_filter=HALF)
    assert resp.results and all(r.doc_id.startswith("b") for r in resp.results)


def test_the_dense_legs_report_names_the_plan(pg):
    rare = pg.search(QUERIES[1], namespace="a", mode="hybrid", top_k=10, metadata_filter=RARE)
    assert rare.legs["dense"].plan is not None and rare.legs["dense"].plan.startswith("exact:")
    assert all(r.metadata["tag"] == "rare" for r in rare.results)
    every = pg.search(QUERIES[1], namespace="a", mode="vector", top_k=10, metadata_filter=ALL)
    assert every.legs["dense"].plan is not None and every.legs["dense"].plan.startswith("hnsw:")
    plain = pg.search(QUERIES[1], namespace="a", mode="vector", top_k=10)
    assert plain.legs["dense"].plan == "hnsw"  # unfiltered: the index, as before
    assert "plan" in rare.model_dump(mode="json")["legs"]["dense"]


# ---------------------------------------------------------------- the BM25 leg in SQL
@pytest.mark.parametrize("spec", [RARE, HALF, ALL], ids=["0.5%", "50%", "100%"])
def test_bm25_reads_the_same_under_either_plan(pg, spec):
    from hybridmem.text.tokenize import query_tokens

    for q in QUERIES:
        terms = query_tokens(q)
        a = pg.store.search_sparse("a", terms, parse_filter(spec), 10, plan="allowed")
        b = pg.store.search_sparse("a", terms, parse_filter(spec), 10, plan="postings")
        assert a and [r for r, _ in a] == [r for r, _ in b]
        assert np.allclose([s for _, s in a], [s for _, s in b])
        assert a.plan.startswith("allowed") and b.plan.startswith("postings")


def test_bm25_in_sql_reads_a_selective_filters_chunks_first_and_says_so(pg):
    sql = Memory(pg.store.url, embedder="hash", auto_embed=False, store_options={"bm25_leg": "sql"})
    try:
        rare = sql.search(QUERIES[0], namespace="a", mode="bm25", top_k=10, metadata_filter=RARE)
        assert rare.legs["bm25"].plan is not None and rare.legs["bm25"].plan.startswith("allowed:")
        assert rare.results and all(r.metadata["tag"] == "rare" for r in rare.results)
        plain = sql.search(QUERIES[0], namespace="a", mode="bm25", top_k=10)
        assert plain.legs["bm25"].plan is None
        other = sql.search(QUERIES[0], namespace="b", mode="bm25", top_k=10, metadata_filter=RARE)
        assert other.results and all(r.doc_id.startswith("b") for r in other.results)
    finally:
        sql.close()


def test_hnsw_under_a_tiny_filter_still_returns_every_allowed_row(pg):
    # 20 rows allowed, k=50, the model made to pick HNSW: every allowed row comes back, in exact order
    tiny = {"half": 0, "tag": "rare"}
    qv = pg.embedder.embed_query(QUERIES[2])
    pg.store.plan_costs = COSTS.__class__(1e6, 1.0, 0.0, 0.0)  # HNSW modelled free: the plan is hnsw
    try:
        got = pg.store.search_dense("a", qv, parse_filter(tiny), 50)
    finally:
        pg.store.plan_costs = COSTS
    assert got.plan is not None and got.plan.startswith("hnsw:")
    want = _exact_top(pg, "a", tiny, qv, 50)
    assert len(want) == 20 and [r for r, _ in got] == want
