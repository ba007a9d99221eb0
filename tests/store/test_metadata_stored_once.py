"""Metadata is stored once per document, not copied into each chunk (issue 16): a document of many
chunks with large metadata costs its metadata once; filters reach it through the chunk's document on
every leg; stores of the schema before keep their metadata through the migration."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg

from hybridmem import Memory, config
from old_layouts import tokens_back_to_fts

BIG = {f"k{i}": "v" * 700 for i in range(20)}  # ~14 KiB of metadata, under the per-document limit


def _long_text(n_chunks: int) -> str:
    return "\n\n".join(
        f"Paragraph {i} about the billing pool HEL-{4000 + i} and its runbook. " * 12 for i in range(n_chunks)
    )


def test_many_chunks_cost_the_metadata_once(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with Memory(path, embedder="hash", auto_embed=False) as m:
        m.add(_long_text(200), id="big", metadata={**BIG, "env": "prod"})
        n_chunks = m.stats().chunks
        assert n_chunks >= 50
        m.add("a small note on the billing pool", id="small", metadata={"env": "dev"})
        m.embed_pending()
        for mode in ("bm25", "vector", "hybrid"):
            r = m.search("billing pool", mode=mode, top_k=100, metadata_filter={"env": "prod"})
            assert r.results and {x.doc_id for x in r.results} == {"big"}, mode
            assert r.results[0].metadata["env"] == "prod" and r.results[0].metadata["k3"] == "v" * 700
    db = sqlite3.connect(path)
    cols = {r[1] for r in db.execute("PRAGMA table_info(chunks)")}
    assert "metadata" not in cols
    stored = db.execute("SELECT sum(length(metadata)) FROM documents").fetchone()[0]
    db.close()
    assert stored < 2 * len(str(BIG))  # once, not n_chunks times
    assert len(str(BIG)) * n_chunks > config.MAX_METADATA_BYTES * 10  # what copying would have cost


def _drop_history_columns(db, sqlite: bool) -> None:
    """Back to the layout before time and versions (SQLite schema 5, PostgreSQL schema 3) and the
    change logs (SQLite schemas 6-7, PostgreSQL schemas 4-5), and SQLite's tokens in FTS5 (schema 8)."""
    if sqlite:
        tokens_back_to_fts(db)
    db.execute("DROP TABLE chunk_log")
    db.execute("DROP TABLE vec_log")
    indexes = [
        "documents_by_time",
        "documents_by_occurred",
        "documents_by_head",
        "documents_by_key",
        "documents_retired",
    ]
    for idx in indexes + (["documents_by_turn"] if sqlite else []):
        db.execute(f"DROP INDEX {idx}")
    for col in ("occurred_at", "recorded_at", "valid_to", "version", "head_id", "mem_key", "change_reason"):
        db.execute(f"ALTER TABLE documents DROP COLUMN {col}")
    db.execute("ALTER TABLE chunks DROP COLUMN context")


def test_a_schema_3_sqlite_store_keeps_its_metadata(tmp_path: Path) -> None:
    from hybridmem.store import sqlite as sq

    path = tmp_path / "old.db"
    with Memory(path, embedder="hash", auto_embed=False) as m:
        m.add("HTTP 504 on the billing pool", id="a", metadata={"env": "prod", "sev": 2})
        m.add("HTTP 200 on the search pool", id="b", metadata={"env": "dev"})
    # the layout of schema 3: metadata also on each chunk
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("ALTER TABLE chunks ADD COLUMN metadata TEXT NOT NULL DEFAULT '{}'")
    db.execute("UPDATE chunks SET metadata = (SELECT metadata FROM documents d WHERE d.doc_id = chunks.doc_id)")
    _drop_history_columns(db, sqlite=True)
    db.execute("PRAGMA user_version=3")
    db.close()
    with Memory(path, embedder="hash", auto_embed=False) as m:
        assert m.stats().schema_version == sq.SCHEMA_VERSION
        r = m.search("pool", mode="bm25", metadata_filter={"env": "prod", "sev": {"$gte": 2}})
        assert [x.doc_id for x in r.results] == ["a"] and r.results[0].metadata == {"env": "prod", "sev": 2}
        assert m.get("b")["metadata"] == {"env": "dev"}


def test_a_schema_1_postgres_store_keeps_its_metadata(pg_url: str) -> None:
    from hybridmem.store import postgres as pg

    with Memory(pg_url, embedder="hash", auto_embed=False) as m:
        m.add("HTTP 504 on the billing pool", id="a", metadata={"env": "prod"})
        m.add("HTTP 200 on the search pool", id="b", metadata={"env": "dev"})
        m.embed_pending()
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute("SET search_path TO hybridmem")
        c.execute("ALTER TABLE chunks ADD COLUMN metadata JSONB NOT NULL DEFAULT '{}'")
        c.execute("UPDATE chunks c SET metadata = d.metadata FROM documents d WHERE d.doc_id = c.doc_id")
        c.execute("CREATE INDEX chunks_metadata ON chunks USING gin (metadata jsonb_path_ops)")
        c.execute("DROP INDEX documents_metadata")
        _drop_history_columns(c, sqlite=False)
        c.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    with Memory(pg_url, embedder="hash", auto_embed=False) as m:
        assert m.stats().schema_version == pg.SCHEMA_VERSION
        for mode in ("bm25", "vector", "hybrid"):
            r = m.search("pool", mode=mode, metadata_filter={"env": "prod"})
            assert [x.doc_id for x in r.results] == ["a"], mode
    with psycopg.connect(pg_url) as c:
        cols = {r[0] for r in c.execute("SELECT column_name FROM information_schema.columns WHERE table_name='chunks'")}
        assert "metadata" not in cols
