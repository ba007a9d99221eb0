"""What every part of the PostgreSQL store stands on: pooled connections under the statement
timeout and the request's deadline, transactions (the ``?`` dialect of the shared SQL through
:class:`~.qmark.Qmark`), the embedder in ``meta``, namespaces and their counters; ``mask_url``."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import errors as pgerr
from psycopg_pool import ConnectionPool, PoolTimeout

from ... import deadline
from ...errors import StoreError, StoreUnavailableError
from ..sql import changelog as changelog_sql
from ..sql.common import PG_DIALECT, Dialect
from .qmark import AutoReader, Qmark
from .schema import _now, _one

if TYPE_CHECKING:
    from .replica import ReplicaRouter

__all__ = ["_Core", "mask_url"]


def mask_url(url: str) -> str:
    """The URL with its password replaced by ``***`` (for messages and ``stats``)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "postgresql://***"
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = netloc[0].split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc[1]}"))


@contextmanager
def _unreplicated_commits(conn: psycopg.Connection) -> Iterator[list[str]]:
    """The server's warnings, while the block runs, that a commit's wait for the synchronous replica
    was cancelled: PostgreSQL then reports the commit as done although no replica confirmed it."""
    seen: list[str] = []

    def notice(diag: psycopg.errors.Diagnostic) -> None:
        text = f"{diag.message_primary or ''} {diag.message_detail or ''}"
        if "synchronous replication" in text or "might not have been replicated" in text:
            seen.append(str(diag.message_primary or "").strip())

    conn.add_notice_handler(notice)
    try:
        yield seen
    finally:
        conn.remove_notice_handler(notice)


