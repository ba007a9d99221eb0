"""Weighted Reciprocal Rank Fusion: the worked examples, the contract example, and invariants."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import shared_path
from hybridmem.models import QueryResult
from hybridmem.retrieve.fusion import DEFAULT_K, rrf

BM25 = [1, 7, 3]
VEC = [9, 7, 4]


def as_dict(fused):
    return dict(fused)


# ---------------------------------------------------------------- worked examples
def test_worked_example_k60():
    fused = rrf([BM25, VEC], k=60)
    items = [item for item, _ in fused]
    scores = as_dict(fused)
    assert DEFAULT_K == 60
    # 7 is in both lists at rank 2: 2/62 ~ 0.0323, first
    assert items[0] == 7
    assert scores[7] == pytest.approx(2 / 62)
    assert round(scores[7], 4) == 0.0323
    # 1 and 9 are first in one list only: 1/61 ~ 0.0164
    assert scores[1] == pytest.approx(1 / 61) and scores[9] == pytest.approx(1 / 61)
    assert round(scores[1], 4) == round(scores[9], 4) == 0.0164
    # 3 and 4 are third in one list only: 1/63 ~ 0.0159
    assert scores[3] == pytest.approx(1 / 63) and scores[4] == pytest.approx(1 / 63)
    assert round(scores[3], 4) == round(scores[4], 4) == 0.0159
    # ties are broken deterministically: leg order, then rank
    assert items == [7, 1, 9, 3, 4]
    assert len(fused) == 5


def test_default_k_is_60():
    assert rrf([BM25, VEC]) == rrf([BM25, VEC], k=60)


def test_first_in_one_list_loses_to_third_in_both():
    fused = rrf([["a", "x", "b"], ["y", "z", "b"]], k=60)
    scores = as_dict(fused)
    assert scores["b"] == pytest.approx(2 / 63)
    assert scores["a"] == pytest.approx(1 / 61)
    assert scores["b"] > scores["a"]
    assert fused[0][0] == "b"


def test_weights_change_order():
    fused = rrf([BM25, VEC], k=60, weights=[0.5, 1.0])
    scores = as_dict(fused)
    assert scores[7] == pytest.approx(0.5 / 62 + 1 / 62)
    assert scores[9] == pytest.approx(1 / 61)
    assert scores[4] == pytest.approx(1 / 63)
    assert scores[1] == pytest.approx(0.5 / 61)
    assert scores[3] == pytest.approx(0.5 / 63)
    # the down-weighted BM25 leg's own hits drop below the vector leg's
    assert [i for i, _ in fused] == [7, 9, 4, 1, 3]
    # unweighted, 1 ties 9 and wins the tie; weighted, 9 clearly beats 1
    assert scores[9] > scores[1]


def test_default_weights_equal_ones():
    assert rrf([BM25, VEC]) == rrf([BM25, VEC], weights=[1, 1]) == rrf([BM25, VEC], weights=[1.0, 1.0])


def test_zero_weight_removes_a_leg():
    scores = as_dict(rrf([BM25, VEC], weights=[0.0, 1.0]))
    assert scores[1] == 0 and scores[3] == 0
    assert scores[9] == pytest.approx(1 / 61)


def test_repeated_item_counts_at_best_rank_only():
    scores = as_dict(rrf([["a", "b", "a"]], k=60))
    assert scores["a"] == pytest.approx(1 / 61)


def test_empty_inputs():
    assert rrf([]) == []
    assert rrf([[], []]) == []


def test_weights_length_must_match():
    with pytest.raises(ValueError):
        rrf([BM25, VEC], weights=[1.0])


# ---------------------------------------------------------------- the contract example
def test_contract_example_scores_and_rounding():
    req = json.loads(shared_path("contract", "query_request.example.json").read_text())
    hp = req["hybrid_params"]
    k, wd, ws = hp["rrf_k_constant"], hp["dense_weight"], hp["sparse_weight"]
    assert (k, wd, ws) == (60, 0.6, 0.4)
    resp = json.loads(shared_path("contract", "query_response.example.json").read_text())
    # the response example: first in one leg, third in the other, weights 1
    unweighted = as_dict(rrf([["d", "x", "y"], ["p", "q", "d"]], k=k))["d"]
    assert unweighted == pytest.approx(1 / 61 + 1 / 63)
    # the example shows 0.0322 (1/61 + 1/63 = 0.03227 truncated); the serializer rounds it to 0.0323,
    # which the contract allows: the example is the shape, the value is within its last digit
    assert abs(unweighted - resp["results"][0]["rrf_score"]) < 1e-4
    assert round(unweighted, 4) == 0.0323
    # with the request's weights: dense first & sparse third, or the reverse
    dense_first = as_dict(rrf([["x", "y", "d"], ["d", "p", "q"]], k=k, weights=[ws, wd]))["d"]
    sparse_first = as_dict(rrf([["d", "x", "y"], ["p", "q", "d"]], k=k, weights=[ws, wd]))["d"]
    assert dense_first == pytest.approx(0.6 / 61 + 0.4 / 63)
    assert sparse_first == pytest.approx(0.4 / 61 + 0.6 / 63)
    # the contract serializes rrf_score rounded to 4 decimals
    for score, shown in ((dense_first, 0.0162), (sparse_first, 0.0161), (unweighted, 0.0323)):
        r = QueryResult(chunk_id="doc_8832_p4", rrf_score=score, text="t", doc_id="doc_8832")
        assert r.model_dump()["rrf_score"] == shown
        assert json.loads(r.model_dump_json())["rrf_score"] == shown
        assert r.rrf_score == score  # the in-memory value keeps full precision


# ---------------------------------------------------------------- invariants
items = st.integers(min_value=0, max_value=30)
ranking = st.lists(items, max_size=15)
rankings = st.lists(ranking, min_size=1, max_size=5)
ks = st.floats(min_value=0, max_value=1000, allow_nan=False, allow_infinity=False)
pos_weight = st.floats(min_value=0.01, max_value=100, allow_nan=False, allow_infinity=False)


@st.composite
def weighted_rankings(draw):
    rs = draw(rankings)
    ws = draw(st.lists(pos_weight, min_size=len(rs), max_size=len(rs)))
    return rs, ws


@given(weighted_rankings(), ks)
def test_scores_positive_and_sorted(rw, k):
    rs, ws = rw
    fused = rrf(rs, k=k, weights=ws)
    scores = [s for _, s in fused]
    assert all(s > 0 for s in scores)
    assert scores == sorted(scores, reverse=True)


@given(weighted_rankings(), ks)
def test_every_item_appears_once(rw, k):
    rs, ws = rw
    fused = rrf(rs, k=k, weights=ws)
    out = [i for i, _ in fused]
    assert len(out) == len(set(out))
    assert set(out) == {i for r in rs for i in r}


@given(weighted_rankings(), ks)
def test_score_bounded_by_best_possible(rw, k):
    rs, ws = rw
    bound = sum(ws) / (k + 1)
    for item, s in rrf(rs, k=k, weights=ws):
        assert s <= bound * (1 + 1e-12)
        # and exactly the sum of the weights of the lists that contain it, at their best rank
        expected = sum(w / (k + r.index(item) + 1) for r, w in zip(rs, ws) if item in r)
        assert s == pytest.approx(expected, rel=1e-9)


@given(weighted_rankings(), ranking, pos_weight, ks)
def test_adding_a_list_never_lowers_a_score(rw, extra, w, k):
    rs, ws = rw
    before = as_dict(rrf(rs, k=k, weights=ws))
    after = as_dict(rrf([*rs, extra], k=k, weights=[*ws, w]))
    for item, s in before.items():
        assert after[item] >= s * (1 - 1e-12)
    assert set(after) == set(before) | set(extra)


@given(weighted_rankings(), ks, st.randoms(use_true_random=False))
def test_list_order_does_not_change_scores(rw, k, rnd):
    rs, ws = rw
    pairs = list(zip(rs, ws))
    rnd.shuffle(pairs)
    a = as_dict(rrf(rs, k=k, weights=ws))
    b = as_dict(rrf([r for r, _ in pairs], k=k, weights=[w for _, w in pairs]))
    assert a.keys() == b.keys()
    for item in a:
        assert b[item] == pytest.approx(a[item], rel=1e-12, abs=0)


@given(rankings, st.floats(max_value=-1e-9, min_value=-1e6, allow_nan=False))
def test_negative_k_raises(rs, k):
    with pytest.raises(ValueError):
        rrf(rs, k=k)


@given(weighted_rankings(), st.floats(max_value=-1e-9, min_value=-1e6, allow_nan=False), st.data())
def test_negative_weight_raises(rw, neg, data):
    rs, ws = rw
    i = data.draw(st.integers(0, len(ws) - 1))
    ws = list(ws)
    ws[i] = neg
    with pytest.raises(ValueError):
        rrf(rs, weights=ws)
