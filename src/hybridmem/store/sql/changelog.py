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
from contextlib import AbstractContextManager
from typing import Any, Protocol

import numpy as np

from ..base import SQLReader, WriteResult

__all__ = ["KEEP", "LOGS", "ChangeLogReads", "ChunkChange", "changed", "mark_at", "net", "record", "since", "table_sql"]

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


def changed(
    db: SQLReader,
    namespace: str,
    ns: int,
    counter: str,
    version: int,
    added: list[int],
    removed: list[int],
    res: WriteResult,
) -> None:
    """A store's write bumped ``counter`` (chunk_version, vec_version) of ``ns`` to ``version``: log
    the change in that counter's log, in the write's transaction, and report it in ``res``."""
    record(db, ns, version, added, removed, LOGS[counter])
    (res.chunk_changes if counter == "chunk_version" else res.vec_changes).append((namespace, version, added, removed))


def net(changes: Sequence[ChunkChange]) -> tuple[int, np.ndarray, np.ndarray]:
    """Several changes as one: (the last version, rowids added by any, rowids to remove first). A
    rowid added and later removed is gone from the store (reading it back finds nothing); one
    re-added is read in its current state: removing every touched rowid first makes the order of
    the changes irrelevant."""
    added = np.unique(np.concatenate([c[1] for c in changes]))
    removed = np.unique(np.concatenate([c[2] for c in changes] + [added]))
    return changes[-1][0], added, removed


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


def mark_at(db: SQLReader, ns: int, version: int, table: str = "chunk_log") -> str | None:
    """The mark of the entry that brought ``ns`` to ``version`` in ``table`` (None: not logged, or pruned)."""
    assert table in LOGS.values()
    row = db.execute(f"SELECT mark FROM {table} WHERE ns_id=? AND version=?", (ns, int(version))).fetchone()
    return None if row is None else str(row[0])


class _Snapshots(Protocol):
    counters: tuple[str, str]  # (table, key column) of each namespace's versions and counts

    def namespace_id(self, name: str) -> int | None: ...
    def snapshot(self) -> AbstractContextManager[SQLReader]: ...
    def _bump(self, conn: Any, ns: int, column: str = ...) -> int: ...
    def _portable(self, conn: Any) -> SQLReader: ...


class ChangeLogReads:
    """The stores' change-log writes and reads (a mixin over ``namespace_id``, ``snapshot()``,
    ``_bump`` and ``_portable``, which both backends have): each read takes a counter and its log
    in one snapshot. Also the namespace a by-id read keeps to (:meth:`_scope`)."""

    def chunk_changes_since(self: _Snapshots, namespace: str, version: int) -> list[ChunkChange] | None:
        """The committed chunk changes after ``version`` up to the current one, or None when the
        change log does not hold them all (:func:`since`)."""
        return ChangeLogReads._since(self, namespace, version, "chunk_version")

    def vector_changes_since(self: _Snapshots, namespace: str, version: int) -> list[ChunkChange] | None:
        """The committed vector changes after ``version`` (as ``chunk_changes_since``)."""
        return ChangeLogReads._since(self, namespace, version, "vec_version")

    def chunk_mark(self: _Snapshots, namespace: str, version: int) -> str | None:
        """The chunk log's mark of ``version`` (:func:`mark_at`)."""
        return ChangeLogReads._mark(self, namespace, version, "chunk_log")

    def vector_mark(self: _Snapshots, namespace: str, version: int) -> str | None:
        """The vector log's mark of ``version`` (:func:`mark_at`)."""
        return ChangeLogReads._mark(self, namespace, version, "vec_log")

    def _scope(self: _Snapshots, namespace: str | None) -> int | None:
        """The id of the namespace a by-id read keeps to: None for no namespace (every one), -1
        for one the store does not hold (the read returns nothing)."""
        if namespace is None:
            return None
        ns = self.namespace_id(namespace)
        return -1 if ns is None else ns

    @staticmethod
    def _mark(store: _Snapshots, namespace: str, version: int, table: str) -> str | None:
        ns = store.namespace_id(namespace)
        if ns is None:
            return None
        with store.snapshot() as db:
            return mark_at(db, ns, version, table)

    def _changed(
        self: _Snapshots,
        conn: Any,
        namespace: str,
        ns: int,
        counter: str,
        added: list[int],
        removed: list[int],
        res: WriteResult,
    ) -> None:
        """In a write's transaction on ``conn``: bump the namespace's ``counter``, log and report
        the change (:func:`changed`)."""
        changed(self._portable(conn), namespace, ns, counter, self._bump(conn, ns, counter), added, removed, res)

    @staticmethod
    def _since(store: _Snapshots, namespace: str, version: int, counter: str) -> list[ChunkChange] | None:
        ns = store.namespace_id(namespace)
        if ns is None:
            return None
        with store.snapshot() as db:
            table, key = store.counters
            row = db.execute(f"SELECT {counter} FROM {table} WHERE {key}=?", (ns,)).fetchone()
            return None if row is None else since(db, ns, version, int(row[0]), LOGS[counter])
