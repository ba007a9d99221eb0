"""The substance leg (issue 17's recall): when the fused top results are conversation turns, the fused
candidates are ranked again by how much each says (its distinct indexed terms), a query-independent
prior fused as one more RRF leg at ``substance_weight`` (the terms as indexed: a turn's own and the
last few of the turn before it). A turn that says little ("Thanks Ana, see
you!") matches every question by a name or a common word and, being short, tops BM25; evidence says
something. On LoCoMo: nDCG@10 0.603 -> 0.622, Recall@10 0.790 -> 0.801 (docs/agent-memory.md).

Here, on both backends: the leg's order and scores against the store's own tokens, the contract's
score with it, the turn it lifts, its depth, weight 0, documents, the pre-filter and the namespace
boundary; and the request's bounds."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from hybridmem import Memory
from hybridmem.errors import ValidationError
from hybridmem.retrieve.search import build_request

CHAT = [
    ("Ana", "Are you coming to the party on Saturday?"),
    ("Bo", "Sure, see you at the party!"),
    ("Ana", "Great, the party starts at eight."),
    ("Bo", "Party time, yay!"),
    ("Bo", "For the party I cooked a big pot of vegetable curry with rice, naan and mango chutney."),
    ("Ana", "Wow Bo, that sounds delicious."),
    ("Bo", "Thanks Ana!"),
    ("Ana", "My cat knocked the plant off the shelf again."),
]
QUESTION = "What did Bo cook for the party?"
TARGET = "s1:4"  # the one turn that answers: the longest, and BM25 prefers the short ones


def _chat(m: Memory, session: str = "s1", namespace: str | None = None) -> None:
    m.add_messages(
        [{"role": "user", "name": who, "content": text} for who, text in CHAT], session_id=session, namespace=namespace
    )
    m.embed_pending()


def _plain(**extra: float) -> dict[str, float]:
    """The other turn-only steps off, so that what moves is the substance leg's doing."""
    return {"feedback_weight": 0, "dense_centering": 0, "time_weight": 0, **extra}


def test_the_substance_leg_ranks_the_candidates_by_what_they_say(target: str | Path) -> None:
    with Memory(target, embedder="hash", auto_embed=False) as m:
        _chat(m)
        res = m.search(QUESTION, session_id="s1", top_k=len(CHAT), hybrid_params=_plain())
        assert res.legs["substance"].status == "ok" and res.leg_weights["substance"] == 1.0
        ranked = sorted((r for r in res.results if "substance" in r.ranks), key=lambda r: r.ranks["substance"])
        assert len(ranked) == res.legs["substance"].returned > 0
        # its score is the count of the turn's distinct indexed terms, from the store's own tokens
        rowids = m.store.rowids_for("default", [r.chunk_id for r in ranked])
        tokens = dict(m.store.tokens_for("default", list(rowids.values())))
        for r in ranked:
            assert r.scores["substance"] == len(set(tokens[rowids[r.chunk_id]].split()))
        counts = [r.scores["substance"] for r in ranked]
        assert counts == sorted(counts, reverse=True)
        assert ranked[0].doc_id == TARGET
        # the contract's score: one more term w / (k + rank)
        for r in res.results:
            expect = sum(res.leg_weights[leg] / (60 + rank) for leg, rank in r.ranks.items())
            assert r.rrf_score == pytest.approx(expect, rel=1e-6)
        assert res.total_retrieved == len(res.results)


