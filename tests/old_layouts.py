"""Store layouts of earlier schema versions, for the migration tests: each helper takes a current
SQLite store's connection back to how an older hybridmem wrote it."""

from __future__ import annotations

import sqlite3


def tokens_back_to_fts(db: sqlite3.Connection) -> None:
    """The layout before SQLite schema 8: each namespace's tokens in an FTS5 table (``fts_{ns}``),
    indexed on every write, instead of a plain table (``tokens_{ns}``)."""
    from hybridmem.store.sqlite import _FTS_TOKENIZE

    for (ns,) in db.execute("SELECT id FROM namespaces").fetchall():
        db.execute(f'CREATE VIRTUAL TABLE fts_{ns} USING fts5(tokens, tokenize="{_FTS_TOKENIZE}")')
        db.execute(f"INSERT INTO fts_{ns} (rowid, tokens) SELECT rowid, tokens FROM tokens_{ns}")
        db.execute(f"DROP TABLE tokens_{ns}")
