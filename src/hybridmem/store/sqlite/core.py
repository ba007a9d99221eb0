"""The SQLite store's connections: one serialized writer, one reader per thread (WAL), read-only
connections that say why a write is refused; its transactions, meta table and namespaces."""

from __future__ import annotations

import shutil
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

from ... import deadline
from ...errors import StoreError, StoreFullError
from ..sql import changelog as changelog_sql
from ..sql.common import SQLITE_DIALECT, Dialect
from .schema import _TOKENS_TABLE, PENDING_RECOUNT, _now, _tokens

__all__ = ["_Core"]


class _Core(changelog_sql.ChangeLogReads):
    """What every part of :class:`~hybridmem.store.sqlite.SQLiteStore` stands on (its state is set
    by ``SQLiteStore.__init__``)."""

    #: where each namespace's versions and counts live (changelog_sql reads them there)
    counters = ("namespaces", "id")
    #: the SQL of the reads shared with the PostgreSQL store (store/sql/common.py)
    dialect: Dialect = SQLITE_DIALECT
    #: why writes are refused for space since the last one that was (None: they are not)
    full: str | None = None

    path: str
    #: the file SQLite opens (a private temporary file for ":memory:")
    _db_path: str
    _tmpdir: str | None
    _local: threading.local
    _wlock: threading.RLock
    read_only: bool
    _read_only_reason: str
    #: how connections open a read-only store (None: read-write, by path)
    _uri: str | None
    _w: sqlite3.Connection
    _ns_cache: dict[str, int]

    # ------------------------------------------------------------------ connections
    def _connect(self) -> sqlite3.Connection:
        db: sqlite3.Connection | None = None
        try:
            if self._uri is None:
                db = sqlite3.connect(self._db_path, isolation_level=None, check_same_thread=False, timeout=30)
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
            else:  # a read-only store: no journal mode to set (that writes the header), writes refused clearly
                ro = sqlite3.connect(
                    self._uri,
                    uri=True,
                    isolation_level=None,
                    check_same_thread=False,
                    timeout=30,
                    factory=_ReadOnlyConnection,
                )
                ro.refusal = (
                    f"the store {self.path} is read-only: {self._read_only_reason}; it can be searched, but writing "
                    "needs write permission on the file and its directory"
                )
                db = ro
            db.execute("PRAGMA busy_timeout=30000")
            db.execute("PRAGMA foreign_keys=ON")
            db.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.DatabaseError as e:
            if db is not None:
                db.close()
            raise self._open_error(e) from None
        return db

    @property
    def reader(self) -> sqlite3.Connection:
        """This thread's read connection (the graph layer reads through it)."""
        db = getattr(self._local, "db", None)
        if db is None:
            db = self._local.db = self._connect()
            # a read past its request's deadline is interrupted (hybridmem.deadline): every 2,000
            # virtual-machine steps, a few microseconds each, the handler looks at the clock
            db.set_progress_handler(deadline.expired, 2000)
        return db

    def _reading(self) -> AbstractContextManager[sqlite3.Connection]:
        """This thread's reader, for the shared reads (store/sql/common.py)."""
        return nullcontext(self.reader)

    _consistent = _reading

    def _open_error(self, e: sqlite3.DatabaseError) -> StoreError:
        """What an SQLite error while opening the file means for the user."""
        code = (e.sqlite_errorcode & 0xFF) if getattr(e, "sqlite_errorcode", None) is not None else None
        if code == sqlite3.SQLITE_CORRUPT:
            return StoreError(self._damaged(str(e)))
        if code in (sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH):
            return StoreError(
                f"cannot open the store {self.path} (SQLite says: {e}): this user must be able to read the "
                "file, and to write it and its directory for anything but reads"
            )
        return StoreError(f"{self.path} is not a hybridmem store (SQLite says: {e})")

    def _damaged(self, problem: str) -> str:
        return (
            f"the store {self.path} is damaged: {problem}; restore a backup (`hybridmem backup` makes one), "
            f"or run `hybridmem --db {self.path} check` to list every problem"
        )

    # ------------------------------------------------------------------ meta
    @staticmethod
    def _meta_get(db: sqlite3.Connection, key: str) -> str | None:
        row = db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def _set_meta(self, key: str, value: str) -> None:
        with self._wlock:
            self._w.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def embedder_info(self) -> tuple[str | None, int | None]:
        name = self._meta_get(self.reader, "embedder")
        dim = self._meta_get(self.reader, "dim")
        return name, (int(dim) if dim else None)

    def set_embedder(self, name: str, dim: int | None, *, reset_vectors: bool = False) -> None:
        """Record the embedder; with ``reset_vectors`` drop every vector and queue every chunk."""
        with self.write_transaction() as db:
            db.execute("INSERT OR REPLACE INTO meta VALUES ('embedder', ?)", (name,))
            if dim:
                db.execute("INSERT OR REPLACE INTO meta VALUES ('dim', ?)", (str(dim),))
            else:
                db.execute("DELETE FROM meta WHERE key='dim'")
            if reset_vectors:
                db.execute("DELETE FROM vectors")
                db.execute("INSERT OR IGNORE INTO embed_queue SELECT id, ? FROM chunks", (_now(),))
                db.execute(PENDING_RECOUNT)
                db.execute("UPDATE namespaces SET vec_version = vec_version + 1")

    # ------------------------------------------------------------------ transactions
    class _Tx:
        """One write transaction. A write refused for space (SQLite's SQLITE_FULL: the disk, or the
        store's ``max_page_count``) is rolled back and raised as :class:`StoreFullError`; the
        store's ``full`` says why until a write commits again."""

        def __init__(self, db: sqlite3.Connection, store: Any = None) -> None:
            self.db, self.store = db, store

        def __enter__(self) -> sqlite3.Connection:
            self.db.execute("BEGIN IMMEDIATE")
            return self.db

        def __exit__(self, exc_type: Any, exc: BaseException | None, _tb: Any) -> None:
            if exc_type is None:
                try:
                    self.db.execute("COMMIT")
                except sqlite3.OperationalError as e:
                    self._rollback()
                    self._raise_full(e)
                    raise
                if self.store is not None:
                    self.store.full = None
                return
            self._rollback()
            self._raise_full(exc)

        def _rollback(self) -> None:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")

        def _raise_full(self, e: BaseException | None) -> None:
            cause = e.__cause__ if isinstance(e, StoreError) else e
            code = getattr(cause, "sqlite_errorcode", 0)  # 0: raised by hand, not by SQLite
            if isinstance(cause, sqlite3.OperationalError) and code & 0xFF == sqlite3.SQLITE_FULL:
                where = getattr(self.store, "path", "the store")
                msg = f"write to {where} refused: the disk or the store's size limit is full ({cause}); nothing of it was kept"
                if self.store is not None:
                    self.store.full = msg
                raise StoreFullError(msg) from cause

    @contextmanager
    def write_transaction(self) -> Iterator[sqlite3.Connection]:
        """The writer lock and one write transaction (the graph layer writes through it)."""
        with self._wlock, self._tx() as db:
            yield db

    def _tx(self) -> "_Core._Tx":
        return _Core._Tx(self._w, self)

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """This thread's reader inside one read transaction: every statement sees one snapshot."""
        db = self.reader
        db.execute("BEGIN")
        try:
            yield db
        finally:
            db.execute("COMMIT")

    @staticmethod
    def _portable(conn: sqlite3.Connection) -> Any:
        """``conn`` in the ``?`` dialect of the SQL both backends share (changelog_sql, history_sql)."""
        return conn

    @staticmethod
    def _bump(db: sqlite3.Connection, ns: int, column: str = "vec_version") -> int:
        assert column in ("vec_version", "chunk_version")
        db.execute(f"UPDATE namespaces SET {column} = {column} + 1 WHERE id=?", (ns,))
        return int(db.execute(f"SELECT {column} FROM namespaces WHERE id=?", (ns,)).fetchone()[0])

    # ------------------------------------------------------------------ namespaces
    def namespaces(self) -> list[str]:
        return [r[0] for r in self.reader.execute("SELECT name FROM namespaces ORDER BY name")]

    def namespace_id(self, name: str, db: sqlite3.Connection | None = None, create: bool = False) -> int | None:
        cached = self._ns_cache.get(name)  # one lookup: a writer may pop the entry concurrently
        if cached is not None:
            return cached
        db = db or self.reader
        row = db.execute("SELECT id FROM namespaces WHERE name=?", (name,)).fetchone()
        if row is None:
            if not create:
                return None
            cur = db.execute("INSERT INTO namespaces (name, created_at) VALUES (?, ?)", (name, _now()))
            assert cur.lastrowid is not None  # set by the INSERT
            ns_id = int(cur.lastrowid)
            db.execute(_TOKENS_TABLE.format(table=_tokens(ns_id)))
            return ns_id  # cached only after commit (see write_documents)
        self._ns_cache[name] = int(row[0])
        return int(row[0])

    def integrity_check(self) -> str:
        return str(self.reader.execute("PRAGMA integrity_check").fetchone()[0])

    def size_bytes(self) -> int:
        if self.path == ":memory:":
            return 0
        return sum(Path(self.path + s).stat().st_size for s in ("", "-wal") if Path(self.path + s).exists())

    def close(self) -> None:
        with self._wlock:
            try:
                self._w.close()
            except sqlite3.Error:
                pass
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None
            self._local.__dict__.pop("fts_built", None)  # went with the connection's temp schema
        if self._tmpdir is not None:  # ":memory:": the store ends with it
            shutil.rmtree(self._tmpdir, ignore_errors=True)


class _ReadOnlyConnection(sqlite3.Connection):
    """A connection to a store opened read-only: a write (a ``BEGIN IMMEDIATE``, or a statement
    SQLite refuses as one) raises a StoreError saying the store is read-only and why, instead of
    SQLite's "attempt to write a readonly database" wherever the write happens."""

    refusal = "the store is read-only"

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        if sql.startswith("BEGIN IMMEDIATE"):
            raise StoreError(self.refusal)
        try:
            return super().execute(sql, parameters)
        except sqlite3.OperationalError as e:
            if e.sqlite_errorcode & 0xFF == sqlite3.SQLITE_READONLY:
                raise StoreError(self.refusal) from None
            raise

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:
        try:
            return super().executemany(sql, parameters)
        except sqlite3.OperationalError as e:
            if e.sqlite_errorcode & 0xFF == sqlite3.SQLITE_READONLY:
                raise StoreError(self.refusal) from None
            raise
