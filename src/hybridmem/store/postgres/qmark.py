"""The ``?`` placeholders of the SQL both backends share (:mod:`hybridmem.graph.store`,
``store/sql/changelog``, ``store/sql/history``) spoken over psycopg's ``%s``."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

import psycopg

__all__ = ["AutoReader", "Qmark", "Rows"]


class Rows:
    """A fetched result with the cursor surface the graph layer uses (iterate, fetchone, fetchall)."""

    def __init__(self, rows: list[tuple[Any, ...]], rowcount: int) -> None:
        self._rows = rows
        self.rowcount = rowcount

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self._rows)

    def fetchone(self) -> tuple[Any, ...] | None:
        return self._rows[0] if self._rows else None

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self._rows


class Qmark:
    """One connection speaking the ``?`` placeholders of the portable SQL in :mod:`hybridmem.graph.store`."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Rows:
        cur = self.conn.execute(sql.replace("?", "%s"), list(params))
        rows = cur.fetchall() if cur.description is not None else []
        return Rows(rows, cur.rowcount)

    def executemany(self, sql: str, seq: Sequence[Sequence[Any]]) -> None:
        seq = [list(p) for p in seq]
        if seq:
            with self.conn.cursor() as cur:
                cur.executemany(sql.replace("?", "%s"), seq)


class AutoReader:
    """``store.reader`` for the graph layer: each statement on a pooled connection, in autocommit."""

    def __init__(self, connect: Callable[[], AbstractContextManager[psycopg.Connection]]) -> None:
        self.connect = connect  # the store's ``_conn``

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Rows:
        with self.connect() as conn:
            return Qmark(conn).execute(sql, params)
