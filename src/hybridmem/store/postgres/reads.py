"""The PostgreSQL store's reads of chunks: by rowid (``fetch``), their tokens for the in-process
BM25 postings, every document of a namespace (``export_documents``) and its counts."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from ...filters import Filter
from ..base import DOCUMENT_COLUMNS, ChunkRow, document_record
from ..sql import history as history_sql
from ..sql.filters import to_pg_sql
from .core import _Core
from .schema import _DOC_JOIN, _by_ids, _one

__all__ = ["_Reads"]


class _Reads(_Core):
    """Chunks by rowid and in bulk, documents, versions and the small reads of a namespace."""

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

    def document_hash(self, namespace: str, doc_id: str) -> str | None:
        ns = self.namespace_id(namespace)
        if ns is None:
            return None
        with self._conn() as conn:
            row = conn.execute(
                "SELECT content_hash FROM documents WHERE ns_id=%s AND doc_id=%s", (ns, doc_id)
            ).fetchone()
        return row[0] if row else None

    def document_heads(self, namespace: str, doc_ids: Sequence[str]) -> dict[str, tuple[str | None, dict[str, Any]]]:
        """(source, metadata) of the stored documents among ``doc_ids``, without reading any chunk."""
        ns = self.namespace_id(namespace)
        if ns is None or not doc_ids:
            return {}
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT doc_id, source, metadata FROM documents WHERE ns_id=%s AND doc_id = ANY(%s)",
                (ns, list(dict.fromkeys(doc_ids))),
            ).fetchall()
        return {r[0]: (r[1], r[2] if isinstance(r[2], dict) else json.loads(r[2])) for r in rows}

    def history(self, namespace: str, doc_id: str) -> list[tuple[Any, ...]]:
        ns = self.namespace_id(namespace)
        if ns is None:
            return []
        with self.snapshot() as db:
            rows = history_sql.versions(db, ns, doc_id)
        return [(*r[:-1], r[-1] if isinstance(r[-1], str) else json.dumps(r[-1])) for r in rows]

    def has_history(self, namespace: str) -> bool:
        ns = self.namespace_id(namespace)
        if ns is None:
            return False
        with self.snapshot() as db:
            return history_sql.has_history(db, ns)

    def key_holder(self, namespace: str, mem_key: str) -> str | None:
        ns = self.namespace_id(namespace)
        if ns is None:
            return None
        with self.snapshot() as db:
            return history_sql.current_by_key(db, ns, mem_key)

    def export_times(self, namespace: str) -> dict[str, tuple[Any, ...]]:
        """doc id -> times, version bookkeeping and chunk context (``history_sql.export_times``)."""
        ns = self.namespace_id(namespace)
        if ns is None:
            return {}
        with self.snapshot() as db:
            return history_sql.export_times(db, ns)

    def has_graph(self, namespace: str) -> bool:
        ns = self.namespace_id(namespace)
        if ns is None:
            return False
        with self._conn() as conn:
            return conn.execute("SELECT 1 FROM graph_state WHERE ns_id=%s", (ns,)).fetchone() is not None

    def metadata_keys(self, namespace: str) -> set[str]:
        ns = self.namespace_id(namespace)
        if ns is None:
            return set()
        with self._conn() as conn:
            return {r[0] for r in conn.execute("SELECT key FROM metadata_keys WHERE ns_id=%s", (ns,))}

    def get_document(self, namespace: str, doc_id: str) -> dict[str, Any] | None:
        ns = self.namespace_id(namespace)
        if ns is None:
            return None
        with self.snapshot() as db:
            row = db.execute(
                f"SELECT {DOCUMENT_COLUMNS} FROM documents WHERE ns_id=? AND doc_id=?", (ns, doc_id)
            ).fetchone()
            if row is None:
                return None
            chunks = db.execute(
                "SELECT chunk_id, text FROM chunks WHERE ns_id=? AND doc_id=? ORDER BY ord", (ns, doc_id)
            ).fetchall()
        return document_record(row, row[2], chunks)

    def rowids_for(self, namespace: str, chunk_ids: Sequence[str]) -> dict[str, int]:
        ns = self.namespace_id(namespace)
        if ns is None:
            return {}
        with self._conn() as conn:
            return dict(
                conn.execute(
                    "SELECT chunk_id, id FROM chunks WHERE ns_id=%s AND chunk_id = ANY(%s)", (ns, list(chunk_ids))
                ).fetchall()
            )

    def any_match(self, namespace: str, flt: Filter) -> bool:
        """True when some document of the namespace passes ``flt`` (an unknown scope is an error)."""
        ns = self.namespace_id(namespace)
        if ns is None:
            return False
        where, params = to_pg_sql(flt, "d.metadata")
        with self._conn() as conn:
            sql = f"SELECT 1 FROM documents d WHERE d.ns_id=%s AND {where} LIMIT 1"
            return conn.execute(sql, [ns, *params]).fetchone() is not None

    def latest_occurred(self, namespace: str, flt: Filter | None) -> float | None:
        """The latest occurred_at among the documents ``flt`` allows (relative times resolve from it)."""
        ns = self.namespace_id(namespace)
        if ns is None:
            return None
        where, params = to_pg_sql(flt, "d.metadata")
        with self._conn() as conn:
            sql = f"SELECT max(d.occurred_at) FROM documents d WHERE d.ns_id=%s AND {where}"
            t = _one(conn.execute(sql, [ns, *params]).fetchone())[0]
        return None if t is None else float(t)

    def recent(self, namespace: str, flt: Filter | None, k: int) -> list[tuple[int, float]]:
        """Top-k (rowid, occurred_at) of the allowed chunks, newest first (the recency leg)."""
        ns = self.namespace_id(namespace)
        if ns is None or k <= 0:
            return []
        where, params = to_pg_sql(flt, "d.metadata")
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT c.id, d.occurred_at FROM chunks c {_DOC_JOIN} WHERE c.ns_id=%s AND {where} "
                "ORDER BY d.occurred_at DESC, c.id LIMIT %s",
                [ns, *params, k],
            ).fetchall()
        return [(int(r), float(t or 0.0)) for r, t in rows]

    def session_turns(self, namespace: str, session_id: str, lo: int, hi: int, as_of: float | None) -> list[int]:
        """Rowids of the chunks of a session's turns ``lo``..``hi`` visible now (or ``as_of``), in order."""
        ns = self.namespace_id(namespace)
        if ns is None:
            return []
        if as_of is None:
            vis, vparams = "d.valid_to IS NULL", []
        else:
            vis, vparams = "d.recorded_at <= %s AND (d.valid_to IS NULL OR d.valid_to > %s)", [as_of, as_of]
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT c.id FROM documents d JOIN chunks c ON c.ns_id = d.ns_id AND c.doc_id = d.doc_id "
                "WHERE d.ns_id=%s AND d.metadata @> %s::jsonb AND jsonb_typeof(d.metadata -> 'turn') = 'number' "
                f"AND (d.metadata ->> 'turn')::numeric BETWEEN %s AND %s AND {vis} "
                "ORDER BY (d.metadata ->> 'turn')::numeric, c.ord",
                [ns, json.dumps({"session_id": session_id}), lo, hi, *vparams],
            ).fetchall()
        return [int(r[0]) for r in rows]

    def max_turn(self, namespace: str, session_id: str) -> int | None:
        """The last turn index of a session (its next message continues from it)."""
        ns = self.namespace_id(namespace)
        if ns is None:
            return None
        with self._conn() as conn:
            t = _one(
                conn.execute(
                    "SELECT max((metadata ->> 'turn')::numeric) FROM documents WHERE ns_id=%s "
                    "AND metadata @> %s::jsonb AND jsonb_typeof(metadata -> 'turn') = 'number'",
                    (ns, json.dumps({"session_id": session_id})),
                ).fetchone()
            )[0]
        return None if t is None else int(t)
