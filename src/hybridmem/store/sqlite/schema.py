"""The SQLite store's tables and helpers every part of it uses: per-namespace BM25 token tables,
lists of ids asked in parts, SQL fragments."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

from ..sql.common import DOC_JOIN as _DOC_JOIN
from ..sql.common import now_text as _now

__all__ = [
    "EMBED_TEXT",
    "PENDING_RECOUNT",
    "_DOC_JOIN",
    "_TIME_COLUMNS",
    "_TOKENS_TABLE",
    "WAL_CHECKPOINT_PAGES",
    "_now",
    "_script",
    "_select_in",
    "_tokens",
]


def _script(db: sqlite3.Connection, sql: str) -> None:
    # statement by statement: executescript() would COMMIT the migration's transaction
    for stmt in sql.split(";"):
        if stmt.strip():
            db.execute(stmt)


#: every namespace's ``n_pending`` counted afresh (the migration, a reset of every vector)
PENDING_RECOUNT = (
    "UPDATE namespaces SET n_pending = (SELECT count(*) FROM embed_queue q CROSS JOIN chunks c "
    "ON c.id = q.chunk_rowid WHERE c.ns_id = namespaces.id)"
)


#: the text a chunk's vector is of: its index-only context (Document.context), then its text
EMBED_TEXT = "CASE WHEN c.context IS NULL THEN c.text ELSE c.context || char(10) || c.text END"


#: a chunk's times and version, from its document (``ChunkRow``'s last fields)
_TIME_COLUMNS = "d.occurred_at, d.recorded_at, d.valid_to, d.version"


#: pages the write-ahead log holds before the writer copies it into the file (40 MB of 4 KiB pages)
WAL_CHECKPOINT_PAGES = 10_000


def _select_in(db: sqlite3.Connection, sql: str, ids: Sequence[Any], head: tuple[Any, ...] = ()) -> Iterator[Any]:
    """The rows of ``sql`` for ``ids``, asked in parts of 500 (within SQLite's limit of bound
    variables): ``{marks}`` in ``sql`` is one part's placeholders, ``head`` the parameters before them."""
    for i in range(0, len(ids), 500):
        part = ids[i : i + 500]
        yield from db.execute(sql.format(marks=",".join("?" * len(part))), (*head, *part))


def _tokens(ns_id: int) -> str:
    """A namespace's BM25 token streams: (rowid of the chunk, its space-joined tokens)."""
    return f"tokens_{int(ns_id)}"


_TOKENS_TABLE = "CREATE TABLE {table} (rowid INTEGER PRIMARY KEY, tokens TEXT NOT NULL)"
