"""The scale-out store: PostgreSQL + pgvector behind the same protocol as :mod:`.sqlite`.

    Memory("postgresql://user@host/db")          # or --db postgresql://… on every command

Everything lives in one PostgreSQL schema (``hybridmem`` by default, so its tables never collide
with an application's), created and upgraded by numbered migrations under an advisory lock.

* **BM25 in SQL**, from hybridmem's own tokenizer: ``postings(ns_id, term, chunk_rowid, tf, dl)``,
  per-namespace document frequencies (``term_df``), chunk count and total length, all maintained in
  the write transaction. The score is the formula of :mod:`hybridmem.retrieve.sparse` (FTS5's)::

      idf(t) = ln((N - n_t + 0.5) / (n_t + 0.5)), floored at 1e-6
      score(d) = Σ_t idf(t) · tf·(k1 + 1) / (tf + k1·(1 - b + b·|d| / avgdl)),  k1 = 1.2, b = 0.75

  PostgreSQL's ``ts_rank`` is not BM25 and its parser splits ``HEL-4040``: it is not used.
* **Dense** vectors in ``vector(d)`` with an HNSW index (cosine); filtered queries use pgvector's
  iterative index scans (0.8+) and fall back to an exact scan when the index returns fewer than
  ``k`` rows while more rows pass the filter.
* **Filters** compile to parameterized SQL over JSONB (:func:`~hybridmem.store.sql_filters.to_pg_sql`);
  equalities are also emitted as containment (``@>``), which the GIN index on ``documents.metadata``
  answers, so a selective filter does not scan every document's JSON. Metadata is stored once per
  document; a chunk reaches it through its document's primary key.
* **Connections** come from a psycopg 3 pool; every statement runs under a statement timeout.
  Writers of one namespace are serialized by a row lock on the namespace, so several processes may
  write to one database.

The dense leg runs in the server (pgvector). The BM25 leg runs, by default (``bm25_leg="process"``),
over postings each process loads from the stored tokens and keeps in step with every process's
writes by replaying the change log (``changelog_sql``): a query reads no posting from the database.
With ``bm25_leg="sql"`` it is aggregated in the server per query (``search_sparse``) and a
``Memory`` over this store keeps no in-process index at all.
"""

from __future__ import annotations

import json
import os
import re
import struct
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np
import psycopg
from psycopg import errors as pgerr
from psycopg_pool import ConnectionPool, PoolTimeout

from .. import config, deadline
from ..config import BM25_B as B
from ..config import BM25_IDF_FLOOR
from ..config import BM25_K1 as K1
from ..errors import EmbedderMismatchError, NotFoundError, StoreError, StoreUnavailableError, ValidationError
from ..filters import Filter
from ..text.tokenize import TOKENIZER_VERSION
from .base import (
    DOCUMENT_COLUMNS,
    Allowed,
    Capabilities,
    ChunkRow,
    PreparedDocument,
    WriteResult,
    document_record,
    plan_writes,
)
from .sql import changelog as changelog_sql
from .sql import graph as graph_sql
from .sql import history as history_sql
from .sql.filters import to_pg_sql

__all__ = ["PostgresStore", "mask_url", "SCHEMA_VERSION", "HNSW_M", "HNSW_EF_CONSTRUCTION", "BM25_LEG_ENV"]

#: environment defaults of ``bm25_leg`` and ``bm25_snapshot_dir`` (for `hybridmem serve` and the CLI)
BM25_LEG_ENV = config.PG_BM25_LEG_ENV
BM25_SNAPSHOT_DIR_ENV = config.PG_BM25_SNAPSHOT_DIR_ENV

HNSW_M = 16
HNSW_EF_CONSTRUCTION = 64
_IDENT = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


#: a chunk's document, where its metadata is (the primary key of documents answers it)
_DOC_JOIN = "JOIN documents d ON d.ns_id = c.ns_id AND d.doc_id = c.doc_id"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


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


def _vec_text(v: np.ndarray) -> str:
    # repr of each float32 (as a Python float) round-trips exactly through pgvector's float4 parser
    return "[" + ",".join(map(repr, np.asarray(v, np.float32).astype(np.float64).tolist())) + "]"


_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)


def _copy_vectors_binary(cur: psycopg.Cursor, rows: Sequence[tuple[int, int, np.ndarray]]) -> None:
    """COPY (chunk_rowid, ns_id, embedding) rows in PostgreSQL's binary format: pgvector's binary
    form is int16 dim, int16 unused, then big-endian float4s — no text formatting of floats."""
    if not rows:
        return
    parts = [_COPY_HEADER]
    for rid, ns, v in rows:
        v = np.asarray(v, np.float32).ravel()
        body = struct.pack(">hh", v.shape[0], 0) + v.astype(">f4").tobytes()
        parts.append(struct.pack(">hiqiqi", 3, 8, int(rid), 8, int(ns), len(body)))
        parts.append(body)
    parts.append(struct.pack(">h", -1))
    with cur.copy("COPY vectors (chunk_rowid, ns_id, embedding) FROM STDIN (FORMAT BINARY)") as cp:
        cp.write(b"".join(parts))


