"""GraphRAG layer: extraction, resolution, provenance, communities, summaries, staleness and
incremental refresh, the graph leg, global map-reduce, tenancy. Offline (hash embedder, rules)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from hybridmem import Memory
from hybridmem.demo import load_documents
from hybridmem.errors import NotFoundError, ValidationError
from hybridmem.graph.communities import detect_communities, fingerprint
from hybridmem.graph.extract import RuleExtractor, entity_key

# ------------------------------------------------------------------------------ extraction


@pytest.mark.parametrize(
    "text, src, dst, typ",
    [
        ("The billing-service depends on PostgreSQL for invoices.", "billing-service", "PostgreSQL", "depends_on"),
        ("Le billing-service dépend de PostgreSQL pour les factures.", "billing-service", "PostgreSQL", "depends_on"),
        ("Der auth-service hängt von redis-prod-01 ab.", "auth-service", "redis-prod-01", "depends_on"),
        ("El export-worker depende de PostgreSQL.", "export-worker", "PostgreSQL", "depends_on"),
        ("api-gateway 依赖 auth-service。", "api-gateway", "auth-service", "depends_on"),
        ("ingest-gateway calls auth-service on every request.", "ingest-gateway", "auth-service", "calls"),
        (
            "Un pool saturé provoque HEL-5040 côté ingest-gateway : HEL-5040 provoque HTTP 504.",
            "HEL-5040",
            "HTTP 504",
            "causes",
        ),
        ("The `scheduler` uses redis-prod-01 for its leader lock.", "scheduler", "redis-prod-01", "uses"),
    ],
)
def test_relation_patterns_are_multilingual(text: str, src: str, dst: str, typ: str) -> None:
    ents, rels = RuleExtractor().extract_text(text)
    keys = {e.key for e in ents}
    assert entity_key(src) in keys and entity_key(dst) in keys
    typed = {(entity_key(r.source), entity_key(r.target), r.type) for r in rels if r.type != "co_occurs"}
    assert (entity_key(src), entity_key(dst), typ) in typed


def test_technical_entities_are_typed_by_shape() -> None:
    text = (
        "HEL-4040 returns HTTP 422 when `max_connections` in /etc/helio/helio.yaml is wrong on db-prod-01 "
        "(cluster B, production, v4.2.1); see SELECT * FROM billing.invoices and parse_config()."
    )
    types = {e.key: e.type for e in RuleExtractor().extract_text(text)[0]}
    assert types["hel-4040"] == "error_code"
    assert types["http-422"] == "http_status"
    assert types["max-connections"] == "config"
    assert types["/etc/helio/helio.yaml"] == "path"
    assert types["db-prod-01"] == "host"
    assert types["cluster-b"] == "cluster"
    assert types["production"] == "environment"
    assert types["v4.2.1"] == "version"
    assert types["billing.invoices"] in ("sql_table", "config")
    assert types[entity_key("parse_config()")] == "function"


def test_entity_resolution_merges_case_accent_separator_and_alias_variants() -> None:
    assert entity_key("Billing-Service") == entity_key("billing_service") == entity_key("billing service")
    assert entity_key("HTTP 504") == entity_key("http-504") == entity_key("HTTP504")
    assert entity_key("Postgres") == entity_key("PostgreSQL") == entity_key("postgresql")
    assert entity_key("Équipe Données") == entity_key("equipe données")
    assert entity_key("auth-service") != entity_key("billing-service")


def test_cooccurrence_edges_are_counted_per_chunk(mem: Memory) -> None:
    mem.add("auth-service and billing-service share redis-prod-01.", id="a")
    mem.add("auth-service talks to billing-service again.", id="b")
    mem.graph.build()
    info = mem.graph.show("auth-service")
    co = {r["target"]: r["weight"] for r in info["relations_out"] if r["type"] == "co_occurs"}
    assert co["billing-service"] == 2.0  # once per chunk, two chunks
    assert co["redis-prod-01"] == 1.0


def test_lookups_see_every_update_and_stay_in_their_namespace(mem: Memory) -> None:
    """show/find reuse the loaded graph only while its version holds: an update adding an entity
    is seen at once; a typo finds the name; another namespace's graph never answers."""
    mem.add("auth-service and billing-service share redis-prod-01.", id="a")
    mem.graph.build()
    assert [m["name"] for m in mem.graph.find("billing")["entities"]] == ["billing-service"]
    with pytest.raises(NotFoundError):
        mem.graph.show("ledger-service")
    mem.add("ledger-service writes to billing-service.", id="b")
    mem.graph.update()
    assert mem.graph.show("ledger-service")["name"] == "ledger-service"
    assert mem.graph.find("ledgr-service")["entities"][0]["name"] == "ledger-service"  # near spelling
    mem.add("payroll-service only lives in team-b.", id="c", namespace="team-b")
    mem.graph.build(namespace="team-b")
    assert mem.graph.find("payroll")["entities"] == []
    with pytest.raises(NotFoundError):
        mem.graph.show("payroll-service")
    assert mem.graph.find("payroll", namespace="team-b")["entities"][0]["name"] == "payroll-service"
    with pytest.raises(ValidationError):
        mem.graph.find(" ")


