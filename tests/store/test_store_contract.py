"""The store contract suite: the Memory facade over each backend (an SQLite file, a PostgreSQL
database) — writes, updates, deletes, namespaces, filters, the contract, validation, async, and leg
isolation. Every test taking ``mem`` or ``target`` runs once per backend (PostgreSQL 18 + pgvector
from tests/pg_utils.py; CI requires it). Uses the deterministic hash embedder."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time

import numpy as np
import pytest

from conftest import shared_path
from hybridmem import (
    EmbedderMismatchError,
    FilterError,
    HybridMemError,
    Memory,
    NotFoundError,
    QueryRequest,
    QueryResponse,
    StoreError,
    ValidationError,
)
from hybridmem.text.chunk import chunk_text

MODES = ("bm25", "vector", "hybrid")


@pytest.fixture
def mem(target):  # ``target`` (conftest): each backend in turn
    m = Memory(target, embedder="hash", auto_embed=False)
    try:
        yield m
    finally:
        m.close()


def ids(resp) -> list[str]:
    return [r.doc_id for r in resp.results]


def chunk_ids(resp) -> list[str]:
    return [r.chunk_id for r in resp.results]


def long_doc(paragraphs: list[str]) -> str:
    return "\n\n".join(paragraphs)


def para(word: str, n: int = 9) -> str:
    # ~450 characters of prose about one distinctive word
    return " ".join(f"Sentence {i} mentions the {word} subsystem and its behaviour." for i in range(n))


# ---------------------------------------------------------------- add / update
def test_add_then_readd_unchanged_is_noop(mem):
    r1 = mem.add("Increase max_connections to 200.", id="d1", metadata={"service": "billing"})
    assert r1.added == ["d1"] and r1.chunks_written == 1 and r1.pending_vectors == 1
    mem.wait_for_vectors()
    before = mem.get("d1")
    r2 = mem.add("Increase max_connections to 200.", id="d1", metadata={"service": "billing"})
    assert r2.unchanged == ["d1"]
    assert r2.added == [] and r2.updated == [] and r2.chunks_written == 0
    assert r2.pending_vectors == 0  # nothing re-queued
    after = mem.get("d1")
    assert after["updated_at"] == before["updated_at"] and after["content_hash"] == before["content_hash"]
    st = mem.stats()
    assert (st.documents, st.chunks, st.vectors) == (1, 1, 1)


def test_same_text_new_metadata_is_an_update(mem):
    mem.add("Increase max_connections to 200.", id="d1", metadata={"service": "billing"})
    r = mem.add("Increase max_connections to 200.", id="d1", metadata={"service": "auth"})
    assert r.updated == ["d1"]
    assert mem.get("d1")["metadata"] == {"service": "auth"}
    assert ids(mem.search("max_connections", mode="bm25", metadata_filter={"service": "auth"})) == ["d1"]
    assert ids(mem.search("max_connections", mode="bm25", metadata_filter={"service": "billing"})) == []


def test_auto_id_is_content_derived(mem):
    a = mem.add("A memory without an explicit id.")
    b = mem.add("A memory without an explicit id.")
    assert a.added and a.added[0].startswith("mem-")
    assert b.unchanged == a.added


def test_update_reindexes_both_legs(mem):
    mem.add("Grafana dashboards show the quokkaflux latency spike.", id="d1")
    mem.add("Unrelated note about lunch menus and coffee.", id="other1")
    mem.add("Another unrelated note about parking spaces.", id="other2")
    mem.wait_for_vectors()
    old_text = "Grafana dashboards show the quokkaflux latency spike."
    assert ids(mem.search("quokkaflux", mode="bm25")) == ["d1"]
    hit = mem.search(old_text, mode="vector", top_k=1).results[0]
    assert hit.doc_id == "d1" and hit.scores["dense"] == pytest.approx(1.0, abs=1e-5)

    new_text = "Kibana shows the zebrawave error rate after the deploy."
    r = mem.update(
        "d1", new_text, keep_history=False
    )  # (the default keeps it: tests/agent_memory/test_agent_memory.py)
    assert r.updated == ["d1"] and r.vectors_reused == 0 and r.pending_vectors == 1
    mem.wait_for_vectors()
    assert mem.stats().vectors == 3  # the old vector is gone, not kept beside the new one
    # BM25: old words gone, new words found
    assert mem.search("quokkaflux", mode="bm25").results == []
    assert ids(mem.search("zebrawave", mode="bm25")) == ["d1"]
    # vectors: the old text's vector is gone, the new one is there
    for r_ in mem.search(old_text, mode="vector", top_k=10).results:
        assert r_.text != old_text
        assert r_.scores["dense"] < 0.99
    hit = mem.search(new_text, mode="vector", top_k=1).results[0]
    assert hit.doc_id == "d1" and hit.text == new_text
    assert hit.scores["dense"] == pytest.approx(1.0, abs=1e-5)


def test_update_keeps_metadata_and_unknown_doc_raises(mem):
    mem.add("first version", id="d1", metadata={"env": "prod"}, source="a.md")
    mem.update("d1", "second version")
    doc = mem.get("d1")
    assert doc["metadata"] == {"env": "prod"} and doc["source"] == "a.md"
    assert [c["text"] for c in doc["chunks"]] == ["second version"]
    with pytest.raises(NotFoundError, match="nope"):
        mem.update("nope", "text")
    with pytest.raises(NotFoundError):
        mem.get("nope")


def test_unchanged_chunks_keep_their_vectors(mem):
    paras = [para(w) for w in ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot")]
    old = long_doc(paras)
    r1 = mem.add(old, id="big")
    old_chunks = chunk_text(old, mem.chunk_size, mem.chunk_overlap)
    assert r1.chunks_written == len(old_chunks) >= 3
    assert mem.embed_pending() == len(old_chunks)
    vec_before = {
        r.text: mem.store.vectors_for([r.rowid])[1][0].copy()
        for r in mem.store.fetch(mem.store.filter_rowids("default", None)).values()
    }

    new = long_doc(paras[:-1] + [para("golf")])  # only the last paragraph changes
    new_chunks = chunk_text(new, mem.chunk_size, mem.chunk_overlap)
    same = [c for c in new_chunks if c in set(old_chunks)]
    assert 1 <= len(same) < len(new_chunks)
    r2 = mem.update("big", new, keep_history=False)  # counts of a replace (history: test_agent_memory)
    assert r2.updated == ["big"]
    assert r2.chunks_written == len(new_chunks)
    assert r2.vectors_reused == len(same)
    assert r2.pending_vectors == len(new_chunks) - len(same)
    st = mem.stats()
    assert st.vectors == len(same) and st.pending_vectors == len(new_chunks) - len(same)
    # the reused vectors are the very same bytes
    for row in mem.store.fetch(mem.store.filter_rowids("default", None)).values():
        if row.text in same:
            _, vecs = mem.store.vectors_for([row.rowid])
            assert (vecs[0] == vec_before[row.text]).all()
    # and they are visible to the dense leg before the changed chunk is embedded
    resp = mem.search(same[0], mode="vector", top_k=1)
    assert resp.results[0].text == same[0] and resp.pending_vectors == len(new_chunks) - len(same)
    assert mem.embed_pending() == len(new_chunks) - len(same)
    assert mem.stats().pending_vectors == 0


# ---------------------------------------------------------------- delete
def _both_legs(mem, query: str, top_k: int = 50) -> dict[str, list[str]]:
    return {m: chunk_ids(mem.search(query, mode=m, top_k=top_k)) for m in ("bm25", "vector")}


def test_delete_by_doc_id_removes_from_both_legs(mem):
    mem.add("The walrusbeacon service crashed at midnight.", id="A")
    mem.add("The penguinlight service was restarted.", id="B")
    mem.wait_for_vectors()
    legs = _both_legs(mem, "walrusbeacon service crashed")
    assert "A_p1" in legs["bm25"] and "A_p1" in legs["vector"]
    assert mem.delete("A") == ["A"]
    legs = _both_legs(mem, "walrusbeacon service crashed")
    assert "A_p1" not in legs["bm25"] and "A_p1" not in legs["vector"]
    assert legs["vector"] == ["B_p1"]  # the dense index holds only what is left
    assert mem.search("walrusbeacon", mode="bm25").results == []
    st = mem.stats()
    assert (st.documents, st.chunks, st.vectors, st.pending_vectors) == (1, 1, 1, 0)
    with pytest.raises(NotFoundError):
        mem.get("A")


def test_delete_by_chunk_id_removes_only_that_chunk(mem):
    text = long_doc([para(w) for w in ("kestrel", "osprey", "harrier", "merlin")])
    n = mem.add(text, id="birds").chunks_written
    assert n >= 3
    mem.wait_for_vectors()
    doc = mem.get("birds")
    victim = doc["chunks"][1]
    assert victim["chunk_id"] == "birds_p2"
    legs = _both_legs(mem, victim["text"])
    assert legs["bm25"][0] == "birds_p2" and legs["vector"][0] == "birds_p2"
    assert mem.delete("birds_p2") == ["birds_p2"]
    legs = _both_legs(mem, victim["text"])
    for leg in legs.values():
        assert "birds_p2" not in leg
        assert "birds_p1" in leg  # the rest of the document stays
    assert len(legs["vector"]) == n - 1
    assert [c["chunk_id"] for c in mem.get("birds")["chunks"]] == [f"birds_p{i}" for i in range(1, n + 1) if i != 2]


def test_deleting_last_chunk_deletes_document(mem):
    mem.add("a single chunk", id="solo")
    assert mem.delete(["solo_p1"]) == ["solo_p1"]
    with pytest.raises(NotFoundError):
        mem.get("solo")
    assert mem.stats().documents == 0


def test_delete_before_embedding_clears_the_queue(mem):
    mem.add("queued but never embedded", id="q")
    assert mem.stats().pending_vectors == 1
    assert mem.delete("q") == ["q"]
    assert mem.stats().pending_vectors == 0
    assert mem.embed_pending() == 0


def test_delete_unknown_id(mem):
    assert mem.delete("nothing-here") == []
    assert mem.delete(["nothing-here"], namespace="never-created") == []
    mem.add("something", id="x")
    assert mem.delete(["nothing-here", "x"]) == ["x"]


# ---------------------------------------------------------------- namespaces
def test_namespaces_are_a_hard_boundary(mem):
    a_texts = [f"Tenant A secret: the narwhalcode for vault {i} is rotated weekly." for i in range(5)]
    for i, t in enumerate(a_texts):
        mem.add(t, id=f"a{i}", metadata={"team": "red"}, namespace="A")
    mem.add("Tenant B notes about gardening and tomatoes.", id="b0", metadata={"owner": "bob"}, namespace="B")
    mem.add("Tenant B notes about the vault of the bank.", id="b1", metadata={"owner": "bob"}, namespace="B")
    # the same id in two namespaces is two documents
    mem.add("shared id in A narwhalcode", id="same", namespace="A")
    mem.add("shared id in B", id="same", namespace="B")
    mem.wait_for_vectors()
    a_chunk_texts = set(a_texts) | {"shared id in A narwhalcode"}
    for mode in MODES:
        for q in [a_texts[0], "narwhalcode vault rotated", "Tenant secret"]:
            resp = mem.search(q, mode=mode, top_k=50, namespace="B")
            assert resp.namespace == "B"
            assert set(ids(resp)) <= {"b0", "b1", "same"}
            assert not {r.text for r in resp.results} & a_chunk_texts
        # and A sees its data
        resp_a = mem.search("narwhalcode vault", mode=mode, top_k=50, namespace="A")
        assert resp_a.results and {r.text for r in resp_a.results} <= a_chunk_texts
    # filter keys of A are unknown in B: nothing of A comes through, and B's answer says the key is unknown
    resp = mem.search("vault", namespace="B", metadata_filter={"team": "red"})
    assert resp.results == [] and "'team'" in resp.warnings[0] and "owner" in resp.warnings[0]
    assert mem.search("vault", namespace="B", metadata_filter={"owner": "bob"}).results
    assert ids(mem.search("narwhalcode", namespace="A", mode="bm25", metadata_filter={"team": "red"}))
    # deleting in one namespace leaves the other alone
    assert mem.delete("same", namespace="B") == ["same"]
    assert mem.get("same", namespace="A")["chunks"][0]["text"] == "shared id in A narwhalcode"
    assert mem.stats("A").documents == 6 and mem.stats("B").documents == 2
    assert mem.stats().namespaces == ["A", "B"]
    # an empty or unknown namespace answers nothing, without error
    assert mem.search("narwhalcode", namespace="C").results == []


def test_the_by_id_reads_keep_to_the_namespace_they_are_given(mem):
    """fetch, vectors_for and pending_among, given a namespace (as the query path always gives
    it), return none of another namespace's rows: a second guard behind the legs' pre-filter, and
    the namespace that lets a distributed PostgreSQL route the read to one shard."""
    mem.add_documents([{"id": f"a{i}", "text": f"alpha note {i} about the pool"} for i in range(3)], namespace="A")
    mem.add_documents([{"id": f"b{i}", "text": f"beta note {i} about the pool"} for i in range(2)], namespace="B")
    st = mem.store
    a, b = st.filter_rowids("A", None).tolist(), st.filter_rowids("B", None).tolist()
    both = a + b
    assert len(a) == 3 and len(b) == 2
    # nothing embedded yet: every chunk waits, and each namespace sees only its own
    assert st.pending_among(both) == set(both)
    assert st.pending_among(both, "A") == set(a) and st.pending_among(both, "B") == set(b)
    assert st.pending_among(both, "nowhere") == set()
    mem.embed_pending()
    assert st.pending_among(both, "A") == set()
    assert set(st.fetch(both)) == set(both)
    assert set(st.fetch(both, "A")) == set(a) and set(st.fetch(both, "B")) == set(b)
    assert all(row.text.startswith("alpha") for row in st.fetch(both, "A").values())
    assert st.fetch(both, "nowhere") == {}
    ids_all, vecs_all = st.vectors_for(both)
    ids_a, vecs_a = st.vectors_for(both, "A")
    assert sorted(ids_all.tolist()) == sorted(both) and sorted(ids_a.tolist()) == sorted(a)
    by_id = {int(i): v for i, v in zip(ids_all, vecs_all)}
    assert all(np.array_equal(by_id[int(i)], v) for i, v in zip(ids_a, vecs_a))
    assert len(st.vectors_for(both, "nowhere")[0]) == 0


def test_bad_namespace(mem):
    with pytest.raises(ValidationError) as ei:
        mem.add("x", namespace="")
    assert ei.value.field == "namespace"


# ---------------------------------------------------------------- filters through the store
@pytest.fixture
def envs(mem):
    docs = []
    for i in range(30):
        docs.append(
            {
                "id": f"prod-{i}",
                "text": f"Database connection pool exhausted on host {i}.",
                "metadata": {"environment": "production", "n": i},
            }
        )
        # staging documents match the query better: a post-filter on a short list would starve
        docs.append(
            {
                "id": f"stg-{i}",
                "text": f"Database connection pool exhausted timeout error timeout error on host {i}.",
                "metadata": {"environment": "staging", "n": i},
            }
        )
    mem.add_documents(docs)
    mem.wait_for_vectors()
    return mem


@pytest.mark.parametrize("mode", MODES)
def test_filter_never_leaks_and_fills_top_k(envs, mode):
    q = "connection pool exhausted timeout error"
    # unfiltered, staging dominates the top
    top = envs.search(q, mode=mode, top_k=10)
    if mode != "vector":
        assert all(d.startswith("stg-") for d in ids(top))
    for k in (1, 10, 30):
        resp = envs.search(q, mode=mode, top_k=k, metadata_filter={"environment": "production"})
        assert len(resp.results) == k == resp.total_retrieved
        assert all(r.metadata["environment"] == "production" for r in resp.results)
        assert all(d.startswith("prod-") for d in ids(resp))
    resp = envs.search(q, mode=mode, top_k=50, metadata_filter={"environment": "production"})
    assert len(resp.results) == 30
    resp = envs.search(q, mode=mode, top_k=50, metadata_filter={"environment": "production", "n": {"$lt": 5}})
    assert sorted(ids(resp)) == [f"prod-{i}" for i in range(5)]


def test_filter_on_a_key_nobody_wrote_is_empty_with_a_warning(envs):
    resp = envs.search("pool", metadata_filter={"enviroment": "production"})
    assert resp.results == [] and len(resp.warnings) == 1
    assert "'enviroment'" in resp.warnings[0] and "environment" in resp.warnings[0]  # the known keys are listed
    # what an operator says of a missing value holds: $exists false and $ne match every document
    everything = envs.search("pool", top_k=50).results
    assert len(envs.search("pool", top_k=50, metadata_filter={"enviroment": {"$exists": False}}).results) == len(
        everything
    )
    assert len(envs.search("pool", top_k=50, metadata_filter={"enviroment": {"$ne": "x"}}).results) == len(everything)
    assert envs.search("pool", metadata_filter={"environment": "production"}).warnings == []
    resp = envs.search("pool", namespace="nope")
    assert resp.results == [] and "namespace 'nope' holds no documents" in resp.warnings[0]


def test_unknown_filter_operator_is_named(envs):
    with pytest.raises(FilterError, match=r"\$regex"):
        envs.search("pool", metadata_filter={"environment": {"$regex": "prod.*"}})
    with pytest.raises(FilterError, match=r"\$nor"):
        envs.search("pool", metadata_filter={"$nor": [{"environment": "staging"}]})


def test_filter_value_beyond_64_bits_is_a_filter_error(envs):
    with pytest.raises(FilterError, match="64-bit"):
        envs.search("pool", metadata_filter={"n": 2**64})
    with pytest.raises(FilterError, match="64-bit"):
        envs.search("pool", mode="bm25", metadata_filter={"n": {"$lt": -(2**70)}})


def test_invalid_metadata_rejected(mem):
    with pytest.raises(ValidationError, match="invalid metadata key"):
        mem.add("x", metadata={"$bad": 1})
    with pytest.raises(ValidationError, match="finite"):
        mem.add("x", metadata={"v": float("nan")})
    with pytest.raises(ValidationError):
        mem.add("   ")
    with pytest.raises(ValidationError, match="NUL"):
        mem.add("bin\x00ary")
    assert mem.stats().documents == 0


# ---------------------------------------------------------------- the store file
def test_store_records_the_embedder(target):
    path = target
    with Memory(path, embedder="hash", auto_embed=False) as m:
        m.add("hello world")
        m.wait_for_vectors()
        assert m.stats().embedder == "hash:256" and m.stats().dim == 256
    with pytest.raises(EmbedderMismatchError) as ei:
        Memory(path, embedder="hash:64", auto_embed=False)
    assert ei.value.stored == "hash:256" and ei.value.given == "hash:64"
    assert "hash:256" in str(ei.value) and "hash:64" in str(ei.value) and "reembed" in str(ei.value)
    assert isinstance(ei.value, StoreError)
    # the same embedder, spelled either way, reopens fine and finds the data
    for spec in ("hash", "hash:256"):
        with Memory(path, embedder=spec, auto_embed=False) as m:
            assert ids(m.search("hello", mode="vector"))


def test_non_sqlite_file_raises_store_error(tmp_path):
    bad = tmp_path / "garbage.db"
    bad.write_bytes(bytes(range(256)) * 8)
    with pytest.raises(StoreError, match="not a hybridmem store") as ei:
        Memory(bad, embedder="hash", auto_embed=False)
    assert str(bad) in str(ei.value)
    assert bad.read_bytes() == bytes(range(256)) * 8  # left untouched


def test_foreign_sqlite_file_raises_store_error(tmp_path):
    other = tmp_path / "other.db"
    db = sqlite3.connect(other)
    db.execute("CREATE TABLE people (name TEXT)")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="not a hybridmem store"):
        Memory(other, embedder="hash", auto_embed=False)


def test_directory_and_missing_store(tmp_path):
    with pytest.raises(StoreError, match="directory"):
        Memory(tmp_path, embedder="hash", auto_embed=False)
    with pytest.raises(NotFoundError):
        Memory(tmp_path / "absent.db", embedder="hash", create=False)


def test_data_survives_reopen(target):
    path = target
    with Memory(path, embedder="hash", auto_embed=False) as m:
        m.add("persistent capybara fact", id="c", metadata={"k": 1})
    with Memory(path, embedder="hash", auto_embed=False) as m:
        assert m.stats().pending_vectors == 1  # the queue is durable
        assert ids(m.search("capybara", mode="bm25", metadata_filter={"k": 1})) == ["c"]
        m.wait_for_vectors()
        assert ids(m.search("persistent capybara fact", mode="vector", top_k=1)) == ["c"]


# ---------------------------------------------------------------- pending vectors
@pytest.mark.parametrize("query", ["database", "connections", "deployed", "zebrawave", "Datenbank", "conexiones"])
def test_a_word_in_a_chunk_is_found_by_a_one_word_query(mem, query):
    # chunks are stemmed in their detected language; a one-word query has none to detect
    mem.add("The database was down: the deployed service dropped all connections to zebrawave.", id="en")
    mem.add("Die Datenbank ist nicht erreichbar und wir haben keine Verbindung.", id="de")
    mem.add("El servidor no responde y las conexiones con la base de datos fallan.", id="es")
    resp = mem.search(query, mode="bm25")
    assert resp.results, f"{query!r} found nothing"
    assert query.lower() in resp.results[0].text.lower()


def test_pending_chunk_is_bm25_searchable_at_once(mem):
    r = mem.add("The ocelotgate proxy drops idle connections.", id="p")
    assert r.pending_vectors == 1 and mem.stats().pending_vectors == 1
    resp = mem.search("ocelotgate", mode="bm25")
    assert ids(resp) == ["p"]
    hy = mem.search("ocelotgate proxy", mode="hybrid")
    assert ids(hy) == ["p"]
    assert hy.pending_vectors == 1
    assert hy.legs["dense"].status == "ok" and hy.legs["dense"].returned == 0
    assert hy.results[0].ranks == {"bm25": 1}
    vec = mem.search("ocelotgate proxy", mode="vector")
    assert vec.results == [] and vec.pending_vectors == 1
    assert mem.embed_pending() == 1
    hy = mem.search("ocelotgate proxy", mode="hybrid")
    assert hy.pending_vectors == 0 and hy.legs["dense"].returned == 1
    assert set(hy.results[0].ranks) == {"bm25", "dense"}


@pytest.mark.parametrize("mode", ["vector", "hybrid"])
def test_query_before_first_vector_then_embed(mem, mode):
    # the first dense query finds no vectors (and no dimension yet); embedding afterwards must
    # bring the dense index up to date, not fail on an index of unknown dimension
    mem.add("first note about the okapi", id="o1")
    assert mem.search("okapi", mode=mode).legs["dense"].returned == 0
    assert mem.embed_pending() == 1
    resp = mem.search("first note about the okapi", mode=mode)
    assert resp.legs["dense"].returned == 1 and resp.results[0].ranks["dense"] == 1
    mem.add("second note about the okapi", id="o2")
    mem.wait_for_vectors()
    assert mem.search("okapi", mode="vector").legs["dense"].returned == 2


def test_background_worker_embeds(target):
    with Memory(target, embedder="hash", auto_embed=True) as m:
        m.add_documents([{"text": f"note number {i} about storage"} for i in range(20)])
        deadline = time.monotonic() + 20
        while m.stats().pending_vectors and time.monotonic() < deadline:
            time.sleep(0.05)
        st = m.stats()
        assert st.pending_vectors == 0 and st.vectors == 20
        assert m.worker_error is None


def test_two_embedders_of_one_queue_share_it_and_return_once_every_vector_is_applied(tmp_path) -> None:
    """The background worker and a caller's ``embed_pending`` drain one queue: the caller skips the
    rows of the worker's batch in flight (no chunk embedded twice) and, finding nothing else queued,
    returns only once that batch is stored and applied — the worker's commit empties the queue
    before it is applied, and a caller that returned then saw a graph missing its vectors (CI)."""
    with Memory(tmp_path / "w.db", embedder="hash", auto_embed=False) as mem:
        mem.add_documents([{"id": f"n{i}", "text": f"note {i} about queue sharing"} for i in range(5)])
        worker, model = mem.worker, mem.embedders.worker_model
        embedded: list[str] = []
        embed, store = model.embed_documents, worker._store_vectors
        in_store, release, stored = threading.Event(), threading.Event(), threading.Event()

        def embed_documents(texts):
            embedded.extend(texts)
            return embed(texts)

        def store_vectors(items):
            if threading.current_thread().name == "bg":
                in_store.set()
                assert release.wait(30)
                store(items)
                stored.set()
            else:
                store(items)

        model.embed_documents, worker._store_vectors = embed_documents, store_vectors
        bg = threading.Thread(target=worker.embed_pending, kwargs={"batch_size": 3}, name="bg")
        bg.start()
        assert in_store.wait(30)  # the worker's 3 rows are out of the queue's reach until it stores them
        returned: list[tuple[int, bool]] = []
        fg = threading.Thread(target=lambda: returned.append((worker.embed_pending(batch_size=3), stored.is_set())))
        fg.start()
        fg.join(0.5)
        assert fg.is_alive()  # it embedded the other 2 and waits for the worker's batch
        release.set()
        fg.join(30)
        bg.join(30)
        assert returned == [(2, True)]  # when it returned, the worker's batch was stored
        assert sorted(embedded) == sorted(f"note {i} about queue sharing" for i in range(5))
        hits = mem.search("note 1 about queue sharing", mode="vector", top_k=5).results
        assert len(hits) == 5 and hits[0].doc_id == "n1"


# ---------------------------------------------------------------- response shape
def test_total_retrieved_ranks_and_scores(envs):
    for mode in MODES:
        for k in (1, 3, 7, 100):
            resp = envs.search("connection pool host 7", mode=mode, top_k=k)
            assert resp.total_retrieved == len(resp.results) <= k
            assert resp.mode == mode
            dumped = json.loads(resp.model_dump_json())
            assert dumped["total_retrieved"] == len(dumped["results"])
    resp = envs.search("connection pool exhausted host 7", mode="hybrid", top_k=10, fetch_k=60)
    assert resp.legs["bm25"].status == resp.legs["dense"].status == "ok"
    scores = [r.rrf_score for r in resp.results]
    assert scores == sorted(scores, reverse=True)
    both = [r for r in resp.results if set(r.ranks) == {"bm25", "dense"}]
    assert both, "some results should come from both legs"
    for r in resp.results:
        assert set(r.ranks) == set(r.scores) and r.ranks
        assert all(v >= 1 for v in r.ranks.values())
        # the fused score is exactly the RRF of the reported ranks
        assert r.rrf_score == pytest.approx(sum(1 / (60 + rank) for rank in r.ranks.values()))
        if "dense" in r.scores:
            assert -1.0 - 1e-6 <= r.scores["dense"] <= 1.0 + 1e-6
    bm = envs.search("connection pool", mode="bm25", top_k=5)
    assert all(set(r.ranks) == {"bm25"} and set(r.scores) == {"bm25"} for r in bm.results)
    assert [r.ranks["bm25"] for r in bm.results] == [1, 2, 3, 4, 5]
    assert bm.legs["dense"].status == "skipped" and bm.pending_vectors == 0
    vec = envs.search("connection pool", mode="vector", top_k=5)
    assert all(set(r.ranks) == {"dense"} for r in vec.results)
    assert vec.legs["bm25"].status == "skipped"
    dense_scores = [r.scores["dense"] for r in vec.results]
    assert dense_scores == sorted(dense_scores, reverse=True)


def test_weights_reach_fusion(envs):
    q = "connection pool exhausted host 7"
    resp = envs.search(q, top_k=20, fetch_k=60, dense_weight=0.6, sparse_weight=0.4, rrf_k_constant=10)
    for r in resp.results:
        w = {"bm25": 0.4, "dense": 0.6}
        assert r.rrf_score == pytest.approx(sum(w[leg] / (10 + rank) for leg, rank in r.ranks.items()))
    # a zero weight silences a leg: what only it found is dropped
    only_dense = envs.search(q, top_k=20, fetch_k=60, sparse_weight=0)
    assert all("dense" in r.ranks for r in only_dense.results)


def test_contract_request_and_response(mem):
    req_json = json.loads(shared_path("contract", "query_request.example.json").read_text())
    example = json.loads(shared_path("contract", "query_response.example.json").read_text())
    req = QueryRequest.model_validate(req_json)
    assert req.query_id == "mem_req_99214" and req.top_k == 5
    assert req.hybrid_params.dense_weight == 0.6 and req.hybrid_params.sparse_weight == 0.4
    assert req.hybrid_params.rrf_k_constant == 60 and req.mode == "hybrid"
    assert QueryRequest.model_validate_json(req.model_dump_json()) == req  # round trip

    ex = example["results"][0]
    mem.add(
        ex["text"],
        id="doc_8832",
        source=ex["source"],
        metadata={"environment": "production", "service": "billing-service"},
    )
    mem.add(
        "Staging copy: PostgreSQL connection pool exhaustion causes HTTP 504 timeouts.",
        id="doc_stg",
        metadata={"environment": "staging", "service": "billing-service"},
    )
    mem.add("Redis cache eviction notes.", id="doc_other", metadata={"environment": "production", "service": "cache"})
    mem.wait_for_vectors()
    resp = mem.search(req_json)
    assert resp.query_id == "mem_req_99214"
    assert ids(resp) == ["doc_8832"]
    assert resp.results[0].chunk_id == "doc_8832_p1" and resp.results[0].source == ex["source"]
    out = json.loads(resp.model_dump_json())
    # every field of the example is there (more may be added, none removed or renamed)
    assert set(example) <= set(out)
    assert set(ex) <= set(out["results"][0])
    assert out["total_retrieved"] == len(out["results"]) == 1
    score = out["results"][0]["rrf_score"]
    assert score == round(resp.results[0].rrf_score, 4)
    assert len(repr(score).split(".")[1]) <= 4
    # first in every leg: Σ w/61 over the legs that ranked it (the query cites the identifier
    # "HTTP 504", so hybrid mode adds the exact-identifier leg, weight 1 by default)
    ranks = resp.results[0].ranks
    assert ranks["bm25"] == ranks["dense"] == 1
    w = {"bm25": 0.4, "dense": 0.6, "exact": 1.0}
    expected = sum(w[leg] / (60 + r) for leg, r in ranks.items())
    assert resp.results[0].rrf_score == pytest.approx(expected)
    assert score == round(expected, 4)
    # the serialized response is itself valid input for the model
    assert QueryResponse.model_validate(out).total_retrieved == 1


@pytest.mark.parametrize(
    "request_, kwargs, field",
    [
        ("", {}, "search_text"),
        ("   \n", {}, "search_text"),
        ("ok", {"top_k": 0}, "top_k"),
        ("ok", {"top_k": 1001}, "top_k"),
        ("ok", {"dense_weight": -0.1}, "hybrid_params.dense_weight"),
        ({"search_text": "ok", "hybrid_params": {"sparse_weight": -1}}, {}, "hybrid_params.sparse_weight"),
        ("ok", {"rrf_k_constant": -5}, "hybrid_params.rrf_k_constant"),
        ("ok", {"mode": "fuzzy"}, "mode"),
        ({"search_text": "ok", "limit": 3}, {}, "limit"),
        ({"search_text": "ok", "hybrid_params": {"alpha": 0.5}}, {}, "hybrid_params.alpha"),
        ("ok", {"fetch_k": 0}, "fetch_k"),
    ],
)
def test_bad_requests_name_the_field(mem, request_, kwargs, field):
    with pytest.raises(ValidationError) as ei:
        mem.search(request_, **kwargs)
    assert ei.value.field == field
    assert field in str(ei.value)


def test_cross_field_request_errors(mem):
    with pytest.raises(ValidationError, match="fetch_k"):
        mem.search("ok", top_k=10, fetch_k=5)
    with pytest.raises(ValidationError, match="both be 0"):
        mem.search("ok", dense_weight=0, sparse_weight=0)
    with pytest.raises(ValidationError):
        mem.search(42)


def test_request_forms_are_equivalent(envs):
    a = envs.search("connection pool", top_k=3, mode="bm25")
    b = envs.search({"search_text": "connection pool", "top_k": 3, "mode": "bm25"})
    c = envs.search(QueryRequest(search_text="connection pool", top_k=3, mode="bm25"))
    assert chunk_ids(a) == chunk_ids(b) == chunk_ids(c) and len(a.results) == 3


# ---------------------------------------------------------------- async
def test_asearch(envs):
    async def main():
        return await asyncio.gather(
            envs.asearch("connection pool exhausted", top_k=4),
            envs.asearch({"search_text": "host 3", "mode": "bm25", "top_k": 2}),
        )

    r1, r2 = asyncio.run(main())
    assert isinstance(r1, QueryResponse) and len(r1.results) == 4
    assert chunk_ids(r1) == chunk_ids(envs.search("connection pool exhausted", top_k=4))
    assert r2.mode == "bm25" and len(r2.results) == 2


def test_async_writes(mem):
    async def main():
        r = await mem.aadd("async write of a marmot fact", id="m1")
        await mem.aupdate("m1", "async update of a marmot fact")
        found = await mem.asearch("marmot", mode="bm25")
        gone = await mem.adelete("m1")
        return r, found, gone

    r, found, gone = asyncio.run(main())
    assert r.added == ["m1"] and ids(found) == ["m1"] and found.results[0].text.startswith("async update")
    assert gone == ["m1"]


# ---------------------------------------------------------------- leg isolation
def test_dense_leg_failure_is_isolated(envs, monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("vector index on fire")

    monkeypatch.setattr(envs.legs, "dense", boom)
    resp = envs.search("connection pool exhausted", top_k=5)
    assert resp.legs["dense"].status == "error"
    assert "vector index on fire" in resp.legs["dense"].error
    assert resp.legs["bm25"].status == "ok"
    assert len(resp.results) == 5 and all(set(r.ranks) == {"bm25"} for r in resp.results)
    # same as the BM25 leg alone
    assert chunk_ids(resp) == chunk_ids(envs.search("connection pool exhausted", top_k=5, mode="bm25"))
    # with no other leg to answer, the error surfaces
    with pytest.raises(HybridMemError, match="on fire"):
        envs.search("connection pool exhausted", mode="vector")


def test_bm25_leg_failure_is_isolated(envs, monkeypatch):
    def boom(*a, **k):
        raise StoreError("fts table corrupt")

    monkeypatch.setattr(envs.legs, "sparse", boom)
    resp = envs.search("connection pool exhausted", top_k=5)
    assert resp.legs["bm25"].status == "error" and "corrupt" in resp.legs["bm25"].error
    assert resp.legs["dense"].status == "ok" and len(resp.results) == 5
    with pytest.raises(StoreError, match="corrupt"):
        envs.search("connection pool exhausted", mode="bm25")


def test_slow_leg_times_out(tmp_path):
    with Memory(tmp_path / "t.db", embedder="hash", auto_embed=False, leg_timeout=0.3) as m:
        m.add("slow leg test about the tapir", id="t")
        m.wait_for_vectors()
        real = m.legs.dense

        def slow(*a, **k):
            time.sleep(2.0)
            return real(*a, **k)

        m.legs.dense = slow
        t0 = time.perf_counter()
        resp = m.search("tapir")
        assert time.perf_counter() - t0 < 1.5  # did not wait for the slow leg
        assert resp.legs["dense"].status == "timeout" and ids(resp) == ["t"]


def test_a_schema_7_store_moves_its_tokens_out_of_fts5_and_ranks_the_same(tmp_path):
    """SQLite schema 8 keeps each namespace's BM25 tokens in a plain table (FTS5 indexed them on
    every write); a store written before keeps every token stream and ranking, and the FTS5
    reference scorer is built from the moved tokens, again after a write."""
    from hybridmem.store import sqlite as sq
    from hybridmem.text.tokenize import query_tokens
    from old_layouts import tokens_back_to_fts

    path = tmp_path / "old.db"
    texts = [f"HTTP {500 + i % 7} on the billing pool, worker {i} restarted after the timeout" for i in range(30)]
    with Memory(path, embedder="hash", auto_embed=False) as m:
        for ns in ("a", "b"):
            m.add_documents(
                [{"id": f"{ns}{i}", "text": t} for i, t in enumerate(texts[: 20 if ns == "a" else 30])], namespace=ns
            )
        tokens = {ns: m.store.load_tokens(ns)[1] for ns in ("a", "b")}
        ranked = {ns: ids(m.search("HTTP 503 timeout", mode="bm25", namespace=ns)) for ns in ("a", "b")}
    db = sqlite3.connect(path, isolation_level=None)
    tokens_back_to_fts(db)
    db.execute("PRAGMA user_version=7")
    db.close()
    with Memory(path, embedder="hash", auto_embed=False) as m:
        assert m.stats().schema_version == sq.SCHEMA_VERSION == 12
        tables = {r[0] for r in m.store.reader.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert not {t for t in tables if t.startswith("fts_")} and {"tokens_1", "tokens_2"} <= tables
        for ns in ("a", "b"):
            assert m.store.load_tokens(ns)[1] == tokens[ns] and len(tokens[ns]) == (20 if ns == "a" else 30)
            assert ids(m.search("HTTP 503 timeout", mode="bm25", namespace=ns)) == ranked[ns]
            ref = m.store.bm25(ns, query_tokens("HTTP 503 timeout"), None, 10)
            rows = m.store.fetch([r for r, _ in ref])
            top = {rows[r].doc_id for r, _ in ref[:3]}  # the three that say 503 (tied), then the others
            assert top == set(ranked[ns][:3]) == {f"{ns}3", f"{ns}10", f"{ns}17"}
        m.add("HTTP 503 HTTP 503 timeout timeout", id="a-new", namespace="a")  # the reference follows writes
        ref = m.store.bm25("a", query_tokens("HTTP 503 timeout"), None, 1)
        assert m.store.fetch([ref[0][0]])[ref[0][0]].doc_id == "a-new"


def test_in_memory_bm25_equals_fts5_through_writes(mem):
    """The in-memory BM25 index gives FTS5's bm25() scores and order, and follows adds, updates and
    deletes made through the memory (incremental apply) and by another handle (reload)."""
    from hybridmem.text.tokenize import query_tokens

    words = "pool timeout connection cache purge worker scheduler kafka redis billing latency retry".split()
    for i in range(80):
        text = " ".join(words[(i * j) % len(words)] for j in range(1, 4 + i % 9)) + f" HEL-{1000 + i}"
        mem.add(text, id=f"d{i}", metadata={"env": "production" if i % 2 else "staging"})

    def check(q: str, flt: dict | None = None) -> None:
        resp = mem.search(q, mode="bm25", top_k=15, fetch_k=15, metadata_filter=flt or {})
        from hybridmem.filters import parse_filter

        ref = mem.store.bm25(mem.namespace, query_tokens(q), parse_filter(flt or {}), 15)
        ours = [(r.chunk_id, r.scores["bm25"]) for r in resp.results]
        rows = mem.store.fetch([r for r, _ in ref])
        theirs = [(rows[r].chunk_id, s) for r, s in ref]
        assert [c for c, _ in ours] == [c for c, _ in theirs] or sorted(round(s, 3) for _, s in ours) == sorted(
            round(s, 3) for _, s in theirs
        )  # equal scores may tie in another order
        for (_, a), (_, b) in zip(sorted(ours, key=lambda x: -x[1]), sorted(theirs, key=lambda x: -x[1])):
            assert a == pytest.approx(b, rel=1e-3, abs=1e-3)

    check("pool timeout retry")
    check("kafka latency", {"env": "production"})
    mem.update("d3", "completely new words about kafka kafka kafka")
    mem.delete(["d5", "d7_p1"])
    check("kafka latency retry")
    other = Memory(mem.path, embedder="hash", auto_embed=False)  # a second writer
    other.add("kafka retry storm on billing", id="fresh")
    other.close()
    check("kafka retry billing")
    assert mem.search("storm", mode="bm25").results[0].doc_id == "fresh"


def test_unpaired_surrogates_are_rejected_clearly(mem) -> None:
    import pytest as _pytest

    from hybridmem.errors import ValidationError as _VE

    for kwargs, field in (
        ({"text": "bad \udc00 text"}, "text"),
        ({"text": "ok", "metadata": {"k": "\udc00"}}, "metadata"),
        ({"text": "ok", "metadata": {"k\udc00": 1}}, "metadata"),
    ):
        with _pytest.raises(_VE, match="surrogate") as e:
            mem.add(**kwargs)
        assert e.value.field == field
    assert mem.stats().documents == 0


def test_a_query_racing_a_write_waits_for_its_apply_instead_of_reloading(tmp_path, monkeypatch):
    """A query that reads the store's version between a write's commit and its in-memory apply
    used to reload the whole namespace (seconds at 50k chunks, and a restarted HNSW build, once per
    write under load): it now waits for the writer, then answers from the updated index."""
    import threading

    from hybridmem.retrieve.dense import DenseIndex
    from hybridmem.retrieve.sparse import SparseIndex

    m = Memory(tmp_path / "m.db", embedder="hash", auto_embed=False)
    m.add_documents([{"id": f"d{i}", "text": f"seed note {i} about pools"} for i in range(30)])
    m.wait_for_vectors()
    for mode in MODES:
        m.search("pools", mode=mode)  # both indexes loaded
    loads = {"sparse": 0, "dense": 0}
    ours = {"sparse": m.legs.sparse_indexes, "dense": m.legs.dense_indexes}
    for name, cls in (("sparse", SparseIndex), ("dense", DenseIndex)):

        def counted(self, *a, _orig=cls.load, _name=name, **k):
            # the patch is class-wide: count only this memory's indexes, not a leftover background
            # thread of an earlier test reloading its own
            if any(self is idx for idx in ours[_name].values()):
                loads[_name] += 1
            return _orig(self, *a, **k)

        monkeypatch.setattr(cls, "load", counted)
    committed = threading.Event()
    real = m.store.write_documents

    def slow_write(*a, **k):  # committed, then a pause before Memory applies the change
        res = real(*a, **k)
        committed.set()
        time.sleep(0.3)
        return res

    monkeypatch.setattr(m.store, "write_documents", slow_write)
    writer = threading.Thread(target=m.add, args=("a new note about zebrafish",), kwargs={"id": "z"})
    writer.start()
    assert committed.wait(10)
    got = m.search("zebrafish", mode="bm25", top_k=1)  # the store is now one version ahead
    writer.join()
    assert ids(got) == ["z"]
    assert loads == {"sparse": 0, "dense": 0}
    m.close()


def test_a_cached_filter_catches_up_with_writes_without_rescanning(tmp_path, monkeypatch):
    """A repeated filter's allowed set follows adds, metadata updates, deletes and re-adds through
    the writes' own changes (only the added chunks are tested), and equals a fresh evaluation after
    each; a change this process did not make (another process wrote) comes from the store's change
    log, and only a change the log no longer holds makes it re-run in full."""
    import random

    m = Memory(tmp_path / "f.db", embedder="hash", auto_embed=False)
    ns = m.namespace
    m.add_documents(
        [
            {"id": f"d{i}", "text": f"note {i} on pools", "metadata": {"env": "prod" if i % 3 else "dev"}}
            for i in range(60)
        ]
    )
    flt = m.searcher.validate_filter(ns, {"env": "prod"})
    scans = []
    real = m.store.filter_rowids

    def counted(namespace, f, among=None):
        if among is None:
            scans.append(1)
        return real(namespace, f, among)

    monkeypatch.setattr(m.store, "filter_rowids", counted)

    def fresh():
        return np.sort(real(ns, flt))

    m.legs.allowed(ns, flt).rowids
    assert len(scans) == 1
    rng = random.Random(3)
    for step in range(40):
        op = rng.choice(["add", "update", "delete", "batch"])
        i = rng.randrange(80)
        env = rng.choice(["prod", "dev"])
        if op == "add" or op == "update":
            m.add(f"note {i} v{step}", id=f"d{i}", metadata={"env": env})
        elif op == "delete":
            m.delete(f"d{i}")
        else:
            m.add_documents(
                [
                    {"id": f"d{rng.randrange(80)}", "text": f"batch {step} {j}", "metadata": {"env": env}}
                    for j in range(3)
                ]
            )
        if step % 3 == 0:  # several writes between two queries, too
            assert np.array_equal(m.legs.allowed(ns, flt).rowids, fresh()), (step, op)
    assert np.array_equal(m.legs.allowed(ns, flt).rowids, fresh())
    assert len(scans) == 1  # every catch-up came from the change log
    assert ids(m.search("note", mode="bm25", top_k=200, metadata_filter={"env": "prod"}))  # the search path uses it

    other = Memory(tmp_path / "f.db", embedder="hash", auto_embed=False)
    other.add("a prod note from another process", id="x", metadata={"env": "prod"})
    got = m.legs.allowed(ns, flt).rowids
    assert np.array_equal(got, fresh()) and len(scans) == 1  # from the store's change log
    other.add("another prod note from another process", id="y", metadata={"env": "prod"})
    other.close()
    with sqlite3.connect(tmp_path / "f.db") as c:  # the log pruned past the cached version
        c.execute("DELETE FROM chunk_log")
    got = m.legs.allowed(ns, flt).rowids
    assert np.array_equal(got, fresh()) and len(scans) == 2  # then the filter runs in full
    m.close()


def test_a_cold_index_load_does_not_count_against_the_leg_timeout(tmp_path, monkeypatch):
    """The first query of a process loads the BM25 postings and the vectors before its legs start:
    at 1M chunks that takes about the 30 s leg timeout, and the leg used to time out and answer
    nothing. A later slow leg still times out."""
    with Memory(tmp_path / "t.db", embedder="hash") as w:
        w.add_documents([{"id": f"d{i}", "text": f"pool exhaustion note {i}"} for i in range(20)])
        w.embed_pending()
    m = Memory(tmp_path / "t.db", embedder="hash", leg_timeout=0.3)
    real_tokens, real_vectors = m.store.load_tokens, m.store.load_vectors

    def slow_tokens(ns):
        time.sleep(0.6)
        return real_tokens(ns)

    def slow_vectors(ns, alloc=None):
        time.sleep(0.6)
        return real_vectors(ns, alloc)

    monkeypatch.setattr(m.store, "load_tokens", slow_tokens)
    monkeypatch.setattr(m.store, "load_vectors", slow_vectors)
    t = time.perf_counter()
    r = m.search("pool exhaustion", mode="hybrid", top_k=5)
    took = time.perf_counter() - t
    assert r.legs["bm25"].status == "ok" and r.legs["dense"].status == "ok", r.legs
    assert len(r.results) == 5
    assert took < 1.1  # the two loads ran at once, not one after the other

    def slow_search(*a, **kw):
        time.sleep(0.6)
        return []

    monkeypatch.setattr(m.legs, "sparse", slow_search)
    assert m.search("pool exhaustion", mode="hybrid", top_k=5).legs["bm25"].status == "timeout"
    m.close()


def test_concurrent_queries_with_a_new_filter_evaluate_it_once(tmp_path, monkeypatch):
    """The first queries of a filter arrive together under load: one evaluates it over every chunk,
    the others wait for that result instead of all scanning at once; every one gets the same set."""
    import threading

    m = Memory(tmp_path / "c.db", embedder="hash", auto_embed=False)
    m.add_documents(
        [
            {"id": f"d{i}", "text": f"note {i} on pools", "metadata": {"env": "prod" if i % 3 else "dev"}}
            for i in range(90)
        ]
    )
    real = m.store.filter_rowids
    scans: list[int] = []

    def slow(namespace, f, among=None):
        if among is None:
            scans.append(1)
            time.sleep(0.2)  # a full evaluation takes long enough for every thread to arrive meanwhile
        return real(namespace, f, among)

    monkeypatch.setattr(m.store, "filter_rowids", slow)
    start = threading.Barrier(8)
    got: list[set[str]] = []
    errors: list[BaseException] = []

    def query() -> None:
        try:
            start.wait(timeout=10)
            got.append(set(ids(m.search("note", mode="bm25", top_k=100, metadata_filter={"env": "prod"}))))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ts = [threading.Thread(target=query) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=30)
    assert not errors and len(got) == 8
    assert len(scans) == 1
    want = {f"d{i}" for i in range(90) if i % 3}
    assert all(g == want for g in got)
    m.close()


def test_filter_rowids_among_a_subset_of_chunks(mem):
    """Both backends: ``among`` restricts a filter to given chunk rowids (the chunks a write added)."""
    mem.add_documents(
        [{"id": f"d{i}", "text": f"note {i}", "metadata": {"env": "prod" if i % 2 else "dev"}} for i in range(1200)]
    )
    flt = mem.searcher.validate_filter(mem.namespace, {"env": "prod"})
    every = np.sort(mem.store.filter_rowids(mem.namespace, flt))
    assert len(every) == 600
    some = every[::7].tolist() + [int(every.max()) + 10_000]  # more than one SQL batch; one unknown rowid
    pool = some + np.sort(mem.store.filter_rowids(mem.namespace, None)).tolist()[:700]
    got = np.sort(mem.store.filter_rowids(mem.namespace, flt, among=pool))
    assert np.array_equal(got, np.intersect1d(every, pool))
    assert len(mem.store.filter_rowids(mem.namespace, flt, among=[])) == 0


def test_the_same_id_twice_in_one_store_write_keeps_the_last_on_every_backend(target):
    """Write planning is shared by the backends (store.base.plan_writes): the same document id twice
    in one ``write_documents`` call leaves the last version, as two writes in a row would (PostgreSQL
    used to reject the write, SQLite wrote both and reported the id added and updated)."""
    from hybridmem.ingest import Preparer

    with Memory(target, embedder="hash", auto_embed=False) as m:
        prep = Preparer(m.chunk_size, m.chunk_overlap)
        first, second = prep.prepare({"id": "dup", "text": "first text"}), prep.prepare({"id": "dup", "text": "second"})
        res = m.legs.commit(lambda: m.store.write_documents(m.namespace, [first, second]))
        assert (res.added, res.updated, res.unchanged, res.chunks_written) == (["dup"], [], [], 1)
        doc = m.get("dup")
        assert [c["text"] for c in doc["chunks"]] == ["second"] and m.stats().chunks == 1
        assert [r.chunk_id for r in m.search("second", mode="bm25").results] == ["dup_p1"]
        assert m.search("first", mode="bm25").results == []


def test_an_in_memory_store_is_one_database_for_every_thread_and_leaves_nothing() -> None:
    """``Memory(":memory:")`` (the usual idiom of a scratch store): SQLite's own ``:memory:`` gives
    every connection its own empty database, so a query thread found no tables ("no such table:
    meta" on open). It is one private temporary file, removed at close."""
    import glob
    import tempfile
    import threading

    before = set(glob.glob(f"{tempfile.gettempdir()}/hybridmem-memory-*"))
    m = Memory(":memory:", embedder="hash", auto_embed=False)
    m.add("The billing pool raises HEL-4040 when saturated", id="pool")
    got: list[list[str]] = []
    t = threading.Thread(target=lambda: got.append([r.chunk_id for r in m.search("HEL-4040").results]))
    t.start()
    t.join()
    assert got == [["pool_p1"]] and m.stats().documents == 1 and m.store.size_bytes() == 0
    with pytest.raises(ValidationError, match="in-memory"):
        m.store.backup("/tmp/never.db")
    m.close()
    assert set(glob.glob(f"{tempfile.gettempdir()}/hybridmem-memory-*")) == before


def _queued(m: Memory, ns: str) -> int:
    """The embedding queue of a namespace, counted row by row (what ``pending_count`` keeps)."""
    nid = m.store.namespace_id(ns)
    if nid is None:
        return 0
    sql = "SELECT count(*) FROM embed_queue q JOIN chunks c ON c.id = q.chunk_rowid WHERE c.ns_id = ?"
    return int(m.store.reader.execute(sql, (nid,)).fetchone()[0])


def test_the_pending_count_is_kept_by_every_write_that_queues_or_unqueues(target, tmp_path):
    """``pending_count`` reads a per-namespace counter (counting the queue was O(backlog) on every
    hybrid query and ingest call); random adds, replacements, deletes of documents and chunks,
    vectors stored for some, a reset of every vector and an embedder switch: after each, the counter
    equals the queue, in every namespace, and ``check`` agrees; a counter set wrong is reported."""
    import random

    rng = random.Random(11)
    with Memory(target, embedder="hash", auto_embed=False, chunk_size=40, chunk_overlap=0) as m:
        spaces = ("a", "b")

        def agree() -> None:
            for ns in spaces:
                assert m.store.pending_count(ns) == _queued(m, ns), ns
            assert m.store.pending_count() == sum(_queued(m, ns) for ns in spaces)

        for step in range(40):
            ns = rng.choice(spaces)
            op = rng.choice(["add", "add", "replace", "delete", "delete_chunk", "embed"])
            ids = [f"d{i}" for i in range(12)]
            if op in ("add", "replace"):
                words = " ".join(
                    rng.choice(["pool", "timeout", "HEL-4040", "cache", "retry"]) for _ in range(rng.randint(3, 30))
                )
                m.add_documents(
                    [{"id": rng.choice(ids), "text": f"{words} {step}"} for _ in range(rng.randint(1, 4))], namespace=ns
                )
            elif op == "delete":
                m.delete([rng.choice(ids)], namespace=ns)
            elif op == "delete_chunk":
                rows = m.store.reader.execute(
                    "SELECT chunk_id FROM chunks WHERE ns_id = ?", (m.store.namespace_id(ns) or -1,)
                ).fetchall()
                if rows:
                    m.delete([rng.choice(rows)[0]], namespace=ns)
            else:
                m.embed_pending(limit=rng.randint(1, 5))
            agree()
        m.embed_pending()
        agree()
        assert m.store.pending_count() == 0
        m.store.set_embedder(*m.store.embedder_info(), reset_vectors=True)  # every chunk queued again
        agree()
        assert m.store.pending_count() == sum(m.store.chunk_count(ns) for ns in spaces) > 0
    if isinstance(target, type(tmp_path)):
        with Memory(target, embedder="hash", auto_embed=False) as m:
            assert m.store.check()["ok"]
        db = sqlite3.connect(target, isolation_level=None)
        db.execute("UPDATE namespaces SET n_pending = n_pending + 3 WHERE name = 'a'")
        db.close()
        with Memory(target, embedder="hash", auto_embed=False) as m:
            problems = m.store.check()["problems"]
            assert any("waiting for a vector is" in p and "'a'" in p for p in problems), problems


def test_a_schema_9_store_counts_its_queue_once(tmp_path):
    """SQLite schema 10 keeps each namespace's queue count: a store written before gets it counted
    at the migration."""
    from hybridmem.store import sqlite as sq

    path = tmp_path / "old.db"
    with Memory(path, embedder="hash", auto_embed=False) as m:
        m.add_documents([{"id": f"d{i}", "text": f"pool timeout {i}"} for i in range(30)], namespace="a")
        m.add_documents([{"id": f"d{i}", "text": f"cache retry {i}"} for i in range(7)], namespace="b")
        m.embed_pending(limit=5)
        before = {ns: _queued(m, ns) for ns in ("a", "b")}
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("ALTER TABLE namespaces DROP COLUMN n_pending")
    db.execute("PRAGMA user_version=9")
    db.close()
    with Memory(path, embedder="hash", auto_embed=False) as m:
        assert m.stats().schema_version == sq.SCHEMA_VERSION
        assert {ns: m.store.pending_count(ns) for ns in ("a", "b")} == before and sum(before.values()) == 32