def _vectors_binary(conn: psycopg.Connection, sql: str, params: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    """(rowids, matrix) of a ``SELECT rowid, embedding`` in binary: pgvector sends int16 dim, int16
    unused, then big-endian float4s — read with numpy, no text parsing (a million rows in seconds)."""
    with conn.cursor(binary=True) as cur:
        cur.execute(sql, list(params))
        rows = cur.fetchall()
    if not rows:
        return np.zeros(0, np.int64), np.zeros((0, 0), np.float32)
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    blob = b"".join(bytes(r[1])[4:] for r in rows)
    return ids, np.frombuffer(blob, dtype=">f4").astype(np.float32).reshape(len(rows), -1)


# ---------------------------------------------------------------------------------------------- schema
_M1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE namespaces (
    id BIGSERIAL PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL,
    vec_version BIGINT NOT NULL DEFAULT 0,
    chunk_version BIGINT NOT NULL DEFAULT 0,
    n_chunks BIGINT NOT NULL DEFAULT 0,
    total_len BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE documents (
    ns_id BIGINT NOT NULL REFERENCES namespaces(id),
    doc_id TEXT NOT NULL,
    source TEXT,
    metadata JSONB NOT NULL DEFAULT '{}',
    content_hash TEXT NOT NULL,
    n_chunks INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (ns_id, doc_id)
);
CREATE TABLE chunks (
    id BIGSERIAL PRIMARY KEY,
    ns_id BIGINT NOT NULL REFERENCES namespaces(id),
    chunk_id TEXT NOT NULL,
    doc_id TEXT NOT NULL,
    ord INTEGER NOT NULL,
    text TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    lang TEXT,
    source TEXT,
    metadata JSONB NOT NULL DEFAULT '{}',
    tokens TEXT NOT NULL DEFAULT '',
    n_tokens INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (ns_id, chunk_id)
);
CREATE INDEX chunks_by_doc ON chunks (ns_id, doc_id);
CREATE INDEX chunks_metadata ON chunks USING gin (metadata jsonb_path_ops);
CREATE TABLE postings (
    ns_id BIGINT NOT NULL,
    term TEXT NOT NULL,
    chunk_rowid BIGINT NOT NULL,
    tf INTEGER NOT NULL,
    dl INTEGER NOT NULL,
    PRIMARY KEY (ns_id, term, chunk_rowid) INCLUDE (tf, dl)  -- covering: BM25 reads only the index
);
CREATE TABLE term_df (
    ns_id BIGINT NOT NULL,
    term TEXT NOT NULL,
    df BIGINT NOT NULL,
    PRIMARY KEY (ns_id, term)
);
CREATE TABLE vectors (
    chunk_rowid BIGINT PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,
    ns_id BIGINT NOT NULL,
    embedding vector NOT NULL
);
CREATE INDEX vectors_by_ns ON vectors (ns_id);
CREATE TABLE embed_queue (
    chunk_rowid BIGINT PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,
    enqueued_at TEXT NOT NULL
);
CREATE TABLE metadata_keys (ns_id BIGINT NOT NULL, key TEXT NOT NULL, PRIMARY KEY (ns_id, key));
"""

# metadata lives once per document (it was copied into every chunk); filters join a chunk to its
# document, whose GIN index answers containment
_M2 = """
CREATE INDEX documents_metadata ON documents USING gin (metadata jsonb_path_ops);
DROP INDEX chunks_metadata;
ALTER TABLE chunks DROP COLUMN metadata;
"""

# time and versions of a memory (store/history_sql.py): existing documents occurred and were
# recorded when they were created
_M3 = """
ALTER TABLE documents ADD COLUMN occurred_at DOUBLE PRECISION;
ALTER TABLE documents ADD COLUMN recorded_at DOUBLE PRECISION;
ALTER TABLE documents ADD COLUMN valid_to DOUBLE PRECISION;
ALTER TABLE documents ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
ALTER TABLE documents ADD COLUMN head_id TEXT;
ALTER TABLE documents ADD COLUMN mem_key TEXT;
ALTER TABLE documents ADD COLUMN change_reason TEXT;
ALTER TABLE chunks ADD COLUMN context TEXT;
UPDATE documents SET occurred_at = extract(epoch FROM created_at::timestamptz),
                     recorded_at = extract(epoch FROM updated_at::timestamptz);
CREATE INDEX documents_by_time ON documents (ns_id, occurred_at);
CREATE INDEX documents_by_head ON documents (ns_id, head_id) WHERE head_id IS NOT NULL;
CREATE INDEX documents_by_key ON documents (ns_id, mem_key) WHERE mem_key IS NOT NULL;
CREATE INDEX documents_retired ON documents (ns_id, valid_to) WHERE valid_to IS NOT NULL;
"""

# the change log of each namespace's chunks (store/changelog_sql.py): a server process keeps its
# in-process BM25 postings in step with every other process's writes by replaying it
_M4 = changelog_sql.table_sql("BYTEA")

# the change log of each namespace's vectors (the same layout)
_M5 = changelog_sql.table_sql("BYTEA", "vec_log")

# keys a distributed PostgreSQL (Citus, tables distributed and colocated by ns_id) accepts: every
# primary key and foreign key between tenant tables holds ns_id (docs/scaling.md, "Past one
# database server"); the rowid look-ups keep plain indexes. Valid on one node, where it changes
# no query's plan class; ``tests/test_postgres_store.py`` checks the rule on the live catalog.
# Written to run again over its own result (a store told it is older than it is)
_M6 = """
ALTER TABLE vectors DROP CONSTRAINT IF EXISTS vectors_chunk_rowid_fkey;
ALTER TABLE vectors DROP CONSTRAINT IF EXISTS vectors_chunk_fkey;
ALTER TABLE embed_queue DROP CONSTRAINT IF EXISTS embed_queue_chunk_rowid_fkey;
ALTER TABLE embed_queue DROP CONSTRAINT IF EXISTS embed_queue_chunk_fkey;
ALTER TABLE graph_mentions DROP CONSTRAINT IF EXISTS graph_mentions_entity_id_fkey;
ALTER TABLE graph_mentions DROP CONSTRAINT IF EXISTS graph_mentions_entity_fkey;
ALTER TABLE graph_relations DROP CONSTRAINT IF EXISTS graph_relations_src_fkey;
ALTER TABLE graph_relations DROP CONSTRAINT IF EXISTS graph_relations_dst_fkey;
ALTER TABLE graph_relation_sources DROP CONSTRAINT IF EXISTS graph_relation_sources_relation_id_fkey;
ALTER TABLE graph_relation_sources DROP CONSTRAINT IF EXISTS graph_relation_sources_relation_fkey;
ALTER TABLE chunks DROP CONSTRAINT chunks_pkey;
ALTER TABLE chunks ADD PRIMARY KEY (ns_id, id);
CREATE INDEX IF NOT EXISTS chunks_by_rowid ON chunks (id);
ALTER TABLE vectors DROP CONSTRAINT vectors_pkey;
ALTER TABLE vectors ADD PRIMARY KEY (ns_id, chunk_rowid);
ALTER TABLE vectors ADD CONSTRAINT vectors_chunk_fkey FOREIGN KEY (ns_id, chunk_rowid)
    REFERENCES chunks (ns_id, id) ON DELETE CASCADE;
CREATE INDEX IF NOT EXISTS vectors_by_rowid ON vectors (chunk_rowid);
DROP INDEX IF EXISTS vectors_by_ns;
ALTER TABLE embed_queue ADD COLUMN IF NOT EXISTS ns_id BIGINT;
UPDATE embed_queue q SET ns_id = c.ns_id FROM chunks c WHERE c.id = q.chunk_rowid AND q.ns_id IS NULL;
ALTER TABLE embed_queue ALTER COLUMN ns_id SET NOT NULL;
ALTER TABLE embed_queue DROP CONSTRAINT embed_queue_pkey;
ALTER TABLE embed_queue ADD PRIMARY KEY (ns_id, chunk_rowid);
ALTER TABLE embed_queue ADD CONSTRAINT embed_queue_chunk_fkey FOREIGN KEY (ns_id, chunk_rowid)
    REFERENCES chunks (ns_id, id) ON DELETE CASCADE;
CREATE INDEX IF NOT EXISTS embed_queue_by_rowid ON embed_queue (chunk_rowid);
ALTER TABLE graph_mentions ADD COLUMN IF NOT EXISTS ns_id BIGINT;
UPDATE graph_mentions m SET ns_id = e.ns_id FROM graph_entities e WHERE e.id = m.entity_id AND m.ns_id IS NULL;
ALTER TABLE graph_mentions ALTER COLUMN ns_id SET NOT NULL;
ALTER TABLE graph_relation_sources ADD COLUMN IF NOT EXISTS ns_id BIGINT;
UPDATE graph_relation_sources s SET ns_id = r.ns_id FROM graph_relations r
    WHERE r.id = s.relation_id AND s.ns_id IS NULL;
ALTER TABLE graph_relation_sources ALTER COLUMN ns_id SET NOT NULL;
ALTER TABLE graph_entities DROP CONSTRAINT graph_entities_pkey;
ALTER TABLE graph_entities ADD PRIMARY KEY (ns_id, id);
CREATE INDEX IF NOT EXISTS graph_entities_by_id ON graph_entities (id);
ALTER TABLE graph_relations DROP CONSTRAINT graph_relations_pkey;
ALTER TABLE graph_relations ADD PRIMARY KEY (ns_id, id);
CREATE INDEX IF NOT EXISTS graph_relations_by_id ON graph_relations (id);
ALTER TABLE graph_relations ADD CONSTRAINT graph_relations_src_fkey FOREIGN KEY (ns_id, src)
    REFERENCES graph_entities (ns_id, id) ON DELETE CASCADE;
ALTER TABLE graph_relations ADD CONSTRAINT graph_relations_dst_fkey FOREIGN KEY (ns_id, dst)
    REFERENCES graph_entities (ns_id, id) ON DELETE CASCADE;
ALTER TABLE graph_mentions DROP CONSTRAINT graph_mentions_pkey;
ALTER TABLE graph_mentions ADD PRIMARY KEY (ns_id, entity_id, chunk_rowid);
ALTER TABLE graph_mentions ADD CONSTRAINT graph_mentions_entity_fkey FOREIGN KEY (ns_id, entity_id)
    REFERENCES graph_entities (ns_id, id) ON DELETE CASCADE;
CREATE INDEX IF NOT EXISTS graph_mentions_by_entity ON graph_mentions (entity_id);
ALTER TABLE graph_relation_sources DROP CONSTRAINT graph_relation_sources_pkey;
ALTER TABLE graph_relation_sources ADD PRIMARY KEY (ns_id, relation_id, chunk_rowid);
ALTER TABLE graph_relation_sources ADD CONSTRAINT graph_relation_sources_relation_fkey FOREIGN KEY (ns_id, relation_id)
    REFERENCES graph_relations (ns_id, id) ON DELETE CASCADE;
CREATE INDEX IF NOT EXISTS graph_relation_sources_by_relation ON graph_relation_sources (relation_id);
ALTER TABLE graph_chunks DROP CONSTRAINT graph_chunks_pkey;
ALTER TABLE graph_chunks ADD PRIMARY KEY (ns_id, chunk_rowid);
CREATE INDEX IF NOT EXISTS graph_chunks_by_rowid ON graph_chunks (chunk_rowid);
DROP INDEX IF EXISTS graph_chunks_by_ns
"""

# each namespace's count of chunks waiting for a vector, kept by every write that queues or
# unqueues in its own transaction: counting the queue was O(backlog) on every hybrid query
_M7 = (
    "ALTER TABLE namespaces ADD COLUMN IF NOT EXISTS n_pending BIGINT NOT NULL DEFAULT 0;"
    "UPDATE namespaces SET n_pending = (SELECT count(*) FROM embed_queue q WHERE q.ns_id = namespaces.id)"
)

# the counters every write bumps leave the namespaces table for one keyed by the namespace alone:
# on a distributed PostgreSQL (Citus, docs/scaling.md) namespaces is a reference table, copied to
# every node, where each update is a two-phase commit to all of them; namespace_stats is
# distributed by ns_id with the tenant's other rows, so a write's bump stays on its shard.
# Re-runnable (the columns re-added empty, the copy keeping rows already moved), as _M6 is
_M8 = """
CREATE TABLE IF NOT EXISTS namespace_stats (
    ns_id BIGINT PRIMARY KEY REFERENCES namespaces(id),
    vec_version BIGINT NOT NULL DEFAULT 0,
    chunk_version BIGINT NOT NULL DEFAULT 0,
    n_chunks BIGINT NOT NULL DEFAULT 0,
    total_len BIGINT NOT NULL DEFAULT 0,
    n_pending BIGINT NOT NULL DEFAULT 0
);
ALTER TABLE namespaces ADD COLUMN IF NOT EXISTS vec_version BIGINT NOT NULL DEFAULT 0;
ALTER TABLE namespaces ADD COLUMN IF NOT EXISTS chunk_version BIGINT NOT NULL DEFAULT 0;
ALTER TABLE namespaces ADD COLUMN IF NOT EXISTS n_chunks BIGINT NOT NULL DEFAULT 0;
ALTER TABLE namespaces ADD COLUMN IF NOT EXISTS total_len BIGINT NOT NULL DEFAULT 0;
ALTER TABLE namespaces ADD COLUMN IF NOT EXISTS n_pending BIGINT NOT NULL DEFAULT 0;
INSERT INTO namespace_stats (ns_id, vec_version, chunk_version, n_chunks, total_len, n_pending)
    SELECT id, vec_version, chunk_version, n_chunks, total_len, n_pending FROM namespaces
    ON CONFLICT (ns_id) DO NOTHING;
ALTER TABLE namespaces DROP COLUMN IF EXISTS vec_version;
ALTER TABLE namespaces DROP COLUMN IF EXISTS chunk_version;
ALTER TABLE namespaces DROP COLUMN IF EXISTS n_chunks;
ALTER TABLE namespaces DROP COLUMN IF EXISTS total_len;
ALTER TABLE namespaces DROP COLUMN IF EXISTS n_pending
"""

#: every namespace's ``n_pending`` counted afresh (a reset of every vector)
PENDING_RECOUNT = (
    "UPDATE namespace_stats SET n_pending = (SELECT count(*) FROM embed_queue q WHERE q.ns_id = namespace_stats.ns_id)"
)

#: numbered migrations; index i upgrades schema version i to i + 1
MIGRATIONS: list[str] = [_M1 + graph_sql.graph_tables("postgres"), _M2, _M3, _M4, _M5, _M6, _M7, _M8]
SCHEMA_VERSION = len(MIGRATIONS)


# ---------------------------------------------------------------------------------------------- adapters
def _by_ids(
    column: str, ns: int | None, rowids: Sequence[int], ns_column: str = "ns_id"
) -> tuple[str, tuple[Any, ...]]:
    """The WHERE clause of a by-id statement: ``column = ANY(rowids)``, led by the namespace when
    known, so that a distributed PostgreSQL (Citus, docs/scaling.md) routes it to one shard."""
    ids = [int(r) for r in rowids]
    if ns is None:
        return f"{column} = ANY(%s)", (ids,)
    return f"{ns_column}=%s AND {column} = ANY(%s)", (ns, ids)


def _one(row: tuple[Any, ...] | None) -> tuple[Any, ...]:
    """The row of a ``fetchone()`` that always returns one (an aggregate, ``RETURNING``, a known id)."""
    assert row is not None
    return row


class _Rows:
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


class _Qmark:
    """One connection speaking the ``?`` placeholders of the portable SQL in :mod:`hybridmem.graph.store`."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> _Rows:
        cur = self.conn.execute(sql.replace("?", "%s"), list(params))
        rows = cur.fetchall() if cur.description is not None else []
        return _Rows(rows, cur.rowcount)

    def executemany(self, sql: str, seq: Sequence[Sequence[Any]]) -> None:
        seq = [list(p) for p in seq]
        if seq:
            with self.conn.cursor() as cur:
                cur.executemany(sql.replace("?", "%s"), seq)


class _AutoReader:
    """``store.reader`` for the graph layer: each statement on a pooled connection, in autocommit."""

    def __init__(self, store: "PostgresStore") -> None:
        self.store = store

    def execute(self, sql: str, params: Sequence[Any] = ()) -> _Rows:
        with self.store._conn() as conn:
            return _Qmark(conn).execute(sql, params)


# ---------------------------------------------------------------------------------------------- store
class PostgresStore(changelog_sql.ChangeLogReads):
    """Thread-safe: pooled connections; writes of this process serialized by a lock, writes of one
    namespace across processes by a row lock on the namespace's counters."""

    #: why writes are refused for space (the SQLite store's; a full PostgreSQL disk is the server's)
    full: str | None = None

    #: where each namespace's versions and counts live (changelog_sql reads them there)
    counters = ("namespace_stats", "ns_id")

    schema_version = SCHEMA_VERSION
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
    ) -> None:
        self.url = url
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
        self.path = mask_url(url)
        if not _IDENT.match(schema):
            raise ValidationError(f"invalid PostgreSQL schema name {schema!r} (lower-case letters, digits, _)")
        self.schema = schema
        self.hnsw_ef_search = int(hnsw_ef_search)
        #: namespaces with fewer vectors are searched exactly (a scan costs little there, and HNSW
        #: recall is never perfect), as the embedded backend does below its own threshold
        self.exact_threshold = int(exact_threshold)
        self._vcount: dict[int, tuple[int, int]] = {}  # ns id -> (vector version, vector count)
        self._dim_cache: tuple[str | None, int | None] | None = None  # see embedder_info_cached
        self._since_analyze = 0  # chunks written since the last ANALYZE (see _maybe_analyze)
        self._analyzed_at = 0  # chunks written in all, as of the last ANALYZE
        self._wlock = threading.RLock()
        self._ns_cache: dict[str, int] = {}
        self._pool: ConnectionPool | None = None
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
        # one direct connection first: a clear error when the server is down or the URL is wrong
        try:
            with psycopg.connect(url, **self._kwargs) as conn:
                self._bootstrap(conn, create)
        except psycopg.OperationalError as e:
            raise StoreError(f"cannot connect to PostgreSQL at {self.path}: {str(e).strip()}") from None
        self._pool = ConnectionPool(
            url,
            min_size=1,
            max_size=max(1, pool_size),
            kwargs=self._kwargs,
            timeout=connect_timeout + statement_timeout_ms / 1000,
            open=False,
            name="hybridmem",
            # no check of each connection at checkout (``check=``): after a restart it made a caller
            # wait for the pool's reconnection backoff (40 s measured, tests/test_pg_restart.py);
            # a dead pooled connection fails its statement with StoreUnavailableError at once and
            # is discarded, and reads retry (Searcher.search)
        )
        self._pool.open(wait=True, timeout=connect_timeout)
        self.reader = _AutoReader(self)

    # ------------------------------------------------------------------ set-up and migrations
    def _bootstrap(self, conn: psycopg.Connection, create: bool) -> None:
        exists = (
            conn.execute(
                "SELECT 1 FROM information_schema.tables WHERE table_schema=%s AND table_name='meta'", (self.schema,)
            ).fetchone()
            is not None
        )
        if not exists and not create:
            raise NotFoundError(f"no hybridmem store in schema {self.schema!r} at {self.path}")
        with conn.transaction():
            # one migrator at a time across processes; the lock goes with the transaction
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('hybridmem-migrate'))")
            try:
                if conn.execute("SELECT 1 FROM pg_extension WHERE extname='vector'").fetchone() is None:
                    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            except (pgerr.FeatureNotSupported, pgerr.UndefinedFile) as e:
                raise StoreError(
                    f"PostgreSQL at {self.path} has no pgvector extension ({str(e).strip()}): install pgvector 0.8+ on the "
                    "server (Debian/Ubuntu: postgresql-NN-pgvector from apt.postgresql.org; or build "
                    "github.com/pgvector/pgvector), or use a managed PostgreSQL that offers it"
                ) from None
            except pgerr.InsufficientPrivilege as e:
                raise StoreError(
                    f"PostgreSQL at {self.path}: cannot CREATE EXTENSION vector ({str(e).strip()}); run it once as a "
                    "superuser or the database owner"
                ) from None
            version_row = conn.execute("SELECT extversion FROM pg_extension WHERE extname='vector'").fetchone()
            if version_row and tuple(int(x) for x in re.findall(r"\d+", version_row[0])[:2]) < (0, 8):
                raise StoreError(
                    f"pgvector {version_row[0]} at {self.path} is too old: hybridmem needs 0.8+ "
                    "(iterative index scans for filtered search)"
                )
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {self.schema}")
            version = 0
            if conn.execute(
                "SELECT 1 FROM information_schema.tables WHERE table_schema=%s AND table_name='meta'", (self.schema,)
            ).fetchone():
                row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
                version = int(row[0]) if row else 0
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path} has hybridmem schema version {version}, newer than this hybridmem "
                    f"({SCHEMA_VERSION}): upgrade"
                )
            for i in range(version, SCHEMA_VERSION):
                for stmt in MIGRATIONS[i].split(";"):
                    if stmt.strip():
                        conn.execute(stmt)
                conn.execute(
                    "INSERT INTO meta VALUES ('schema_version', %s) ON CONFLICT (key) DO UPDATE "
                    "SET value = excluded.value",
                    (str(i + 1),),
                )
            row = conn.execute("SELECT value FROM meta WHERE key='tokenizer_version'").fetchone()
            stored = row[0] if row else None
            if stored != TOKENIZER_VERSION:
                conn.execute(
                    "INSERT INTO meta VALUES ('tokenizer_version', %s) ON CONFLICT (key) DO UPDATE "
                    "SET value = excluded.value",
                    (TOKENIZER_VERSION,),
                )
        if stored is not None and stored != TOKENIZER_VERSION:
            self._reindex(conn)

    @contextmanager
    def _conn(self) -> Iterator[psycopg.Connection]:
        if self._pool is None:
            raise StoreError(f"the store at {self.path} is closed")
        left = deadline.remaining()
        if left is not None and left <= 0:
            raise deadline.DeadlineExceeded("the request ran past its deadline and was stopped")
        ms = self._statement_timeout_ms
        try:
            with self._pool.connection() as conn:
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
            raise StoreUnavailableError(f"no PostgreSQL connection available at {self.path} ({e})") from None
        except pgerr.QueryCanceled as e:  # (an OperationalError: caught first)
            # the server's clock may fire a hair before ours: a timeout shorter than the default was the deadline
            if deadline.expired() or ms < self._statement_timeout_ms:
                raise deadline.DeadlineExceeded("the request ran past its deadline and was stopped") from None
            raise StoreError(f"PostgreSQL statement timed out at {self.path}: {str(e).strip()}") from None
        except psycopg.OperationalError as e:
            raise StoreUnavailableError(
                f"PostgreSQL at {self.path} is unavailable ({str(e).strip()}); retry shortly "
                "(a write in flight may or may not have been committed: writes are idempotent by id)"
            ) from None

    @contextmanager
    def _tx(self) -> Iterator[_Qmark]:
        """A write transaction (the graph layer's portable SQL goes through it)."""
        with self._conn() as conn, conn.transaction():
            yield _Qmark(conn)

    @contextmanager
    def write_transaction(self) -> Iterator[_Qmark]:
        """The writer lock and one write transaction, in the ``?`` dialect (the graph layer's)."""
        with self._wlock, self._tx() as db:
            yield db

    @contextmanager
    def snapshot(self) -> Iterator[_Qmark]:
        """A read-only transaction seeing one consistent snapshot."""
        with self._conn() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            yield _Qmark(conn)

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

    def set_embedder(self, name: str, dim: int | None, *, reset_vectors: bool = False) -> None:
        """Record the embedder and type the vector column ``vector(dim)`` with its HNSW index; with
        ``reset_vectors`` drop every vector and queue every chunk."""
        self._dim_cache = None
        with self._wlock, self._conn() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('hybridmem-embedder'))")
            conn.execute(
                "INSERT INTO meta VALUES ('embedder', %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (name,),
            )
            old = conn.execute("SELECT value FROM meta WHERE key='dim'").fetchone()
            if dim:
                conn.execute(
                    "INSERT INTO meta VALUES ('dim', %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (str(int(dim)),),
                )
            else:
                conn.execute("DELETE FROM meta WHERE key='dim'")
            if reset_vectors:
                conn.execute("DELETE FROM vectors")
                conn.execute(
                    "INSERT INTO embed_queue (ns_id, chunk_rowid, enqueued_at) SELECT ns_id, id, %s FROM chunks "
                    "ON CONFLICT DO NOTHING",
                    (_now(),),
                )
                conn.execute(PENDING_RECOUNT)
                conn.execute("UPDATE namespace_stats SET vec_version = vec_version + 1")
            if dim and (old is None or int(old[0]) != int(dim) or reset_vectors):
                conn.execute("DROP INDEX IF EXISTS vectors_hnsw")
                if conn.execute("SELECT 1 FROM vectors LIMIT 1").fetchone() is not None:
                    raise ValidationError(
                        f"the store holds vectors of dimension {old[0] if old else '?'}; "
                        f"re-embed (reset_vectors) to change to {dim}"
                    )
                conn.execute(f"ALTER TABLE vectors ALTER COLUMN embedding TYPE vector({int(dim)})")
                conn.execute(
                    f"CREATE INDEX vectors_hnsw ON vectors USING hnsw (embedding vector_cosine_ops) "
                    f"WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION})"
                )

    def drop_vector_index(self) -> None:
        """Drop the HNSW index (before a bulk load: building it once afterwards is much faster than
        inserting a million vectors into it one by one). Dense search stays exact until rebuilt."""
        with self._wlock, self._conn() as conn:
            conn.execute("DROP INDEX IF EXISTS vectors_hnsw")

    def create_vector_index(
        self, *, m: int = HNSW_M, ef_construction: int = HNSW_EF_CONSTRUCTION, maintenance_work_mem: str = "1GB"
    ) -> None:
        """(Re)build the HNSW index (cosine) over every vector; give the build enough
        ``maintenance_work_mem`` to keep the graph in memory (about 1.5 × the vectors' size)."""
        if not re.fullmatch(r"\d+\s*(kB|MB|GB)", maintenance_work_mem):
            raise ValidationError(f"maintenance_work_mem {maintenance_work_mem!r}: expected e.g. '2GB'")
        with self._wlock, self._conn() as conn:
            conn.execute(f"SET maintenance_work_mem = '{maintenance_work_mem}'")
            conn.execute("DROP INDEX IF EXISTS vectors_hnsw")
            conn.execute("SET statement_timeout = 0")  # a build may take longer than any query may
            conn.execute(
                f"CREATE INDEX vectors_hnsw ON vectors USING hnsw (embedding vector_cosine_ops) "
                f"WITH (m = {int(m)}, ef_construction = {int(ef_construction)})"
            )
            conn.execute("ANALYZE vectors")
            conn.execute("RESET statement_timeout")
            conn.execute("RESET maintenance_work_mem")

    # ------------------------------------------------------------------ namespaces
    def namespaces(self) -> list[str]:
        with self._conn() as conn:
            return [r[0] for r in conn.execute('SELECT name FROM namespaces ORDER BY name COLLATE "C"')]

    def namespace_id(self, name: str, db: Any = None, create: bool = False) -> int | None:
        cached = self._ns_cache.get(name)
        if cached is not None:
            return cached
        conn = db.conn if isinstance(db, _Qmark) else db
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

    # ------------------------------------------------------------------ writes
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

    def write_documents(self, namespace: str, docs: Sequence[PreparedDocument]) -> WriteResult:
        """Insert or replace documents in one transaction. Chunks whose text did not change keep
        their vectors; other chunks are queued for embedding."""
        res = WriteResult()
        if not docs:
            return res
        now, at = _now(), history_sql.now_epoch()
        try:
            with self._wlock, self._conn() as conn, conn.transaction():
                ns = self._lock_ns(conn, namespace, create=True)
                assert ns is not None
                ids = [d.doc_id for d in docs]
                existing = {
                    r[0]: (r[1], r[2])
                    for r in conn.execute(
                        "SELECT doc_id, content_hash, created_at FROM documents WHERE ns_id=%s AND doc_id = ANY(%s)",
                        (ns, ids),
                    )
                }
                plan = plan_writes(docs, existing, now, res)
                todo, replaced = plan.writes, plan.replaced
                old_vecs: dict[tuple[str, str], str] = {}  # (doc_id, text_hash) -> vector text
                removed_chunks: list[int] = []
                removed_vecs: list[int] = []
                versions: dict[str, int] = {}
                kept = {d.doc_id for d, _ in todo if d.keep_history}  # replaced versions retired, not dropped
                if replaced:
                    versions = dict(
                        conn.execute(
                            "SELECT doc_id, version FROM documents WHERE ns_id=%s AND doc_id = ANY(%s)", (ns, replaced)
                        ).fetchall()
                    )
                    old = conn.execute(
                        "SELECT c.id, c.doc_id, c.text_hash, v.embedding::text FROM chunks c LEFT JOIN vectors v "
                        "ON v.chunk_rowid = c.id WHERE c.ns_id=%s AND c.doc_id = ANY(%s)",
                        (ns, replaced),
                    ).fetchall()
                    old_vecs = {(doc, h): v for _, doc, h, v in old if v is not None}
                    removed_vecs = [i for i, doc, _, v in old if v is not None and doc not in kept]
                    removed_chunks = [i for i, doc, _, _ in old if doc not in kept]
                    self._delete_chunk_rows(conn, ns, removed_chunks)
                fresh = [d.doc_id for d, _ in todo if d.doc_id not in set(replaced)]
                versions.update(history_sql.last_retired(_Qmark(conn), ns, fresh))
                retired = self._retire_for(conn, ns, [d for d, _ in todo], set(replaced) & kept, at)
                n_new = sum(len(d.chunks) for d, _ in todo)
                rowids = [
                    r[0]
                    for r in conn.execute(
                        "SELECT nextval(pg_get_serial_sequence('chunks', 'id')) FROM generate_series(1, %s)", (n_new,)
                    )
                ]
                doc_rows, chunk_rows, post_rows, queue_rows, vec_rows, df, total_len, keys = self._write_rows(
                    ns, todo, rowids, old_vecs, (now, at, versions), res
                )
                if replaced:  # (the retired ones were renamed: this drops the others)
                    conn.execute("DELETE FROM documents WHERE ns_id=%s AND doc_id = ANY(%s)", (ns, replaced))
                self._insert_rows(conn, ns, doc_rows, chunk_rows, post_rows, queue_rows, vec_rows, df, keys)
                conn.execute(
                    "UPDATE namespace_stats SET n_chunks = n_chunks + %s, total_len = total_len + %s WHERE ns_id=%s",
                    (len(chunk_rows), total_len, ns),
                )
                added_chunks = [r[0] for r in chunk_rows] + retired  # a retired chunk: its visibility changed
                removed_chunks += retired
                added_vecs = [r[0] for r in vec_rows]
                if added_vecs or removed_vecs:
                    self._changed(conn, namespace, ns, "vec_version", added_vecs, removed_vecs, res)
                if added_chunks or removed_chunks:
                    self._changed(conn, namespace, ns, "chunk_version", added_chunks, removed_chunks, res)
        except (pgerr.IntegrityError, pgerr.DataError, pgerr.UntranslatableCharacter) as e:
            raise ValidationError(f"write rejected by the store: {str(e).strip()}") from None
        except psycopg.DatabaseError as e:
            if isinstance(e, (psycopg.OperationalError, pgerr.QueryCanceled)):
                raise  # turned into StoreError by _conn
            raise StoreError(f"write to {self.path} failed: {str(e).strip()}") from e
        self._ns_cache.pop(namespace, None)
        self._maybe_analyze(res.chunks_written)
        return res

    @staticmethod
    def _write_rows(
        ns: int,
        todo: Sequence[tuple[PreparedDocument, str]],
        rowids: Sequence[int],
        old_vecs: dict[tuple[str, str], str],
        when: tuple[str, float, dict[str, int]],
        res: WriteResult,
    ) -> tuple[
        list[tuple[Any, ...]],
        list[tuple[Any, ...]],
        list[tuple[Any, ...]],
        list[tuple[Any, ...]],
        list[tuple[Any, ...]],
        Counter[str],
        int,
        set[str],
    ]:
        """The rows one write inserts (documents, chunks, postings, queue, reused vectors), its term
        document frequencies, token count and metadata keys; ``res`` counts chunks and reused vectors."""
        doc_rows, chunk_rows, post_rows, queue_rows, vec_rows = [], [], [], [], []
        df: Counter[str] = Counter()
        total_len = 0
        keys: set[str] = set()
        it = iter(rowids)
        now, at, versions = when
        for d, created in todo:
            meta_json = json.dumps(d.metadata, ensure_ascii=False, allow_nan=False)
            keys.update(d.metadata)
            occurred = d.occurred_at if d.occurred_at is not None else at
            version = versions.get(d.doc_id, 0) + 1
            doc_rows.append(
                (ns, d.doc_id, d.source, meta_json, d.content_hash, len(d.chunks), created, now)
                + (occurred, at, version, d.mem_key, d.reason)
            )
            for i, (text, toks, lang, th) in enumerate(zip(d.chunks, d.tokens, d.langs, d.text_hashes), start=1):
                rid = next(it)
                terms = toks.split()
                tf = Counter(terms)
                chunk_rows.append(
                    (
                        rid,
                        ns,
                        d.chunk_id(i),
                        d.doc_id,
                        i,
                        text,
                        th,
                        lang,
                        d.source,
                        d.context,
                        toks,
                        len(terms),
                        created,
                        now,
                    )
                )
                post_rows += [(ns, t, rid, c, len(terms)) for t, c in tf.items()]
                df.update(tf.keys())
                total_len += len(terms)
                v = old_vecs.get((d.doc_id, th))
                if v is not None:
                    vec_rows.append((rid, ns, v))
                    res.vectors_reused += 1
                else:
                    queue_rows.append((ns, rid, now))
                res.chunks_written += 1
        return doc_rows, chunk_rows, post_rows, queue_rows, vec_rows, df, total_len, keys

    def _insert_rows(
        self,
        conn: psycopg.Connection,
        ns: int,
        doc_rows: list[tuple[Any, ...]],
        chunk_rows: list[tuple[Any, ...]],
        post_rows: list[tuple[Any, ...]],
        queue_rows: list[tuple[Any, ...]],
        vec_rows: list[tuple[Any, ...]],
        df: Counter[str],
        keys: set[str],
    ) -> None:
        """The rows of one write, in bulk (COPY), and the term and metadata-key statistics."""
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO documents (ns_id, doc_id, source, metadata, content_hash, n_chunks, created_at, updated_at, "
                "occurred_at, recorded_at, version, mem_key, change_reason) "
                "VALUES (%s, %s, %s, %s::jsonb, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                doc_rows,
            )
            self._copy(
                cur,
                "chunks (id, ns_id, chunk_id, doc_id, ord, text, text_hash, lang, source, context, "
                "tokens, n_tokens, created_at, updated_at)",
                chunk_rows,
            )
            self._copy(cur, "postings (ns_id, term, chunk_rowid, tf, dl)", post_rows)
            self._copy(cur, "embed_queue (ns_id, chunk_rowid, enqueued_at)", queue_rows)
            if queue_rows:
                cur.execute(
                    "UPDATE namespace_stats SET n_pending = n_pending + %s WHERE ns_id=%s", (len(queue_rows), ns)
                )
            self._copy(cur, "vectors (chunk_rowid, ns_id, embedding)", vec_rows)
            if df:
                terms_l = list(df)
                cur.execute(
                    "INSERT INTO term_df (ns_id, term, df) SELECT %s, t, n FROM unnest(%s::text[], %s::bigint[]) "
                    "AS u(t, n) ON CONFLICT (ns_id, term) DO UPDATE SET df = term_df.df + excluded.df",
                    (ns, terms_l, [df[t] for t in terms_l]),
                )
            if keys:
                cur.execute(
                    "INSERT INTO metadata_keys SELECT %s, k FROM unnest(%s::text[]) AS k ON CONFLICT DO NOTHING",
                    (ns, sorted(keys)),
                )

    def _maybe_analyze(self, n: int) -> None:
        """Refresh planner statistics after bulk writes (autovacuum catches up only later, and a
        planner that still believes the tables empty picks nested loops over a million rows)."""
        with self._wlock:
            self._since_analyze += n
            if self._since_analyze < max(5_000, self._analyzed_at // 5):
                return
            self._analyzed_at += self._since_analyze
            self._since_analyze = 0
        with self._conn() as conn:
            # VACUUM sets the visibility map, without which the covering postings index cannot
            # answer BM25 alone (autovacuum does it too, later)
            conn.execute("VACUUM (ANALYZE) postings")
            for table in ("chunks", "term_df", "vectors", "embed_queue"):
                conn.execute(f"ANALYZE {table}")

    @staticmethod
    def _copy(cur: psycopg.Cursor, target: str, rows: list[tuple[Any, ...]]) -> None:
        if not rows:
            return
        with cur.copy(f"COPY {target} FROM STDIN") as cp:
            for r in rows:
                cp.write_row(r)

    @staticmethod
    def _retire_for(
        conn: psycopg.Connection, ns: int, docs: Sequence[PreparedDocument], keep: set[str], at: float
    ) -> list[int]:
        """Retire, in the write's transaction, the replaced versions kept as history (``keep``) and
        the current holders of the keys the write's documents carry; returns the retired rowids."""
        db = _Qmark(conn)
        out: list[int] = []
        for d in docs:
            if d.mem_key:
                holder = history_sql.current_by_key(db, ns, d.mem_key)
                if holder is not None and holder != d.doc_id:
                    r = history_sql.retire(db, ns, holder, at, f"superseded by {d.doc_id} (same key)")
                    out += r[1] if r else []
        for doc_id in sorted(keep):
            r = history_sql.retire(db, ns, doc_id, at, None)
            out += r[1] if r else []
        return out

    # ------------------------------------------------------------------ versions (store/history_sql.py)
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

    def retire(self, namespace: str, doc_id: str, reason: str | None) -> WriteResult:
        """A soft delete (see the SQLite store's): the current version stays in the history."""
        res = WriteResult()
        with self._wlock, self._conn() as conn, conn.transaction():
            ns = self._lock_ns(conn, namespace, create=False)
            retired = (
                None if ns is None else history_sql.retire(_Qmark(conn), ns, doc_id, history_sql.now_epoch(), reason)
            )
            if ns is None or retired is None:
                raise NotFoundError(f"no memory {doc_id!r} in namespace {namespace!r}")
            if retired[1]:
                self._changed(conn, namespace, ns, "chunk_version", retired[1], retired[1], res)
        return res

    def export_times(self, namespace: str) -> dict[str, tuple[Any, ...]]:
        """doc id -> times, version bookkeeping and chunk context (``history_sql.export_times``)."""
        ns = self.namespace_id(namespace)
        if ns is None:
            return {}
        with self.snapshot() as db:
            return history_sql.export_times(db, ns)

    def restore_times(self, namespace: str, rows: dict[str, tuple[Any, ...]]) -> WriteResult:
        """Copied documents get the source's times and versions (``migrate``), in one transaction."""
        res = WriteResult()
        with self._wlock, self._conn() as conn, conn.transaction():
            ns = self._lock_ns(conn, namespace, create=False)
            if ns is None:
                raise NotFoundError(f"no namespace {namespace!r}")
            retired = history_sql.restore_times(_Qmark(conn), ns, rows)
            if retired:
                self._changed(conn, namespace, ns, "chunk_version", retired, retired, res)
        return res

    @staticmethod
    def _portable(conn: psycopg.Connection) -> Any:
        """``conn`` in the ``?`` dialect of the SQL both backends share (changelog_sql, history_sql)."""
        return _Qmark(conn)

    @staticmethod
    def _bump(conn: psycopg.Connection, ns: int, column: str = "vec_version") -> int:
        assert column in ("vec_version", "chunk_version")
        row = conn.execute(
            f"UPDATE namespace_stats SET {column} = {column} + 1 WHERE ns_id=%s RETURNING {column}", (ns,)
        )
        return int(_one(row.fetchone())[0])

    @staticmethod
    def _delete_chunk_rows(conn: psycopg.Connection, ns: int, rowids: list[int]) -> None:
        """Delete chunks with their postings, BM25 statistics, vectors, queue entries and graph
        provenance, in the caller's transaction."""
        if not rowids:
            return
        rows = conn.execute(
            "SELECT id, tokens, n_tokens FROM chunks WHERE id = ANY(%s) AND ns_id=%s", (rowids, ns)
        ).fetchall()
        df: Counter[str] = Counter()
        total = 0
        pairs_t: list[str] = []
        pairs_r: list[int] = []
        for rid, toks, n in rows:
            terms = set(toks.split())
            df.update(terms)
            total += n
            pairs_t += terms
            pairs_r += [rid] * len(terms)
        conn.execute(
            "DELETE FROM postings p USING unnest(%s::text[], %s::bigint[]) AS u(t, r) "
            "WHERE p.ns_id=%s AND p.term = u.t AND p.chunk_rowid = u.r",
            (pairs_t, pairs_r, ns),
        )
        if df:
            terms_l = list(df)
            conn.execute(
                "UPDATE term_df d SET df = d.df - u.n FROM unnest(%s::text[], %s::bigint[]) AS u(t, n) "
                "WHERE d.ns_id=%s AND d.term = u.t",
                (terms_l, [df[t] for t in terms_l], ns),
            )
            conn.execute("DELETE FROM term_df WHERE ns_id=%s AND term = ANY(%s) AND df <= 0", (ns, terms_l))
        conn.execute(
            "UPDATE namespace_stats SET n_chunks = n_chunks - %s, total_len = total_len - %s WHERE ns_id=%s",
            (len(rows), total, ns),
        )
        for i in range(0, len(rowids), 500):
            graph_sql.delete_graph_provenance(_Qmark(conn), rowids[i : i + 500])
        unqueued = conn.execute(
            "DELETE FROM embed_queue WHERE ns_id=%s AND chunk_rowid = ANY(%s)", (ns, rowids)
        ).rowcount
        if unqueued:
            conn.execute("UPDATE namespace_stats SET n_pending = n_pending - %s WHERE ns_id=%s", (unqueued, ns))
        conn.execute("DELETE FROM chunks WHERE ns_id=%s AND id = ANY(%s)", (ns, rowids))  # vectors cascade

    def delete(self, namespace: str, ids: Sequence[str]) -> tuple[list[str], WriteResult]:
        """Delete documents (by doc id) or single chunks (by chunk id) from every index at once.
        Returns the ids that were found."""
        res = WriteResult()
        found: list[str] = []
        with self._wlock, self._conn() as conn, conn.transaction():
            ns = self._lock_ns(conn, namespace, create=False)
            if ns is None:
                return found, res
            removed_vecs: list[int] = []
            removed_chunks: list[int] = []
            # a hard delete removes every version of a memory (its retired ones are not reported)
            db = _Qmark(conn)
            todo = [(i, True) for i in ids] + [(h, False) for i in ids for h in history_sql.history_ids(db, ns, i)]
            for ident, report in todo:
                rowids = [r[0] for r in conn.execute("SELECT id FROM chunks WHERE ns_id=%s AND doc_id=%s", (ns, ident))]
                is_doc = (
                    bool(rowids)
                    or conn.execute("SELECT 1 FROM documents WHERE ns_id=%s AND doc_id=%s", (ns, ident)).fetchone()
                    is not None
                )
                if not is_doc:
                    rowids = [
                        r[0] for r in conn.execute("SELECT id FROM chunks WHERE ns_id=%s AND chunk_id=%s", (ns, ident))
                    ]
                    if not rowids:
                        continue
                if rowids:
                    removed_vecs += [
                        r[0]
                        for r in conn.execute(
                            "SELECT chunk_rowid FROM vectors WHERE ns_id=%s AND chunk_rowid = ANY(%s)", (ns, rowids)
                        )
                    ]
                removed_chunks += rowids
                self._delete_chunk_rows(conn, ns, rowids)
                if is_doc:
                    conn.execute("DELETE FROM documents WHERE ns_id=%s AND doc_id=%s", (ns, ident))
                else:
                    doc = ident.rsplit("_p", 1)[0]
                    conn.execute(  # the last chunk of a document went: the document goes too
                        "DELETE FROM documents d WHERE ns_id=%s AND doc_id=%s AND NOT EXISTS "
                        "(SELECT 1 FROM chunks c WHERE c.ns_id = d.ns_id AND c.doc_id = d.doc_id)",
                        (ns, doc),
                    )
                if report:
                    found.append(ident)
            if removed_vecs:
                self._changed(conn, namespace, ns, "vec_version", [], removed_vecs, res)
            if removed_chunks:
                self._changed(conn, namespace, ns, "chunk_version", [], removed_chunks, res)
        return found, res

    def reindex_sparse(self) -> int:
        """Rebuild postings and BM25 statistics from chunk text (after a tokenizer change)."""
        with self._conn() as conn:
            return self._reindex(conn)

    def _reindex(self, conn: psycopg.Connection) -> int:
        from ..text.tokenize import index_tokens

        n = 0
        with self._wlock, conn.transaction():
            for (ns,) in conn.execute("SELECT ns_id FROM namespace_stats ORDER BY ns_id FOR UPDATE").fetchall():
                conn.execute("DELETE FROM postings WHERE ns_id=%s", (ns,))
                conn.execute("DELETE FROM term_df WHERE ns_id=%s", (ns,))
                rows = conn.execute("SELECT id, text, lang, context FROM chunks WHERE ns_id=%s", (ns,)).fetchall()
                df: Counter[str]
                post, upd, df, total = [], [], Counter(), 0
                for rid, text, lang, ctx in rows:
                    terms = index_tokens(text, lang, ctx)
                    tf = Counter(terms)
                    upd.append((" ".join(terms), len(terms), rid))
                    post += [(ns, t, rid, c, len(terms)) for t, c in tf.items()]
                    df.update(tf.keys())
                    total += len(terms)
                with conn.cursor() as cur:
                    cur.executemany("UPDATE chunks SET tokens=%s, n_tokens=%s WHERE id=%s", upd)
                    self._copy(cur, "postings (ns_id, term, chunk_rowid, tf, dl)", post)
                    self._copy(cur, "term_df (ns_id, term, df)", [(ns, t, c) for t, c in df.items()])
                conn.execute(
                    "UPDATE namespace_stats SET n_chunks=%s, total_len=%s WHERE ns_id=%s", (len(rows), total, ns)
                )
                self._bump(conn, ns, "chunk_version")
                n += len(rows)
        return n

    # ------------------------------------------------------------------ embedding queue
    def pending(self, limit: int) -> list[tuple[int, str, str, str]]:
        """(rowid, namespace, text, text_hash) of chunks waiting for a vector, oldest first."""
        with self._conn() as conn:
            return conn.execute(
                "SELECT c.id, n.name, CASE WHEN c.context IS NULL THEN c.text ELSE c.context || E'\\n' || c.text END, "
                "c.text_hash FROM embed_queue q JOIN chunks c ON c.id = q.chunk_rowid "
                "JOIN namespaces n ON n.id = c.ns_id ORDER BY q.chunk_rowid LIMIT %s",
                (limit,),
            ).fetchall()

    def pending_among(self, rowids: Sequence[int], namespace: str | None = None) -> set[int]:
        """The chunks among ``rowids`` (of ``namespace`` when given) that still wait for their vector."""
        ns = self._scope(namespace)
        if not rowids or ns == -1:
            return set()
        where, params = _by_ids("chunk_rowid", ns, rowids)
        with self._conn() as conn:
            rows = conn.execute(f"SELECT chunk_rowid FROM embed_queue WHERE {where}", params).fetchall()
        return {int(r[0]) for r in rows}

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

    def store_vectors(self, items: Sequence[tuple[int, str, np.ndarray]]) -> WriteResult:
        """Store vectors for (rowid, text_hash, vec); skips chunks deleted or changed meanwhile."""
        res = WriteResult()
        if not items:
            return res
        name, dim = self.embedder_info_cached()
        if not dim:  # the first vectors fix the dimension: type the column and build its index
            dim = int(np.asarray(items[0][2]).ravel().shape[0])
            self.set_embedder(name or "unknown", dim)
        with self._wlock, self._conn() as conn, conn.transaction():
            rids = [int(r) for r, _, _ in items]
            live = {
                r: (ns, th)
                for r, ns, th in conn.execute(
                    "SELECT id, ns_id, text_hash FROM chunks WHERE id = ANY(%s) FOR UPDATE", (rids,)
                )
            }
            # dequeue what is stored or gone; a chunk whose text changed meanwhile stays queued
            done = [r for r, th, _ in items if int(r) not in live or live[int(r)][1] == th]
            gone = conn.execute(
                "DELETE FROM embed_queue WHERE chunk_rowid = ANY(%s) RETURNING ns_id", ([int(r) for r in done],)
            ).fetchall()
            unqueued = Counter(int(r[0]) for r in gone)
            for ns in sorted(unqueued):  # in namespace order, as every writer locks them
                conn.execute("UPDATE namespace_stats SET n_pending = n_pending - %s WHERE ns_id=%s", (unqueued[ns], ns))
            rows: list[tuple[int, int, np.ndarray]] = []
            by_ns: dict[int, list[int]] = {}
            for rid, th, vec in items:
                got = live.get(int(rid))
                if got is None or got[1] != th:
                    continue
                v = np.asarray(vec, np.float32).ravel()
                if dim and v.shape[0] != dim:
                    raise ValidationError(f"vector for chunk {rid} has dimension {v.shape[0]}, the store's is {dim}")
                rows.append((int(rid), got[0], v))
                by_ns.setdefault(got[0], []).append(int(rid))
            conn.execute("DELETE FROM vectors WHERE chunk_rowid = ANY(%s)", ([r[0] for r in rows],))  # re-embedding
            with conn.cursor() as cur:
                _copy_vectors_binary(cur, rows)
            names = dict(conn.execute("SELECT id, name FROM namespaces WHERE id = ANY(%s)", (list(by_ns),)).fetchall())
            for ns in sorted(by_ns):
                self._changed(conn, names[ns], ns, "vec_version", by_ns[ns], [], res)
        return res

    # ------------------------------------------------------------------ versions and bulk reads
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

    def load_vectors(
        self, namespace: str, alloc: Callable[[int, int], np.ndarray] | None = None
    ) -> tuple[int, np.ndarray, np.ndarray]:
        ns = self.namespace_id(namespace)
        dim = self.embedder_info()[1] or 0
        if ns is None:
            return 0, np.zeros(0, np.int64), np.zeros((0, dim), np.float32)
        with self.snapshot() as db:
            version = int(
                _one(db.execute("SELECT vec_version FROM namespace_stats WHERE ns_id=?", (ns,)).fetchone())[0]
            )
            ids, m = _vectors_binary(
                db.conn, "SELECT chunk_rowid, embedding FROM vectors WHERE ns_id=%s ORDER BY chunk_rowid", (ns,)
            )
        if not len(ids):
            return version, np.zeros(0, np.int64), np.zeros((0, dim), np.float32)
        if alloc is not None:  # this backend's dense leg is pgvector's: no large local load to spare
            out = alloc(*m.shape)
            out[:] = m
            m = out
        return version, ids, m

    def vectors_for(self, rowids: Sequence[int], namespace: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        ns = self._scope(namespace)
        where, params = _by_ids("chunk_rowid", ns, [] if ns == -1 else rowids)
        with self._conn() as conn:
            return _vectors_binary(
                conn, f"SELECT chunk_rowid, embedding FROM vectors WHERE {where} ORDER BY chunk_rowid", params
            )

    # ------------------------------------------------------------------ the legs, in SQL
    def search_legs(self) -> "PostgresLegs":
        """The BM25 and dense legs of this store, run in SQL (see :class:`PostgresLegs`)."""
        return PostgresLegs(self)

    @staticmethod
    def _where(scope: Allowed | Filter | None) -> tuple[str, list[Any]]:
        """A filter's WHERE fragment over ``d.metadata`` (the chunk's document, joined as
        :data:`_DOC_JOIN`): compiled once per query (``Allowed.sql``), or here for a bare filter."""
        if isinstance(scope, Allowed):
            if scope.sql is not None:
                return scope.sql[0], list(scope.sql[1])
            scope = scope.flt
        return to_pg_sql(scope, "d.metadata")

    def search_sparse(
        self, namespace: str, tokens: Sequence[str], flt: Allowed | Filter | None, k: int
    ) -> list[tuple[int, float]]:
        """Top-k (rowid, BM25) among chunks holding a query term and passing the filter (a pre-filter:
        statistics are the namespace's, ranking is among allowed chunks). Ties go to the lower rowid."""
        ns = self.namespace_id(namespace)
        terms = list(dict.fromkeys(tokens))
        if ns is None or not terms or k <= 0:
            return []
        where, fparams = self._where(flt)
        join = f"JOIN chunks c ON c.id = p.chunk_rowid {_DOC_JOIN} AND {where}" if flt is not None else ""
        # statistics and idf once per query (materialized), then float8 arithmetic per posting:
        # tf·(k1+1) / (tf + k1·(1−b) + (k1·b/avgdl)·dl) is the BM25 term weight rearranged
        sql = f"""
            WITH s AS MATERIALIZED (
                     SELECT n_chunks::float8 AS n,
                            {K1}::float8 * (1.0::float8 - {B}::float8) AS c1,
                            {K1}::float8 * {B}::float8 / NULLIF(total_len::float8 / NULLIF(n_chunks, 0), 0) AS c2
                     FROM namespace_stats WHERE ns_id = %s),
                 w AS MATERIALIZED (
                     SELECT d.term, CASE WHEN x.idf > 0 THEN x.idf ELSE {BM25_IDF_FLOOR}::float8 END AS idf
                     FROM term_df d CROSS JOIN s,
                          LATERAL (SELECT ln((s.n - d.df::float8 + 0.5::float8) / (d.df::float8 + 0.5::float8)) AS idf) x
                     WHERE d.ns_id = %s AND d.term = ANY(%s))
            SELECT p.chunk_rowid,
                   sum(w.idf * p.tf::float8 * {K1 + 1.0}::float8 / (p.tf::float8 + s.c1 + s.c2 * p.dl::float8)) AS score
            FROM w JOIN postings p ON p.ns_id = %s AND p.term = w.term CROSS JOIN s {join}
            GROUP BY p.chunk_rowid ORDER BY score DESC, p.chunk_rowid LIMIT %s"""
        with self._conn() as conn:
            rows = conn.execute(sql, [ns, ns, terms, ns, *fparams, k]).fetchall()
        return [(int(r), float(s)) for r, s in rows]

    def doc_freqs(self, namespace: str, terms: Sequence[str]) -> tuple[int, dict[str, int]]:
        """(n_chunks, {term: df}) from the namespace's statistics, what :meth:`search_sparse` scores with."""
        ns = self.namespace_id(namespace)
        if ns is None:
            return 0, {}
        with self._conn() as conn:
            row = conn.execute("SELECT n_chunks FROM namespace_stats WHERE ns_id=%s", (ns,)).fetchone()
            rows = (
                conn.execute(
                    "SELECT term, df FROM term_df WHERE ns_id=%s AND term = ANY(%s) AND df > 0",
                    (ns, list(dict.fromkeys(terms))),
                ).fetchall()
                if terms
                else []
            )
        return (int(row[0]) if row else 0), {str(t): int(n) for t, n in rows}

    def holding(self, namespace: str, terms: Sequence[str], rowids: Sequence[int]) -> set[int]:
        """The chunks among ``rowids`` holding at least one of ``terms`` (index look-ups in the postings'
        primary key, one per term and chunk)."""
        ns = self.namespace_id(namespace)
        if ns is None or not terms or not rowids:
            return set()
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT DISTINCT p.chunk_rowid FROM unnest(%s::text[]) t(term) JOIN postings p "
                "ON p.ns_id = %s AND p.term = t.term AND p.chunk_rowid = ANY(%s)",
                (list(dict.fromkeys(terms)), ns, [int(r) for r in rowids]),
            ).fetchall()
        return {int(r[0]) for r in rows}

    def search_dense(
        self, namespace: str, q: np.ndarray, flt: Allowed | Filter | None, k: int, *, exact: bool = False
    ) -> list[tuple[int, float]]:
        """Top-k (rowid, cosine similarity) by the HNSW index with iterative scans under the filter;
        exact when the index returns fewer than ``k`` rows while more rows pass the filter (or when
        asked: ``migrate`` verifies against an exact scan)."""
        ns = self.namespace_id(namespace)
        if ns is None or k <= 0:
            return []
        where, fparams = self._where(flt)
        join = f"JOIN chunks c ON c.id = v.chunk_rowid {_DOC_JOIN} AND {where}" if flt is not None else ""
        qv = _vec_text(np.asarray(q, np.float32).ravel())
        head = f"SELECT v.chunk_rowid, v.embedding <=> %s::vector AS d FROM vectors v {join} WHERE v.ns_id = %s "
        sql = head + "ORDER BY v.embedding <=> %s::vector LIMIT %s"
        # exact: ordered by an expression the HNSW index does not serve, so the planner scans the
        # namespace's rows through its ns_id index and sorts them. (Turning index scans off instead
        # also turned off that index: every exact query of a small namespace scanned every
        # namespace's vectors — 41 vs 11 ms p50 with 1,000 namespaces, bench/namespaces.py.)
        sql_exact = head + "ORDER BY (v.embedding <=> %s::vector) + 0 LIMIT %s"
        params = [qv, *fparams, ns, qv, k]
        with self._conn() as conn, conn.transaction():
            if not exact and self.exact_threshold > 0:
                version = _one(
                    conn.execute("SELECT vec_version FROM namespace_stats WHERE ns_id=%s", (ns,)).fetchone()
                )[0]
                cached = self._vcount.get(ns)
                if cached is None or cached[0] != version:
                    n_vec = _one(conn.execute("SELECT count(*) FROM vectors WHERE ns_id=%s", (ns,)).fetchone())[0]
                    cached = self._vcount[ns] = (version, int(n_vec))
                exact = cached[1] < self.exact_threshold
            conn.execute(f"SET LOCAL hnsw.ef_search = {max(self.hnsw_ef_search, min(int(k), 1000))}")
            conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            rows = conn.execute(sql_exact if exact else sql, params).fetchall()
            if len(rows) < k and not exact:
                n = _one(
                    conn.execute(f"SELECT count(*) FROM vectors v {join} WHERE v.ns_id = %s", [*fparams, ns]).fetchone()
                )[0]
                if n > len(rows):  # the index scan gave up early: exact scan over the allowed rows
                    rows = conn.execute(sql_exact, params).fetchall()
        rows.sort(key=lambda r: (r[1], r[0]))  # relaxed order: re-sort exactly
        return [(int(r), 1.0 - float(d)) for r, d in rows]

    # ------------------------------------------------------------------ reads
    def bm25(self, namespace: str, tokens: Sequence[str], flt: Filter | None, k: int) -> list[tuple[int, float]]:
        return self.search_sparse(namespace, tokens, flt, k)

    def filter_rowids(
        self, namespace: str, flt: Allowed | Filter | None, among: Iterable[int] | None = None
    ) -> np.ndarray:
        ns = self.namespace_id(namespace)
        if ns is None:
            return np.zeros(0, np.int64)
        where, params = self._where(flt)
        if among is not None:
            where, params = f"{where} AND c.id = ANY(%s)", [*params, [int(r) for r in among]]
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT c.id FROM chunks c {_DOC_JOIN} WHERE c.ns_id=%s AND {where} ORDER BY c.id", [ns, *params]
            ).fetchall()
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

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

    def chunk_langs(self, namespace: str, rowids: Sequence[int]) -> dict[int, str | None]:
        ns = self.namespace_id(namespace)
        if ns is None:
            return {}
        with self._conn() as conn:
            return dict(
                conn.execute(
                    "SELECT id, lang FROM chunks WHERE ns_id=%s AND id = ANY(%s)", (ns, list(rowids))
                ).fetchall()
            )

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

    def chunk_count(self, namespace: str) -> int:
        """The namespace's chunks, from its statistics row (kept in each write transaction)."""
        ns = self.namespace_id(namespace)
        if ns is None:
            return 0
        with self._conn() as conn:
            return int(_one(conn.execute("SELECT n_chunks FROM namespace_stats WHERE ns_id=%s", (ns,)).fetchone())[0])

    def check(self) -> dict[str, Any]:
        """Not for a database server (``capabilities.file_checks`` is False): use ``integrity_check``."""
        raise StoreError("a PostgreSQL store has no file to check: `hybridmem check` runs integrity_check on it")

    def backup(self, dest: str | Path) -> dict[str, Any]:
        """Not for a database server (``capabilities.file_checks`` is False): use pg_dump or ``export``."""
        raise StoreError("a PostgreSQL store is backed up with pg_dump (or copied with `hybridmem migrate`)")

    def integrity_check(self) -> str:
        """``ok``, or what is inconsistent: chunk statistics, document frequencies, postings, and
        chunks with neither a vector nor a queue entry."""
        problems: list[str] = []
        with self.snapshot() as db:
            for ns, name in db.execute("SELECT id, name FROM namespaces ORDER BY id").fetchall():
                n, total = _one(
                    db.execute("SELECT n_chunks, total_len FROM namespace_stats WHERE ns_id=?", (ns,)).fetchone()
                )
                cn, ct = _one(
                    db.execute(
                        "SELECT count(*), coalesce(sum(n_tokens), 0) FROM chunks WHERE ns_id=?", (ns,)
                    ).fetchone()
                )
                if (n, total) != (cn, ct):
                    problems.append(f"{name}: BM25 statistics say {n} chunks / {total} tokens, chunks hold {cn} / {ct}")
                bad_df = _one(
                    db.execute(
                        "SELECT count(*) FROM (SELECT term, count(*) AS n FROM postings WHERE ns_id=? GROUP BY term) p "
                        "FULL JOIN (SELECT term, df FROM term_df WHERE ns_id=?) d ON d.term = p.term "
                        "WHERE p.n IS DISTINCT FROM d.df",
                        (ns, ns),
                    ).fetchone()
                )[0]
                if bad_df:
                    problems.append(f"{name}: {bad_df} terms with a wrong document frequency")
                orphan = _one(
                    db.execute(
                        "SELECT count(*) FROM postings p WHERE p.ns_id=? AND NOT EXISTS "
                        "(SELECT 1 FROM chunks c WHERE c.id = p.chunk_rowid AND c.ns_id = p.ns_id)",
                        (ns,),
                    ).fetchone()
                )[0]
                if orphan:
                    problems.append(f"{name}: {orphan} postings of missing chunks")
                lost = _one(
                    db.execute(
                        "SELECT count(*) FROM chunks c WHERE c.ns_id=? AND NOT EXISTS "
                        "(SELECT 1 FROM vectors v WHERE v.chunk_rowid = c.id) AND NOT EXISTS "
                        "(SELECT 1 FROM embed_queue q WHERE q.chunk_rowid = c.id)",
                        (ns,),
                    ).fetchone()
                )[0]
                if lost:
                    problems.append(f"{name}: {lost} chunks with neither a vector nor a queue entry")
        return "ok" if not problems else "; ".join(problems)

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

    def __del__(self) -> None:  # pragma: no cover - best effort
        try:
            self.close()
        except Exception:
            pass


