"""The class :class:`PostgresStore`: connecting (the BM25 leg's options, the schema name, the first
connection's checks and migrations, the pool), composed from the parts of the store (core, files,
reads, search, vectors, writes) and the reads and writes shared with the SQLite store
(store/sql/common.py, store/sql/writes.py)."""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg_pool import ConnectionPool

from ... import config
from ...errors import StoreError, ValidationError
from ..base import Capabilities, NativeSearchStore
from ..sql.common import SQLReads
from ..sql.export import SQLExport
from ..sql.writes import SQLWrites
from .core import mask_url
from .files import _Files
from .migrations import SCHEMA_VERSION, bootstrap
from .qmark import AutoReader
from .reads import _Reads
from .replica import ReplicaRouter, check_replica
from .search import _Search
from .vectors import _Vectors
from .writes import _Writes

__all__ = ["PostgresStore", "BM25_LEG_ENV", "BM25_SNAPSHOT_DIR_ENV"]

#: environment defaults of ``bm25_leg`` and ``bm25_snapshot_dir`` (for `hybridmem serve` and the CLI)
BM25_LEG_ENV = config.PG_BM25_LEG_ENV
BM25_SNAPSHOT_DIR_ENV = config.PG_BM25_SNAPSHOT_DIR_ENV

T = TypeVar("T")
_IDENT = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


