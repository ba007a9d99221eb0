"""The PostgreSQL store's reads of chunks: by rowid (``fetch``), their tokens for the in-process
BM25 postings, the hooks of the export walk (store/sql/export.py) and a namespace's counts."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from ..base import ChunkRow
from .core import _Core
from .schema import _DOC_JOIN, _by_ids, _one

__all__ = ["_Reads"]


class _Reads(_Core):
    """Chunks by rowid and in bulk (the reads shared with SQLite are in store/sql/common.py)."""

    def load_tokens(self, namespace: str) -> tuple[int, list[tuple[int, str]]]:
        ns = self.namespace_id(namespace)
        if ns is None:
            return 0, []
        with self.snapshot() as db:
            version = int(
                _one(db.execute("SELECT chunk_version FROM namespace_stats WHERE ns_id=?", (ns,)).fetchone())[0]
            )
            rows = db.execute("SELECT id, tokens FROM chunks WHERE ns_id=? ORDER BY id", (ns,)).fetchall()
        return version, rows

    def tokens_for(self, namespace: str, rowids: Sequence[int]) -> list[tuple[int, str]]:
        ns = self.namespace_id(namespace)
        if ns is None:
            return []
        with self._conn() as conn:
            return conn.execute(
                "SELECT id, tokens FROM chunks WHERE ns_id=%s AND id = ANY(%s) ORDER BY id",
                (ns, [int(r) for r in rowids]),
            ).fetchall()

    def fetch(self, rowids: Sequence[int], namespace: str | None = None) -> dict[int, ChunkRow]:
        ns = self._scope(namespace)
        if ns == -1:
            return {}
        where, params = _by_ids("c.id", ns, rowids, ns_column="c.ns_id")
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT c.id, c.chunk_id, c.doc_id, c.text, c.source, d.metadata, d.occurred_at, d.recorded_at, "
                f"d.valid_to, d.version FROM chunks c {_DOC_JOIN} WHERE {where}",
                params,
            ).fetchall()
        return {r[0]: ChunkRow(*r) for r in rows}

    # ------------------------------------------------------------------ export (store/sql/export.py)
    def _export_snapshot(self) -> AbstractContextManager[Any]:
        return self.snapshot()

    @staticmethod
    def _export_tokens(ns: int) -> tuple[str, str]:
        return "c.tokens", ""

    def counts(self, namespace: str) -> dict[str, int]:
        ns = self.namespace_id(namespace)
        if ns is None:
            return {"documents": 0, "chunks": 0, "vectors": 0, "pending_vectors": 0}
        with self._conn() as conn:
            d, c, v = _one(
                conn.execute(
                    "SELECT (SELECT count(*) FROM documents WHERE ns_id=%s AND valid_to IS NULL), "
                    "(SELECT count(*) FROM chunks WHERE ns_id=%s), "
                    "(SELECT count(*) FROM vectors WHERE ns_id=%s)",
                    (ns, ns, ns),
                ).fetchone()
            )
        return {
            "documents": int(d),
            "chunks": int(c),
            "vectors": int(v),
            "pending_vectors": self.pending_count(namespace),
        }
