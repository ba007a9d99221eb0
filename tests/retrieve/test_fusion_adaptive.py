"""The fusions beside classic RRF: normalized-score fusions (CombSUM, CombMNZ, DBSF), the adaptive
fusion's features and model, and the search path that uses them (issue 20; docs/evaluation.md)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator

import pytest

from hybridmem import Memory
from hybridmem.errors import ValidationError
from hybridmem.retrieve.fusion import (
    FEATURES,
    SHAPE_DEPTH,
    AdaptiveModel,
    query_features,
    rrf,
    score_fusion,
    shipped_model,
)

A = [("a", 10.0), ("b", 5.0), ("c", 0.0)]
B = [("b", 0.9), ("d", 0.5)]


# ---------------------------------------------------------------- score fusions
def test_combsum_adds_min_max_normalized_scores():
    fused = score_fusion([A, B], "combsum")
    assert dict(fused) == pytest.approx({"a": 1.0, "b": 1.5, "c": 0.0, "d": 0.0})
    # ties at 0: d reached rank 2, c only rank 3
    assert [item for item, _ in fused] == ["b", "a", "d", "c"]


def test_combmnz_multiplies_by_the_lists_holding_the_item():
    assert dict(score_fusion([A, B], "combmnz")) == pytest.approx({"a": 1.0, "b": 3.0, "c": 0.0, "d": 0.0})


def test_dbsf_maps_mean_plus_minus_three_sigma_to_the_unit_interval():
    mu, sd = 5.0, math.sqrt(50 / 3)  # A's scores 10, 5, 0
    expect_a = {x: (s - (mu - 3 * sd)) / (6 * sd) for x, s in A}
    b_mu, b_sd = 0.7, 0.2
    expect_b = {x: (s - (b_mu - 3 * b_sd)) / (6 * b_sd) for x, s in B}
    fused = dict(score_fusion([A, B], "dbsf"))
    assert fused["a"] == pytest.approx(expect_a["a"])
    assert fused["b"] == pytest.approx(expect_a["b"] + expect_b["b"])
    assert fused["d"] == pytest.approx(expect_b["d"])
    assert all(0 <= v <= 2 for v in fused.values())


def test_weights_make_combsum_a_convex_combination():
    only_b = score_fusion([A, B], "combsum", [0.0, 1.0])
    assert [x for x, s in only_b if s > 0] == ["b"]
    only_a = score_fusion([A, B], "combsum", [1.0, 0.0])
    assert [x for x, _ in only_a][:2] == ["a", "b"]


def test_a_one_item_list_and_a_repeated_item():
    assert dict(score_fusion([[("x", 3.0)], [("x", 1.0), ("x", 0.5), ("y", 0.1)]], "combsum")) == pytest.approx(
        {"x": 2.0, "y": 0.0}
    )


@pytest.mark.parametrize(
    "method,weights,msg",
    [("borda", None, "unknown score fusion"), ("combsum", [1.0], "one weight"), ("dbsf", [1.0, -1.0], "one weight")],
)
def test_score_fusion_refuses_what_it_cannot_do(method, weights, msg):
    with pytest.raises(ValueError, match=msg):
        score_fusion([A, B], method, weights)


# ---------------------------------------------------------------- features
def test_query_features_by_hand():
    bm25 = [(1, 10.0), (2, 6.0), (3, 5.0), (4, 2.0)]
    dense = [(2, 0.9), (1, 0.8), (5, 0.7)]
    f = query_features(bm25, dense, query_terms=3, identifier=True)
    assert set(f) == set(FEATURES)
    assert f["bm25_margin"] == pytest.approx((10 - 6) / (10 - 2))
    assert f["dense_margin"] == pytest.approx((0.9 - 0.8) / (0.9 - 0.7))
    assert f["bm25_found"] == pytest.approx(4 / SHAPE_DEPTH)
    assert f["agreement"] == pytest.approx(2 / SHAPE_DEPTH)
    assert f["top_agree"] == 0.0
    assert f["bm25_top_in_dense"] == pytest.approx(1 / 2) and f["dense_top_in_bm25"] == pytest.approx(1 / 2)
    assert f["query_terms"] == pytest.approx(math.log1p(3)) and f["identifier"] == 1.0


def test_query_features_of_empty_and_flat_legs():
    f = query_features([], [(1, 0.5), (2, 0.5), (3, 0.5)], query_terms=0, identifier=False)
    assert f["bm25_margin"] == 0.0 and f["dense_margin"] == 0.0  # no hits; a flat list
    assert f["bm25_found"] == 0.0 and f["agreement"] == 0.0 and f["bm25_top_in_dense"] == 0.0


def test_shape_is_read_from_the_first_hits_only():
    long = [(i, 100.0 - i) for i in range(50)]
    assert query_features(long, long, 1, False)["bm25_margin"] == pytest.approx(1 / (SHAPE_DEPTH - 1))


# ---------------------------------------------------------------- model
def _model(**kw):
    n = len(FEATURES)
    data = {"features": list(FEATURES), "mean": [0.0] * n, "scale": [1.0] * n, "coef": [0.0] * n, "intercept": 0.0}
    return {**data, **kw}


def test_a_model_without_coefficients_is_classic_rrf():
    m = AdaptiveModel.from_json(_model())
    assert m.dense_share(dict.fromkeys(FEATURES, 3.0)) == 0.5
    assert AdaptiveModel.from_json(m.to_json()) == m


def test_the_logistic_map_by_hand():
    coef = [0.0] * len(FEATURES)
    coef[FEATURES.index("dense_margin")] = 2.0
    m = AdaptiveModel.from_json(
        _model(coef=coef, intercept=-0.5, mean=[0.1] * len(FEATURES), scale=[0.5] * len(FEATURES))
    )
    x = dict.fromkeys(FEATURES, 0.0) | {"dense_margin": 0.6}
    assert m.dense_share(x) == pytest.approx(1 / (1 + math.exp(-(-0.5 + 2.0 * (0.6 - 0.1) / 0.5))))


@pytest.mark.parametrize(
    "change,msg",
    [
        ({"features": ["bm25_margin", "moon_phase"]}, "unknown features"),
        ({"coef": [1.0]}, "one number per feature"),
        ({"scale": [0.0] * len(FEATURES)}, "scale > 0"),
    ],
)
def test_a_broken_model_file_is_refused(change, msg):
    data = _model(**change)
    if "features" in change:
        data |= {k: data[k][:2] for k in ("mean", "scale", "coef")}
    with pytest.raises(ValueError, match=msg):
        AdaptiveModel.from_json(data)


def test_the_shipped_model_is_fitted_and_moves_alpha():
    m = shipped_model()
    assert m.fitted_on.startswith("training splits of") and set(m.features) <= set(FEATURES)
    assert any(c != 0 for c in m.coef)
    # a query whose BM25 top hit stands far out and a query whose dense top hit does get different α
    lo = dict.fromkeys(FEATURES, 0.0) | {"bm25_margin": 0.9, "dense_margin": 0.05, "query_terms": 1.0}
    hi = dict.fromkeys(FEATURES, 0.0) | {"bm25_margin": 0.05, "dense_margin": 0.9, "query_terms": 3.0}
    assert 0 < m.dense_share(lo) < m.dense_share(hi) < 1


# ---------------------------------------------------------------- search path
@pytest.fixture
def mem(tmp_path) -> Iterator[Memory]:
    with Memory(tmp_path / "m.db", embedder="hash") as m:
        m.add_documents(
            [
                {"id": "a", "text": "HEL-4040 means the billing connection pool is exhausted"},
                {"id": "b", "text": "sizing the connection pool of the billing service"},
                {"id": "c", "text": "the pool party is on Saturday"},
                {"id": "d", "text": "billing runs nightly at 02:00 UTC"},
            ]
        )
        m.wait_for_vectors()
        yield m


def test_adaptive_is_its_base_fusion_with_the_weights_it_reports(mem: Memory):
    base = shipped_model().base
    for q in ("billing pool HEL-4040", "how big is the connection pool", "party"):
        ad = mem.search({"search_text": q, "hybrid_params": {"fusion": "adaptive"}})
        w = ad.leg_weights
        assert ad.fusion == "adaptive" and w["bm25"] + w["dense"] == pytest.approx(2.0)
        same = mem.search(
            {
                "search_text": q,
                "hybrid_params": {"fusion": base, "sparse_weight": w["bm25"], "dense_weight": w["dense"]},
            }
        )
        assert [(r.chunk_id, round(r.rrf_score, 5)) for r in ad.results] == [
            (r.chunk_id, round(r.rrf_score, 5)) for r in same.results
        ]


def test_adaptive_scales_the_callers_weights(mem: Memory):
    base = mem.search({"search_text": "connection pool", "hybrid_params": {"fusion": "adaptive"}}).leg_weights
    biased = mem.search(
        {"search_text": "connection pool", "hybrid_params": {"fusion": "adaptive", "dense_weight": 3.0}}
    ).leg_weights
    assert biased["dense"] == pytest.approx(3 * base["dense"], rel=1e-4) and biased["bm25"] == pytest.approx(
        base["bm25"]
    )


@pytest.mark.parametrize("method", ["dbsf", "combsum", "combmnz"])
def test_score_fusions_run_on_the_search_path(mem: Memory, method: str):
    resp = mem.search({"search_text": "billing pool HEL-4040", "hybrid_params": {"fusion": method}, "top_k": 10})
    assert resp.fusion == method and resp.results[0].chunk_id == "a_p1"
    scores = [r.rrf_score for r in resp.results]
    assert scores == sorted(scores, reverse=True)
    # a leg's weakest hit normalizes to 0 and still comes back: every hit of a weighted leg is kept
    assert {r.chunk_id for r in resp.results} >= {
        r.chunk_id for r in mem.search("billing pool HEL-4040", mode="bm25").results
    }


def test_classic_rrf_reports_its_weights_and_is_unchanged(mem: Memory):
    resp = mem.search({"search_text": "billing pool", "hybrid_params": {"dense_weight": 2.0}})
    assert resp.fusion == "rrf" and resp.leg_weights == {"bm25": 1.0, "dense": 2.0}
    bm, de = (mem.search("billing pool", mode=m, top_k=20) for m in ("bm25", "vector"))
    expect = rrf([[r.chunk_id for r in bm.results], [r.chunk_id for r in de.results]], weights=[1.0, 2.0])
    assert [(r.chunk_id, round(r.rrf_score, 6)) for r in resp.results] == [(c, round(s, 6)) for c, s in expect[:10]]


def test_an_unknown_fusion_names_the_field(mem: Memory):
    with pytest.raises(ValidationError) as e:
        mem.search({"search_text": "x", "hybrid_params": {"fusion": "borda"}})
    assert e.value.field == "hybrid_params.fusion" and "adaptive" in str(e.value)


def test_the_model_file_ships_with_the_package():
    from importlib import resources

    data = json.loads(resources.files("hybridmem.retrieve").joinpath("fusion_model.json").read_text())
    assert AdaptiveModel.from_json(data) == shipped_model()


def test_score_fusions_fall_back_to_rrf_while_vectors_are_pending(tmp_path):
    with Memory(tmp_path / "p.db", embedder="hash", auto_embed=False) as m:
        m.add_documents([{"id": f"d{i}", "text": f"billing pool note {i}"} for i in range(6)])
        m.embed_pending(limit=2)
        resp = m.search({"search_text": "billing pool", "hybrid_params": {"fusion": "dbsf"}})
        assert resp.fusion == "rrf" and any("runs as rrf while 4 chunks wait" in w for w in resp.warnings)
        m.embed_pending()
        assert m.search({"search_text": "billing pool", "hybrid_params": {"fusion": "dbsf"}}).fusion == "dbsf"


# ---------------------------------------------------------------- a memory's default fusion
def test_a_memory_wide_default_fusion_applies_where_a_request_names_none(tmp_path, monkeypatch):
    monkeypatch.delenv("HYBRIDMEM_FUSION", raising=False)
    with Memory(tmp_path / "f.db", embedder="hash", fusion="adaptive") as m:
        m.add_documents([{"id": "a", "text": "billing pool HEL-4040"}, {"id": "b", "text": "pool sizing"}])
        m.wait_for_vectors()
        assert m.search("billing pool").fusion == "adaptive"
        assert m.search({"search_text": "billing pool", "hybrid_params": {"dense_weight": 2.0}}).fusion == "adaptive"
        assert m.search({"search_text": "billing pool", "hybrid_params": {"fusion": "rrf"}}).fusion == "rrf"
    monkeypatch.setenv("HYBRIDMEM_FUSION", "DBSF")
    with Memory(tmp_path / "f.db", embedder="hash") as m:
        assert m.search("billing pool").fusion == "dbsf"
    with Memory(tmp_path / "f.db", embedder="hash", fusion="rrf") as m:  # the argument wins over the variable
        assert m.search("billing pool").fusion == "rrf"


@pytest.mark.parametrize(("env", "arg", "needle"), [("borda", None, "HYBRIDMEM_FUSION"), (None, "borda", "fusion")])
def test_an_unknown_default_fusion_is_refused_at_open(tmp_path, monkeypatch, env, arg, needle):
    if env:
        monkeypatch.setenv("HYBRIDMEM_FUSION", env)
    else:
        monkeypatch.delenv("HYBRIDMEM_FUSION", raising=False)
    with pytest.raises(ValidationError, match=f"{needle}: unknown fusion 'borda'"):
        Memory(tmp_path / "g.db", embedder="hash", fusion=arg)


def test_the_harness_measures_classic_rrf_whatever_the_environment_says(tmp_path, monkeypatch):
    from hybridmem.eval.datasets import load_dataset
    from hybridmem.eval.harness import EvalConfig
    from hybridmem.eval.runner import run_mode

    monkeypatch.setenv("HYBRIDMEM_FUSION", "combmnz")
    ds = load_dataset("demo", "all").subset(["q01", "q02", "q03"], "all")
    with Memory(tmp_path / "h.db", embedder="hash") as m:
        m.add_documents(ds.docs[:10])
        m.wait_for_vectors()
        seen = []
        real = m.search

        def spy(req):
            resp = real(req)
            seen.append((req["mode"], resp.fusion))
            return resp

        m.search = spy  # type: ignore[method-assign]
        cfg = EvalConfig(modes=("hybrid",), embedder="hash")
        run_mode(m, ds, "hybrid", cfg, depth=False)
        run_mode(m, ds, "hybrid+adaptive", cfg, depth=False)
        run_mode(m, ds, "hybrid+time", cfg, depth=False)
        run_mode(m, ds, "hybrid+time+adaptive", cfg, depth=False)
    assert [f for _, f in seen] == ["rrf"] * 3 + ["adaptive"] * 3 + ["rrf"] * 3 + ["adaptive"] * 3
    assert {mode for mode, _ in seen} == {"hybrid"}  # the agent modes are hybrid queries


def test_the_adaptive_time_mode_is_compared_with_the_default_it_varies():
    from hybridmem.eval.compare import compare_modes
    from hybridmem.eval.modes import AGENT_MODES

    assert AGENT_MODES["hybrid+time+adaptive"][0] == {**AGENT_MODES["hybrid+time"][0], "fusion": "adaptive"}
    qids = ["a", "b", "c", "d"]

    def mode(ndcgs):
        return {
            "status": "ok",
            "metrics": {"all": {"ndcg@10": sum(ndcgs) / 4}},
            "per_query": {q: {"ndcg@10": v, "mrr@10": v} for q, v in zip(qids, ndcgs)},
        }

    modes = {
        "bm25": mode([0.1, 0.2, 0.3, 0.4]),
        "hybrid": mode([0.2, 0.2, 0.3, 0.4]),
        "hybrid+time": mode([0.2, 0.3, 0.3, 0.4]),
        "hybrid+time+adaptive": mode([0.3, 0.4, 0.4, 0.5]),
    }
    rows = [r for r in compare_modes(modes, "ndcg@10", 0) if r["a"] == "hybrid+time+adaptive"]
    assert [(r["b"], r["metric"]) for r in rows] == [("hybrid+time", "ndcg@10"), ("hybrid+time", "mrr@10")]
    assert rows[0]["mean_diff"] == pytest.approx(0.1)
    # without its base mode, no comparison (and no KeyError)
    del modes["hybrid+time"]
    assert not [r for r in compare_modes(modes, "ndcg@10", 0) if r["a"] == "hybrid+time+adaptive"]
