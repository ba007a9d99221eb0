"""What only the PostgreSQL backend has: BM25 in SQL equal to the embedded backend's, JSONB filters
equal to the Python predicate (hypothesis) and safe from injection, filtered HNSW search that still
fills ``top_k``, and clear errors (server down, no pgvector privilege, newer schema, timeouts).
The behaviour both backends share is in the contract suite (tests/store/test_store_contract.py, ``target``)."""

from __future__ import annotations

import json
import random
import threading
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from test_filters import LONG_IN_METAS, LONG_IN_SPECS
from test_filters import filters as filter_strategy
from test_filters import metadata as metadata_strategy

from conftest import shared_path
from hybridmem import Memory
from hybridmem.errors import FilterError, StoreError
from hybridmem.filters import matches, parse_filter
from hybridmem.retrieve.sparse import SparseIndex
from hybridmem.store.sql.filters import to_pg_sql
from hybridmem.text.tokenize import query_tokens

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg(pg_url):
    m = Memory(pg_url, embedder="hash", auto_embed=False)
    try:
        yield m
    finally:
        m.close()


def _scifact_sample(n: int) -> list[dict[str, Any]]:
    rows = []
    with open(shared_path("data", "beir", "scifact", "corpus.jsonl"), encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            rows.append(
                {
                    "id": r["_id"],
                    "text": f"{r.get('title', '')}\n\n{r['text']}",
                    "metadata": {"year": 2000 + len(rows) % 25, "split": "a" if len(rows) % 3 else "b"},
                }
            )
            if len(rows) == n:
                break
    return rows


MULTILINGUAL = [
    {"id": "fr1", "text": "Le pool de connexions est saturé : le serveur renvoie HTTP 504 et HEL-4040."},
    {"id": "de1", "text": "Die Datenbank lehnt neue Verbindungen ab, max_connections ist erreicht."},
    {"id": "es1", "text": "El servidor devuelve errores 504 cuando las conexiones se agotan."},
    {"id": "zh1", "text": "数据库连接池耗尽，网关返回 HTTP 504 超时错误。"},
    {"id": "en1", "text": "Raise max_connections or add PgBouncer when HEL-4040 shows up in production."},
]
QUERIES = [
    "HEL-4040 504 gateway",
    "max_connections pool",
    "serveur connexions saturé",
    "Datenbank Verbindungen",
    "数据库 连接池",
    "protein expression in cancer cells",
    "vaccine immune response",
    "DNA repair mechanism",
]


# ---------------------------------------------------------------- BM25 parity
def test_bm25_in_sql_equals_the_embedded_backend(pg, tmp_path):
    """Same corpus and tokenizer: PostgreSQL's BM25 scores equal FTS5's ``bm25()`` and the
    in-memory index's within 1e-6, with and without filters, through updates and deletes."""
    docs = _scifact_sample(400) + MULTILINGUAL
    lite = Memory(tmp_path / "ref.db", embedder="hash", auto_embed=False, chunk_size=None)
    pgm = Memory(pg.path, embedder="hash", auto_embed=False, chunk_size=None)
    try:
        for m in (lite, pgm):
            m.add_documents(docs, batch_size=128)

        def compare(flt: dict | None = None) -> int:
            f = parse_filter(flt)
            n = 0
            for q in QUERIES:
                terms = query_tokens(q)
                ours = pgm.store.search_sparse("default", terms, f, 20)
                fts = lite.store.bm25("default", terms, f, 20)
                idx = SparseIndex()
                idx.load(*lite.store.load_tokens("default"))
                allowed = lite.store.filter_rowids("default", f) if f is not None else None
                mem_scores = dict(idx.search(terms, 20, allowed))
                to_id = lambda store, rows: [(store.fetch([r])[r].chunk_id, s) for r, s in rows]  # noqa: E731
                a, b = to_id(pgm.store, ours), to_id(lite.store, fts)
                assert len(a) == len(b), q
                for (ca, sa), (cb, sb) in zip(a, b):
                    assert sa == pytest.approx(sb, abs=1e-6), (q, ca, cb)
                # same set of chunks at each distinct score (ties may order differently in FTS5)
                assert sorted((round(s, 5), c) for c, s in a) == sorted((round(s, 5), c) for c, s in b), q
                for r, s in fts:
                    assert mem_scores[r] == pytest.approx(s, rel=1e-5)
                n += len(a)
            return n

        assert compare() > 40
        assert compare({"split": "b"}) > 10
        assert compare({"year": {"$gte": 2010}, "split": {"$ne": "b"}}) > 10
        # statistics follow updates and deletes (N, avgdl and document frequencies all change)
        for m in (lite, pgm):
            m.update("fr1", "Nouveau texte : le cache Redis expire, HEL-4040 disparaît, connexions rétablies.")
            m.delete([docs[0]["id"], docs[5]["id"], docs[7]["id"]])
            m.add("protein protein protein expression DNA repair in cancer cells", id="new")
        assert compare() > 40
        assert pgm.store.integrity_check() == "ok"
    finally:
        lite.close()
        pgm.close()


# ---------------------------------------------------------------- filters
@pytest.fixture(scope="module")
def pg_conn():
    import psycopg

    from pg_utils import server

    srv = server()
    url = srv.new_database()
    conn = psycopg.connect(url, autocommit=True)
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, metadata JSONB NOT NULL)")
    try:
        yield conn
    finally:
        conn.close()
        srv.drop_database(url)


