"""hybridmem.eval.metrics: per-query metrics agree with trec_eval (pytrec_eval) on a real BM25 run
over SciFact, plus edge cases of per_query / recall_curve / means_by_category and the behaviour of
the paired significance tests."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hybridmem.eval.metrics import CUTOFFS, METRICS, means_by_category, paired_test, per_query, recall_curve

pytrec_eval = pytest.importorskip("pytrec_eval")

N_QUERIES = 100  # the first test queries: enough to exercise every metric, indexing stays a few seconds
TOL = 1e-6


def _trec_run(ranked: list[str]) -> dict[str, float]:
    """Our order as a pytrec_eval run: it sorts by score (ties by doc id, descending), so strictly
    decreasing scores encode the ranking exactly."""
    return {d: 1.0 / i for i, d in enumerate(ranked, 1)}


def _dedupe(ids):
    return list(dict.fromkeys(ids))


# ---------------------------------------------------------------- oracle: pytrec_eval on a real run
@pytest.fixture(scope="module")
def scifact_run(scifact_bm25):
    ds, m, _ = scifact_bm25
    qrels = {qid: ds.qrels[qid] for qid in list(ds.qrels)[:N_QUERIES]}
    run = {}
    for qid in qrels:
        resp = m.search({"search_text": ds.queries[qid], "top_k": 100, "mode": "bm25"})
        run[qid] = _dedupe(r.doc_id for r in resp.results)
    return qrels, run


def test_scifact_bm25_run_matches_pytrec_eval(scifact_run):
    qrels, run = scifact_run
    assert len(qrels) == N_QUERIES
    # every query gets a full, duplicate-free top 100 (else trec_eval would silently drop a query)
    assert all(len(run[q]) == 100 == len(set(run[q])) for q in qrels)

    ours = {q: per_query(run[q], qrels[q]) for q in qrels}
    assert all(set(s) == set(METRICS) for s in ours.values())

    full = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall." + ",".join(map(str, CUTOFFS))})
    theirs = full.evaluate({q: _trec_run(run[q]) for q in qrels})
    # trec_eval's recip_rank has no cutoff: evaluate the run cut to its top 10 for mrr@10
    top10 = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"})
    theirs_rr = top10.evaluate({q: _trec_run(run[q][:10]) for q in qrels})
    assert set(theirs) == set(theirs_rr) == set(qrels)

    pairs = {"ndcg@10": (theirs, "ndcg_cut_10"), "mrr@10": (theirs_rr, "recip_rank")}
    pairs.update({f"recall@{k}": (theirs, f"recall_{k}") for k in CUTOFFS})
    for metric, (table, name) in pairs.items():
        for q in qrels:
            assert ours[q][metric] == pytest.approx(table[q][name], abs=TOL), (metric, q)

    # the run is informative, so the comparison is not between trivial zeros
    assert sum(ours[q]["ndcg@10"] > 0 for q in qrels) > N_QUERIES // 2
    assert sum(0 < ours[q]["ndcg@10"] < 1 for q in qrels) > 10
    assert any(0 < ours[q]["mrr@10"] < 1 for q in qrels)
    assert any(0 < ours[q]["recall@5"] < 1 for q in qrels)  # queries with several relevant documents

    means = means_by_category(ours)["all"]
    assert means["queries"] == N_QUERIES
    for metric, (table, name) in pairs.items():
        oracle = pytrec_eval.compute_aggregated_measure(name, [table[q][name] for q in qrels])
        assert means[metric] == pytest.approx(oracle, abs=TOL), metric
    assert 0.5 < means["ndcg@10"] < 0.85  # BM25 on SciFact: ~0.67 over all 300 test queries


def test_graded_and_unjudged_match_pytrec_eval():
    """Graded, zero and negative grades and unjudged documents, against trec_eval."""
    qrels = {
        "q1": {"a": 3, "b": 2, "c": 1, "d": 0, "e": -1, "f": 2},
        "q2": {"x": 1},
        "q3": {"m": 2, "n": 1},
    }
    run = {
        "q1": ["e", "z", "c", "a", "d", "y", "b"],  # f never retrieved
        "q2": [f"u{i}" for i in range(10)] + ["x"],  # relevant document at rank 11: outside the top 10
        "q3": ["n", "m"],
    }
    full = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.1,5,10,100"})
    theirs = full.evaluate({q: _trec_run(r) for q, r in run.items()})
    theirs_rr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(
        {q: _trec_run(r[:10]) for q, r in run.items()}
    )
    for q in qrels:
        ours = per_query(run[q], qrels[q])
        assert ours["ndcg@10"] == pytest.approx(theirs[q]["ndcg_cut_10"], abs=TOL), q
        assert ours["mrr@10"] == pytest.approx(theirs_rr[q]["recip_rank"], abs=TOL), q
        for k in CUTOFFS:
            assert ours[f"recall@{k}"] == pytest.approx(theirs[q][f"recall_{k}"], abs=TOL), (q, k)
    assert per_query(run["q2"], qrels["q2"])["recall@100"] == 1.0
    assert per_query(run["q2"], qrels["q2"])["ndcg@10"] == 0.0


# ---------------------------------------------------------------- per_query edge cases
def _dcg(gains):
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains))


def test_per_query_graded_relevance_by_hand():
    rel = {"a": 2, "b": 1, "c": 0}
    got = per_query(["b", "c", "a"], rel)
    expect = (1 / math.log2(2) + 2 / math.log2(4)) / (2 / math.log2(2) + 1 / math.log2(3))
    assert got["ndcg@10"] == pytest.approx(expect, abs=1e-12)
    assert got["mrr@10"] == 1.0  # grade 1 counts as relevant
    assert got["recall@1"] == 0.5 and got["recall@5"] == 1.0
    # the ideal order scores 1, and swapping the grades lowers nDCG while mrr / recall stay put
    assert per_query(["a", "b"], rel)["ndcg@10"] == pytest.approx(1.0)
    assert per_query(["b", "a"], rel)["ndcg@10"] < 1.0
    assert per_query(["b", "a"], rel)["recall@5"] == per_query(["a", "b"], rel)["recall@5"]


def test_per_query_relevant_doc_absent():
    got = per_query(["x", "y", "z"], {"a": 1, "b": 2})
    assert got == {m: 0.0 for m in METRICS}


def test_per_query_fewer_than_ten_results():
    rel = {"a": 1, "b": 1, "c": 1, "d": 1}
    got = per_query(["x", "a", "y"], rel)
    assert got["mrr@10"] == 0.5
    assert got["recall@1"] == 0.0
    assert got["recall@5"] == got["recall@10"] == got["recall@100"] == 0.25
    assert got["ndcg@10"] == pytest.approx(_dcg([0, 1, 0]) / _dcg([1, 1, 1, 1]))
    assert per_query([], rel) == {m: 0.0 for m in METRICS}


def test_per_query_ideal_dcg_cut_at_ten():
    """More relevant documents than the cutoff: a top 10 of relevant documents is a perfect nDCG@10."""
    rel = {f"d{i}": 1 for i in range(15)}
    got = per_query([f"d{i}" for i in range(10)], rel)
    assert got["ndcg@10"] == pytest.approx(1.0)
    assert got["recall@10"] == pytest.approx(10 / 15)


@pytest.mark.parametrize("rel", [{}, {"a": 0}, {"a": 0, "b": -1}])
def test_per_query_without_relevant_document_is_an_error(rel):
    with pytest.raises(ValueError, match="no relevant"):
        per_query(["a", "b"], rel)


# ---------------------------------------------------------------- recall_curve
def test_recall_curve_is_monotone_and_ends_at_recall_at_100():
    rng = np.random.default_rng(7)
    ranked = [f"d{i}" for i in rng.permutation(300)[:150]]
    rel = {f"d{i}": int(g) for i, g in zip(range(0, 300, 7), rng.integers(0, 3, size=43))}
    assert any(g > 0 for g in rel.values())
    ks = list(range(1, 101))
    curve = recall_curve(ranked, rel, ks)
    assert len(curve) == len(ks)
    assert all(0.0 <= x <= 1.0 for x in curve)
    assert all(x <= y for x, y in zip(curve, curve[1:]))
    assert curve[-1] > curve[0]  # it actually rises
    pq = per_query(ranked, rel)
    assert curve[-1] == pytest.approx(pq["recall@100"])
    for k in CUTOFFS:
        assert curve[k - 1] == pytest.approx(pq[f"recall@{k}"])


def test_recall_curve_short_list_and_edges():
    rel = {"a": 1, "b": 1, "c": 0}
    # past the end of the list recall stays where it ended
    assert recall_curve(["x", "a"], rel, [1, 2, 3, 100]) == [0.0, 0.5, 0.5, 0.5]
    assert recall_curve([], rel, [1, 10]) == [0.0, 0.0]
    assert recall_curve(["a", "b"], rel, [0, 1]) == [0.0, 0.5]  # k = 0 holds nothing
    # a repeated relevant document counts once, as in per_query
    assert recall_curve(["a", "a", "a"], rel, [3]) == [per_query(["a", "a", "a"], rel)["recall@5"]] == [0.5]
    with pytest.raises(ValueError):
        recall_curve(["a"], {"a": 0}, [1])


# ---------------------------------------------------------------- means_by_category
def test_means_by_category():
    scores = {
        "q1": {"ndcg@10": 1.0, "mrr@10": 1.0},
        "q2": {"ndcg@10": 0.5, "mrr@10": 0.0},
        "q3": {"ndcg@10": 0.0, "mrr@10": 0.5},
        "q4": {"ndcg@10": 0.25, "mrr@10": 0.25},
    }
    cats = {"q1": "fact", "q2": "fact", "q3": "howto", "q4": ""}  # q4: no category, only in "all"
    out = means_by_category(scores, cats)
    assert set(out) == {"all", "fact", "howto"}
    assert out["all"] == {"ndcg@10": pytest.approx(1.75 / 4), "mrr@10": pytest.approx(1.75 / 4), "queries": 4}
    assert out["fact"] == {"ndcg@10": pytest.approx(0.75), "mrr@10": pytest.approx(0.5), "queries": 2}
    assert out["howto"] == {"ndcg@10": pytest.approx(0.0), "mrr@10": pytest.approx(0.5), "queries": 1}

    # no categories: only "all"; a category literally named "all" does not count its queries twice
    assert set(means_by_category(scores)) == {"all"}
    assert means_by_category(scores, {"q1": "all"})["all"] == out["all"]
    assert means_by_category({}) == {}


# ---------------------------------------------------------------- paired_test
def test_paired_test_identical_lists():
    a = list(np.random.default_rng(1).uniform(size=50))
    res = paired_test(a, a, resamples=2000)
    assert res["mean_diff"] == 0.0
    assert res["ci95"] == [0.0, 0.0]
    assert res["p_bootstrap"] >= 0.99 and res["p_randomization"] >= 0.99
    assert res["queries"] == 50


def test_paired_test_clearly_better_system():
    rng = np.random.default_rng(2)
    b = rng.uniform(0, 0.7, size=200)
    a = b + 0.2 + rng.normal(0, 0.1, size=200)
    res = paired_test(a, b, resamples=5000)
    assert res["mean_diff"] == pytest.approx(float(np.mean(a - b)))
    assert 0.15 < res["mean_diff"] < 0.25
    assert res["p_bootstrap"] < 0.01 and res["p_randomization"] < 0.01
    lo, hi = res["ci95"]
    assert 0 < lo <= res["mean_diff"] <= hi
    # the other way round: the same evidence, with the sign flipped
    rev = paired_test(b, a, resamples=5000)
    assert rev["mean_diff"] == pytest.approx(-res["mean_diff"])
    assert rev["p_bootstrap"] < 0.01 and rev["p_randomization"] < 0.01
    assert rev["ci95"][1] < 0


def test_paired_test_pure_noise():
    rng = np.random.default_rng(3)
    a, b = rng.uniform(size=200), rng.uniform(size=200)
    res = paired_test(a, b, resamples=5000)
    assert res["p_bootstrap"] > 0.05 and res["p_randomization"] > 0.05
    lo, hi = res["ci95"]
    assert lo < 0 < hi


@pytest.mark.parametrize(
    "a, b", [([0.1, 0.2, 0.3], [0.1, 0.2]), ([0.5], [0.1, 0.2, 0.3]), ([0.1, 0.2], [0.5]), ([], [])]
)
def test_paired_test_rejects_unequal_or_empty(a, b):
    with pytest.raises(ValueError, match="equally long"):
        paired_test(a, b)


def test_paired_test_is_deterministic_per_seed():
    rng = np.random.default_rng(4)
    a, b = rng.uniform(size=80), rng.uniform(size=80)
    first = paired_test(a, b, resamples=2000, seed=11)
    assert paired_test(a, b, resamples=2000, seed=11) == first
    other = paired_test(a, b, resamples=2000, seed=12)
    assert other["mean_diff"] == first["mean_diff"]  # the observed difference does not depend on the seed
    assert other["ci95"] != first["ci95"]  # the resampling does