# ------------------------------------------------------------------------------ build, provenance


@pytest.fixture
def demo(target) -> Memory:  # on each backend (conftest ``target``)
    m = Memory(target, embedder="hash", auto_embed=False)
    m.add_documents(load_documents())
    m.graph.build()
    yield m
    m.close()


def test_demo_graph_has_provenance_communities_and_summaries(demo: Memory) -> None:
    st = demo.graph.status()
    chunks = demo.stats().chunks
    assert st.built and st.chunks_extracted == chunks and st.chunks_pending == 0
    assert st.entities > 100 and st.relations > 0 and st.communities > 5
    assert st.stale_communities == 0 and st.fresh_communities == st.communities
    info = demo.graph.show("Auth Service")  # resolved to auth-service
    assert info["type"] == "service" and "err-HEL-5031" in info["documents"]
    for cid in info["chunks"]:
        assert (
            "auth-service"
            in demo.store.fetch(
                [r for (r,) in demo.store.reader.execute("SELECT id FROM chunks WHERE chunk_id=?", (cid,))]
            )
            .popitem()[1]
            .text.lower()
        )
    comms = demo.graph.communities()
    ids = {c.community_id for c in comms}
    all_chunk_ids = {r for (r,) in demo.store.reader.execute("SELECT chunk_id FROM chunks")}
    for c in comms:
        assert c.summary and c.fingerprint and c.summary_model == "extractive"
        assert set(c.chunk_ids) <= all_chunk_ids
        assert c.parent is None or c.parent in ids
        if c.parent:  # a child's members are inside its parent's
            parent = next(p for p in comms if p.community_id == c.parent)
            assert set(c.members) <= set(parent.members)
    leaves = [c for c in comms if c.chunk_ids and not any(x.parent == c.community_id for x in comms)]
    assert any(f"[{c.chunk_ids[0]}]" in c.summary for c in leaves)  # sentences carry their chunk ids


def test_show_unknown_entity_is_a_clear_error(demo: Memory) -> None:
    with pytest.raises(NotFoundError, match="no entity 'nothing-here'"):
        demo.graph.show("nothing-here")
    with pytest.raises(ValidationError):
        demo.graph.show("  ")


def test_export_json_and_graphml(demo: Memory) -> None:
    import json

    import networkx as nx

    data = json.loads(demo.graph.export("json"))
    assert len(data["entities"]) == demo.graph.status().entities
    assert all(e["chunks"] for e in data["entities"])
    g = nx.parse_graphml(demo.graph.export("graphml"))
    assert g.number_of_nodes() == len(data["entities"]) and g.is_directed()
    with pytest.raises(ValidationError, match="graphml or json"):
        demo.graph.export("csv")


# ------------------------------------------------------------------------------ communities


def _clustered_weights(n_clusters: int = 6, size: int = 10) -> dict[tuple[int, int], float]:
    w: dict[tuple[int, int], float] = {}
    for c in range(n_clusters):
        base = c * size
        for i in range(size):
            for j in range(i + 1, size):
                w[(base + i, base + j)] = 3.0
        w[(base, ((c + 1) % n_clusters) * size)] = 0.2  # weak bridges
    return w


