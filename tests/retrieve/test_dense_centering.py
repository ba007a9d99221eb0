"""Dense centering (issue 17's recall): when the fused top results are conversation turns, the dense
leg ranks again with its query vector less ``dense_centering`` times the mean vector of the query's
scope (its pre-filter, else the namespace). Short generic turns sit close to every question; the
mean is what they share. On LoCoMo: nDCG@10 0.592 -> 0.603, Recall@10 0.776 -> 0.790
(docs/agent-memory.md).

Here, on both backends, against a brute force over the store's own vectors: the ranking it gives,
the scope its mean is taken over (the session, not the namespace; never another namespace), a
write moving the mean, weight 0, documents; and the request's bounds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hybridmem import Memory
from hybridmem.errors import ValidationError
from hybridmem.retrieve.search import CENTER_SAMPLE, CenteredEncoder, build_request

CHAT = [
    "Cool, talk soon!",
    "Sounds great, see you later.",
    "I adopted a puppy from the shelter last week.",
    "My sister plays the violin in an orchestra.",
    "We went camping by the lake with the kids.",
    "Haha yes, totally agree.",
    "The new job starts in March, I am nervous.",
    "Thanks so much, that means a lot!",
]
OTHER = ["The quarterly report is due on Friday.", "The lake froze early this year.", "Okay, bye!"]
QUESTION = "What pet did she get?"


def _ns_vectors(m: Memory, ns: str, chunk_ids: list[str]) -> tuple[list[int], np.ndarray]:
    rowids = list(m.store.rowids_for(ns, chunk_ids).values())
    ids, vecs = m.store.vectors_for(rowids, ns)
    return [int(i) for i in ids], np.asarray(vecs, np.float32)


def _expected_order(
    m: Memory, ns: str, scope_ids: list[str], share: float, mean_of: list[str] | None = None
) -> list[str]:
    """The scope's chunks by cosine with the query vector less ``share`` x the mean of the vectors of
    ``mean_of`` (default: the scope's)."""
    rowids, vecs = _ns_vectors(m, ns, scope_ids)
    q = np.asarray(m.embedders.vector(QUESTION), np.float32)
    if share:
        q = q - share * _ns_vectors(m, ns, mean_of or scope_ids)[1].mean(axis=0)
        q = q / np.linalg.norm(q)
    by_row = {r: c for c, r in m.store.rowids_for(ns, scope_ids).items()}
    scores = vecs @ q / np.linalg.norm(vecs, axis=1)
    return [by_row[rowids[i]] for i in np.argsort(-scores, kind="stable")]


def _dense_order(res) -> list[str]:  # type: ignore[no-untyped-def]
    return [r.chunk_id for r in sorted((r for r in res.results if "dense" in r.ranks), key=lambda r: r.ranks["dense"])]


def _chat(m: Memory, texts: list[str], session: str, namespace: str | None = None) -> list[str]:
    kw = {"namespace": namespace} if namespace else {}
    m.add_messages([{"role": "user", "name": "Bo", "content": t} for t in texts], session_id=session, **kw)
    m.embed_pending()
    return [f"{session}:{i}_p1" for i in range(len(texts))]


def test_centering_ranks_the_dense_leg_by_the_scope_centered_query(target: str | Path) -> None:
    with Memory(target, embedder="hash", auto_embed=False) as m:
        s1 = _chat(m, CHAT, "s1")
        _chat(m, OTHER, "s2")  # in the namespace, outside the question's session
        _chat(m, ["Completely unrelated words here.", *OTHER], "s1", namespace="elsewhere")
        res = m.search(QUESTION, session_id="s1", top_k=len(CHAT))
        assert res.legs["centering"].status == "ok" and res.legs["centering"].returned == len(CHAT)
        # the dense ranks are the brute force's over the session's vectors, centered by their mean
        # (the session's: not the namespace's with s2, not the other namespace's)
        order = _dense_order(res)
        assert order == _expected_order(m, "default", s1, 0.75)[: len(order)]
        assert all(r.session_id == "s1" for r in res.results)
        # the contract holds: Σ w / (k + rank) over the legs that ranked each result
        for r in res.results:
            assert r.rrf_score == pytest.approx(sum(res.leg_weights[g] / (60 + k) for g, k in r.ranks.items()))
        assert res.total_retrieved == len(res.results)
        # a share asked for, and 0: the plain leg, ranked by the plain cosine, and no second search
        half = m.search(QUESTION, session_id="s1", top_k=len(CHAT), hybrid_params={"dense_centering": 0.3})
        assert _dense_order(half) == _expected_order(m, "default", s1, 0.3)[: len(_dense_order(half))]
        plain = m.search(QUESTION, session_id="s1", top_k=len(CHAT), hybrid_params={"dense_centering": 0})
        assert "centering" not in plain.legs
        assert _dense_order(plain) == _expected_order(m, "default", s1, 0.0)[: len(_dense_order(plain))]
        assert _expected_order(m, "default", s1, 0.75) != _expected_order(m, "default", s1, 0.0)
        # a dense leg of weight 0 counts for nothing: no second search for it
        assert "centering" not in m.search(QUESTION, session_id="s1", hybrid_params={"dense_weight": 0}).legs


def test_without_a_scope_the_mean_is_the_namespace_s(target: str | Path) -> None:
    with Memory(target, embedder="hash", auto_embed=False) as m:
        ids = _chat(m, CHAT, "s1") + _chat(m, OTHER, "s2")
        _chat(m, ["Completely unrelated words here.", "Okay, bye!"], "s1", namespace="elsewhere")
        res = m.search(QUESTION, top_k=len(ids))
        assert res.legs["centering"].status == "ok"
        order = _dense_order(res)
        assert order == _expected_order(m, "default", ids, 0.75)[: len(order)]


def test_a_write_moves_the_mean(target: str | Path) -> None:
    with Memory(target, embedder="hash", auto_embed=False) as m:
        s1 = _chat(m, CHAT, "s1")
        m.search(QUESTION, session_id="s1", top_k=20)  # the mean of these 8 turns, cached
        old = list(s1)
        m.add_messages(
            [{"role": "user", "name": "Bo", "content": t} for t in ["Cool cool, later!", "See you soon, bye!"] * 3],
            session_id="s1",
        )
        m.embed_pending()
        s1 += [f"s1:{i}_p1" for i in range(len(CHAT), len(CHAT) + 6)]
        after = _dense_order(m.search(QUESTION, session_id="s1", top_k=20))
        assert after == _expected_order(m, "default", s1, 0.75)[: len(after)]
        # the cached mean of the 8 turns before would have ranked them otherwise
        assert after != _expected_order(m, "default", s1, 0.75, mean_of=old)[: len(after)]


def test_documents_keep_the_plain_dense_leg(target: str | Path) -> None:
    with Memory(target, embedder="hash", auto_embed=False) as m:
        m.add_documents([{"id": f"d{i}", "text": t} for i, t in enumerate(CHAT)])
        m.embed_pending()
        res = m.search(QUESTION, top_k=len(CHAT))
        assert "centering" not in res.legs
        plain = m.search(QUESTION, top_k=len(CHAT), hybrid_params={"dense_centering": 0})
        assert [(r.chunk_id, r.ranks) for r in res.results] == [(r.chunk_id, r.ranks) for r in plain.results]
        # and modes other than hybrid never center
        assert "centering" not in m.search(QUESTION, mode="vector").legs


def test_the_mean_reads_a_bounded_sample(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder="hash", auto_embed=False) as m:
        _chat(m, [f"Turn number {i} about nothing much." for i in range(CENTER_SAMPLE + 300)], "s1")
        asked: list[int] = []
        vectors_for = m.store.vectors_for

        def spy(rowids, namespace=None):  # type: ignore[no-untyped-def]
            asked.append(len(rowids))
            return vectors_for(rowids, namespace)

        m.store.vectors_for = spy  # type: ignore[method-assign]
        res = m.search("turn about nothing", session_id="s1")
        assert res.legs["centering"].status == "ok"
        assert asked and max(asked) <= CENTER_SAMPLE
        asked.clear()
        m.search("another question about turns", session_id="s1")
        assert not asked  # the mean is cached until a vector is written


def test_the_centered_encoder() -> None:
    class Fixed:
        name = "fixed"

        def vector(self, text: str) -> np.ndarray:
            return np.array([0.6, 0.8, 0.0], np.float32)

    q = CenteredEncoder(Fixed(), np.array([0.3, 0.0, 0.0], np.float32)).vector("x")
    assert np.linalg.norm(q) == pytest.approx(1.0) and q[0] == pytest.approx(0.3 / np.hypot(0.3, 0.8))
    # a query that is the shift itself is left as it is, never a zero vector (a NaN cosine)
    same = CenteredEncoder(Fixed(), np.array([0.6, 0.8, 0.0], np.float32)).vector("x")
    assert np.allclose(same, [0.6, 0.8, 0.0])


@pytest.mark.parametrize("bad", [-0.1, 2.5, float("nan"), "a lot"])
def test_the_share_is_validated(bad: object) -> None:
    with pytest.raises(ValidationError) as e:
        build_request({"search_text": "x", "hybrid_params": {"dense_centering": bad}})
    assert e.value.field == "hybrid_params.dense_centering"