def _pg_select(conn, metas: list[dict[str, Any]], spec: dict[str, Any]) -> set[int]:
    conn.execute("TRUNCATE t")
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO t VALUES (%s, %s::jsonb)",
            [(i, json.dumps(m, ensure_ascii=False, allow_nan=False)) for i, m in enumerate(metas)],
        )
    where, params = to_pg_sql(parse_filter(spec), "metadata")
    return {r[0] for r in conn.execute(f"SELECT id FROM t WHERE {where}", params)}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(metadata_strategy, min_size=1, max_size=12), filter_strategy)
def test_jsonb_filters_agree_with_the_python_predicate(pg_conn, metas, spec):
    assume("\\u0000" not in json.dumps(metas))  # PostgreSQL stores no NUL character (the store rejects it)
    f = parse_filter(spec)
    try:
        rows = _pg_select(pg_conn, metas, spec)
    except FilterError as e:
        assert "NUL" in str(e)
        return
    expected = {i for i, m in enumerate(metas) if matches(f, m)}
    assert rows == expected, (spec, [metas[i] for i in sorted(rows ^ expected)])


HOSTILE = [
    "a'b",
    'x"; DROP TABLE chunks; --',
    "k;--",
    "$.a",
    "a.b",
    "a->>b",
    "{a,b}",
    "[0]",
    "a' OR '1'='1",
    "%s",
    "%(x)s",
    "?",
    "ünï €",
    "x') OR 1=1 --",
]


def test_hostile_keys_and_values_are_parameters(pg):
    good_keys = []
    for i, key in enumerate(HOSTILE):
        try:
            parse_filter({key: 1})
        except FilterError:
            continue  # the grammar refuses the key itself ("" and keys with a double quote)
        good_keys.append(key)
        pg.add(f"hostile note number {i}", id=f"h{i}", metadata={key: HOSTILE[-1 - i], "n": i})
    assert len(good_keys) >= 10
    for i, key in enumerate(HOSTILE):
        if key not in good_keys:
            continue
        value = HOSTILE[-1 - i]
        for mode in ("bm25", "vector", "hybrid"):
            pg.embed_pending()
            resp = pg.search("hostile note", mode=mode, top_k=50, metadata_filter={key: value})
            assert [r.doc_id for r in resp.results] == [f"h{i}"], (key, mode)
        resp = pg.search("hostile note", mode="bm25", top_k=50, metadata_filter={key: {"$in": [value, "zz"]}})
        assert [r.doc_id for r in resp.results] == [f"h{i}"]
        resp = pg.search("hostile note", mode="bm25", top_k=50, metadata_filter={key: {"$gte": value}})
        assert f"h{i}" in {r.doc_id for r in resp.results}
    # nothing was dropped or rewritten
    assert pg.stats().documents == len(good_keys)
    assert pg.store.integrity_check() == "ok"
    key = HOSTILE[1].replace('"', "")
    where, params = to_pg_sql(parse_filter({key: HOSTILE[1]}), "m")
    assert "DROP" not in where and params == [json.dumps({key: HOSTILE[1]}), key, json.dumps(HOSTILE[1])]


