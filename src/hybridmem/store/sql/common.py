"""The reads both SQL stores ask in the same SQL, written once against a small :class:`Dialect`.

:class:`SQLReads` is a mixin over four things a store has:

* ``namespace_id(name)`` (the id of a namespace, None when the store does not hold it);
* ``dialect``: a :class:`Dialect` (a class attribute): the placeholder (``?`` or ``%s``), the
  filter compiler (``to_sql`` / ``to_pg_sql``), how a list of ids is asked (``IN (?,?,..)`` in
  parts of 500 on SQLite, one ``= ANY(%s)`` on PostgreSQL) and the JSON expressions of a
  session's turns;
* ``_reading()``: a context manager giving a connection in the dialect's own placeholders, for
  one statement (SQLite: this thread's reader; PostgreSQL: ``_conn()``);
* ``_consistent()``: a context manager giving a connection in the ``?`` dialect
  (:class:`~hybridmem.store.base.SQLReader`) for a read of several statements and for
  ``store.sql.history`` (SQLite: this thread's reader, as before; PostgreSQL: ``snapshot()``).

The PostgreSQL store adopts it by defining ``dialect = PG_DIALECT`` (below), ``_reading = _conn``
and ``_consistent = snapshot``, then dropping its own copies of these methods; its JSONB metadata
comes back as dicts, which :func:`as_json` passes through.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Protocol

from ...filters import Filter
from ..base import DOCUMENT_COLUMNS, SQLReader, document_record
from . import history as history_sql
from .filters import to_pg_sql, to_sql

__all__ = ["Dialect", "SQLITE_DIALECT", "PG_DIALECT", "SQLReads", "DOC_JOIN", "as_json", "now_text", "visible"]

#: the sort key of each order of ``list_documents``: ``recorded_at`` is when the memory was first
#: recorded (its ``created_at``, which its later versions keep: an update does not move it in a
#: walk); a memory with no occurred_at sorts first
_LIST_KEYS = {
    "recorded_at": "d.created_at",
    "occurred_at": "COALESCE(d.occurred_at, 0)",
    "id": "d.doc_id",
}

#: a chunk's document, where its metadata is (the primary key of documents answers it)
DOC_JOIN = "JOIN documents d ON d.ns_id = c.ns_id AND d.doc_id = c.doc_id"


def _sqlite_in(db: Any, sql: str, ids: Sequence[Any], head: tuple[Any, ...]) -> Iterator[Any]:
    # in parts of 500 (within SQLite's limit of bound variables)
    for i in range(0, len(ids), 500):
        part = ids[i : i + 500]
        yield from db.execute(sql.format(in_ids="IN (" + ",".join("?" * len(part)) + ")"), (*head, *part))


def _pg_in(db: Any, sql: str, ids: Sequence[Any], head: tuple[Any, ...]) -> Iterator[Any]:
    if ids:
        yield from db.execute(sql.format(in_ids="= ANY(%s)"), (*head, list(ids))).fetchall()


@dataclass(frozen=True)
class Dialect:
    """What differs between the backends' SQL in the shared reads."""

    #: the placeholder of a connection from ``_reading()``
    mark: str
    #: a filter compiled to (WHERE clause, parameters) over a JSON column
    to_sql: Callable[[Filter | None, str], tuple[str, list[Any]]]
    #: the rows of ``sql`` for ``ids``: ``{in_ids}`` in ``sql`` becomes the test of a list of ids,
    #: ``head`` the parameters before it
    select_in: Callable[[Any, str, Sequence[Any], tuple[Any, ...]], Iterator[Any]]
    #: (clause, parameters) of the documents of one session, over the JSON column given
    session: Callable[[str, str], tuple[str, list[Any]]]
    #: the expression of a document's turn index, over the JSON column given
    turn: Callable[[str], str]


SQLITE_DIALECT = Dialect(
    mark="?",
    to_sql=to_sql,
    select_in=_sqlite_in,
    session=lambda col, sid: (f"json_extract({col}, '$.session_id') = ?", [sid]),
    turn=lambda col: f"json_extract({col}, '$.turn')",
)