def test_leiden_recovers_planted_clusters_deterministically() -> None:
    w = _clustered_weights()
    a = detect_communities(w, max_cluster_size=20, max_levels=2)
    b = detect_communities(w, max_cluster_size=20, max_levels=2)
    assert [(c.community_id, c.members) for c in a] == [(c.community_id, c.members) for c in b]
    top = {frozenset(c.members) for c in a if c.level == 0}
    planted = {frozenset(range(c * 10, c * 10 + 10)) for c in range(6)}
    assert top == planted


def test_max_cluster_size_splits_large_communities_into_a_second_level(demo: Memory) -> None:
    comms = demo.graph.communities()
    assert {c.level for c in comms} == {0, 1}
    parents = {c.parent for c in comms if c.parent}
    assert parents
    for c in comms:
        if c.community_id in parents:  # only communities above max_cluster_size (25) were split
            assert len(c.members) > 25
    with pytest.raises(ValidationError):
        detect_communities(_clustered_weights(), max_cluster_size=1)
    # a smaller max_cluster_size gives more, smaller communities
    rep = demo.graph.build(max_cluster_size=10)
    assert rep.communities > len(comms)
    assert demo.graph.status().params["max_cluster_size"] == 10


def test_fingerprint_changes_with_members_and_provenance() -> None:
    h = {"a": "1", "b": "2"}
    fp = fingerprint(["b", "a"], h)
    assert fp == fingerprint(["a", "b"], h)
    assert fp != fingerprint(["a", "b"], {"a": "1", "b": "3"})
    assert fp != fingerprint(["a"], h)
    assert fp != fingerprint(["a", "b"], {"a": "1", "b": None})  # stale member


# ------------------------------------------------------------------------------ staleness, deletes


def test_delete_cascades_provenance_in_the_same_transaction(demo: Memory) -> None:
    doc = "err-HEL-5031"
    rowids = [r for (r,) in demo.store.reader.execute("SELECT id FROM chunks WHERE doc_id=?", (doc,))]
    q = ",".join("?" * len(rowids))
    assert demo.store.reader.execute(
        f"SELECT count(*) FROM graph_mentions WHERE chunk_rowid IN ({q})", rowids
    ).fetchone()[0]
    only_here = [
        k
        for (k,) in demo.store.reader.execute(
            f"SELECT e.key FROM graph_entities e WHERE NOT EXISTS (SELECT 1 FROM graph_mentions m WHERE m.entity_id=e.id "
            f"AND m.chunk_rowid NOT IN ({q}))",
            rowids,
        )
    ]
    assert demo.delete(doc) == [doc]
    db = demo.store.reader
    for table in ("graph_mentions", "graph_relation_sources", "graph_chunks"):
        assert db.execute(f"SELECT count(*) FROM {table} WHERE chunk_rowid IN ({q})", rowids).fetchone()[0] == 0
    for k in only_here:  # orphaned entities went with their last chunk
        assert db.execute("SELECT count(*) FROM graph_entities WHERE key=?", (k,)).fetchone()[0] == 0
    # no relation is left pointing at nothing
    assert (
        db.execute(
            "SELECT count(*) FROM graph_relations r WHERE NOT EXISTS "
            "(SELECT 1 FROM graph_relation_sources s WHERE s.relation_id=r.id)"
        ).fetchone()[0]
        == 0
    )
    st = demo.graph.status()
    assert st.stale_communities > 0 and st.stale_entities > 0


