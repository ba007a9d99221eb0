"""Hybrid while vectors are pending (issue 15): the few chunks embedded so far must not take the top
of every answer, and the worker says how it is progressing."""

from __future__ import annotations

import random

import pytest

from hybridmem import Memory
from hybridmem.retrieve.fusion import rrf

TOPICS = ["walrus", "otter", "badger", "ferret", "lynx", "heron", "marten", "stoat", "vole", "hare"]


def _docs() -> list[dict[str, str]]:
    rng = random.Random(7)
    docs = []
    for i in range(60):
        topic = TOPICS[i % len(TOPICS)]
        filler = " ".join(rng.choice(TOPICS) for _ in range(3))
        docs.append({"id": f"d{i}", "text": f"A note about the {topic} ({i}), seen near {filler}."})
    return docs


def test_rrf_rank_scales_and_stand_in_ranks() -> None:
    # a list that ranked a tenth of the items: its first item stands where it is expected, at rank 10
    fused = dict(rrf([[1, 2], [3]], k=60, rank_scales=[1.0, 10.0]))
    assert fused[3] == pytest.approx(1 / 70) and fused[1] == pytest.approx(1 / 61)
    # a stand-in rank adds to an item already ranked elsewhere, and never brings in a new one
    fused = dict(rrf([[1, 2], [3]], k=60, imputed=[[], [(2, 2.0), (9, 1.0)]]))
    assert fused[2] == pytest.approx(2 / 62) and 9 not in fused
    with pytest.raises(ValueError):
        rrf([[1]], rank_scales=[0.0])


@pytest.mark.parametrize("policy", ["impute", "none"])
def test_few_vectors_do_not_take_the_top(tmp_path, policy: str) -> None:
    with Memory(tmp_path / "m.db", embedder="hash", auto_embed=False) as mem:
        mem.add_documents(_docs())
        mem.embed_pending(limit=3)  # 3 of 60 chunks have a vector: the state after a plain ingest
        mem.searcher.partial_dense = policy
        unrelated = 0
        for topic in TOPICS:
            resp = mem.search(f"the {topic}", top_k=5)
            assert resp.pending_vectors == 57 and "57 of 60 chunks wait" in resp.warnings[0]
            assert len(resp.results) == 5
            unrelated += sum(topic not in r.text for r in resp.results)
        if policy == "impute":
            assert unrelated == 0  # every answer holds its topic while the dense leg sees 5% of the memory
        else:
            assert unrelated >= 10  # plain RRF: the 3 embedded chunks climb into unrelated answers


def test_full_coverage_is_plain_rrf(tmp_path) -> None:
    with Memory(tmp_path / "m.db", embedder="hash", auto_embed=False) as mem:
        mem.add_documents(_docs())
        mem.embed_pending()
        for topic in TOPICS[:4]:
            out = {}
            for policy in ("impute", "none", "rank", "weight", "drop", "impute-rank"):
                mem.searcher.partial_dense = policy
                resp = mem.search(f"the {topic}", top_k=10)
                assert resp.warnings == []
                out[policy] = [(r.chunk_id, r.rrf_score) for r in resp.results]
            assert all(v == out["none"] for v in out.values())


def test_worker_status_reports_progress(tmp_path) -> None:
    with Memory(tmp_path / "m.db", embedder="hash", auto_embed=False) as mem:
        mem.add_documents(_docs())
        assert mem.stats().worker is None  # it never ran in this process
        mem.embed_pending(limit=20)
        st = mem.worker_status()
        assert st.vectors_last_minute == 20 and st.stored_total == 20 and st.pending == 40
        assert st.vectors_per_s == round(20 / 60, 3) and st.last_batch_s_ago is not None
        assert st.error is None and st.batch_running_s is None
        assert mem.stats().worker is not None and mem.stats().worker.stored_total == 20