# ---------------------------------------------------------------- dense leg
def test_selective_filter_still_fills_top_k_and_uses_hnsw(pg_url):
    # exact_threshold=0: the HNSW index serves every dense query (by default small namespaces are exact)
    pg = Memory(pg_url, embedder="hash", auto_embed=False, exact_threshold=0)
    try:
        _selective_filter_checks(pg)
    finally:
        pg.close()


def _selective_filter_checks(pg: Memory) -> None:
    rng = random.Random(7)
    words = "alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega".split()
    docs = [
        {
            "id": f"d{i}",
            "text": " ".join(rng.choice(words) for _ in range(12)) + f" item {i}",
            "metadata": {"tag": "rare" if i % 100 == 0 else "common", "i": i},
        }
        for i in range(3000)
    ]
    pg.add_documents(docs, batch_size=500)
    pg.embed_pending()
    with pg.store._conn() as conn:  # the index exists and the planner uses it for a namespace query
        plan = "\n".join(
            r[0]
            for r in conn.execute(
                "EXPLAIN SELECT chunk_rowid FROM vectors WHERE ns_id = 1 ORDER BY embedding <=> "
                "(SELECT embedding FROM vectors LIMIT 1) LIMIT 10"
            )
        )
    assert "vectors_hnsw" in plan
    q = "alpha omega sigma item"
    resp = pg.search(q, mode="vector", top_k=10, metadata_filter={"tag": "rare"})  # 30 of 3000 rows
    assert len(resp.results) == 10 and all(r.metadata["tag"] == "rare" for r in resp.results)
    # exact reference over the allowed rows
    qv = pg.embedder.embed_query(q)
    _, rowids, m = pg.store.load_vectors("default")
    allowed = set(pg.store.filter_rowids("default", parse_filter({"tag": "rare"})).tolist())
    sims = m @ qv / (np.linalg.norm(m, axis=1) * np.linalg.norm(qv))
    exact = [int(r) for r in rowids[np.argsort(-sims)] if int(r) in allowed][:10]
    got = pg.store.search_dense("default", qv, parse_filter({"tag": "rare"}), 10)
    assert len(set(r for r, _ in got) & set(exact)) >= 8
    # a filter so selective the index alone cannot fill k: the exact fallback returns all of them
    tiny = {"i": {"$in": [5, 17, 2999]}}
    resp = pg.search(q, mode="vector", top_k=10, metadata_filter=tiny)
    assert sorted(r.doc_id for r in resp.results) == ["d17", "d2999", "d5"]
    assert pg.stats().dense_index == "pgvector-hnsw"


def test_small_namespaces_are_searched_exactly(pg):
    pg.add_documents(
        [{"id": f"e{i}", "text": f"exact scan note {i} about {'lynx' if i % 2 else 'otter'}"} for i in range(200)]
    )
    pg.embed_pending()
    assert pg.stats().dense_index == "exact"
    qv = pg.embedder.embed_query("otter note")
    got = pg.store.search_dense("default", qv, None, 10)
    assert got == pg.store.search_dense("default", qv, None, 10, exact=True)


