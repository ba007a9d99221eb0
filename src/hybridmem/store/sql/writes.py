"""The writes both SQL stores do in the same SQL: deleting by id (documents, chunks and every
version of a memory), retiring a memory and restoring copied times.

:class:`SQLWrites` is a mixin over what each store has: ``_namespace_write(namespace)`` (a context
manager: the store's write transaction and lock, giving its connection and the namespace's id, or
None when it holds no such namespace; PostgreSQL also locks the namespace's row), ``_portable(conn)``
(the connection in the ``?`` dialect), ``_changed`` (store/sql/changelog.py), and three steps
whose SQL differs: ``_vector_rowids``, ``_delete_chunk_rows`` and ``_drop_emptied_document``.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from ...errors import NotFoundError
from ..base import SQLReader, WriteResult
from . import history as history_sql

__all__ = ["SQLWrites"]


class _Writing(Protocol):
    def _namespace_write(self, namespace: str) -> AbstractContextManager[tuple[Any, int | None]]: ...
    def _portable(self, conn: Any) -> SQLReader: ...
    def _vector_rowids(self, conn: Any, ns: int, rowids: list[int]) -> list[int]: ...
    def _delete_chunk_rows(self, conn: Any, ns: int, rowids: list[int]) -> None: ...
    def _drop_emptied_document(self, conn: Any, ns: int, doc_id: str) -> None: ...
    def _changed(
        self, conn: Any, namespace: str, ns: int, counter: str, added: list[int], removed: list[int], res: WriteResult
    ) -> None: ...


class SQLWrites:
    """The shared writes (see the module's docstring for what a store provides)."""

    def delete(self: _Writing, namespace: str, ids: Sequence[str]) -> tuple[list[str], WriteResult]:
        """Delete documents (by doc id) or single chunks (by chunk id) from every index at once.
        Returns the ids that were found."""
        res = WriteResult()
        found: list[str] = []
        with self._namespace_write(namespace) as (conn, ns):
            if ns is None:
                return found, res
            db = self._portable(conn)
            removed_vecs: list[int] = []
            removed_chunks: list[int] = []
            # a hard delete removes every version of a memory (its retired ones are not reported)
            todo = [(i, True) for i in ids] + [(h, False) for i in ids for h in history_sql.history_ids(db, ns, i)]
            for ident, report in todo:
                rowids = [r[0] for r in db.execute("SELECT id FROM chunks WHERE ns_id=? AND doc_id=?", (ns, ident))]
                is_doc = (
                    bool(rowids)
                    or db.execute("SELECT 1 FROM documents WHERE ns_id=? AND doc_id=?", (ns, ident)).fetchone()
                    is not None
                )
                if not is_doc:
                    rowids = [
                        r[0] for r in db.execute("SELECT id FROM chunks WHERE ns_id=? AND chunk_id=?", (ns, ident))
                    ]
                    if not rowids:
                        continue
                if rowids:
                    removed_vecs += self._vector_rowids(conn, ns, rowids)
                removed_chunks += rowids
                self._delete_chunk_rows(conn, ns, rowids)
                if is_doc:
                    db.execute("DELETE FROM documents WHERE ns_id=? AND doc_id=?", (ns, ident))
                else:  # the last chunk of a document went: the document goes too
                    self._drop_emptied_document(conn, ns, ident.rsplit("_p", 1)[0])
                if report:
                    found.append(ident)
            if removed_vecs:
                self._changed(conn, namespace, ns, "vec_version", [], removed_vecs, res)
            if removed_chunks:
                self._changed(conn, namespace, ns, "chunk_version", [], removed_chunks, res)
        return found, res

    def retire(self: _Writing, namespace: str, doc_id: str, reason: str | None) -> WriteResult:
        """A soft delete: the memory's current version stops being current now, and stays in its
        history (``as_of`` before now still sees it). NotFoundError when there is none. A retired
        chunk is logged as removed and added again (its visibility changed, its rows not)."""
        res = WriteResult()
        with self._namespace_write(namespace) as (conn, ns):
            retired = (
                None
                if ns is None
                else history_sql.retire(self._portable(conn), ns, doc_id, history_sql.now_epoch(), reason)
            )
            if ns is None or retired is None:
                raise NotFoundError(f"no memory {doc_id!r} in namespace {namespace!r}")
            if retired[1]:
                self._changed(conn, namespace, ns, "chunk_version", retired[1], retired[1], res)
        return res

    def restore_times(self: _Writing, namespace: str, rows: dict[str, tuple[Any, ...]]) -> WriteResult:
        """Copied documents get the source's times and versions (``migrate``), in one transaction."""
        res = WriteResult()
        with self._namespace_write(namespace) as (conn, ns):
            if ns is None:
                raise NotFoundError(f"no namespace {namespace!r}")
            retired = history_sql.restore_times(self._portable(conn), ns, rows)
            if retired:
                self._changed(conn, namespace, ns, "chunk_version", retired, retired, res)
        return res
