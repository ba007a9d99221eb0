"""The SQLite store's searches in SQL: the FTS5 BM25 reference scorer (built on demand in a read
connection's temp schema) and the rowids a filter allows."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ...errors import StoreError
from ...filters import Filter
from ...text.tokenize import TOKEN_CHARS
from ..sql.filters import to_sql
from .core import _Core
from .schema import _DOC_JOIN, _tokens

__all__ = ["_Search", "_FTS_TOKENIZE", "_fts", "_fts_query"]

_FTS_TOKENIZE = f"unicode61 remove_diacritics 0 tokenchars '{TOKEN_CHARS}'"


def _fts(ns_id: int) -> str:
    """The FTS5 reference index of a namespace's tokens (in a read connection's temp schema)."""
    return f"fts_{int(ns_id)}"


def _fts_query(tokens: Sequence[str]) -> str:
    # every term is a quoted FTS5 string: no user text can reach FTS5 query syntax
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in tokens)


class _Search(_Core):
    """BM25 by FTS5 and filter rowids."""

    def bm25(self, namespace: str, tokens: Sequence[str], flt: Filter | None, k: int) -> list[tuple[int, float]]:
        """Top-k (rowid, score) by FTS5 BM25 (k1=1.2, b=0.75), the filter applied before ranking.
        Scores are negated so that higher is better. A reference scorer, independent of the
        in-process index (tests and ``migrate`` compare the two): FTS5 indexes the namespace's tokens
        in this thread's temp schema when a write changed them since it last did (writes never pay
        for it)."""
        ns = self.namespace_id(namespace)
        if ns is None or not tokens:
            return []
        where, params = to_sql(flt, "d.metadata")
        fts = _fts(ns)
        sql = (
            f"SELECT {fts}.rowid, bm25({fts}) AS s FROM {fts} JOIN chunks c ON c.id = {fts}.rowid {_DOC_JOIN} "
            f"WHERE {fts} MATCH ? AND {where} ORDER BY s LIMIT ?"
            if flt is not None
            else f"SELECT rowid, bm25({fts}) AS s FROM {fts} WHERE {fts} MATCH ? ORDER BY s LIMIT ?"
        )
        db = self.reader
        built: dict[int, tuple[Any, ...]] = self._local.__dict__.setdefault("fts_built", {})
        db.execute("BEGIN")  # the index, its version and the query in one snapshot
        try:
            state = tuple(db.execute("SELECT created_at, chunk_version FROM namespaces WHERE id=?", (ns,)).fetchone())
            if built.get(ns) != state:
                built.pop(ns, None)
                db.execute(f"DROP TABLE IF EXISTS temp.{fts}")
                db.execute(f'CREATE VIRTUAL TABLE temp.{fts} USING fts5(tokens, tokenize="{_FTS_TOKENIZE}")')
                db.execute(f"INSERT INTO temp.{fts} (rowid, tokens) SELECT rowid, tokens FROM main.{_tokens(ns)}")
                built[ns] = state
            rows = db.execute(sql, [_fts_query(tokens), *params, k]).fetchall()
        except BaseException as e:
            db.execute("ROLLBACK")
            built.pop(ns, None)
            if isinstance(e, sqlite3.OperationalError):
                raise StoreError(f"BM25 query failed: {e}") from e
            raise
        db.execute("COMMIT")
        return [(int(r), -float(s)) for r, s in rows]

    def filter_rowids(self, namespace: str, flt: Filter | None, among: Iterable[int] | None = None) -> np.ndarray:
        """Rowids of the namespace's chunks the filter allows; only among ``among`` when given (the
        chunks a write added: an allowed set is kept up to date from them)."""
        ns = self.namespace_id(namespace)
        if ns is None:
            return np.zeros(0, np.int64)
        where, params = to_sql(flt, "d.metadata")
        sql = f"SELECT c.id FROM chunks c {_DOC_JOIN} WHERE c.ns_id=? AND {where}"
        if among is None:
            rows = self.reader.execute(sql, [ns, *params]).fetchall()
        else:
            among = sorted({int(r) for r in among})
            rows = []
            for i in range(0, len(among), 500):
                part = among[i : i + 500]
                rows += self.reader.execute(
                    f"{sql} AND c.id IN ({','.join('?' * len(part))})", [ns, *params, *part]
                ).fetchall()
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