class PostgresStore(_Writes, _Vectors, _Reads, _Search, _Files, SQLReads, SQLExport, SQLWrites):
    """Thread-safe: pooled connections; writes of this process serialized by a lock, writes of one
    namespace across processes by a row lock on the namespace's counters."""

    schema_version = SCHEMA_VERSION
    #: why writes are refused for space (the SQLite store's; a full PostgreSQL disk is the server's)
    full: str | None = None
    #: the BM25 and dense legs run in SQL (``search_sparse``, ``search_dense``)
    native_search = True

    @property
    def capabilities(self) -> Capabilities:
        """A database server: the dense leg in pgvector, BM25 in SQL or over in-process postings
        (``bm25_leg``), saved under ``bm25_snapshot_dir`` keyed by the masked URL and schema."""
        return Capabilities(
            backend="postgres",
            native_search=True,
            bm25_in_process=self.bm25_leg == "process",
            snapshot_dir=self.bm25_snapshot_dir,
            snapshot_key=f"{self.path}#{self.schema}",
        )

    def __init__(
        self,
        url: str,
        *,
        create: bool = True,
        pool_size: int = 8,
        statement_timeout_ms: int = 30_000,
        schema: str = "hybridmem",
        connect_timeout: float = 10.0,
        hnsw_ef_search: int = 64,
        exact_threshold: int = 20_000,
        work_mem_mb: int = 32,
        bm25_leg: str | None = None,
        bm25_snapshot_dir: str | None = None,
        read_url: str | None = None,
        read_your_writes: bool = False,
        replica_max_lag_s: float = 5.0,
        replica_wait_s: float = 1.0,
        replica_retry_s: float = 5.0,
        replica_check_s: float = 0.5,
    ) -> None:
        self.url = url
        self._bm25_options(bm25_leg, bm25_snapshot_dir, replica=read_url is not None)
        #: what a read asks of the replica by default (a query's ``read_your_writes`` overrides)
        self.read_your_writes = bool(read_your_writes)
        self.path = mask_url(url)
        if not _IDENT.match(schema):
            raise ValidationError(f"invalid PostgreSQL schema name {schema!r} (lower-case letters, digits, _)")
        self.schema = schema
        self.hnsw_ef_search = int(hnsw_ef_search)
        #: namespaces with fewer vectors are searched exactly (a scan costs little there, and HNSW
        #: recall is never perfect), as the embedded backend does below its own threshold
        self.exact_threshold = int(exact_threshold)
        self._vcount: dict[int, tuple[int, int]] = {}  # ns id -> (vector version, vector count)
        self._estimates: dict[tuple[int, str, str], tuple[float, float]] = {}  # see _Search._estimate_allowed
        self._dim_cache: tuple[str | None, int | None] | None = None  # see embedder_info_cached
        self._since_analyze = 0  # chunks written since the last ANALYZE (see _maybe_analyze)
        self._analyzed_at = 0  # chunks written in all, as of the last ANALYZE
        self._wlock = threading.RLock()
        self._ns_cache: dict[str, int] = {}
        self._pool: ConnectionPool | None = None
        self._replica: ReplicaRouter | None = None
        self._statement_timeout_ms = int(statement_timeout_ms)
        # work_mem caps each sort/hash of a query (a backend holds a few): with the filter budgets and
        # the statement timeout, one request's memory on the server is bounded
        opts = (
            f"-c search_path={schema},public -c statement_timeout={int(statement_timeout_ms)} "
            f"-c work_mem={max(1, int(work_mem_mb))}MB -c hash_mem_multiplier=1"
        )
        self._kwargs: dict[str, Any] = {
            "autocommit": True,
            "options": opts,
            "connect_timeout": max(1, int(connect_timeout)),
        }
        self._open(create, pool_size, connect_timeout)
        self.reader = AutoReader(self._conn)
        if read_url is not None:
            waits = (replica_max_lag_s, replica_wait_s, replica_retry_s, replica_check_s)
            self._open_replica(read_url, pool_size, connect_timeout, *waits)

    # ------------------------------------------------------------------ the read replica (replica.py)
    def _open_replica(
        self, url: str, pool_size: int, connect_timeout: float, lag: float, wait: float, retry: float, check: float
    ) -> None:
        """The replica at ``url`` checked (``check_replica``) and its pool opened; the store closed on failure."""
        router = ReplicaRouter(
            url,
            mask_url(url),
            self._kwargs,
            pool_size=pool_size,
            connect_timeout=connect_timeout,
            max_lag_s=float(lag),
            wait_s=float(wait),
            retry_s=float(retry),
            check_s=float(check),
        )
        try:
            check_replica(self, router, timeout=connect_timeout)
            router.open_pool()
        except BaseException:
            self.close()
            raise
        self._replica = router

    @property
    def read_path(self) -> str | None:
        """The read replica's URL, its password masked (None without one)."""
        return self._replica.path if self._replica is not None else None

    def read_route(self, read_your_writes: bool | None = None, *, primary: bool = False) -> Any:
        """The context of one read (a :class:`~.replica.ReadRoute`: where it went and why); without a
        replica, every read is the primary's. ``read_your_writes`` None: the store's default."""
        if self._replica is None:
            return nullcontext(None)
        ryw = self.read_your_writes if read_your_writes is None else bool(read_your_writes)
        return self._replica.route(ryw, primary=primary)

    def bind_route(self, fn: Callable[..., T]) -> Callable[..., T]:
        """``fn`` to run in another thread on the calling thread's read route (the legs)."""
        return self._replica.bind(fn) if self._replica is not None else fn

    def _bm25_options(self, bm25_leg: str | None, bm25_snapshot_dir: str | None, replica: bool = False) -> None:
        """``bm25_leg`` and ``bm25_snapshot_dir``, checked; unset, from the environment. With a read
        replica the BM25 leg is the SQL one (it reads the replica too; in-process postings are kept
        in step with the primary's change log, not the replica's)."""
        if replica:
            if bm25_leg not in (None, "sql"):
                raise ValidationError("a read replica (read_url) needs bm25_leg='sql'", field="bm25_leg")
            bm25_leg = "sql"
        # unset here: the environment (how `hybridmem serve` and the CLI are configured), else defaults
        if bm25_leg is None:
            bm25_leg = os.environ.get(BM25_LEG_ENV) or "process"
            if bm25_leg not in ("process", "sql"):
                raise ValidationError(f"{BM25_LEG_ENV} must be 'process' or 'sql', got {bm25_leg!r}")
        if bm25_leg not in ("process", "sql"):
            raise ValidationError(f"bm25_leg must be 'process' or 'sql', got {bm25_leg!r}", field="bm25_leg")
        if bm25_snapshot_dir is None:
            bm25_snapshot_dir = os.environ.get(BM25_SNAPSHOT_DIR_ENV) or None
        #: where the BM25 leg runs: "process" — postings loaded into each process from the stored
        #: tokens and kept in step through the change log (``hybridmem.retrieve.legs.ProcessBM25Legs``,
        #: the embedded design with this database as the truth); "sql" — aggregated in the database
        #: per query (no memory in the process, but every posting of every query term is read)
        self.bm25_leg = bm25_leg
        #: a local directory where this process saves its namespaces' BM25 postings (and the next
        #: process on this machine reads them back, brought forward through the change log,
        #: instead of reading every chunk's tokens from the server); None: not saved
        self.bm25_snapshot_dir = str(bm25_snapshot_dir) if bm25_snapshot_dir else None

    def _open(self, create: bool, pool_size: int, connect_timeout: float) -> None:
        """Check and migrate the schema over one direct connection, then open the pool."""
        # one direct connection first: a clear error when the server is down or the URL is wrong
        try:
            with psycopg.connect(self.url, **self._kwargs) as conn:
                self._bootstrap(conn, create)
        except psycopg.OperationalError as e:
            raise StoreError(f"cannot connect to PostgreSQL at {self.path}: {str(e).strip()}") from None
        self._pool = ConnectionPool(
            self.url,
            min_size=1,
            max_size=max(1, pool_size),
            kwargs=self._kwargs,
            timeout=connect_timeout + self._statement_timeout_ms / 1000,
            open=False,
            name="hybridmem",
            # no check of each connection at checkout (``check=``): after a restart it made a caller
            # wait for the pool's reconnection backoff (40 s measured, tests/test_pg_restart.py);
            # a dead pooled connection fails its statement with StoreUnavailableError at once and
            # is discarded, and reads retry (Searcher.search)
        )
        self._pool.open(wait=True, timeout=connect_timeout)

    def _bootstrap(self, conn: psycopg.Connection, create: bool) -> None:
        """Migrations (``migrations.bootstrap``); postings of another tokenizer are rebuilt."""
        if bootstrap(conn, self.schema, self.path, create):
            self._reindex(conn)


if TYPE_CHECKING:

    def _is_native_search_store(store: PostgresStore) -> NativeSearchStore:
        return store  # mypy checks here that the class offers what the SQL legs ask of it
