"""The change logs of a namespace's chunks and vectors, in SQL both backends speak (``?``
placeholders; PostgreSQL through its qmark adapter): every committed bump of a namespace's chunk
version (``chunk_log``) or vector version (``vec_log``) records, in the same transaction, the rowids
it added and removed. A process whose in-process BM25 postings, dense index, cached filter result
or saved snapshot reflect an older version replays the changes since then instead of reading every
chunk or vector again: another process's writes to the same SQLite file, every server's writes to
a shared PostgreSQL database.

The log keeps the last :data:`KEEP` versions of a namespace; a bump made without logging (a
re-index after a tokenizer change) leaves a gap. Either way :func:`since` answers None and the
reader loads from the store, which is the truth: a reader never applies a partial log.

Each entry carries a random ``mark``: a saved index records the mark of the version it reflects,
and is brought forward only from a store whose entry at that version bears the same mark. A store
file put back from a backup and written to again reaches the same version numbers through other
changes (and SQLite hands out the same rowids again): the marks differ, the snapshot is refused.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import numpy as np

from .base import SQLReader

__all__ = ["KEEP", "LOGS", "ChunkChange", "mark_at", "record", "since", "table_sql"]

#: versions of each namespace the log keeps (older entries are pruned as new ones are written)
KEEP = 10_000

#: (version, rowids added, rowids removed) of one committed change; a chunk whose visibility changed
#: (a retired version) is both removed and added
ChunkChange = tuple[int, np.ndarray, np.ndarray]

#: the logs, by the version counter of ``namespaces`` they follow
LOGS = {"chunk_version": "chunk_log", "vec_version": "vec_log"}


def table_sql(blob: str, table: str = "chunk_log") -> str:
    """A log's table, for a backend whose binary column type is ``blob`` (``BLOB``, ``BYTEA``)."""
    assert table in LOGS.values()
    return (
        f"CREATE TABLE {table} (ns_id BIGINT NOT NULL, version BIGINT NOT NULL, "
        f"added {blob} NOT NULL, removed {blob} NOT NULL, mark TEXT NOT NULL, PRIMARY KEY (ns_id, version))"
    )


def _pack(rowids: Sequence[int]) -> bytes:
    return np.asarray(rowids, dtype="<i8").tobytes()


def _unpack(data: bytes | memoryview) -> np.ndarray:
    return np.frombuffer(bytes(data), dtype="<i8").astype(np.int64)


def record(
    db: SQLReader, ns: int, version: int, added: Sequence[int], removed: Sequence[int], table: str = "chunk_log"
) -> None:
    """Log the change that brought namespace ``ns`` to ``version``, in the caller's transaction, and
    forget the entries :data:`KEEP` versions older."""
    assert table in LOGS.values()
    db.execute(
        f"INSERT INTO {table} VALUES (?, ?, ?, ?, ?)",
        (ns, int(version), _pack(added), _pack(removed), uuid.uuid4().hex),
    )
    if version > KEEP:
        db.execute(f"DELETE FROM {table} WHERE ns_id=? AND version <= ?", (ns, int(version) - KEEP))


def since(db: SQLReader, ns: int, version: int, current: int, table: str = "chunk_log") -> list[ChunkChange] | None:
    """The changes from ``version`` (exclusive) to ``current`` (inclusive), in order; None when the
    log does not hold every one of them (pruned, a bump that was not logged, or ``version`` is not
    a version this namespace went through before ``current``)."""
    if version > current or version < 0:
        return None
    if version == current:
        return []
    assert table in LOGS.values()
    rows = db.execute(
        f"SELECT version, added, removed FROM {table} WHERE ns_id=? AND version > ? AND version <= ? ORDER BY version",
        (ns, int(version), int(current)),
    ).fetchall()
    if [int(r[0]) for r in rows] != list(range(version + 1, current + 1)):
        return None
    return [(int(v), _unpack(a), _unpack(r)) for v, a, r in rows]


def mark_at(db: SQLReader, ns: int, version: int) -> str | None:
    """The mark of the entry that brought ``ns`` to ``version`` (None: not logged, or pruned)."""
    row = db.execute("SELECT mark FROM chunk_log WHERE ns_id=? AND version=?", (ns, int(version))).fetchone()
    return None if row is None else str(row[0])
