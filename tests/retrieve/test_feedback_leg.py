"""The feedback leg (issue 17's recall): when the fused top results are conversation turns, BM25
runs again over the question's terms plus the rarest terms of those turns that the question lacks,
fused as one more RRF leg at ``feedback_weight``. On LoCoMo it took Recall@10 from 0.761 to 0.776
and nDCG@10 from 0.582 to 0.592 (p = 0.010; docs/agent-memory.md).

Here, in a search on both backends: the turn it reaches, the contract's score with it, weight 0,
documents, the pre-filter and the namespace boundary. Its document frequencies are checked against
a brute force in test_sparse_paths.py and, on PostgreSQL, in test_when_leg.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from hybridmem import Memory
from hybridmem.retrieve.search import FEEDBACK_DOCS

CHAT = [
    "Ana cooked lasagna for the garden party.",
    "Everyone loved the lasagna at the garden party.",
    *(f"The weather report for day {i} said clouds and wind." for i in range(8)),
    "My grandmother taught me lasagna in Bologna.",  # none of the question's words, nor has the turn before
]
QUESTION = "What was cooked for the garden party?"
TARGET = f"s1:{len(CHAT) - 1}"


def _chat(m: Memory, session: str = "s1") -> None:
    m.add_messages([{"role": "user", "name": "Bo", "content": t} for t in CHAT], session_id=session)
    m.embed_pending()


def test_the_feedback_leg_reaches_what_shares_the_top_turns_words(target: str | Path) -> None:
    with Memory(target, embedder="hash", auto_embed=False) as m:
        _chat(m)
        # the feedback leg alone against none (dense centering and the substance leg, which also move
        # turns, off in both)
        res = m.search(
            QUESTION, session_id="s1", top_k=len(CHAT), hybrid_params={"dense_centering": 0, "substance_weight": 0}
        )
        assert res.legs["feedback"].status == "ok" and res.legs["feedback"].returned > 0
        assert res.leg_weights["feedback"] == 1.0
        by_doc = {r.doc_id: r for r in res.results}
        # the top turns hold "lasagna"; the turn about the grandmother shares it and none of the
        # question's words: BM25 does not find it, the feedback leg does
        assert res.results[0].doc_id == "s1:0"
        assert "feedback" in by_doc[TARGET].ranks and "bm25" not in by_doc[TARGET].ranks
        # the contract's score: the feedback leg is one more term Σ w / (k + rank)
        for r in res.results:
            expect = sum(res.leg_weights[leg] / (60 + rank) for leg, rank in r.ranks.items())
            assert r.rrf_score == pytest.approx(expect, rel=1e-6)
        assert res.total_retrieved == len(res.results)
        plain = m.search(
            QUESTION,
            session_id="s1",
            top_k=len(CHAT),
            hybrid_params={"feedback_weight": 0, "dense_centering": 0, "substance_weight": 0},
        )
        assert "feedback" not in plain.legs and "feedback" not in plain.leg_weights
        assert all("feedback" not in r.ranks for r in plain.results)
        rank_with = [r.doc_id for r in res.results].index(TARGET)
        rank_without = [r.doc_id for r in plain.results].index(TARGET)
        assert rank_with < rank_without
        # bm25 and vector modes have no feedback leg
        assert "feedback" not in m.search(QUESTION, session_id="s1", mode="bm25").legs


def test_documents_do_not_get_the_feedback_leg(target: str | Path) -> None:
    with Memory(target, embedder="hash", auto_embed=False) as m:
        m.add_documents([{"id": f"d{i}", "text": t} for i, t in enumerate(CHAT)])
        m.embed_pending()
        res = m.search(QUESTION, top_k=8)
        assert res.legs["feedback"].returned == 0 and "feedback" not in res.leg_weights
        assert all("feedback" not in r.ranks for r in res.results)


def test_the_feedback_leg_keeps_the_pre_filter_and_the_namespace(target: str | Path) -> None:
    with Memory(target, embedder="hash", auto_embed=False) as m:
        _chat(m, "s1")
        # another session holds the expansion words: the session filter keeps it out of every leg
        m.add_messages(
            [{"role": "user", "name": "Cy", "content": "Lasagna from Bologna, my grandmother taught me."}],
            session_id="s2",
        )
        m.embed_pending()
        res = m.search(QUESTION, session_id="s1", top_k=10)
        assert res.legs["feedback"].returned > 0
        assert all(r.session_id == "s1" for r in res.results)
    with Memory(target, embedder="hash", auto_embed=False, namespace="other") as o:
        o.add_messages(
            [{"role": "user", "name": "Cy", "content": "lasagna bologna grandmother taught"}] * 3, session_id="s1"
        )
        o.embed_pending()
    with Memory(target, embedder="hash", auto_embed=False) as m:
        res = m.search(QUESTION, session_id="s1", top_k=20)
        assert res.legs["feedback"].returned > 0
        assert {r.speaker for r in res.results} == {"Bo"} and len(res.results) == len(CHAT)


def test_the_feedback_leg_reads_the_fused_top_only(
    tmp_path: Path, token_reads: Callable[[Memory], list[list[int]]]
) -> None:
    with Memory(tmp_path / "m.db", embedder="hash", auto_embed=False) as m:
        _chat(m)
        seen = token_reads(m)
        m.search(QUESTION, session_id="s1", hybrid_params={"substance_weight": 0})  # it reads the fused top too
        assert seen and all(len(s) <= FEEDBACK_DOCS for s in seen)