PG_DIALECT = Dialect(
    mark="%s",
    to_sql=to_pg_sql,
    select_in=_pg_in,
    session=lambda col, sid: (
        f"{col} @> %s::jsonb AND jsonb_typeof({col} -> 'turn') = 'number'",
        [json.dumps({"session_id": sid})],
    ),
    turn=lambda col: f"({col} ->> 'turn')::numeric",
)


def now_text() -> str:
    """Now, as the stores write ``created_at`` and ``updated_at``: ISO 8601, UTC, milliseconds."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def as_json(value: Any) -> Any:
    """A metadata value as Python: SQLite's JSON text decoded, PostgreSQL's JSONB (decoded) kept."""
    return value if isinstance(value, dict) else json.loads(value)


def visible(as_of: float | None, mark: str = "?") -> tuple[str, list[float]]:
    """The versions visible now, or as the memory stood at ``as_of`` (store/sql/history.py)."""
    if as_of is None:
        return "d.valid_to IS NULL", []
    return f"d.recorded_at <= {mark} AND (d.valid_to IS NULL OR d.valid_to > {mark})", [as_of, as_of]


class _Reading(Protocol):
    dialect: Dialect

    def namespace_id(self, name: str) -> int | None: ...
    def _reading(self) -> AbstractContextManager[Any]: ...
    def _consistent(self) -> AbstractContextManager[SQLReader]: ...


class SQLReads:
    """The shared reads (see the module's docstring for what a store provides)."""

    def document_hash(self: _Reading, namespace: str, doc_id: str) -> str | None:
        ns = self.namespace_id(namespace)
        if ns is None:
            return None
        m = self.dialect.mark
        with self._reading() as db:
            row = db.execute(
                f"SELECT content_hash FROM documents WHERE ns_id={m} AND doc_id={m}", (ns, doc_id)
            ).fetchone()
        return row[0] if row else None

    def document_hashes(self: _Reading, namespace: str, doc_ids: Sequence[str]) -> dict[str, str]:
        """doc id -> content hash of the stored documents among ``doc_ids`` (an import's skip check)."""
        ns = self.namespace_id(namespace)
        if ns is None or not doc_ids:
            return {}
        m = self.dialect.mark
        out: dict[str, str] = {}
        with self._reading() as db:
            for i in range(0, len(doc_ids), 500):
                part = list(doc_ids[i : i + 500])
                sql = f"SELECT doc_id, content_hash FROM documents WHERE ns_id={m} AND doc_id IN ({','.join([m] * len(part))})"
                out.update({str(r[0]): str(r[1]) for r in db.execute(sql, (ns, *part)).fetchall()})
        return out

    def document_heads(
        self: _Reading, namespace: str, doc_ids: Sequence[str]
    ) -> dict[str, tuple[str | None, dict[str, Any]]]:
        """(source, metadata) of the stored documents among ``doc_ids``: what a re-ingest merges
        metadata with and checks id collisions against, without reading any chunk."""
        ns = self.namespace_id(namespace)
        if ns is None:
            return {}
        sql = f"SELECT doc_id, source, metadata FROM documents WHERE ns_id={self.dialect.mark} AND doc_id {{in_ids}}"
        with self._reading() as db:
            rows = self.dialect.select_in(db, sql, list(dict.fromkeys(doc_ids)), (ns,))
            return {r[0]: (r[1], as_json(r[2])) for r in rows}

    def rowids_for(self: _Reading, namespace: str, chunk_ids: Sequence[str]) -> dict[str, int]:
        ns = self.namespace_id(namespace)
        if ns is None:
            return {}
        sql = f"SELECT chunk_id, id FROM chunks WHERE ns_id={self.dialect.mark} AND chunk_id {{in_ids}}"
        with self._reading() as db:
            return dict(self.dialect.select_in(db, sql, list(chunk_ids), (ns,)))

    def chunk_langs(self: _Reading, namespace: str, rowids: Sequence[int]) -> dict[int, str | None]:
        """The language each chunk was detected in at ingest (None: none detected), by rowid."""
        ns = self.namespace_id(namespace)
        if ns is None:
            return {}
        # by rowid only, the namespace checked here: with "ns_id = ? AND" SQLite chose the namespace's
        # index and scanned it (5.4 ms at 100k chunks, for 10 rows)
        sql = "SELECT id, ns_id, lang FROM chunks WHERE id {in_ids}"
        with self._reading() as db:
            return {r: lang for r, n, lang in self.dialect.select_in(db, sql, list(rowids), ()) if n == ns}

    def get_document(self: _Reading, namespace: str, doc_id: str) -> dict[str, Any] | None:
        ns = self.namespace_id(namespace)
        if ns is None:
            return None
        with self._consistent() as db:
            row = db.execute(
                f"SELECT {DOCUMENT_COLUMNS} FROM documents WHERE ns_id=? AND doc_id=?", (ns, doc_id)
            ).fetchone()
            if row is None:
                return None
            chunks = db.execute(
                "SELECT chunk_id, text FROM chunks WHERE ns_id=? AND doc_id=? ORDER BY ord", (ns, doc_id)
            ).fetchall()
        return document_record(row, as_json(row[2]), chunks)

    def has_graph(self: _Reading, namespace: str) -> bool:
        """True once ``graph build`` ran for the namespace (cheap: no graph module is loaded)."""
        ns = self.namespace_id(namespace)
        if ns is None:
            return False
        with self._reading() as db:
            return (
                db.execute(f"SELECT 1 FROM graph_state WHERE ns_id={self.dialect.mark}", (ns,)).fetchone() is not None
            )

    def metadata_keys(self: _Reading, namespace: str) -> set[str]:
        ns = self.namespace_id(namespace)
        if ns is None:
            return set()
        with self._reading() as db:
            return {r[0] for r in db.execute(f"SELECT key FROM metadata_keys WHERE ns_id={self.dialect.mark}", (ns,))}

    # ------------------------------------------------------------------ versions (store/sql/history.py)
    def history(self: _Reading, namespace: str, doc_id: str) -> list[tuple[Any, ...]]:
        ns = self.namespace_id(namespace)
        if ns is None:
            return []
        with self._consistent() as db:
            rows = history_sql.versions(db, ns, doc_id)
        # the metadata as JSON text on both backends
        return [(*r[:-1], r[-1] if isinstance(r[-1], str) else json.dumps(r[-1])) for r in rows]

    def has_history(self: _Reading, namespace: str) -> bool:
        ns = self.namespace_id(namespace)
        if ns is None:
            return False
        with self._consistent() as db:
            return history_sql.has_history(db, ns)

    def key_holder(self: _Reading, namespace: str, mem_key: str) -> str | None:
        ns = self.namespace_id(namespace)
        if ns is None:
            return None
        with self._consistent() as db:
            return history_sql.current_by_key(db, ns, mem_key)

    # ------------------------------------------------------------------ filters, time and sessions
    def any_match(self: _Reading, namespace: str, flt: Filter) -> bool:
        """True when some document of the namespace passes ``flt`` (an unknown scope is an error)."""
        ns = self.namespace_id(namespace)
        if ns is None:
            return False
        where, params = self.dialect.to_sql(flt, "d.metadata")
        sql = f"SELECT 1 FROM documents d WHERE d.ns_id={self.dialect.mark} AND {where} LIMIT 1"
        with self._reading() as db:
            return db.execute(sql, [ns, *params]).fetchone() is not None

    def latest_occurred(self: _Reading, namespace: str, flt: Filter | None) -> float | None:
        """The latest occurred_at among the documents ``flt`` allows (relative times resolve from it)."""
        ns = self.namespace_id(namespace)
        if ns is None:
            return None
        where, params = self.dialect.to_sql(flt, "d.metadata")
        sql = f"SELECT max(d.occurred_at) FROM documents d WHERE d.ns_id={self.dialect.mark} AND {where}"
        with self._reading() as db:
            t = db.execute(sql, [ns, *params]).fetchone()[0]
        return None if t is None else float(t)

    def list_documents(
        self: _Reading,
        namespace: str,
        flt: Filter | None,
        order: str,
        descending: bool,
        after: tuple[Any, str] | None,
        limit: int,
    ) -> list[tuple[Any, dict[str, Any]]]:
        """Up to ``limit`` documents that pass ``flt``, in ``order`` (``recorded_at``, ``occurred_at``
        or ``id``; ties by id), after the keyset position ``after`` (a previous page's last (key,
        id)): each as (its key, ``get_document``'s record). One statement, so one snapshot; a page
        starts where the last ended whatever was written or deleted between them."""
        ns = self.namespace_id(namespace)
        if ns is None or limit <= 0:
            return []
        m, key = self.dialect.mark, _LIST_KEYS[order]
        where, params = self.dialect.to_sql(flt, "d.metadata")
        cmp, direction = ("<", "DESC") if descending else (">", "ASC")
        if after is None:
            keyset, kparams = "", []
        elif order == "id":
            keyset, kparams = f" AND d.doc_id {cmp} {m}", [after[1]]
        else:
            keyset, kparams = f" AND ({key}, d.doc_id) {cmp} ({m}, {m})", [after[0], after[1]]
        page = (
            f"SELECT {', '.join('d.' + c.strip() for c in DOCUMENT_COLUMNS.split(','))}, {key} AS list_key "
            f"FROM documents d WHERE d.ns_id = {m} AND {where}{keyset} "
            f"ORDER BY {key} {direction}, d.doc_id {direction} LIMIT {m}"
        )
        sql = (
            f"SELECT p.*, c.chunk_id, c.text FROM ({page}) p LEFT JOIN chunks c ON c.ns_id = {m} AND c.doc_id = p.doc_id "
            f"ORDER BY p.list_key {direction}, p.doc_id {direction}, c.ord"
        )
        with self._reading() as db:
            rows = db.execute(sql, [ns, *params, *kparams, limit, ns]).fetchall()
        n = len(DOCUMENT_COLUMNS.split(","))
        out: list[tuple[Any, Any]] = []  # (key, the document's row), in order
        chunks: dict[str, list[tuple[str, str]]] = {}
        for r in rows:
            if r[0] not in chunks:
                chunks[r[0]] = []
                out.append((r[n], r))
            if r[n + 1] is not None:
                chunks[r[0]].append((r[n + 1], r[n + 2]))
        return [(k, document_record(r, as_json(r[2]), chunks[r[0]])) for k, r in out]

    def recent(self: _Reading, namespace: str, flt: Filter | None, k: int) -> list[tuple[int, float]]:
        """Top-k (rowid, occurred_at) of the allowed chunks, newest first (the recency leg)."""
        ns = self.namespace_id(namespace)
        if ns is None or k <= 0:
            return []
        where, params = self.dialect.to_sql(flt, "d.metadata")
        m = self.dialect.mark
        with self._reading() as db:
            rows = db.execute(
                f"SELECT c.id, d.occurred_at FROM chunks c {DOC_JOIN} WHERE c.ns_id={m} AND {where} "
                f"ORDER BY d.occurred_at DESC, c.id LIMIT {m}",
                [ns, *params, k],
            ).fetchall()
        return [(int(r), float(t or 0.0)) for r, t in rows]

    def session_turns(
        self: _Reading, namespace: str, session_id: str, lo: int, hi: int, as_of: float | None
    ) -> list[int]:
        """Rowids of the chunks of a session's turns ``lo``..``hi`` visible now (or ``as_of``), in order."""
        ns = self.namespace_id(namespace)
        if ns is None:
            return []
        m, d = self.dialect.mark, self.dialect
        vis, vparams = visible(as_of, m)
        session, sparams = d.session("d.metadata", session_id)
        turn = d.turn("d.metadata")
        with self._reading() as db:
            rows = db.execute(
                "SELECT c.id FROM documents d JOIN chunks c ON c.ns_id = d.ns_id AND c.doc_id = d.doc_id "
                f"WHERE d.ns_id={m} AND {session} AND {turn} BETWEEN {m} AND {m} AND {vis} ORDER BY {turn}, c.ord",
                [ns, *sparams, lo, hi, *vparams],
            ).fetchall()
        return [int(r[0]) for r in rows]

    def max_turn(self: _Reading, namespace: str, session_id: str) -> int | None:
        """The last turn index of a session (its next message continues from it)."""
        ns = self.namespace_id(namespace)
        if ns is None:
            return None
        session, sparams = self.dialect.session("metadata", session_id)
        sql = (
            f"SELECT max({self.dialect.turn('metadata')}) FROM documents WHERE ns_id={self.dialect.mark} AND {session}"
        )
        with self._reading() as db:
            t = db.execute(sql, (ns, *sparams)).fetchone()[0]
        return None if t is None else int(t)