# ---------------------------------------------------------------- concurrency
def test_concurrent_writers_and_readers(pg):
    errors: list[BaseException] = []

    def writer(w: int) -> None:
        try:
            for j in range(15):
                pg.add(f"writer {w} note {j} about kestrel pipelines", id=f"w{w}-{j}", metadata={"w": w})
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    def reader() -> None:
        try:
            for _ in range(30):
                pg.search("kestrel pipelines", mode="bm25", top_k=5)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)] + [
        threading.Thread(target=reader) for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert pg.stats().documents == 60 and pg.stats().chunks == 60
    assert pg.store.integrity_check() == "ok"
    for w in range(4):
        resp = pg.search("kestrel", mode="bm25", top_k=50, metadata_filter={"w": w})
        assert len(resp.results) == 15


# ---------------------------------------------------------------- clear errors
def test_server_down_is_a_clear_error():
    with pytest.raises(StoreError, match="cannot connect to PostgreSQL") as ei:
        Memory("postgresql://hm:s3cret@127.0.0.1:1/nodb?connect_timeout=2", embedder="hash", auto_embed=False)
    assert "s3cret" not in str(ei.value) and "hm:***@127.0.0.1:1" in str(ei.value)


def test_cli_with_a_postgres_url(pg_url, tmp_path):
    from typer.testing import CliRunner

    from hybridmem.cli import app

    note = tmp_path / "note.md"
    note.write_text("# Runbook\n\nWhen HEL-4040 appears, raise max_connections on db-prod-01.\n", encoding="utf-8")
    r = CliRunner().invoke(app, ["--db", pg_url, "--embedder", "hash", "ingest", str(note)])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(app, ["--db", pg_url, "search", "HEL-4040", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)  # notes and warnings go to stderr
    assert out["total_retrieved"] == len(out["results"]) >= 1 and "HEL-4040" in out["results"][0]["text"]


def test_no_privilege_for_the_extension_says_what_to_do(pg_url):
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    role = "hm_plain_" + urlsplit(pg_url).path.strip("/")[-8:]
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute(f"CREATE ROLE {role} LOGIN")
        c.execute(f"GRANT ALL ON DATABASE {urlsplit(pg_url).path.strip('/')} TO {role}")
        c.execute(f"GRANT ALL ON SCHEMA public TO {role}")
    parts = urlsplit(pg_url)
    url = urlunsplit(parts._replace(netloc=f"{role}@{parts.netloc.split('@')[-1]}"))
    try:
        with pytest.raises(StoreError, match="CREATE EXTENSION vector"):
            Memory(url, embedder="hash", auto_embed=False)
    finally:
        with psycopg.connect(pg_url, autocommit=True) as c:
            c.execute(f"REVOKE ALL ON SCHEMA public FROM {role}")
            c.execute(f"REVOKE ALL ON DATABASE {urlsplit(pg_url).path.strip('/')} FROM {role}")
            c.execute(f"DROP ROLE {role}")


def test_newer_schema_and_missing_store(pg_url):
    from hybridmem.store.postgres import PostgresStore

    with pytest.raises(Exception, match="no hybridmem store"):
        PostgresStore(pg_url, create=False)
    PostgresStore(pg_url).close()
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute("UPDATE hybridmem.meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match="newer than this hybridmem"):
        PostgresStore(pg_url)


def test_statement_timeout_is_a_store_error(pg_url):
    from hybridmem.store.postgres import PostgresStore

    s = PostgresStore(pg_url, statement_timeout_ms=100)
    try:
        with pytest.raises(StoreError, match="timed out"):
            s.reader.execute("SELECT pg_sleep(2)")
        assert s.namespaces() == []  # the pool is still usable
    finally:
        s.close()


def test_missing_pgvector_says_what_to_install(pg_url, monkeypatch):
    """A server without the extension: CREATE EXTENSION fails with 'not available' (simulated at
    the driver: every test server here has pgvector) → one error naming what to install."""
    import psycopg
    from psycopg import errors as pgerr

    real = psycopg.Connection.execute

    def execute(self, query, *a, **kw):  # type: ignore[no-untyped-def]
        if isinstance(query, str) and query.startswith("CREATE EXTENSION"):
            raise pgerr.UndefinedFile('extension "vector" is not available')
        return real(self, query, *a, **kw)

    monkeypatch.setattr(psycopg.Connection, "execute", execute)
    with pytest.raises(StoreError, match="no pgvector extension") as ei:
        Memory(pg_url, embedder="hash", auto_embed=False)
    assert "install pgvector" in str(ei.value)


def test_store_options_reach_the_backend(pg_url):
    import psycopg

    from hybridmem.errors import ValidationError

    with Memory(
        pg_url,
        embedder="hash",
        auto_embed=False,
        store_options={"schema": "team_a", "pool_size": 2, "hnsw_ef_search": 200},
    ) as m:
        m.add("a note in its own schema", id="s1")
        assert m.store.hnsw_ef_search == 200 and m.store.schema == "team_a"
    with psycopg.connect(pg_url) as c:
        assert c.execute("SELECT count(*) FROM team_a.chunks").fetchone()[0] == 1
        assert (
            c.execute("SELECT count(*) FROM information_schema.schemata WHERE schema_name = 'hybridmem'").fetchone()[0]
            == 0
        )
    with pytest.raises(ValidationError, match="schema"):
        Memory(pg_url, embedder="hash", auto_embed=False, store_options={"schema": "x; DROP TABLE y"})


@pytest.mark.parametrize("spec", LONG_IN_SPECS + [{"k": {"$in": [f"z{i}" for i in range(20)]}}])
def test_long_in_lists_are_one_hashed_any_per_row(pg_conn, spec):
    """A list of over 8 values is one ``= ANY(jsonb[])`` (not an ``OR`` of equalities): same rows as Python."""
    sql, _ = to_pg_sql(parse_filter(spec), "metadata")
    assert "= ANY(" in sql
    expected = {i for i, m in enumerate(LONG_IN_METAS) if matches(parse_filter(spec), m)}
    assert _pg_select(pg_conn, LONG_IN_METAS, spec) == expected


# the tables a distributed PostgreSQL (Citus) would copy to every node; every other table of the
# store is distributed and colocated by ns_id (docs/scaling.md, "Past one database server")
REFERENCE_TABLES = {"meta", "namespaces"}


def test_every_key_holds_the_namespace_as_a_distributed_postgres_needs(pg):
    """Citus distributes a table by a column only when each primary key, unique constraint and unique
    index holds it, and a foreign key between distributed tables joins on it: checked here on the
    live catalog of a store with every kind of row (documents, vectors, queue, graph), so a later
    migration that adds a key without ns_id fails here."""
    from hybridmem.graph.extract import ChunkExtraction, Entity, Relation
    from hybridmem.graph.store import GraphStore

    pg.add_documents(MULTILINGUAL)
    pg.embed_pending(limit=1)  # vectors and a queue both hold rows
    store = pg.store
    gs = GraphStore(store)
    items = [
        ChunkExtraction(
            c.rowid,
            [Entity("Pool", "term"), Entity("HEL-4040", "id")],
            [Relation("Pool", "HEL-4040", "raises")],
        )
        for c in gs.pending_chunks("default")
    ]
    assert gs.write_extractions("default", "test", items) == len(items) > 0
    assert gs.pending_count("default") == 0 and gs.extracted_count("default") == len(items)
    with store._conn() as conn:
        tables = {
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s AND table_type = 'BASE TABLE'",
                (store.schema,),
            )
        }
        distributed = tables - REFERENCE_TABLES
        assert {
            "chunks",
            "vectors",
            "embed_queue",
            "graph_mentions",
            "graph_relation_sources",
            "graph_chunks",
        } <= distributed
        keys = conn.execute(
            """SELECT t.relname, c.conname, c.contype,
                      ARRAY(SELECT a.attname FROM unnest(c.conkey) k JOIN pg_attribute a
                            ON a.attrelid = c.conrelid AND a.attnum = k ORDER BY a.attname),
                      f.relname,
                      ARRAY(SELECT a.attname FROM unnest(c.confkey) k JOIN pg_attribute a
                            ON a.attrelid = c.confrelid AND a.attnum = k ORDER BY a.attname)
               FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid
               JOIN pg_namespace n ON n.oid = t.relnamespace LEFT JOIN pg_class f ON f.oid = c.confrelid
               WHERE n.nspname = %s AND c.contype IN ('p', 'u', 'f')""",
            (store.schema,),
        ).fetchall()
        uniques = conn.execute(
            """SELECT t.relname, i.relname, ARRAY(SELECT a.attname FROM unnest(x.indkey) k JOIN pg_attribute a
                      ON a.attrelid = x.indrelid AND a.attnum = k)
               FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
               JOIN pg_namespace n ON n.oid = t.relnamespace WHERE n.nspname = %s AND x.indisunique""",
            (store.schema,),
        ).fetchall()
    # the catalog was read (a query that found nothing would pass the rule below)
    assert ("chunks", "p", ("id", "ns_id")) in {(t, k, tuple(c)) for t, _, k, c, _, _ in keys}
    assert ("vectors", "f", "chunks") in {(t, k, f) for t, _, k, _, f, _ in keys}
    bad = []
    for table, name, kind, cols, ref, ref_cols in keys:
        if table not in distributed:
            continue
        if kind in ("p", "u") and "ns_id" not in cols:
            bad.append(f"{table}.{name}: key {cols} without ns_id")
        if kind == "f" and ref in distributed and ("ns_id" not in cols or "ns_id" not in ref_cols):
            bad.append(f"{table}.{name}: foreign key {cols} -> {ref}{ref_cols} not on ns_id")
    bad += [f"{t}.{i}: unique index {c} without ns_id" for t, i, c in uniques if t in distributed and "ns_id" not in c]
    assert not bad, bad
    # and the store works through them: a delete cascades to vectors, queue and graph provenance
    pg.delete([d["id"] for d in MULTILINGUAL])
    with store._conn() as conn:
        for table in ("vectors", "embed_queue", "graph_mentions", "graph_relation_sources", "graph_chunks"):
            assert conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0, table


def test_the_counters_every_write_bumps_live_in_a_table_keyed_by_the_namespace(pg, pg_url):
    """PostgreSQL schema 8: the versions and counts each write bumps (chunk and vector versions,
    chunk count and total length, queue count) live in ``namespace_stats``, keyed by ``ns_id``
    (distributed with the tenant's rows on Citus), not in ``namespaces`` (a reference table there,
    where every update is a two-phase commit to every node). A store of schema 7 migrates with its
    counts, and answers and writes as before."""
    pg.add_documents([{"id": f"d{i}", "text": f"pool timeout HEL-{4000 + i}"} for i in range(12)], namespace="a")
    pg.add_documents([{"id": f"e{i}", "text": f"cache retry {i}"} for i in range(5)], namespace="b")
    pg.embed_pending(limit=4)
    st_ = pg.store
    schema = st_.schema
    before = {
        ns: (st_.chunk_version(ns), st_.vector_version(ns), st_.chunk_count(ns), st_.pending_count(ns))
        for ns in ("a", "b")
    }
    answer = [r.chunk_id for r in pg.search("HEL-4003", namespace="a", mode="bm25").results]
    assert before["a"][2] == 12 and before["a"][3] + before["b"][3] == 13 and answer[0] == "d3_p1"
    with st_._conn() as conn:
        cols = {
            r[0]
            for r in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND table_name = 'namespaces'",
                (schema,),
            )
        }
        assert cols == {"id", "name", "created_at"}  # nothing a write updates
        # back to schema 7: the counters on namespaces, no namespace_stats
        for col in ("vec_version", "chunk_version", "n_chunks", "total_len", "n_pending"):
            conn.execute(f"ALTER TABLE namespaces ADD COLUMN {col} BIGINT NOT NULL DEFAULT 0")
            conn.execute(f"UPDATE namespaces n SET {col} = s.{col} FROM namespace_stats s WHERE s.ns_id = n.id")
        conn.execute("DROP TABLE namespace_stats")
        conn.execute("UPDATE meta SET value = '7' WHERE key = 'schema_version'")
    pg.close()
    with Memory(pg_url, embedder="hash", auto_embed=False) as m:
        st2 = m.store
        assert m.stats().schema_version == type(st2).schema_version == 10
        after = {
            ns: (st2.chunk_version(ns), st2.vector_version(ns), st2.chunk_count(ns), st2.pending_count(ns))
            for ns in ("a", "b")
        }
        assert after == before
        assert [r.chunk_id for r in m.search("HEL-4003", namespace="a", mode="bm25").results] == answer
        m.add_documents([{"id": "d99", "text": "pool timeout HEL-4099"}], namespace="a")
        m.delete("e0", namespace="b")
        assert st2.chunk_count("a") == 13 and st2.chunk_count("b") == 4
        assert st2.chunk_version("a") == before["a"][0] + 1 and st2.pending_count("a") == before["a"][3] + 1
        waiting = st2.pending_count()
        assert waiting == st2.pending_count("a") + st2.pending_count("b") > 0
        assert m.embed_pending() == waiting and st2.pending_count() == 0