def test_failed_delete_rolls_back_graph_provenance(demo: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    from hybridmem.store import sqlite as sq

    if not isinstance(demo.store, sq.SQLiteStore):
        return _failed_delete_rolls_back_on_postgres(demo, monkeypatch)

    before = demo.store.reader.execute("SELECT count(*) FROM graph_mentions").fetchone()[0]
    orig = sq.SQLiteStore._delete_chunk_rows

    def boom(db: sqlite3.Connection, fts: str, rowids: list[int]) -> None:
        orig(db, fts, rowids)
        raise sqlite3.OperationalError("disk on fire")

    monkeypatch.setattr(sq.SQLiteStore, "_delete_chunk_rows", staticmethod(boom))
    with pytest.raises(sqlite3.OperationalError):
        demo.delete("err-HEL-5031")
    monkeypatch.undo()
    assert demo.store.reader.execute("SELECT count(*) FROM graph_mentions").fetchone()[0] == before
    assert demo.get("err-HEL-5031")["n_chunks"] > 0


def _failed_delete_rolls_back_on_postgres(demo: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    from hybridmem.store.sql import graph as graph_sql

    before = demo.store.reader.execute("SELECT count(*) FROM graph_mentions").fetchone()[0]
    orig = graph_sql.delete_graph_provenance

    def boom(db, part):  # type: ignore[no-untyped-def]
        orig(db, part)
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(graph_sql, "delete_graph_provenance", boom)
    with pytest.raises(RuntimeError):
        demo.delete("err-HEL-5031")
    monkeypatch.undo()
    assert demo.store.reader.execute("SELECT count(*) FROM graph_mentions").fetchone()[0] == before
    assert demo.get("err-HEL-5031")["n_chunks"] > 0
    assert demo.store.integrity_check() == "ok"


def test_update_after_deletes_prunes_without_rebuilding(demo: Memory) -> None:
    before = {c.community_id: c for c in demo.graph.communities()}
    demo.delete(["err-HEL-5031", "err-HEL-1002"])
    rep = demo.graph.update()
    assert rep.chunks_extracted == 0 and rep.llm_calls == 0 and rep.summaries_made == 0
    assert rep.summaries_pruned > 0
    st = demo.graph.status()
    assert st.stale_communities == 0
    alive = {r for (r,) in demo.store.reader.execute("SELECT chunk_id FROM chunks")}
    for c in demo.graph.communities():
        assert set(c.chunk_ids) <= alive
        assert "err-HEL-5031_p" not in c.summary
        assert set(c.members) <= set(before[c.community_id].members)


def test_update_of_a_document_reextracts_only_its_chunks(demo: Memory) -> None:
    total = demo.graph.status().communities
    n_chunks = demo.get("cfg-max-connections")["n_chunks"]
    demo.update("cfg-max-connections", "Le billing-service dépend de PostgreSQL (pool max_connections = 80).")
    st = demo.graph.status()
    assert st.chunks_pending == 1 and st.stale_communities > 0
    rep = demo.graph.update()
    assert rep.chunks_extracted == 1 and n_chunks >= 1
    assert 0 < rep.summaries_made < total  # not a rebuild
    assert rep.summaries_reused > 0
    assert demo.graph.status().stale_communities == 0
    rel = demo.graph.show("billing-service")["relations_out"]
    assert any(r["type"] == "depends_on" and r["target"] == "PostgreSQL" for r in rel)


# ------------------------------------------------------------------------------ search


def test_graph_mode_reaches_neighbour_chunks(mem: Memory) -> None:
    mem.add("Le billing-service dépend de PostgreSQL.", id="dep")
    mem.add("PostgreSQL stores invoices in the ledger table.", id="pg")
    mem.add("The weather is nice today and nothing technical is said.", id="noise")
    mem.graph.build()
    resp = mem.search("what about billing-service?", mode="graph", top_k=5)
    docs = [r.doc_id for r in resp.results]
    assert docs[0] == "dep"  # the chunk naming the entity first
    assert "pg" in docs  # its neighbour's chunk through the graph
    assert "noise" not in docs
    assert all("graph" in r.ranks for r in resp.results)
    assert resp.legs["graph"].status == "ok" and resp.legs["bm25"].status == "skipped"


def test_graph_leg_fuses_in_hybrid_only_with_a_weight(demo: Memory) -> None:
    q = "Qui dépend de PostgreSQL ?"
    plain = demo.search(q, top_k=10)
    assert "graph" not in plain.legs
    fused = demo.search(q, top_k=10, hybrid_params={"graph_weight": 1.0})
    assert fused.legs["graph"].status == "ok" and fused.legs["graph"].returned > 0
    assert any("graph" in r.ranks for r in fused.results)


def test_graph_leg_respects_filters(demo: Memory) -> None:
    resp = demo.search("billing-service PostgreSQL", mode="graph", top_k=20, metadata_filter={"environment": "staging"})
    assert resp.results
    assert all(r.metadata.get("environment") == "staging" for r in resp.results)


def test_graph_mode_without_graph_is_a_clear_error(mem: Memory) -> None:
    mem.add("auth-service calls billing-service.", id="x")
    with pytest.raises(NotFoundError, match="graph build"):
        mem.search("auth-service", mode="graph")
    # hybrid with a graph weight still answers (the leg is just empty)
    assert mem.search("auth-service", hybrid_params={"graph_weight": 1}).results


def test_update_on_an_empty_namespace_is_a_clear_error(mem: Memory) -> None:
    with pytest.raises(NotFoundError, match="empty"):
        mem.graph.build(namespace="nobody")


def test_global_answer_offline_cites_communities_and_chunks(demo: Memory) -> None:
    ans = demo.ask_global("Quels services provoquent des erreurs HTTP 504 ?")
    comms = {c.community_id: c for c in demo.graph.communities(level=0)}
    assert ans.found and ans.answerer == "extractive" and ans.level == 0
    assert ans.community_ids and set(ans.community_ids) <= set(comms)
    assert set(ans.chunk_ids) <= {x for c in comms.values() for x in c.chunk_ids}
    assert 0 < ans.communities_used <= min(8, ans.communities_total)
    assert ans.prompt_tokens > 0 and not ans.stale
    with pytest.raises(ValidationError, match="level"):
        demo.ask_global("x", level=9)
    with pytest.raises(ValidationError):
        demo.ask_global("   ")


def test_global_answer_says_when_summaries_are_stale(demo: Memory) -> None:
    demo.delete("err-HEL-5040")
    demo.add("HEL-9999: the billing-service provoque HTTP 504.", id="new")
    ans = demo.ask_global("HTTP 504 billing-service")
    assert ans.stale
    assert any("graph update" in n or "added or changed" in n for n in ans.notes)


def test_global_without_graph_is_a_clear_error(mem: Memory) -> None:
    mem.add("auth-service calls billing-service.", id="x")
    with pytest.raises(NotFoundError, match="graph build"):
        mem.ask_global("what calls billing-service?")


# ------------------------------------------------------------------------------ tenancy


def test_namespaces_are_a_hard_boundary_in_the_graph(target) -> None:
    with Memory(target, embedder="hash", auto_embed=False) as m:
        m.add("acme-service depends on shared-db. acme-service causes HEL-1111.", id="a1", namespace="acme")
        m.add("shared-db is backed by PostgreSQL for acme-service.", id="a2", namespace="acme")
        m.add("globex-service depends on shared-db. globex-service causes HEL-2222.", id="g1", namespace="globex")
        m.graph.build(namespace="acme")
        m.graph.build(namespace="globex")
        acme_chunks = {
            r
            for (r,) in m.store.reader.execute(
                "SELECT c.chunk_id FROM chunks c JOIN namespaces n ON n.id=c.ns_id WHERE n.name='acme'"
            )
        }
        # the shared entity name exists in both graphs, each with its own provenance only
        g = m.graph.show("shared-db", namespace="globex")
        assert g["documents"] == ["g1"]
        assert set(m.graph.show("shared-db", namespace="acme")["documents"]) == {"a1", "a2"}
        with pytest.raises(NotFoundError):
            m.graph.show("acme-service", namespace="globex")
        resp = m.search("shared-db acme-service PostgreSQL", mode="graph", namespace="globex", top_k=50)
        assert resp.results and not ({r.chunk_id for r in resp.results} & acme_chunks)
        resp = m.search("shared-db", namespace="globex", top_k=50, hybrid_params={"graph_weight": 5})
        assert all(r.doc_id == "g1" for r in resp.results)
        ans = m.ask_global("What depends on shared-db?", namespace="globex")
        assert not (set(ans.chunk_ids) & acme_chunks)
        globex_comm_members = {k for c in m.graph.communities(namespace="globex") for k in c.members}
        assert "acme-service" not in globex_comm_members
        # deleting in one namespace leaves the other's graph untouched
        before = m.graph.status(namespace="globex")
        m.delete("a1", namespace="acme")
        after = m.graph.status(namespace="globex")
        assert (after.entities, after.stale_communities) == (before.entities, 0)
        assert m.graph.status(namespace="acme").stale_communities > 0


# ------------------------------------------------------------------------------ CLI


def _cli(db: Path, *args: str):
    import os
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "hybridmem.cli", "--db", str(db), "--embedder", "hash", *args]
    env = {**os.environ, "COLUMNS": "200", "HYBRIDMEM_LLM": ""}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)