def test_ties_keep_the_fused_order(target: str | Path) -> None:
    with Memory(target, embedder="hash", auto_embed=False) as m:
        sessions = [f"s{i}" for i in range(4)]  # one turn each: none is indexed with a turn before it
        for s, w in zip(sessions, ("apples", "pears", "plums", "cherries")):
            m.add_messages([{"role": "user", "name": "Bo", "content": f"party {w}"}], session_id=s)
        m.embed_pending()
        off = m.search("party", session_id=sessions, top_k=4, hybrid_params=_plain(substance_weight=0))
        on = m.search("party", session_id=sessions, top_k=4, hybrid_params=_plain())
        # every turn holds the same number of distinct terms: the leg repeats the fused order, which stays
        assert {r.scores["substance"] for r in on.results} == {3.0}
        assert [r.chunk_id for r in on.results] == [r.chunk_id for r in off.results]
        assert [r.ranks["substance"] for r in on.results] == [1, 2, 3, 4]


def test_the_leg_lifts_the_turn_that_says_something(target: str | Path) -> None:
    with Memory(target, embedder="hash", auto_embed=False) as m:
        _chat(m)
        on = m.search(QUESTION, session_id="s1", top_k=len(CHAT), hybrid_params=_plain())
        off = m.search(QUESTION, session_id="s1", top_k=len(CHAT), hybrid_params=_plain(substance_weight=0))
        assert "substance" not in off.legs and "substance" not in off.leg_weights
        assert all("substance" not in r.ranks for r in off.results)
        rank_off = [r.doc_id for r in off.results].index(TARGET)
        assert rank_off > 0  # a short party turn tops the fusion without the leg
        assert [r.doc_id for r in on.results].index(TARGET) < rank_off


def test_the_leg_ranks_the_fused_top_at_the_legs_depth(
    target: str | Path, token_reads: Callable[[Memory], list[list[int]]]
) -> None:
    with Memory(target, embedder="hash", auto_embed=False) as m:
        _chat(m)
        res = m.search(QUESTION, session_id="s1", top_k=2, fetch_k=3, hybrid_params=_plain())
        assert res.legs["substance"].returned == 3  # the fused top 3, not every candidate the legs found
        seen = token_reads(m)
        m.search(QUESTION, session_id="s1", top_k=2, fetch_k=3, hybrid_params=_plain())
        assert [len(s) for s in seen] == [3]  # one read, of the fused top 3
        assert m.search(QUESTION, session_id="s1", mode="bm25").legs.get("substance") is None
        assert m.search(QUESTION, session_id="s1", mode="vector").legs.get("substance") is None


def test_documents_do_not_get_the_substance_leg(target: str | Path) -> None:
    with Memory(target, embedder="hash", auto_embed=False) as m:
        m.add_documents([{"id": f"d{i}", "text": f"{who}: {text}"} for i, (who, text) in enumerate(CHAT)])
        m.embed_pending()
        res = m.search(QUESTION, top_k=8)
        assert "substance" not in res.legs and "substance" not in res.leg_weights
        assert all("substance" not in r.ranks for r in res.results)


def test_the_leg_keeps_the_pre_filter_and_the_namespace(target: str | Path) -> None:
    with Memory(target, embedder="hash", auto_embed=False) as m:
        _chat(m, "s1")
        long = "For the party Bo cooked a giant paella with saffron, prawns, mussels, chorizo and green beans."
        m.add_messages([{"role": "user", "name": "Cy", "content": long}], session_id="s2")
        _chat(m, "s1", namespace="other")
        m.add_messages([{"role": "user", "name": "Cy", "content": long}], session_id="s1", namespace="other")
        m.embed_pending()
        res = m.search(QUESTION, session_id="s1", top_k=len(CHAT) + 2, hybrid_params=_plain())
        assert res.legs["substance"].returned > 0
        assert {r.session_id for r in res.results} == {"s1"}
        assert {r.doc_id for r in res.results} <= {f"s1:{i}" for i in range(len(CHAT))}


@pytest.mark.parametrize("bad", [-0.5, float("nan"), float("inf"), 1001, "a lot"])
def test_the_weight_is_validated(bad: object) -> None:
    with pytest.raises(ValidationError) as e:
        build_request({"search_text": "q", "hybrid_params": {"substance_weight": bad}})
    assert e.value.field == "hybrid_params.substance_weight"
