"""Precomputed vectors (``add(..., vector=)``, ``add_documents`` with ``vector``, ``update``,
``remember``, the async twins): checked against the store's embedder before the store sees them,
stored normalised as the embedder's own, the model never called for them; on both backends."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from hybridmem import Memory
from hybridmem.embed.hashing import HashEmbedder
from hybridmem.errors import ValidationError

DIM = 64
QUERY = "zebra quantum harbour"


class CountingEmbedder(HashEmbedder):
    """The hash embedder, counting the texts it embeds (documents and queries)."""

    def __init__(self) -> None:
        super().__init__(DIM)
        self.documents = 0
        self.queries = 0

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.documents += len(texts)
        return super().embed_documents(texts)

    def embed_query(self, text: str) -> np.ndarray:
        self.queries += 1
        return super().embed_query(text)


@pytest.fixture
def mem(target: str | Path) -> Iterator[tuple[Memory, CountingEmbedder]]:
    emb = CountingEmbedder()
    m = Memory(target, embedder=emb, auto_embed=False)
    try:
        yield m, emb
    finally:
        m.close()


def _stored(m: Memory, chunk_id: str) -> np.ndarray:
    rowid = m.store.rowids_for(m.namespace, [chunk_id])[chunk_id]
    _, matrix = m.store.vectors_for([rowid], m.namespace)
    return np.asarray(matrix[0])


def test_vectors_are_stored_as_given_and_searched_without_a_model_call(mem: tuple[Memory, CountingEmbedder]) -> None:
    m, emb = mem
    q = HashEmbedder(DIM).embed_query(QUERY)  # what the store's embedder gives the query
    raw = q * 7.5  # not normalised: stored normalised, as the embedder's vectors are
    m.add("The cafeteria menu changes on Mondays.", id="menu", vector=raw.tolist())
    other = HashEmbedder(DIM).embed_documents(["Backups run nightly at 02:00."])[0]
    report = m.add_documents(
        [
            {"id": "backup", "text": "Backups run nightly at 02:00.", "vector": other},  # a numpy array
            {"id": "plain", "text": "Zebra crossings near the quantum lab harbour."},  # no vector: queued
        ]
    )
    assert sorted(report.added) == ["backup", "plain"]
    assert emb.documents == 0 and emb.queries == 0
    assert m.store.pending_count(m.namespace) == 1  # only the document without a vector waits
    assert m.stats().vectors == 2
    np.testing.assert_allclose(_stored(m, "menu_p1"), q, atol=1e-6)
    assert abs(float(np.linalg.norm(_stored(m, "menu_p1"))) - 1.0) < 1e-6
    m.wait_for_vectors()
    assert emb.documents == 1  # the queued one, and only it
    resp = m.search(QUERY, mode="vector", top_k=3)
    # the menu's text shares nothing with the query; its vector is the query's own
    assert resp.results[0].doc_id == "menu"
    assert resp.results[0].ranks == {"dense": 1}
    assert emb.documents == 1


def test_bad_vectors_are_refused_before_the_store(mem: tuple[Memory, CountingEmbedder]) -> None:
    m, emb = mem
    good = [0.5] * DIM
    cases: list[tuple[object, str]] = [
        (
            [1.0] * (DIM - 1),
            f"dimension {DIM - 1}, but the store's embedder hash:{DIM} gives vectors of dimension {DIM}",
        ),
        (np.ones((1, DIM)), "1-D"),
        ([float("nan")] + good[1:], "finite"),
        ([float("inf")] + good[1:], "finite"),
        (np.array([np.nan] * DIM), "finite"),
        ([0.0] * DIM, "all-zero"),
        (["0.5"] * DIM, "numbers"),
        ([True] * DIM, "numbers"),
        ([[0.5]] * DIM, "numbers"),
        (np.array(["a"] * DIM), "numeric"),
        ("0.5, 0.5", "list of numbers"),
        ([0.5] * 20_000, "more than 16000"),
    ]
    for value, words in cases:
        with pytest.raises(ValidationError, match=words) as e:
            m.add("One short memory.", id="x", vector=value)
        assert e.value.field == "vector", value
    long_text = "\n\n".join(f"Paragraph {i} " + "word " * 200 for i in range(10))
    with pytest.raises(ValidationError, match=r"this text makes \d+ \(chunk_size 1200\)") as e:
        m.add(long_text, id="long", vector=good)
    assert e.value.field == "vector"
    docs = [{"id": f"d{i}", "text": f"memory {i}", "vector": good} for i in range(3)]
    docs[2]["vector"] = good[:-1]
    with pytest.raises(ValidationError, match=f"dimension {DIM - 1}") as e:
        m.add_documents(docs)
    assert e.value.field == "documents[2].vector"
    assert m.stats().documents == 0 and m.store.pending_count(m.namespace) == 0  # nothing of the batch written
    report = m.add_documents(docs, skip_invalid=True)
    assert report.added == ["d0", "d1"] and report.skipped[0]["path"] == "d2"
    assert "documents[2].vector" in report.skipped[0]["reason"]
    assert emb.documents == 0


def test_huge_and_tiny_values_normalise(mem: tuple[Memory, CountingEmbedder]) -> None:
    m, _ = mem
    huge = [1e308] * DIM
    tiny = [5e-324] * (DIM - 1) + [1e-323]
    m.add_documents(
        [{"id": "huge", "text": "huge values", "vector": huge}, {"id": "tiny", "text": "tiny", "vector": tiny}]
    )
    for cid in ("huge_p1", "tiny_p1"):
        v = _stored(m, cid)
        assert np.isfinite(v).all() and abs(float(np.linalg.norm(v)) - 1.0) < 1e-5


def test_same_vector_is_a_no_op_a_new_one_replaces_and_an_update_without_one_requeues(
    mem: tuple[Memory, CountingEmbedder],
) -> None:
    m, emb = mem
    a = HashEmbedder(DIM).embed_query("first vector")
    b = HashEmbedder(DIM).embed_query("second vector")
    m.add("Rotate the TLS certificates every 90 days.", id="tls", vector=a)
    assert m.add("Rotate the TLS certificates every 90 days.", id="tls", vector=a).unchanged == ["tls"]
    assert m.add("Rotate the TLS certificates every 90 days.", id="tls", vector=b).updated == ["tls"]
    np.testing.assert_allclose(_stored(m, "tls_p1"), b, atol=1e-6)
    assert m.store.pending_count(m.namespace) == 0
    m.update("tls", "Rotate the TLS certificates every 30 days.")  # new text, no vector: embedded again
    assert m.store.pending_count(m.namespace) == 1
    m.wait_for_vectors()
    assert emb.documents == 1
    np.testing.assert_allclose(
        _stored(m, "tls_p1"),
        HashEmbedder(DIM).embed_documents(["Rotate the TLS certificates every 30 days."])[0],
        atol=1e-6,
    )
    m.update("tls", "Rotate the TLS certificates every 7 days.", vector=a)  # new text with its vector
    assert m.store.pending_count(m.namespace) == 0 and emb.documents == 1
    np.testing.assert_allclose(_stored(m, "tls_p1"), a, atol=1e-6)
    # the add with a new vector replaced version 1 (an add keeps no history); the updates keep theirs
    assert [(v["version"], v["current"]) for v in m.history("tls")] == [(2, False), (3, False), (4, True)]


def test_remember_and_the_async_twins_take_a_vector(mem: tuple[Memory, CountingEmbedder]) -> None:
    m, emb = mem
    q = HashEmbedder(DIM).embed_query(QUERY)
    d = m.remember("Priya prefers green tea.", user_id="u1", vector=q)
    assert d.event == "ADD" and d.id is not None
    with pytest.raises(ValidationError) as e:
        m.remember("Priya lives in Lyon.", user_id="u1", vector=[1.0, 2.0])
    assert e.value.field == "vector"

    async def run() -> None:
        await m.aadd("Async memory one.", id="as1", vector=q)
        await m.aadd_documents([{"id": "as2", "text": "Async memory two.", "vector": q.tolist()}])
        await m.aupdate("as1", "Async memory one, changed.", vector=q)

    asyncio.run(run())
    assert m.store.pending_count(m.namespace) == 0 and emb.documents == 0
    hits = m.search(QUERY, mode="vector", top_k=3, user_id="u1").results
    assert hits[0].doc_id == d.id


def test_the_conflict_check_keeps_the_vector_of_the_text_it_writes(target: str | Path) -> None:
    from llm_fakes import ScriptedChatModel

    def verdict(event: str, target_id: str | None = None, text: str | None = None) -> str:
        return json.dumps({"event": event, "target_id": target_id, "text": text, "reason": "because"})

    emb = CountingEmbedder()
    llm = ScriptedChatModel([])  # no memory to compare with yet: ADD without asking
    with Memory(target, embedder=emb, llm=llm, auto_embed=False) as m:
        q = HashEmbedder(DIM).embed_query(QUERY)
        d = m.remember("The billing pool allows 100 connections.", user_id="u1", id="pool", vector=q, reconcile=True)
        assert d.event == "ADD" and m.store.pending_count(m.namespace) == 0
        np.testing.assert_allclose(_stored(m, "pool_p1"), q, atol=1e-6)
        new = "The billing pool allows 200 connections."
        llm.replies.append(verdict("UPDATE", "pool", new))  # the statement as it is: its vector stays
        assert m.remember(new, user_id="u1", vector=q, reconcile=True).event == "UPDATE"
        assert m.store.pending_count(m.namespace) == 0
        llm.replies.append(verdict("UPDATE", "pool", "The billing pool allows 300 connections (was 200)."))
        assert m.remember("Pool: 300 now.", user_id="u1", vector=q, reconcile=True).event == "UPDATE"
        assert m.store.pending_count(m.namespace) == 1  # the model's own text: embedded by the worker
        assert emb.documents == 0
