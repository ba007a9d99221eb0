"""``hybridmem migrate``: SQLite → PostgreSQL → SQLite round trip of namespaces, documents, chunks,
embeddings and the graph, verified by counts and identical top-10 on sample queries."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hybridmem import Memory
from hybridmem.demo import load_documents
from hybridmem.errors import StoreError, ValidationError
from hybridmem.migrate import migrate

pytestmark = pytest.mark.postgres


def _search_ids(m: Memory, q: str, **kw) -> list[tuple[str, float]]:
    return [(r.chunk_id, round(r.rrf_score, 6)) for r in m.search(q, top_k=10, **kw).results]


def test_round_trip_sqlite_postgres_sqlite(tmp_path, pg_url):
    src = tmp_path / "src.db"
    with Memory(src, embedder="hash", auto_embed=False) as m:
        m.add_documents(load_documents())
        m.add(
            "acme note about HEL-4040 and the billing-service",
            id="a1",
            namespace="acme",
            metadata={"env": "prod", "sev": 2},
        )
        m.add("acme note never embedded: it stays queued", id="a2", namespace="acme")
        m.embed_pending()
        m.add("queued after the last embedding run", id="late", namespace="acme")
        m.graph.build()
        before = {q: _search_ids(m, q) for q in ("HEL-4040 gateway timeout", "postgres max_connections")}
        filtered = _search_ids(m, "note", namespace="acme", metadata_filter={"env": "prod"})
        g_before = m.graph.status()
        comms_before = sorted((c.community_id, c.summary) for c in m.graph.communities())
        vec_before = m.store.load_vectors("default")
    rep = migrate(str(src), pg_url, verify_queries=15)
    assert rep.ok, rep.mismatches
    assert rep.queries_checked >= 20
    assert set(rep.namespaces) == {"default", "acme"}
    assert rep.namespaces["acme"]["pending_vectors"] == 1 and rep.namespaces["acme"]["documents"] == 3
    assert rep.namespaces["default"]["graph_entities"] > 10
    with Memory(pg_url, embedder="hash", auto_embed=False) as m:
        for q, ids in before.items():
            assert _search_ids(m, q) == ids, q
        assert _search_ids(m, "note", namespace="acme", metadata_filter={"env": "prod"}) == filtered
        g = m.graph.status()
        assert (g.entities, g.relations, g.communities) == (g_before.entities, g_before.relations, g_before.communities)
        assert sorted((c.community_id, c.summary) for c in m.graph.communities()) == comms_before
        assert m.search("billing-service", mode="graph", top_k=5).results
        v = m.store.load_vectors("default")
        assert len(v[1]) == len(vec_before[1])
    # and back into a new SQLite file
    back = tmp_path / "back.db"
    rep2 = migrate(pg_url, str(back), verify_queries=10)
    assert rep2.ok, rep2.mismatches
    with Memory(back, embedder="hash", auto_embed=False) as m:
        for q, ids in before.items():
            assert _search_ids(m, q) == ids, q
        v2 = m.store.load_vectors("default")
        # embeddings survive both hops bit for bit (matched by chunk id)
        a = {m.store.fetch([r])[r].chunk_id: vec for r, vec in zip(v2[1].tolist(), v2[2])}
        with Memory(src, embedder="hash", auto_embed=False) as s:
            b = {s.store.fetch([r])[r].chunk_id: vec for r, vec in zip(vec_before[1].tolist(), vec_before[2])}
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
        assert m.store.integrity_check() == "ok"


def test_refuses_a_non_empty_destination_and_same_store(tmp_path, pg_url):
    src = tmp_path / "s.db"
    with Memory(src, embedder="hash", auto_embed=False) as m:
        m.add("one note", id="n1")
    with Memory(pg_url, embedder="hash", auto_embed=False) as m:
        m.add("already here", id="x")
    with pytest.raises(StoreError, match="already holds documents"):
        migrate(str(src), pg_url)
    with pytest.raises(ValidationError, match="same store"):
        migrate(str(src), str(src))


def test_cli_migrate_json(tmp_path, pg_url):
    from typer.testing import CliRunner

    from hybridmem.cli import app

    src = tmp_path / "c.db"
    with Memory(src, embedder="hash", auto_embed=False) as m:
        m.add_documents(
            [{"id": f"d{i}", "text": f"note {i} about kestrel pipelines and HEL-{4000 + i}"} for i in range(30)]
        )
        m.embed_pending()
    r = CliRunner().invoke(app, ["migrate", "--from", str(src), "--to", pg_url, "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output[r.output.index("{") :])
    assert (
        out["ok"] and out["namespaces"]["default"]["documents"] == 30 and out["namespaces"]["default"]["vectors"] == 30
    )


def _memory_state(m: Memory) -> dict:
    """What the agent-memory layer holds: histories, current hits, an as_of view, a message's context."""
    hist = {
        i: [
            (v["version"], v["current"], v["reason"], v["occurred_at"], v["recorded_at"], v["valid_to"], v["text"])
            for v in m.history(i)
        ]
        for i in ("city", "pool", "s1:1")
    }
    now = _search_ids(m, "user lives in city", include_superseded=False)
    then = [r.chunk_id for r in m.search("user lives in city", top_k=10, as_of=hist["city"][0][4]).results]
    ctx = [r.context for r in m.search("Kafka lag", top_k=3, session_id="s1").results]
    return {"history": hist, "now": now, "then": then, "context": ctx, "documents": m.stats().documents}


def test_migrate_carries_times_versions_keys_and_context(tmp_path, pg_url):
    """A superseded or forgotten version stays retired in the copy, with its times and reason; a
    key's holder stays the holder; a message keeps its index-only context (issue 17)."""
    src = tmp_path / "hist.db"
    with Memory(src, embedder="hash") as m:
        m.add("The user lives in Lyon.", id="city", metadata={"user_id": "u1"}, occurred_at="2023-05-01T10:00:00Z")
        m.update("city", "The user lives in Berlin now.", reason="moved")
        m.add("Billing pool is 100 connections.", key="billing.pool", metadata={"user_id": "u1"}, id="pool")
        m.add("Billing pool is 200 connections.", key="billing.pool", metadata={"user_id": "u1"})
        m.add("an old note", id="gone")
        m.forget("gone", reason="obsolete")
        m.add_messages(
            [
                {"role": "user", "content": "Kafka consumers are lagging.", "timestamp": "2023-05-02T09:00:00Z"},
                {"role": "assistant", "content": "Raise the partitions.", "timestamp": "2023-05-02T09:01:00Z"},
            ],
            session_id="s1",
        )
        m.embed_pending()
        before = _memory_state(m)
    assert before["history"]["city"][0][1] is False and before["context"] != [None]
    rep = migrate(str(src), pg_url, verify_queries=5)
    assert rep.ok, rep.mismatches
    with Memory(pg_url, embedder="hash") as m:
        assert _memory_state(m) == before
        m.add("Billing pool is 300 connections.", key="billing.pool", metadata={"user_id": "u1"})
        assert [v["current"] for v in m.history("pool")] == [False, False, True]  # the key still holds
    back = tmp_path / "back.db"
    assert migrate(pg_url, str(back), verify_queries=5).ok
    with Memory(back, embedder="hash") as m:
        assert m.history("gone")[0]["reason"] == "obsolete" and not m.history("gone")[0]["current"]
        assert len(m.history("pool")) == 3