def test_cli_graph_commands(tmp_path: Path) -> None:
    import json

    db = tmp_path / "c.db"
    src = tmp_path / "docs"
    src.mkdir()
    (src / "a.md").write_text("Le billing-service dépend de PostgreSQL. HEL-5040 provoque HTTP 504.\n")
    (src / "b.md").write_text("The auth-service calls billing-service; auth-service uses redis-prod-01.\n")
    assert _cli(db, "ingest", str(src)).returncode == 0
    r = _cli(db, "graph", "status", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["built"] is False
    r = _cli(db, "graph", "build", "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["chunks_extracted"] == 2 and rep["llm_calls"] == 0
    st = json.loads(_cli(db, "graph", "status", "--json").stdout)
    assert st["built"] and st["communities"] == rep["communities"] and st["stale_communities"] == 0
    r = _cli(db, "graph", "show", "Billing_Service")
    assert r.returncode == 0 and "→ depends_on PostgreSQL" in r.stdout and "billing-service (service)" in r.stdout
    r = _cli(db, "graph", "communities", "--json")
    assert r.returncode == 0 and all("stale" in c for c in json.loads(r.stdout))
    out = tmp_path / "g.graphml"
    assert _cli(db, "graph", "export", "--format", "graphml", "-o", str(out)).returncode == 0
    assert out.read_text().lstrip().startswith("<graphml")
    png = tmp_path / "g.png"
    r = _cli(db, "graph", "plot", "-o", str(png))
    assert r.returncode == 0 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    r = _cli(db, "ask", "--global", "What does billing-service depend on?", "--json")
    assert r.returncode == 0, r.stderr
    ans = json.loads(r.stdout)
    assert ans["found"] and ans["community_ids"] and ans["answerer"] == "extractive"
    r = _cli(db, "search", "billing-service", "--mode", "graph", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["results"][0]["ranks"]["graph"] == 1
    r = _cli(db, "graph", "update", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["summaries_made"] == 0


def test_cli_graph_errors_are_clean(tmp_path: Path) -> None:
    db = tmp_path / "e.db"
    r = _cli(db, "graph", "status")
    assert r.returncode == 3 and "no memory store" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "a.md").write_text("auth-service calls billing-service.\n")
    assert _cli(db, "ingest", str(tmp_path / "a.md")).returncode == 0
    r = _cli(db, "ask", "--global", "anything?")
    assert r.returncode == 3 and "graph build" in r.stderr and "Traceback" not in r.stderr
    r = _cli(db, "search", "auth-service", "--mode", "graph")
    assert r.returncode == 3 and "graph build" in r.stderr
    assert _cli(db, "graph", "build").returncode == 0
    r = _cli(db, "graph", "show", "nothing-like-it")
    assert r.returncode == 3 and "no entity" in r.stderr and "Traceback" not in r.stderr
    r = _cli(db, "graph", "export", "--format", "xml")
    assert r.returncode == 2 and "graphml or json" in r.stderr
    r = _cli(db, "graph", "build", "--extractor", "llm")
    assert r.returncode == 2 and "needs an LLM" in r.stderr
    r = _cli(db, "graph", "plot", "--top", "0")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    r = _cli(db, "graph", "plot", "-o", str(tmp_path / "missing-dir" / "g.png"))
    assert r.returncode != 0 and "Traceback" not in r.stderr


def test_adding_a_document_marks_the_entities_it_names_stale(demo: Memory) -> None:
    assert demo.graph.status().stale_communities == 0
    demo.add("Après la mise à jour, billing-service renvoie HTTP 504 quand max_connections est trop bas.", id="note-1")
    st = demo.graph.status()
    assert st.chunks_pending == 1 and st.stale_entities >= 3 and st.stale_communities > 0
    stale = demo.graph.stale_community_ids()
    members = {k for c in demo.graph.communities() if c.community_id in stale for k in c.members}
    assert {"billing-service", "http-504", "max-connections"} <= members
    rep = demo.graph.update()
    assert rep.chunks_extracted == 1 and demo.graph.status().stale_communities == 0
    assert "note-1" in demo.graph.show("billing-service")["documents"]


def test_adding_without_a_graph_costs_nothing(mem: Memory) -> None:
    mem.add("billing-service depends on PostgreSQL.", id="a")
    assert mem.graph.gstore.state(mem.namespace) is None
    assert mem.graph.on_write(mem.namespace, ["billing-service"]) == 0


def test_a_version_2_store_migrates_to_the_graph_tables(tmp_path: Path) -> None:
    from hybridmem.store import sqlite as sq

    path = tmp_path / "old.db"
    db = sqlite3.connect(path, isolation_level=None)
    for i, mig in enumerate(sq.MIGRATIONS[:2]):
        db.execute("BEGIN")
        mig(db)
        db.execute(f"PRAGMA user_version={i + 1}")
        db.execute("COMMIT")
    db.close()
    with Memory(path, embedder="hash", auto_embed=False) as m:
        assert m.stats().schema_version == sq.SCHEMA_VERSION
        m.add("auth-service calls billing-service.", id="x")
        assert m.graph.build().entities == 2


def test_a_store_whose_keys_lack_the_namespace_migrates_with_its_graph_vectors_and_queue(target) -> None:
    """SQLite schema 9 / PostgreSQL schema 6 key the graph's provenance (and, on PostgreSQL, chunks,
    vectors and the embedding queue) by namespace, as a distributed PostgreSQL needs: a store
    written before keeps its graph, vectors and queue, answers the same, and writes, re-extracts
    and deletes through the new keys (the cascades included)."""
    import psycopg

    from old_layouts import PG_KEYS_WITHOUT_NAMESPACE, graph_keys_without_namespace

    docs = load_documents()[:12]
    tables = ("graph_entities", "graph_mentions", "graph_relations", "graph_relation_sources", "graph_chunks")

    def counts(m: Memory) -> dict[str, int]:
        out = {t: int(m.store.reader.execute(f"SELECT count(*) FROM {t}").fetchone()[0]) for t in (*tables, "vectors")}
        return out | {"queued": m.store.pending_count()}

    def answers(m: Memory, spaces: tuple[str, ...] = ("a", "b")) -> dict[tuple[str, str], list[str]]:
        q = "billing-service PostgreSQL"
        return {
            (ns, mode): [r.chunk_id for r in m.search(q, mode=mode, top_k=8, namespace=ns).results]
            for ns in spaces
            for mode in ("graph", "hybrid")
        }

    with Memory(target, embedder="hash", auto_embed=False) as m:
        for ns in ("a", "b"):
            m.add_documents(docs, namespace=ns)
            m.graph.build(ns)
        m.embed_pending(limit=10)  # some vectors stored, the rest still queued
        before, ranked = counts(m), answers(m)
    assert before["graph_mentions"] > 0 and before["queued"] > 0 and before["vectors"] > 0
    if isinstance(target, Path):
        db = sqlite3.connect(target, isolation_level=None)
        db.execute("BEGIN")
        graph_keys_without_namespace(db)
        db.execute("PRAGMA user_version=8")
        db.execute("COMMIT")
        db.close()
    else:
        with psycopg.connect(target, autocommit=True) as c:
            c.execute("SET search_path TO hybridmem")
            with c.transaction():
                for stmt in PG_KEYS_WITHOUT_NAMESPACE.split(";"):
                    c.execute(stmt)
                c.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
            cols = {
                r[0]
                for r in c.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name='graph_mentions'"
                )
            }
            assert "ns_id" not in cols  # the old layout, truly
    with Memory(target, embedder="hash", auto_embed=False) as m:
        assert counts(m) == before and answers(m) == ranked
        nulls = m.store.reader.execute(
            "SELECT count(*) FROM graph_mentions m JOIN graph_entities e ON e.id = m.entity_id WHERE m.ns_id <> e.ns_id"
        ).fetchone()[0]
        assert nulls == 0  # each provenance row took its entity's namespace
        ns_a = m.store.namespace_id("a")
        m.embed_pending()  # the queue is claimed and emptied through its new key
        assert m.store.pending_count() == 0
        b_before = answers(m, ("b",))
        m.add("auth-service now calls ledger-service over gRPC.", id="new", namespace="a")
        assert m.graph.update("a").chunks_extracted == 1
        m.delete([d["id"] for d in docs] + ["new"], namespace="a")  # cascades through the new keys
        left = counts(m)
        assert left["graph_chunks"] == before["graph_chunks"] // 2 and left["vectors"] == left["graph_chunks"]
        assert m.store.reader.execute("SELECT count(*) FROM graph_mentions WHERE ns_id = ?", (ns_a,)).fetchone()[0] == 0
        assert answers(m, ("b",)) == b_before  # the other namespace untouched
