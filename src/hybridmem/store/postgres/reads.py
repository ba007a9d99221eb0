"""The PostgreSQL store's reads of chunks: by rowid (``fetch``), their tokens for the in-process
BM25 postings, every document of a namespace (``export_documents``) and its counts."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
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

    def export_documents(self, namespace: str) -> Iterator[dict[str, Any]]:
        """Every document of a namespace with its chunks (rowid, chunk_id, text, text_hash, lang,
        tokens), in doc id order, read in one snapshot (for ``migrate``)."""
        ns = self.namespace_id(namespace)
        if ns is None:
            return
        with self.snapshot() as db:
            # in insertion order (first chunk rowid), so a copy keeps the rowid order BM25 ties break on
            docs = db.execute(
                "SELECT doc_id, source, metadata, content_hash FROM documents d WHERE ns_id=? ORDER BY "
                "(SELECT min(id) FROM chunks c WHERE c.ns_id = d.ns_id AND c.doc_id = d.doc_id), "
                'doc_id COLLATE "C"',
                (ns,),
            ).fetchall()
            chunks: dict[str, list[tuple[Any, ...]]] = {}
            for row in db.execute(
                "SELECT doc_id, id, chunk_id, text, text_hash, lang, tokens FROM chunks "
                "WHERE ns_id=? ORDER BY doc_id, ord",
                (ns,),
            ):
                chunks.setdefault(row[0], []).append(tuple(row[1:]))
        for doc_id, source, meta, h in docs:
            yield {
                "doc_id": doc_id,
                "source": source,
                "metadata": meta,
                "content_hash": h,
                "chunks": chunks.get(doc_id, []),
            }

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