class _Core(changelog_sql.ChangeLogReads):
    """The state and connections every part of :class:`~hybridmem.store.postgres.PostgresStore`
    uses (the state is set by ``PostgresStore.__init__``)."""

    #: where each namespace's versions and counts live (changelog_sql reads them there)
    counters = ("namespace_stats", "ns_id")
    #: the SQL of the reads shared with the SQLite store (store/sql/common.py)
    dialect: Dialect = PG_DIALECT

    url: str
    #: the URL with its password masked (for messages)
    path: str
    schema: str
    bm25_leg: str
    bm25_snapshot_dir: str | None
    hnsw_ef_search: int
    exact_threshold: int
    _vcount: dict[int, tuple[int, int]]  # ns id -> (vector version, vector count)
    _estimates: dict[tuple[int, str, str], tuple[float, float]]  # (ns, filter) -> (when, est. rows)
    _dim_cache: tuple[str | None, int | None] | None  # see embedder_info_cached
    _since_analyze: int  # chunks written since the last ANALYZE (see _maybe_analyze)
    _analyzed_at: int  # chunks written in all, as of the last ANALYZE
    _wlock: threading.RLock
    _ns_cache: dict[str, int]
    _pool: ConnectionPool | None
    #: the read replica (``read_url``), None without one
    _replica: ReplicaRouter | None
    _statement_timeout_ms: int
    _kwargs: dict[str, Any]
    reader: AutoReader

    # ------------------------------------------------------------------ connections and transactions
    @contextmanager
    def _conn(self, write: bool = False, record: bool = True) -> Iterator[psycopg.Connection]:
        """A pooled connection: the replica's inside a read routed there (:mod:`.replica`), else the
        primary's. ``write``: the primary's always; with a replica, the WAL position after the write
        is remembered (unless ``record`` is False) for reads that must see it (read_your_writes)."""
        if self._pool is None:
            raise StoreError(f"the store at {self.path} is closed")
        left = deadline.remaining()
        if left is not None and left <= 0:
            raise deadline.DeadlineExceeded("the request ran past its deadline and was stopped")
        replica = self._replica
        pool = None if write or replica is None else replica.pool()
        try:
            with self._checkout(pool or self._pool, left) as conn:
                if not write:
                    yield conn
                    return
                with _unreplicated_commits(conn) as cancelled:
                    yield conn
                if cancelled:
                    raise StoreUnavailableError(
                        f"the write committed on the primary at {self.path}, but its wait for the synchronous "
                        f"replica was cancelled ({cancelled[0]}): it may be lost in a failover; writes are "
                        "idempotent by id: write it again"
                    )
                if record and replica is not None:
                    replica.record_write(conn)
        except (PoolTimeout, psycopg.OperationalError) as e:
            if pool is None or isinstance(e, pgerr.QueryCanceled):
                raise
            assert replica is not None
            replica.failed(str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)
            raise StoreUnavailableError(f"the read replica at {replica.path} failed: {e}; read again") from None

    @contextmanager
    def _checkout(self, pool: ConnectionPool, left: float | None) -> Iterator[psycopg.Connection]:
        ms = self._statement_timeout_ms
        path = self.path if pool is self._pool else f"{self.path} (read replica)"
        try:
            with pool.connection() as conn:
                if left is None:
                    yield conn
                    return
                # the request's deadline, as the statement timeout of this checkout (then the default)
                ms = max(1, min(int(left * 1000), self._statement_timeout_ms))
                conn.execute(f"SET statement_timeout = {ms}")
                try:
                    yield conn
                finally:
                    if not conn.closed and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
                        conn.execute(f"SET statement_timeout = {self._statement_timeout_ms}")
        except PoolTimeout as e:
            if pool is not self._pool:
                raise
            raise StoreUnavailableError(f"no PostgreSQL connection available at {path} ({e})") from None
        except pgerr.QueryCanceled as e:  # (an OperationalError: caught first)
            # the server's clock may fire a hair before ours: a timeout shorter than the default was the deadline
            if deadline.expired() or ms < self._statement_timeout_ms:
                raise deadline.DeadlineExceeded("the request ran past its deadline and was stopped") from None
            raise StoreError(f"PostgreSQL statement timed out at {path}: {str(e).strip()}") from None
        except psycopg.OperationalError as e:
            if pool is not self._pool:
                raise
            raise StoreUnavailableError(
                f"PostgreSQL at {path} is unavailable ({str(e).strip()}); retry shortly "
                "(a write in flight may or may not have been committed: writes are idempotent by id)"
            ) from None

    #: a pooled connection in autocommit for one statement of the shared reads (store/sql/common.py)
    _reading = _conn

    @contextmanager
    def _tx(self) -> Iterator[Qmark]:
        """A write transaction (the graph layer's portable SQL goes through it)."""
        with self._conn(write=True) as conn, conn.transaction():
            yield Qmark(conn)

    @contextmanager
    def write_transaction(self) -> Iterator[Qmark]:
        """The writer lock and one write transaction, in the ``?`` dialect (the graph layer's)."""
        with self._wlock, self._tx() as db:
            yield db

    @contextmanager
    def snapshot(self) -> Iterator[Qmark]:
        """A read-only transaction seeing one consistent snapshot."""
        with self._conn() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            yield Qmark(conn)

    #: a snapshot for the shared reads of several statements (store/sql/common.py)
    _consistent = snapshot

    @staticmethod
    def _portable(conn: psycopg.Connection) -> Any:
        """``conn`` in the ``?`` dialect of the SQL both backends share (changelog_sql, history_sql)."""
        return Qmark(conn)

    @staticmethod
    def _bump(conn: psycopg.Connection, ns: int, column: str = "vec_version") -> int:
        assert column in ("vec_version", "chunk_version")
        row = conn.execute(
            f"UPDATE namespace_stats SET {column} = {column} + 1 WHERE ns_id=%s RETURNING {column}", (ns,)
        )
        return int(_one(row.fetchone())[0])

    # ------------------------------------------------------------------ meta
    def embedder_info(self) -> tuple[str | None, int | None]:
        with self._conn() as conn:
            rows = dict(conn.execute("SELECT key, value FROM meta WHERE key IN ('embedder', 'dim')").fetchall())
        dim = rows.get("dim")
        return rows.get("embedder"), (int(dim) if dim else None)

    def embedder_info_cached(self) -> tuple[str | None, int | None]:
        """embedder_info without a round trip once a dimension is recorded (it changes only through
        set_embedder, which every process sees as a type change of the column: a stale cache fails
        loudly there). For the per-query and per-batch checks."""
        cached = self._dim_cache
        if cached is None:
            cached = self.embedder_info()
            if cached[1]:
                self._dim_cache = cached
        return cached

    # ------------------------------------------------------------------ namespaces
    def namespaces(self) -> list[str]:
        with self._conn() as conn:
            return [r[0] for r in conn.execute('SELECT name FROM namespaces ORDER BY name COLLATE "C"')]

    def namespace_id(self, name: str, db: Any = None, create: bool = False) -> int | None:
        cached = self._ns_cache.get(name)
        if cached is not None:
            return cached
        conn = db.conn if isinstance(db, Qmark) else db
        if conn is None:
            with self._conn() as c:
                row = c.execute("SELECT id FROM namespaces WHERE name=%s", (name,)).fetchone()
        else:
            row = conn.execute("SELECT id FROM namespaces WHERE name=%s", (name,)).fetchone()
            if row is None and create:
                conn.execute(
                    "INSERT INTO namespaces (name, created_at) VALUES (%s, %s) ON CONFLICT (name) DO NOTHING",
                    (name, _now()),
                )
                ns = int(_one(conn.execute("SELECT id FROM namespaces WHERE name=%s", (name,)).fetchone())[0])
                conn.execute("INSERT INTO namespace_stats (ns_id) VALUES (%s) ON CONFLICT DO NOTHING", (ns,))
                return ns  # cached only after commit
        if row is None:
            return None
        self._ns_cache[name] = int(row[0])
        return int(row[0])

    def _lock_ns(self, conn: psycopg.Connection, name: str, create: bool) -> int | None:
        """The namespace id, its row locked for this transaction (one writer per namespace)."""
        ns = self.namespace_id(name, conn, create=create)
        if ns is not None:
            conn.execute("SELECT 1 FROM namespace_stats WHERE ns_id=%s FOR UPDATE", (ns,))
        return ns

    # ------------------------------------------------------------------ counters (namespace_stats)
    def _version(self, namespace: str, column: str) -> int:
        ns = self.namespace_id(namespace)
        if ns is None:
            return 0
        with self._conn() as conn:
            row = conn.execute(f"SELECT {column} FROM namespace_stats WHERE ns_id=%s", (ns,)).fetchone()
        return int(row[0]) if row else 0

    def vector_version(self, namespace: str) -> int:
        return self._version(namespace, "vec_version")

    def chunk_version(self, namespace: str) -> int:
        return self._version(namespace, "chunk_version")

    def pending_count(self, namespace: str | None = None) -> int:
        """Chunks waiting for a vector: the namespaces' counters (O(1), whatever the backlog)."""
        with self._conn() as conn:
            if namespace is None:
                return int(_one(conn.execute("SELECT coalesce(sum(n_pending), 0) FROM namespace_stats").fetchone())[0])
            ns = self.namespace_id(namespace)
            if ns is None:
                return 0
            row = conn.execute("SELECT n_pending FROM namespace_stats WHERE ns_id=%s", (ns,)).fetchone()
            return int(row[0]) if row else 0

    def chunk_count(self, namespace: str) -> int:
        """The namespace's chunks, from its statistics row (kept in each write transaction)."""
        ns = self.namespace_id(namespace)
        if ns is None:
            return 0
        with self._conn() as conn:
            return int(_one(conn.execute("SELECT n_chunks FROM namespace_stats WHERE ns_id=%s", (ns,)).fetchone())[0])

    def size_bytes(self) -> int:
        with self._conn() as conn:
            row = conn.execute(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c JOIN "
                "pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind IN ('r', 'm')",
                (self.schema,),
            ).fetchone()
        return int(_one(row)[0])

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
        replica, self._replica = getattr(self, "_replica", None), None
        if replica is not None:
            replica.close()

    def __del__(self) -> None:  # pragma: no cover - best effort
        try:
            self.close()
        except Exception:
            pass
