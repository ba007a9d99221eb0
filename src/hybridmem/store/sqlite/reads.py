"""The SQLite store's own reads: the embedding queue, version counters, BM25 token streams and
vectors for the in-process indexes, chunk rows, the hooks of the export walk and counts."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from ...errors import StoreError
from ..base import ChunkRow
from .core import _Core
from .schema import _DOC_JOIN, _TIME_COLUMNS, EMBED_TEXT, _select_in, _tokens

__all__ = ["_Reads"]

#: vectors per fetch of a whole namespace's load (``load_vectors``): ~12 MB at 384 dimensions
LOAD_BATCH = 8192


class _Reads(_Core):
    """Reads of chunks, tokens and vectors (the reads shared with PostgreSQL: store/sql/common.py)."""

    # ------------------------------------------------------------------ embedding queue
    def pending(self, limit: int) -> list[tuple[int, str, str, str]]:
        """(rowid, namespace, text, text_hash) of chunks waiting for a vector, oldest first."""
        return self.reader.execute(
            f"SELECT c.id, n.name, {EMBED_TEXT}, c.text_hash FROM embed_queue q JOIN chunks c ON c.id = q.chunk_rowid "
            "JOIN namespaces n ON n.id = c.ns_id ORDER BY q.chunk_rowid LIMIT ?",
            (limit,),
        ).fetchall()

    def pending_among(self, rowids: Sequence[int], namespace: str | None = None) -> set[int]:
        """The chunks among ``rowids`` (of ``namespace`` when given) that still wait for their vector."""
        ns = self._scope(namespace)
        if ns is None:
            sql = "SELECT chunk_rowid FROM embed_queue WHERE chunk_rowid IN ({marks})"
            return {r[0] for r in _select_in(self.reader, sql, list(rowids))}
        sql = (
            "SELECT q.chunk_rowid FROM embed_queue q JOIN chunks c ON c.id = q.chunk_rowid "
            "WHERE c.ns_id=? AND q.chunk_rowid IN ({marks})"
        )
        return {r[0] for r in _select_in(self.reader, sql, list(rowids), (ns,))}

    def pending_count(self, namespace: str | None = None) -> int:
        """Chunks waiting for a vector (in ``namespace``, or in all): the namespaces' counters, which
        every write that queues or unqueues keeps in its transaction (O(1), whatever the backlog)."""
        if namespace is None:
            return int(self.reader.execute("SELECT coalesce(sum(n_pending), 0) FROM namespaces").fetchone()[0])
        ns = self.namespace_id(namespace)
        if ns is None:
            return 0
        return int(self.reader.execute("SELECT n_pending FROM namespaces WHERE id=?", (ns,)).fetchone()[0])

    # ------------------------------------------------------------------ index loads
    def vector_version(self, namespace: str) -> int:
        ns = self.namespace_id(namespace)
        if ns is None:
            return 0
        return int(self.reader.execute("SELECT vec_version FROM namespaces WHERE id=?", (ns,)).fetchone()[0])

    def chunk_version(self, namespace: str) -> int:
        ns = self.namespace_id(namespace)
        if ns is None:
            return 0
        return int(self.reader.execute("SELECT chunk_version FROM namespaces WHERE id=?", (ns,)).fetchone()[0])

    def load_tokens(self, namespace: str) -> tuple[int, list[tuple[int, str]]]:
        """(chunk version, [(rowid, space-joined tokens)]) of a namespace, read in one snapshot."""
        ns = self.namespace_id(namespace)
        if ns is None:
            return 0, []
        db = self.reader
        db.execute("BEGIN")
        try:
            version = int(db.execute("SELECT chunk_version FROM namespaces WHERE id=?", (ns,)).fetchone()[0])
            rows = db.execute(f"SELECT rowid, tokens FROM {_tokens(ns)} ORDER BY rowid").fetchall()
        finally:
            db.execute("COMMIT")
        return version, rows

    def tokens_for(self, namespace: str, rowids: Sequence[int]) -> list[tuple[int, str]]:
        ns = self.namespace_id(namespace)
        if ns is None:
            return []
        sql = f"SELECT rowid, tokens FROM {_tokens(ns)} WHERE rowid IN ({{marks}}) ORDER BY rowid"
        return list(_select_in(self.reader, sql, list(rowids)))

    def load_vectors(
        self, namespace: str, alloc: Callable[[int, int], np.ndarray] | None = None
    ) -> tuple[int, np.ndarray, np.ndarray]:
        """(version, rowids, matrix) of every embedded chunk of a namespace, read in one snapshot,
        streamed into ``alloc(rows, dim)`` (default: memory) a batch at a time: the vectors are held
        once. (All rows fetched, joined, then copied held them three times: 46 GB at 10M chunks of
        384 dimensions, killed by the kernel on a 24 GB machine.)"""
        ns = self.namespace_id(namespace)
        dim = self.embedder_info()[1] or 0
        if ns is None:
            return 0, np.zeros(0, np.int64), np.zeros((0, dim), np.float32)
        db = self.reader
        db.execute("BEGIN")
        try:
            version = int(db.execute("SELECT vec_version FROM namespaces WHERE id=?", (ns,)).fetchone()[0])
            # the namespace's rowids (a sorted list from its index), each vector looked up by rowid in
            # that order: no sort. (A join walked the chunks in (ns_id, doc_id) order and sorted the
            # vectors after, in a temporary B-tree: 15 GB written and sorted at 10M chunks.)
            mine = "FROM vectors WHERE chunk_rowid IN (SELECT id FROM chunks WHERE ns_id=?)"
            n = int(db.execute(f"SELECT count(*) {mine}", (ns,)).fetchone()[0])
            if not n:
                return version, np.zeros(0, np.int64), np.zeros((0, dim), np.float32)
            cur = db.execute(f"SELECT chunk_rowid, vec {mine} ORDER BY chunk_rowid", (ns,))
            first = cur.fetchmany(LOAD_BATCH)
            width = len(first[0][1]) // 4
            rowids = np.empty(n, np.int64)
            matrix = alloc(n, width) if alloc is not None else np.empty((n, width), np.float32)
            i, batch = 0, first
            while batch:
                j = i + len(batch)
                rowids[i:j] = [r[0] for r in batch]
                matrix[i:j] = np.frombuffer(b"".join(r[1] for r in batch), np.float32).reshape(-1, width)
                i, batch = j, cur.fetchmany(LOAD_BATCH)
        finally:
            db.execute("COMMIT")
        if i != n:  # pragma: no cover - one snapshot: the count and the rows agree
            raise StoreError(f"read {i} vectors of namespace {namespace!r} where its count said {n}")
        return version, rowids, matrix

    def vectors_for(self, rowids: Sequence[int], namespace: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        ns = self._scope(namespace)
        sql = "SELECT chunk_rowid, vec FROM vectors WHERE chunk_rowid IN ({marks})"
        head: tuple[Any, ...] = ()
        if ns is not None:
            sql = (
                "SELECT v.chunk_rowid, v.vec FROM vectors v JOIN chunks c ON c.id = v.chunk_rowid "
                "WHERE c.ns_id=? AND v.chunk_rowid IN ({marks}) ORDER BY v.chunk_rowid"
            )  # the order of the statement without the join: an index applies vectors in it
            head = (ns,)
        out_ids: list[int] = []
        blobs: list[bytes] = []
        for rid, blob in _select_in(self.reader, sql, list(rowids), head):
            out_ids.append(rid)
            blobs.append(blob)
        if not blobs:
            return np.zeros(0, np.int64), np.zeros((0, 0), np.float32)
        m = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), -1)
        return np.asarray(out_ids, np.int64), m.copy()

    # ------------------------------------------------------------------ rows
    def fetch(self, rowids: Sequence[int], namespace: str | None = None) -> dict[int, ChunkRow]:
        ns = self._scope(namespace)
        sql = (
            f"SELECT c.id, c.chunk_id, c.doc_id, c.text, c.source, d.metadata, {_TIME_COLUMNS} "
            f"FROM chunks c {_DOC_JOIN} WHERE {'' if ns is None else 'c.ns_id=? AND '}c.id IN ({{marks}}) ORDER BY c.id"
        )
        return {
            r[0]: ChunkRow(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]), r[6], r[7], r[8], r[9])
            for r in _select_in(self.reader, sql, list(rowids), () if ns is None else (ns,))
        }

    # ------------------------------------------------------------------ export (store/sql/export.py)
    @contextmanager
    def _export_snapshot(self) -> Iterator[sqlite3.Connection]:
        """Its own connection in one read transaction: the caller may write elsewhere meanwhile."""
        db = self._connect()
        try:
            db.execute("BEGIN")
            yield db
        finally:
            db.close()

    @staticmethod
    def _export_tokens(ns: int) -> tuple[str, str]:
        return "f.tokens", f"JOIN {_tokens(ns)} f ON f.rowid = c.id"

    def counts(self, namespace: str) -> dict[str, int]:
        ns = self.namespace_id(namespace)
        if ns is None:
            return {"documents": 0, "chunks": 0, "vectors": 0, "pending_vectors": 0}
        db = self.reader
        return {
            # current memories (a retired version is history, not a document); chunks and vectors: all stored
            "documents": db.execute(
                "SELECT count(*) FROM documents WHERE ns_id=? AND valid_to IS NULL", (ns,)
            ).fetchone()[0],
            "chunks": db.execute("SELECT count(*) FROM chunks WHERE ns_id=?", (ns,)).fetchone()[0],
            "vectors": db.execute(
                "SELECT count(*) FROM vectors v JOIN chunks c ON c.id = v.chunk_rowid WHERE c.ns_id=?", (ns,)
            ).fetchone()[0],
            "pending_vectors": self.pending_count(namespace),
        }

    def chunk_count(self, namespace: str) -> int:
        """The namespace's chunks (one indexed count: what a query needs, not all of :meth:`counts`)."""
        ns = self.namespace_id(namespace)
        if ns is None:
            return 0
        return int(self.reader.execute("SELECT count(*) FROM chunks WHERE ns_id=?", (ns,)).fetchone()[0])
