"""Every document of a namespace, streamed in one snapshot and in bounded memory (``hybridmem
export``, ``migrate``): a page of chunks at a time in rowid order, each document yielded when its
first chunk comes up, with its chunks, their tokens, its times and version bookkeeping.

Rowid order: a write gives a document's chunks consecutive rowids after every existing one, so a
copy written in this order keeps the order BM25 ties break on. A store provides
``_export_snapshot()`` (a ``?``-speaking reader holding one snapshot for the whole walk) and
``_export_tokens(ns)`` (the select expression and join of a chunk's token string)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from .history import EXPORTED_TIMES

__all__ = ["EXPORT_PAGE", "SQLExport"]

#: chunks per page of the walk (and at most as many documents per batch of reads)
EXPORT_PAGE = 500


class _Exporting(Protocol):
    def namespace_id(self, name: str, db: Any = None, create: bool = False) -> int | None: ...
    def _export_snapshot(self) -> AbstractContextManager[Any]: ...
    def _export_tokens(self, ns: int) -> tuple[str, str]: ...


class SQLExport:
    """``export_documents``, written once for both backends."""

    def export_documents(self: _Exporting, namespace: str, page: int = EXPORT_PAGE) -> Iterator[dict[str, Any]]:
        """Each document of ``namespace`` (retired versions included) as ``{doc_id, source, metadata,
        content_hash, context, times: {EXPORTED_TIMES...}, chunks: [(rowid, chunk_id, text,
        text_hash, lang, tokens)]}``, in the order of its first chunk; a document without chunks is
        left out (it holds nothing to search)."""
        ns = self.namespace_id(namespace)
        if ns is None:
            return
        tok_expr, tok_join = self._export_tokens(ns)
        with self._export_snapshot() as db:
            after = 0
            while True:
                ids = db.execute(
                    "SELECT id, doc_id FROM chunks WHERE ns_id=? AND id > ? ORDER BY id LIMIT ?", (ns, after, page)
                ).fetchall()
                if not ids:
                    return
                after = int(ids[-1][0])
                # a document is yielded on the page of its first chunk (its other chunks may be on the next)
                docs = _starting(db, ns, ids)
                chunks = _chunks_of(db, ns, docs, tok_expr, tok_join)
                heads = _documents(db, ns, docs)
                for d in docs:
                    if d in heads and d in chunks:
                        yield {**heads[d], "chunks": [c[:6] for c in chunks[d]]}


def _starting(db: Any, ns: int, ids: Sequence[tuple[Any, Any]]) -> list[str]:
    """The documents whose first chunk is among ``ids`` (rowid, doc id), in rowid order."""
    docs = list(dict.fromkeys(str(d) for _, d in ids))
    firsts = dict(
        db.execute(
            f"SELECT doc_id, min(id) FROM chunks WHERE ns_id=? AND doc_id IN ({','.join('?' * len(docs))}) "
            "GROUP BY doc_id",
            (ns, *docs),
        ).fetchall()
    )
    on_page = {int(r) for r, _ in ids}
    return [d for d in docs if int(firsts.get(d, -1)) in on_page]


def _chunks_of(db: Any, ns: int, docs: Sequence[str], tok_expr: str, tok_join: str) -> dict[str, list[tuple[Any, ...]]]:
    """doc id -> its chunks (rowid, chunk_id, text, text_hash, lang, tokens, context) in order."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    if not docs:
        return out
    rows = db.execute(
        f"SELECT c.doc_id, c.id, c.chunk_id, c.text, c.text_hash, c.lang, {tok_expr}, c.context FROM chunks c "
        f"{tok_join} WHERE c.ns_id=? AND c.doc_id IN ({','.join('?' * len(docs))}) ORDER BY c.doc_id, c.ord",
        (ns, *docs),
    ).fetchall()
    for r in rows:
        out.setdefault(str(r[0]), []).append(tuple(r[1:]))
    return out


def _documents(db: Any, ns: int, docs: Sequence[str]) -> dict[str, dict[str, Any]]:
    """doc id -> its row: source, metadata, content hash, times, and its chunks' context."""
    if not docs:
        return {}
    cols = ", ".join(f"d.{c}" for c in EXPORTED_TIMES)
    rows = db.execute(
        f"SELECT d.doc_id, d.source, d.metadata, d.content_hash, {cols}, (SELECT c.context FROM chunks c "
        "WHERE c.ns_id = d.ns_id AND c.doc_id = d.doc_id ORDER BY c.ord LIMIT 1) "
        f"FROM documents d WHERE d.ns_id=? AND d.doc_id IN ({','.join('?' * len(docs))})",
        (ns, *docs),
    ).fetchall()
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        meta = r[2]
        out[str(r[0])] = {
            "doc_id": str(r[0]),
            "source": r[1],
            "metadata": json.loads(meta) if isinstance(meta, str) else dict(meta or {}),
            "content_hash": r[3],
            "times": dict(zip(EXPORTED_TIMES, r[4 : 4 + len(EXPORTED_TIMES)])),
            "context": r[4 + len(EXPORTED_TIMES)],
        }
    return out