class PostgresLegs:
    """The legs of the PostgreSQL backend (the ``Legs`` protocol of ``hybridmem.retrieve``): BM25
    from the store's own postings and pgvector HNSW, both in SQL, the filter compiled once per query
    into the WHERE fragment every leg joins on. No in-process index, so nothing to keep in step."""

    def __init__(self, store: PostgresStore) -> None:
        self.store = store

    def prepare(self, namespace: str, mode: str) -> None:
        return None

    def allowed(self, namespace: str, flt: Filter) -> Allowed:
        return Allowed(flt, sql=to_pg_sql(flt, "d.metadata"))

    def allowed_rowids(self, namespace: str, allowed: Allowed) -> np.ndarray:
        return allowed.rowids if allowed.rowids is not None else self.store.filter_rowids(namespace, allowed)

    def sparse(self, namespace: str, terms: Sequence[str], allowed: Allowed | None, k: int) -> list[tuple[int, float]]:
        return self.store.search_sparse(namespace, terms, allowed, k) if terms else []

    def dense(
        self, namespace: str, text: str, encoder: Any, allowed: Allowed | None, k: int
    ) -> list[tuple[int, float]]:
        if self.store.vector_version(namespace) == 0:
            return []  # nothing ever embedded in this namespace: do not even load the model
        q = encoder.vector(text)
        _, dim = self.store.embedder_info_cached()  # no round trip per query
        if dim and q.shape[0] != dim:
            raise EmbedderMismatchError(self.store.embedder_info()[0] or "?", dim, encoder.name, q.shape[0])
        return self.store.search_dense(namespace, q, allowed, k)

    def holding(self, namespace: str, terms: Sequence[str], rowids: Sequence[int]) -> set[int]:
        return self.store.holding(namespace, terms, rowids)

    def doc_freqs(self, namespace: str, terms: Sequence[str]) -> tuple[int, dict[str, int]]:
        return self.store.doc_freqs(namespace, terms)

    def commit(self, write: Callable[[], WriteResult]) -> WriteResult:
        return write()

    def wait_ready(self, namespace: str, timeout: float | None = None) -> bool:
        return True  # the server keeps its indexes

    def dense_kind(self, namespace: str, n_vectors: int) -> str:
        return "pgvector-hnsw" if n_vectors >= self.store.exact_threshold else "exact"

    def reset_dense(self) -> None:
        return None

    def close(self) -> None:
        return None
