"""The embedded store: one SQLite file, WAL, numbered migrations, FTS5 BM25 per namespace.

Every write (chunks, BM25 postings, vectors, embedding queue) happens in one transaction, so a crash
leaves either the old or the new state. Namespaces get their own FTS5 table: BM25 statistics and
postings of one tenant never mix with another's.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from .. import deadline
from ..errors import NotFoundError, StoreError, ValidationError
from ..filters import Filter
from ..text.tokenize import TOKEN_CHARS, TOKENIZER_VERSION
from .base import (
    DOCUMENT_COLUMNS,
    META_JSON,
    Capabilities,
    ChunkRow,
    PreparedDocument,
    WriteResult,
    document_record,
    plan_writes,
)
from .sql import changelog as changelog_sql
from .sql import history as history_sql
from .sql.filters import to_sql
from .sql.graph import delete_graph_provenance, graph_tables

__all__ = ["SQLiteStore", "SCHEMA_VERSION"]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def _script(db: sqlite3.Connection, sql: str) -> None:
    # statement by statement: executescript() would COMMIT the migration's transaction
    for stmt in sql.split(";"):
        if stmt.strip():
            db.execute(stmt)


#: every namespace's ``n_pending`` counted afresh (the migration, a reset of every vector)
PENDING_RECOUNT = (
    "UPDATE namespaces SET n_pending = (SELECT count(*) FROM embed_queue q CROSS JOIN chunks c "
    "ON c.id = q.chunk_rowid WHERE c.ns_id = namespaces.id)"
)


def _m1(db: sqlite3.Connection) -> None:
    _script(
        db,
        """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE namespaces (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            created_at TEXT NOT NULL,
            vec_version INTEGER NOT NULL DEFAULT 0
        );
        CREATE TABLE documents (
            ns_id INTEGER NOT NULL REFERENCES namespaces(id),
            doc_id TEXT NOT NULL,
            source TEXT,
            metadata TEXT NOT NULL DEFAULT '{}',
            content_hash TEXT NOT NULL,
            n_chunks INTEGER NOT NULL,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (ns_id, doc_id)
        );
        CREATE TABLE chunks (
            id INTEGER PRIMARY KEY,
            ns_id INTEGER NOT NULL REFERENCES namespaces(id),
            chunk_id TEXT NOT NULL,
            doc_id TEXT NOT NULL,
            ord INTEGER NOT NULL,
            text TEXT NOT NULL,
            text_hash TEXT NOT NULL,
            lang TEXT,
            source TEXT,
            metadata TEXT NOT NULL DEFAULT '{}',
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            UNIQUE (ns_id, chunk_id)
        );
        CREATE INDEX chunks_by_doc ON chunks (ns_id, doc_id);
        CREATE TABLE vectors (chunk_rowid INTEGER PRIMARY KEY, vec BLOB NOT NULL);
        CREATE TABLE embed_queue (chunk_rowid INTEGER PRIMARY KEY, enqueued_at TEXT NOT NULL);
        CREATE TABLE metadata_keys (ns_id INTEGER NOT NULL, key TEXT NOT NULL, PRIMARY KEY (ns_id, key));
        """,
    )


def _m2(db: sqlite3.Connection) -> None:
    # a counter bumped by every write that adds or removes chunks: in-memory BM25 indexes follow it
    db.execute("ALTER TABLE namespaces ADD COLUMN chunk_version INTEGER NOT NULL DEFAULT 0")


def _m3(db: sqlite3.Connection) -> None:
    # the GraphRAG layer (hybridmem.graph): entities and relations with their provenance (chunk
    # rowids), the chunks already extracted, and communities with their summaries. Every row carries
    # its namespace; provenance rows are deleted with their chunk (see _delete_chunk_rows)
    _script(db, graph_tables("sqlite"))


HISTORY_COLUMNS_SQL = """
    ALTER TABLE documents ADD COLUMN occurred_at REAL;
    ALTER TABLE documents ADD COLUMN recorded_at REAL;
    ALTER TABLE documents ADD COLUMN valid_to REAL;
    ALTER TABLE documents ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
    ALTER TABLE documents ADD COLUMN head_id TEXT;
    ALTER TABLE documents ADD COLUMN mem_key TEXT;
    ALTER TABLE documents ADD COLUMN change_reason TEXT;
    ALTER TABLE chunks ADD COLUMN context TEXT;
    CREATE INDEX documents_by_time ON documents (ns_id, occurred_at);
    CREATE INDEX documents_by_head ON documents (ns_id, head_id) WHERE head_id IS NOT NULL;
    CREATE INDEX documents_by_key ON documents (ns_id, mem_key) WHERE mem_key IS NOT NULL;
    CREATE INDEX documents_retired ON documents (ns_id, valid_to) WHERE valid_to IS NOT NULL;
    CREATE INDEX documents_by_turn ON documents
        (ns_id, json_extract(metadata, '$.session_id'), json_extract(metadata, '$.turn'))
"""


def _m4(db: sqlite3.Connection) -> None:
    # metadata lives once per document (it was copied into every chunk: a document of 200 chunks
    # with 16 KiB of metadata stored 3.2 MB); filters join a chunk to its document
    db.execute("ALTER TABLE chunks DROP COLUMN metadata")


def _m5(db: sqlite3.Connection) -> None:
    # time and versions of a memory (store/history_sql.py): existing documents occurred and were
    # recorded when they were created
    _script(db, HISTORY_COLUMNS_SQL)
    db.execute(
        "UPDATE documents SET occurred_at = (julianday(created_at) - 2440587.5) * 86400.0, "
        "recorded_at = (julianday(updated_at) - 2440587.5) * 86400.0"
    )


def _m6(db: sqlite3.Connection) -> None:
    # the change log of each namespace's chunks (store/changelog_sql.py): another process replays
    # the writes it did not make instead of reloading every chunk's tokens
    db.execute(changelog_sql.table_sql("BLOB") + " WITHOUT ROWID")


def _m7(db: sqlite3.Connection) -> None:
    # the change log of each namespace's vectors: another process's embeddings are applied to the
    # loaded dense index instead of reloading (and re-indexing) every vector
    db.execute(changelog_sql.table_sql("BLOB", "vec_log") + " WITHOUT ROWID")


def _m8(db: sqlite3.Connection) -> None:
    # each namespace's BM25 token streams in a plain table (tokens_{ns}): the FTS5 table that held
    # them was indexed on every write (its inverted index was 45 % of a bulk ingest's SQL time) and
    # read only as a reference scorer, which now builds it on demand (``SQLiteStore.bm25``)
    for (ns,) in db.execute("SELECT id FROM namespaces").fetchall():
        db.execute(_TOKENS_TABLE.format(table=_tokens(ns)))
        db.execute(f"INSERT INTO {_tokens(ns)} (rowid, tokens) SELECT rowid, tokens FROM fts_{int(ns)}")
        db.execute(f"DROP TABLE fts_{int(ns)}")


def _provenance_keyed_by_namespace(table: str, parent_key: str, parent: str, value: str) -> str:
    """SQL rebuilding a graph provenance table (``parent_key`` → ``parent``, a chunk, a ``value``)
    keyed by (ns_id, parent_key, chunk_rowid), each row given its parent's namespace."""
    name, _ = value.split(" ", 1)
    return f"""
        CREATE TABLE {table}_v9 (
            {parent_key} INTEGER NOT NULL REFERENCES {parent}(id) ON DELETE CASCADE,
            chunk_rowid INTEGER NOT NULL,
            {value},
            ns_id INTEGER NOT NULL,
            PRIMARY KEY (ns_id, {parent_key}, chunk_rowid)
        );
        INSERT INTO {table}_v9 SELECT t.{parent_key}, t.chunk_rowid, t.{name}, p.ns_id
            FROM {table} t JOIN {parent} p ON p.id = t.{parent_key};
        DROP TABLE {table};
        ALTER TABLE {table}_v9 RENAME TO {table};
        CREATE INDEX {table}_by_chunk ON {table} (chunk_rowid);
        CREATE INDEX {table}_by_{parent_key.removesuffix("_id")} ON {table} ({parent_key});
    """


def _m9(db: sqlite3.Connection) -> None:
    # the graph's provenance rows carry their namespace and are keyed by it, as on PostgreSQL,
    # where the keys must hold ns_id for a distributed database (docs/scaling.md): one graph SQL
    # for both stores. SQLite cannot change a primary key in place: the three tables are rebuilt
    _script(
        db,
        _provenance_keyed_by_namespace(
            "graph_mentions", "entity_id", "graph_entities", "count INTEGER NOT NULL DEFAULT 1"
        )
        + _provenance_keyed_by_namespace(
            "graph_relation_sources", "relation_id", "graph_relations", "weight REAL NOT NULL DEFAULT 1.0"
        )
        + """
        CREATE TABLE graph_chunks_v9 (
            chunk_rowid INTEGER NOT NULL,
            ns_id INTEGER NOT NULL,
            extractor TEXT NOT NULL,
            extracted_at TEXT NOT NULL,
            PRIMARY KEY (ns_id, chunk_rowid)
        );
        INSERT INTO graph_chunks_v9 SELECT chunk_rowid, ns_id, extractor, extracted_at FROM graph_chunks;
        DROP TABLE graph_chunks;
        ALTER TABLE graph_chunks_v9 RENAME TO graph_chunks;
        CREATE INDEX graph_chunks_by_rowid ON graph_chunks (chunk_rowid)
        """,
    )


def _m10(db: sqlite3.Connection) -> None:
    # each namespace's count of chunks waiting for a vector, kept by every write that queues or
    # unqueues: counting the queue was O(backlog) on every hybrid query and every ingest call
    # (0.46 s at 1.9M chunks queued, a bulk load's write rate falling from 6,000 to 1,600 chunks/s)
    if "n_pending" not in {r[1] for r in db.execute("PRAGMA table_info(namespaces)")}:
        db.execute("ALTER TABLE namespaces ADD COLUMN n_pending INTEGER NOT NULL DEFAULT 0")
    db.execute(PENDING_RECOUNT)


#: numbered schema migrations; index i upgrades user_version i to i + 1
MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [_m1, _m2, _m3, _m4, _m5, _m6, _m7, _m8, _m9, _m10]
SCHEMA_VERSION = len(MIGRATIONS)
_FTS_TOKENIZE = f"unicode61 remove_diacritics 0 tokenchars '{TOKEN_CHARS}'"


#: a chunk's document, where its metadata is (the primary key of documents answers it)
_DOC_JOIN = "JOIN documents d ON d.ns_id = c.ns_id AND d.doc_id = c.doc_id"
#: the text a chunk's vector is of: its index-only context (Document.context), then its text
EMBED_TEXT = "CASE WHEN c.context IS NULL THEN c.text ELSE c.context || char(10) || c.text END"
#: a chunk's times and version, from its document (``ChunkRow``'s last fields)
_TIME_COLUMNS = "d.occurred_at, d.recorded_at, d.valid_to, d.version"


def _visible(as_of: float | None, mark: str = "?") -> tuple[str, list[float]]:
    """The versions visible now, or as the memory stood at ``as_of`` (store/history_sql.py)."""
    if as_of is None:
        return "d.valid_to IS NULL", []
    return f"d.recorded_at <= {mark} AND (d.valid_to IS NULL OR d.valid_to > {mark})", [as_of, as_of]


#: pages the write-ahead log holds before the writer copies it into the file (40 MB of 4 KiB pages)
WAL_CHECKPOINT_PAGES = 10_000


def _select_in(db: sqlite3.Connection, sql: str, ids: Sequence[Any], head: tuple[Any, ...] = ()) -> Iterator[Any]:
    """The rows of ``sql`` for ``ids``, asked in parts of 500 (within SQLite's limit of bound
    variables): ``{marks}`` in ``sql`` is one part's placeholders, ``head`` the parameters before them."""
    for i in range(0, len(ids), 500):
        part = ids[i : i + 500]
        yield from db.execute(sql.format(marks=",".join("?" * len(part))), (*head, *part))


def _tokens(ns_id: int) -> str:
    """A namespace's BM25 token streams: (rowid of the chunk, its space-joined tokens)."""
    return f"tokens_{int(ns_id)}"


_TOKENS_TABLE = "CREATE TABLE {table} (rowid INTEGER PRIMARY KEY, tokens TEXT NOT NULL)"


def _fts(ns_id: int) -> str:
    """The FTS5 reference index of a namespace's tokens (in a read connection's temp schema)."""
    return f"fts_{int(ns_id)}"


def _fts_query(tokens: Sequence[str]) -> str:
    # every term is a quoted FTS5 string: no user text can reach FTS5 query syntax
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in tokens)


#: vectors per fetch of a whole namespace's load (``load_vectors``): ~12 MB at 384 dimensions
LOAD_BATCH = 8192


@dataclass
class _Changes:
    """What one write changed, for the version counters and the change log (``_log_changes``)."""

    added_vecs: list[int] = field(default_factory=list)
    removed_vecs: list[int] = field(default_factory=list)
    added_chunks: list[int] = field(default_factory=list)
    removed_chunks: list[int] = field(default_factory=list)
    retired: list[int] = field(default_factory=list)
    keys: set[str] = field(default_factory=set)


@dataclass
class _Rows:
    """The rows a write inserts, written table by table with one ``executemany`` each (per-row
    statements were most of a bulk ingest's SQL time). Chunk rowids are given here, as SQLite would
    (the largest + 1), so that the tokens, vectors and queue rows can name them before the insert."""

    next_id: int
    documents: list[tuple[Any, ...]] = field(default_factory=list)
    chunks: list[tuple[Any, ...]] = field(default_factory=list)
    tokens: list[tuple[int, str]] = field(default_factory=list)
    vectors: list[tuple[int, bytes]] = field(default_factory=list)
    queue: list[tuple[int, str]] = field(default_factory=list)

    def flush(self, db: sqlite3.Connection, ns: int) -> None:
        tokens = _tokens(ns)
        if self.documents:
            db.executemany(
                "INSERT INTO documents (ns_id, doc_id, source, metadata, content_hash, n_chunks, created_at, "
                "updated_at, occurred_at, recorded_at, version, mem_key, change_reason) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                self.documents,
            )
        if self.chunks:
            db.executemany(
                "INSERT INTO chunks (id, ns_id, chunk_id, doc_id, ord, text, text_hash, lang, source,"
                " created_at, updated_at, context) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                self.chunks,
            )
        if self.tokens:
            db.executemany(f"INSERT INTO {tokens} (rowid, tokens) VALUES (?, ?)", self.tokens)
        if self.vectors:
            db.executemany("INSERT INTO vectors VALUES (?, ?)", self.vectors)
        if self.queue:
            db.executemany("INSERT INTO embed_queue VALUES (?, ?)", self.queue)
            db.execute("UPDATE namespaces SET n_pending = n_pending + ? WHERE id=?", (len(self.queue), ns))
        for rows in (self.documents, self.chunks, self.tokens, self.vectors, self.queue):
            rows.clear()


class SQLiteStore(changelog_sql.ChangeLogReads):
    """Thread-safe: one serialized writer connection, one reader connection per thread (WAL)."""

    schema_version = 0  # set below, once the migrations are listed
    #: where each namespace's versions and counts live (changelog_sql reads them there)
    counters = ("namespaces", "id")
    #: the legs run over in-process indexes loaded from this store (see ``Memory``), not in SQL
    native_search = False

    @property
    def capabilities(self) -> Capabilities:
        """An SQLite file: every leg in process, index snapshots beside the file, ``check``/``backup``."""
        file = self.path if self.path != ":memory:" else None
        return Capabilities(backend="sqlite", read_only=self.read_only, file=file, file_checks=True)

    def __init__(self, path: str | Path, *, create: bool = True, read_only: bool = False, verify: bool = True) -> None:
        """Open (or, with ``create``, start) the store at ``path``. An existing file is checked first
        (``PRAGMA quick_check``, once per process and file state; ``verify=False`` skips it, as
        ``hybridmem check`` does to report every problem itself). ``read_only`` opens it for reads
        only; a file or directory this process may not write is opened so without being asked."""
        self.path = str(path)
        #: the file SQLite opens: the path, or for ":memory:" a private temporary file removed at
        #: close (every thread's connection must see one database; SQLite's own ":memory:" gives
        #: each connection its own, empty one)
        self._db_path = self.path
        self._tmpdir: str | None = None
        if self.path == ":memory:":
            self._tmpdir = tempfile.mkdtemp(prefix="hybridmem-memory-")
            self._db_path = os.path.join(self._tmpdir, "memory.db")
            weakref.finalize(self, shutil.rmtree, self._tmpdir, True)
        p = Path(self.path)
        if self.path != ":memory:":
            if not p.exists():
                if not create or read_only:
                    raise NotFoundError(f"no memory store at {p}")
                p.parent.mkdir(parents=True, exist_ok=True)
            elif p.is_dir():
                raise StoreError(f"{p} is a directory, not a memory store file")
            elif self._empty_file(p) and (not create or read_only or not os.access(p, os.W_OK)):
                raise NotFoundError(
                    f"{p} is an empty file (0 bytes), not a memory store: to start a new store there, ingest "
                    f"into it (`hybridmem --db {p} ingest PATH`, or Memory(path, create=True)); else pass the "
                    "right --db"
                )
        self._local = threading.local()
        self._wlock = threading.RLock()
        #: a store opened for reads only (``self._uri``: how), and why: a write raises a StoreError saying so
        self.read_only = False
        self._read_only_reason = ""
        self._uri = self._read_only_uri(read_only)
        self._precheck()
        self._w = self._connect()
        try:
            if verify:
                self._verify_once()
            self._migrate()
            if self._uri is None:
                # the write-ahead log is copied into the file every WAL_CHECKPOINT_PAGES pages, not
                # every 1,000 (SQLite's default: a third of a bulk ingest's write time went to those
                # checkpoints and their fsyncs); past a checkpoint the log file is cut back to 64 MB
                self._w.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_PAGES}")
                self._w.execute(f"PRAGMA journal_size_limit={64 * 2**20}")
        except BaseException:
            self._w.close()  # a refused file keeps no handle (and grows no -wal/-shm beside it)
            raise
        self._ns_cache: dict[str, int] = {}

    def _precheck(self) -> None:
        """A read-only look at an existing file before anything may change it (switching to WAL
        rewrites the header): a corrupt or foreign file is refused exactly as it was."""
        p = Path(self.path)
        if self.path == ":memory:" or not p.is_file() or p.stat().st_size == 0:
            return
        try:
            # immutable: no lock, no -wal/-shm created next to a file that may not be ours (with a
            # WAL present the store is in use: read it through the WAL)
            has_wal = Path(self.path + "-wal").exists()
            db = sqlite3.connect(f"{p.resolve().as_uri()}?{'mode=ro' if has_wal else 'immutable=1'}", uri=True)
            try:
                version = db.execute("PRAGMA user_version").fetchone()[0]
                tables = db.execute("SELECT count(*) FROM sqlite_master WHERE type='table'").fetchone()[0]
                # without a WAL beside it, the file holds every page its header counts
                expected = db.execute("PRAGMA page_count").fetchone()[0] * db.execute("PRAGMA page_size").fetchone()[0]
            finally:
                db.close()
        except sqlite3.DatabaseError as e:
            raise self._open_error(e) from None
        if version == 0 and tables:
            raise StoreError(f"{self.path} is an SQLite file but not a hybridmem store")
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} has schema version {version}, newer than this hybridmem ({SCHEMA_VERSION}): upgrade"
            )
        size = p.stat().st_size
        if not has_wal and size < expected:
            raise StoreError(
                f"{self.path} is not a hybridmem store: truncated or corrupt ({size} bytes, its header "
                f"counts {expected})"
            )

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

    def _migrate(self) -> None:
        with self._wlock:
            db = self._w
            version = db.execute("PRAGMA user_version").fetchone()[0]
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if version == 0 and tables:
                raise StoreError(f"{self.path} is an SQLite file but not a hybridmem store")
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path} has schema version {version}, newer than this hybridmem ({SCHEMA_VERSION}): upgrade"
                )
            if self.read_only and version < SCHEMA_VERSION:
                raise StoreError(
                    f"the store {self.path} is read-only: {self._read_only_reason}; and it has schema version "
                    f"{version}, older than this hybridmem's ({SCHEMA_VERSION}): open it once with write access to "
                    "upgrade it"
                )
            try:
                for i in range(version, SCHEMA_VERSION):
                    db.execute("BEGIN IMMEDIATE")
                    MIGRATIONS[i](db)
                    db.execute(f"PRAGMA user_version={i + 1}")
                    db.execute("COMMIT")
            except sqlite3.DatabaseError as e:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise StoreError(f"migrating {self.path} failed: {e}") from e
            stored = self._meta_get(db, "tokenizer_version")
            # read-only: BM25 keeps the terms of the tokenizer that wrote it (re-tokenizing is a write)
            if stored != TOKENIZER_VERSION and not self.read_only:
                self._set_meta("tokenizer_version", TOKENIZER_VERSION)
                if stored is not None:
                    self.reindex_sparse()

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
        def __init__(self, db: sqlite3.Connection) -> None:
            self.db = db

        def __enter__(self) -> sqlite3.Connection:
            self.db.execute("BEGIN IMMEDIATE")
            return self.db

        def __exit__(self, exc_type: Any, *_: Any) -> None:
            if exc_type is None:
                self.db.execute("COMMIT")
            else:
                self.db.execute("ROLLBACK")

    @contextmanager
    def write_transaction(self) -> Iterator[sqlite3.Connection]:
        """The writer lock and one write transaction (the graph layer writes through it)."""
        with self._wlock, self._tx() as db:
            yield db

    def _tx(self) -> "SQLiteStore._Tx":
        return SQLiteStore._Tx(self._w)

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """This thread's reader inside one read transaction: every statement sees one snapshot."""
        db = self.reader
        db.execute("BEGIN")
        try:
            yield db
        finally:
            db.execute("COMMIT")

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

    # ------------------------------------------------------------------ writes
    def document_hash(self, namespace: str, doc_id: str) -> str | None:
        ns = self.namespace_id(namespace)
        if ns is None:
            return None
        row = self.reader.execute(
            "SELECT content_hash FROM documents WHERE ns_id=? AND doc_id=?", (ns, doc_id)
        ).fetchone()
        return row[0] if row else None

    def document_heads(self, namespace: str, doc_ids: Sequence[str]) -> dict[str, tuple[str | None, dict[str, Any]]]:
        """(source, metadata) of the stored documents among ``doc_ids``: what a re-ingest merges
        metadata with and checks id collisions against, without reading any chunk."""
        ns = self.namespace_id(namespace)
        if ns is None:
            return {}
        sql = "SELECT doc_id, source, metadata FROM documents WHERE ns_id=? AND doc_id IN ({marks})"
        return {
            r[0]: (r[1], json.loads(r[2])) for r in _select_in(self.reader, sql, list(dict.fromkeys(doc_ids)), (ns,))
        }

    def write_documents(self, namespace: str, docs: Sequence[PreparedDocument]) -> WriteResult:
        """Insert or replace documents in one transaction. Chunks whose text did not change keep
        their vectors; other chunks are queued for embedding. A document with ``keep_history``
        retires the version it replaces (``store.history_sql``) instead of dropping it."""
        res = WriteResult()
        if not docs:
            return res
        now, at = _now(), history_sql.now_epoch()
        with self._wlock:
            try:
                with self._tx() as db:
                    ns = self.namespace_id(namespace, db, create=True)
                    assert ns is not None
                    acc = _Changes()
                    existing = self._existing(db, ns, [d.doc_id for d in docs])
                    plan = plan_writes(docs, existing, now, res)
                    replaced = set(plan.replaced)
                    # a new id continues the numbering of its retired versions; no write of this
                    # batch can retire a version of an id the store did not hold when it began
                    versions = history_sql.last_retired(
                        db, ns, [d.doc_id for d, _ in plan.writes if d.doc_id not in replaced]
                    )
                    rows = _Rows(self._next_rowid(db))
                    for d, created in plan.writes:
                        replacing = d.doc_id in replaced
                        if replacing or d.mem_key:  # reads what the batch wrote so far: write it first
                            rows.flush(db, ns)
                        version = versions.get(d.doc_id, 0) + 1
                        self._write_one(db, ns, d, created, replacing, version, (now, at), res, acc, rows)
                    rows.flush(db, ns)
                    db.executemany(
                        "INSERT OR IGNORE INTO metadata_keys VALUES (?, ?)", [(ns, k) for k in sorted(acc.keys)]
                    )
                    self._log_changes(db, namespace, ns, acc, res)
            except sqlite3.IntegrityError as e:
                raise ValidationError(f"write rejected by the store: {e}") from None
            except sqlite3.OperationalError as e:
                raise StoreError(f"write to {self.path} failed: {e}") from e
            self._ns_cache.pop(namespace, None)
        return res

    def _log_changes(self, db: sqlite3.Connection, namespace: str, ns: int, acc: "_Changes", res: WriteResult) -> None:
        """Bump the version counters and log what changed for in-process indexes and filter caches;
        a retired chunk is logged as removed and added again (its visibility changed, its rows not)."""
        if acc.added_vecs or acc.removed_vecs:
            self._changed(db, namespace, ns, "vec_version", acc.added_vecs, acc.removed_vecs, res)
        added, removed = acc.added_chunks + acc.retired, acc.removed_chunks + acc.retired
        if added or removed:
            self._changed(db, namespace, ns, "chunk_version", added, removed, res)

    @staticmethod
    def _portable(conn: sqlite3.Connection) -> Any:
        """``conn`` in the ``?`` dialect of the SQL both backends share (changelog_sql, history_sql)."""
        return conn

    def _write_one(
        self,
        db: sqlite3.Connection,
        ns: int,
        d: PreparedDocument,
        created: str,
        replacing: bool,
        version: int,
        when: tuple[str, float],
        res: WriteResult,
        acc: "_Changes",
        rows: "_Rows",
    ) -> None:
        """One document's rows, in the caller's transaction: the version it replaces dropped or
        retired, the memory holding its key retired (at once), then its document, chunks, tokens and
        vectors (into ``rows``, written by its next flush). ``version``: the document's when it is new."""
        now, at = when
        old_vecs: dict[str, bytes] = {}
        if d.mem_key:
            holder = history_sql.current_by_key(db, ns, d.mem_key)
            if holder is not None and holder != d.doc_id:
                retired = history_sql.retire(db, ns, holder, at, f"superseded by {d.doc_id} (same key)")
                acc.retired += retired[1] if retired else []
        if replacing:
            old = db.execute(
                "SELECT c.id, c.text_hash, v.vec FROM chunks c LEFT JOIN vectors v "
                "ON v.chunk_rowid = c.id WHERE c.ns_id=? AND c.doc_id=?",
                (ns, d.doc_id),
            ).fetchall()
            old_vecs = {h: v for _, h, v in old if v is not None}
            row = db.execute("SELECT version FROM documents WHERE ns_id=? AND doc_id=?", (ns, d.doc_id)).fetchone()
            version = int(row[0]) + 1 if row else 1  # (retired under its key by an earlier write of the batch: 1)
            if d.keep_history:
                retired = history_sql.retire(db, ns, d.doc_id, at, None)
                acc.retired += retired[1] if retired else []
            else:
                acc.removed_vecs += [i for i, _, v in old if v is not None]
                acc.removed_chunks += [i for i, _, _ in old]
                self._delete_chunk_rows(db, ns, [i for i, _, _ in old])
                db.execute("DELETE FROM documents WHERE ns_id=? AND doc_id=?", (ns, d.doc_id))
        meta_json = META_JSON(d.metadata) if d.metadata else "{}"
        rows.documents.append(
            (ns, d.doc_id, d.source, meta_json, d.content_hash, len(d.chunks), created, now)
            + (d.occurred_at if d.occurred_at is not None else at, at, version, d.mem_key, d.reason)
        )
        acc.keys.update(d.metadata)
        for i, (text, toks, lang, th) in enumerate(zip(d.chunks, d.tokens, d.langs, d.text_hashes), start=1):
            rid = rows.next_id
            rows.next_id += 1
            rows.chunks.append((rid, ns, d.chunk_id(i), d.doc_id, i, text, th, lang, d.source, created, now, d.context))
            rows.tokens.append((rid, toks))
            acc.added_chunks.append(rid)
            if th in old_vecs:
                rows.vectors.append((rid, old_vecs[th]))
                acc.added_vecs.append(rid)
                res.vectors_reused += 1
            else:
                rows.queue.append((rid, now))
            res.chunks_written += 1

    @staticmethod
    def _existing(db: sqlite3.Connection, ns: int, doc_ids: Sequence[str]) -> dict[str, tuple[str, str]]:
        """doc id -> (content hash, created_at) of the stored documents among ``doc_ids``."""
        sql = "SELECT doc_id, content_hash, created_at FROM documents WHERE ns_id=? AND doc_id IN ({marks})"
        return {r[0]: (r[1], r[2]) for r in _select_in(db, sql, list(dict.fromkeys(doc_ids)), (ns,))}

    @staticmethod
    def _next_rowid(db: sqlite3.Connection) -> int:
        """The rowid SQLite would give the next chunk (the largest one + 1), in the write transaction."""
        return int(db.execute("SELECT coalesce(max(id), 0) + 1 FROM chunks").fetchone()[0])

    @staticmethod
    def _bump(db: sqlite3.Connection, ns: int, column: str = "vec_version") -> int:
        assert column in ("vec_version", "chunk_version")
        db.execute(f"UPDATE namespaces SET {column} = {column} + 1 WHERE id=?", (ns,))
        return int(db.execute(f"SELECT {column} FROM namespaces WHERE id=?", (ns,)).fetchone()[0])

    @staticmethod
    def _delete_chunk_rows(db: sqlite3.Connection, ns: int, rowids: list[int]) -> None:
        """Delete chunks of namespace ``ns`` with their tokens, vectors, queue places and graph provenance."""
        tokens = _tokens(ns)
        unqueued = 0
        for i in range(0, len(rowids), 500):
            part = rowids[i : i + 500]
            q = ",".join("?" * len(part))
            delete_graph_provenance(db, part)
            db.execute(f"DELETE FROM {tokens} WHERE rowid IN ({q})", part)
            db.execute(f"DELETE FROM vectors WHERE chunk_rowid IN ({q})", part)
            unqueued += db.execute(f"DELETE FROM embed_queue WHERE chunk_rowid IN ({q})", part).rowcount
            db.execute(f"DELETE FROM chunks WHERE id IN ({q})", part)
        if unqueued:
            db.execute("UPDATE namespaces SET n_pending = n_pending - ? WHERE id=?", (unqueued, ns))

    def delete(self, namespace: str, ids: Sequence[str]) -> tuple[list[str], WriteResult]:
        """Delete documents (by doc id) or single chunks (by chunk id) from every index at once.
        Returns the ids that were found."""
        res = WriteResult()
        found: list[str] = []
        with self.write_transaction() as db:
            ns = self.namespace_id(namespace, db)
            if ns is None:
                return found, res
            removed_vecs: list[int] = []
            removed_chunks: list[int] = []
            # a hard delete removes every version of a memory (its retired ones are not reported)
            todo = [(i, True) for i in ids] + [(h, False) for i in ids for h in history_sql.history_ids(db, ns, i)]
            for ident, report in todo:
                rows = db.execute("SELECT id FROM chunks WHERE ns_id=? AND doc_id=?", (ns, ident)).fetchall()
                is_doc = (
                    bool(rows)
                    or db.execute("SELECT 1 FROM documents WHERE ns_id=? AND doc_id=?", (ns, ident)).fetchone()
                    is not None
                )
                if not is_doc:
                    rows = db.execute("SELECT id FROM chunks WHERE ns_id=? AND chunk_id=?", (ns, ident)).fetchall()
                    if not rows:
                        continue
                rowids = [r[0] for r in rows]
                if rowids:
                    q = ",".join("?" * len(rowids))
                    removed_vecs += [
                        r[0] for r in db.execute(f"SELECT chunk_rowid FROM vectors WHERE chunk_rowid IN ({q})", rowids)
                    ]
                removed_chunks += rowids
                self._delete_chunk_rows(db, ns, rowids)
                if is_doc:
                    db.execute("DELETE FROM documents WHERE ns_id=? AND doc_id=?", (ns, ident))
                else:
                    doc_row = db.execute(
                        "SELECT doc_id FROM documents d WHERE ns_id=? AND NOT EXISTS "
                        "(SELECT 1 FROM chunks c WHERE c.ns_id=d.ns_id AND c.doc_id=d.doc_id) AND doc_id=?",
                        (ns, ident.rsplit("_p", 1)[0]),
                    ).fetchone()
                    if doc_row:  # the last chunk of a document went: the document goes too
                        db.execute("DELETE FROM documents WHERE ns_id=? AND doc_id=?", (ns, doc_row[0]))
                if report:
                    found.append(ident)
            if removed_vecs:
                self._changed(db, namespace, ns, "vec_version", [], removed_vecs, res)
            if removed_chunks:
                self._changed(db, namespace, ns, "chunk_version", [], removed_chunks, res)
        return found, res

    def reindex_sparse(self) -> int:
        """Rebuild every BM25 table from chunk text (after a tokenizer change)."""
        from ..text.tokenize import index_tokens

        n = 0
        with self.write_transaction() as db:
            for (ns,) in db.execute("SELECT id FROM namespaces").fetchall():
                tok = _tokens(ns)
                db.execute(f"DELETE FROM {tok}")
                rows = db.execute("SELECT id, text, lang, context FROM chunks WHERE ns_id=?", (ns,)).fetchall()
                db.executemany(
                    f"INSERT INTO {tok} (rowid, tokens) VALUES (?, ?)",
                    [(rid, " ".join(index_tokens(text, lang, ctx))) for rid, text, lang, ctx in rows],
                )
                self._bump(db, ns, "chunk_version")
                n += len(rows)
        return n

    # ------------------------------------------------------------------ embedding queue
    def pending(self, limit: int) -> list[tuple[int, str, str, str]]:
        """(rowid, namespace, text, text_hash) of chunks waiting for a vector, oldest first."""
        return self.reader.execute(
            f"SELECT c.id, n.name, {EMBED_TEXT}, c.text_hash FROM embed_queue q JOIN chunks c ON c.id = q.chunk_rowid "
            "JOIN namespaces n ON n.id = c.ns_id ORDER BY q.chunk_rowid LIMIT ?",
            (limit,),
        ).fetchall()

    def pending_among(self, rowids: Sequence[int], namespace: str | None = None) -> set[int]:
        """The chunks among ``rowids`` (of ``namespace`` when given) that still wait for their vector."""
        ns = self._scope(namespace)
        if ns is None:
            sql = "SELECT chunk_rowid FROM embed_queue WHERE chunk_rowid IN ({marks})"
            return {r[0] for r in _select_in(self.reader, sql, list(rowids))}
        sql = (
            "SELECT q.chunk_rowid FROM embed_queue q JOIN chunks c ON c.id = q.chunk_rowid "
            "WHERE c.ns_id=? AND q.chunk_rowid IN ({marks})"
        )
        return {r[0] for r in _select_in(self.reader, sql, list(rowids), (ns,))}

    def pending_count(self, namespace: str | None = None) -> int:
        """Chunks waiting for a vector (in ``namespace``, or in all): the namespaces' counters, which
        every write that queues or unqueues keeps in its transaction (O(1), whatever the backlog)."""
        if namespace is None:
            return int(self.reader.execute("SELECT coalesce(sum(n_pending), 0) FROM namespaces").fetchone()[0])
        ns = self.namespace_id(namespace)
        if ns is None:
            return 0
        return int(self.reader.execute("SELECT n_pending FROM namespaces WHERE id=?", (ns,)).fetchone()[0])

    def store_vectors(self, items: Sequence[tuple[int, str, np.ndarray]]) -> WriteResult:
        """Store vectors for (rowid, text_hash, vec); skips chunks deleted or changed meanwhile."""
        res = WriteResult()
        with self.write_transaction() as db:
            by_ns: dict[int, list[int]] = {}
            sql = "SELECT id, ns_id, text_hash FROM chunks WHERE id IN ({marks})"
            held = {r[0]: (r[1], r[2]) for r in _select_in(db, sql, list(dict.fromkeys(rid for rid, _, _ in items)))}
            done: list[tuple[int]] = []
            rows: dict[int, bytes] = {}
            for rid, th, vec in items:
                row = held.get(rid)
                if row is not None and row[1] != th:
                    # changed meanwhile (SQLite may even give a new chunk the rowid of a deleted
                    # one): its queue entry stays, for the new text's vector
                    continue
                done.append((rid,))
                if row is None:
                    continue
                if rid not in rows:
                    by_ns.setdefault(row[0], []).append(rid)
                rows[rid] = np.asarray(vec, np.float32).tobytes()  # the same chunk twice: the last vector
            unqueued: dict[int, int] = {}
            for (rid,) in done:
                if db.execute("DELETE FROM embed_queue WHERE chunk_rowid=?", (rid,)).rowcount and rid in held:
                    unqueued[held[rid][0]] = unqueued.get(held[rid][0], 0) + 1
            db.executemany(
                "UPDATE namespaces SET n_pending = n_pending - ? WHERE id=?", [(n, ns) for ns, n in unqueued.items()]
            )
            db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?)", list(rows.items()))
            names = dict(db.execute("SELECT id, name FROM namespaces").fetchall())
            for ns, rids in by_ns.items():
                self._changed(db, names[ns], ns, "vec_version", rids, [], res)
        return res

    # ------------------------------------------------------------------ reads
    def vector_version(self, namespace: str) -> int:
        ns = self.namespace_id(namespace)
        if ns is None:
            return 0
        return int(self.reader.execute("SELECT vec_version FROM namespaces WHERE id=?", (ns,)).fetchone()[0])

    def chunk_version(self, namespace: str) -> int:
        ns = self.namespace_id(namespace)
        if ns is None:
            return 0
        return int(self.reader.execute("SELECT chunk_version FROM namespaces WHERE id=?", (ns,)).fetchone()[0])

    def load_tokens(self, namespace: str) -> tuple[int, list[tuple[int, str]]]:
        """(chunk version, [(rowid, space-joined tokens)]) of a namespace, read in one snapshot."""
        ns = self.namespace_id(namespace)
        if ns is None:
            return 0, []
        db = self.reader
        db.execute("BEGIN")
        try:
            version = int(db.execute("SELECT chunk_version FROM namespaces WHERE id=?", (ns,)).fetchone()[0])
            rows = db.execute(f"SELECT rowid, tokens FROM {_tokens(ns)} ORDER BY rowid").fetchall()
        finally:
            db.execute("COMMIT")
        return version, rows

    def tokens_for(self, namespace: str, rowids: Sequence[int]) -> list[tuple[int, str]]:
        ns = self.namespace_id(namespace)
        if ns is None:
            return []
        sql = f"SELECT rowid, tokens FROM {_tokens(ns)} WHERE rowid IN ({{marks}}) ORDER BY rowid"
        return list(_select_in(self.reader, sql, list(rowids)))

    def load_vectors(
        self, namespace: str, alloc: Callable[[int, int], np.ndarray] | None = None
    ) -> tuple[int, np.ndarray, np.ndarray]:
        """(version, rowids, matrix) of every embedded chunk of a namespace, read in one snapshot,
        streamed into ``alloc(rows, dim)`` (default: memory) a batch at a time: the vectors are held
        once. (All rows fetched, joined, then copied held them three times: 46 GB at 10M chunks of
        384 dimensions, killed by the kernel on a 24 GB machine.)"""
        ns = self.namespace_id(namespace)
        dim = self.embedder_info()[1] or 0
        if ns is None:
            return 0, np.zeros(0, np.int64), np.zeros((0, dim), np.float32)
        db = self.reader
        db.execute("BEGIN")
        try:
            version = int(db.execute("SELECT vec_version FROM namespaces WHERE id=?", (ns,)).fetchone()[0])
            # the namespace's rowids (a sorted list from its index), each vector looked up by rowid in
            # that order: no sort. (A join walked the chunks in (ns_id, doc_id) order and sorted the
            # vectors after, in a temporary B-tree: 15 GB written and sorted at 10M chunks.)
            mine = "FROM vectors WHERE chunk_rowid IN (SELECT id FROM chunks WHERE ns_id=?)"
            n = int(db.execute(f"SELECT count(*) {mine}", (ns,)).fetchone()[0])
            if not n:
                return version, np.zeros(0, np.int64), np.zeros((0, dim), np.float32)
            cur = db.execute(f"SELECT chunk_rowid, vec {mine} ORDER BY chunk_rowid", (ns,))
            first = cur.fetchmany(LOAD_BATCH)
            width = len(first[0][1]) // 4
            rowids = np.empty(n, np.int64)
            matrix = alloc(n, width) if alloc is not None else np.empty((n, width), np.float32)
            i, batch = 0, first
            while batch:
                j = i + len(batch)
                rowids[i:j] = [r[0] for r in batch]
                matrix[i:j] = np.frombuffer(b"".join(r[1] for r in batch), np.float32).reshape(-1, width)
                i, batch = j, cur.fetchmany(LOAD_BATCH)
        finally:
            db.execute("COMMIT")
        if i != n:  # pragma: no cover - one snapshot: the count and the rows agree
            raise StoreError(f"read {i} vectors of namespace {namespace!r} where its count said {n}")
        return version, rowids, matrix

    def vectors_for(self, rowids: Sequence[int], namespace: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        ns = self._scope(namespace)
        sql = "SELECT chunk_rowid, vec FROM vectors WHERE chunk_rowid IN ({marks})"
        head: tuple[Any, ...] = ()
        if ns is not None:
            sql = (
                "SELECT v.chunk_rowid, v.vec FROM vectors v JOIN chunks c ON c.id = v.chunk_rowid "
                "WHERE c.ns_id=? AND v.chunk_rowid IN ({marks}) ORDER BY v.chunk_rowid"
            )  # the order of the statement without the join: an index applies vectors in it
            head = (ns,)
        out_ids: list[int] = []
        blobs: list[bytes] = []
        for rid, blob in _select_in(self.reader, sql, list(rowids), head):
            out_ids.append(rid)
            blobs.append(blob)
        if not blobs:
            return np.zeros(0, np.int64), np.zeros((0, 0), np.float32)
        m = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), -1)
        return np.asarray(out_ids, np.int64), m.copy()

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

    def has_graph(self, namespace: str) -> bool:
        """True once ``graph build`` ran for the namespace (cheap: no graph module is loaded)."""
        ns = self.namespace_id(namespace)
        return (
            ns is not None
            and self.reader.execute("SELECT 1 FROM graph_state WHERE ns_id=?", (ns,)).fetchone() is not None
        )

    def metadata_keys(self, namespace: str) -> set[str]:
        ns = self.namespace_id(namespace)
        if ns is None:
            return set()
        return {r[0] for r in self.reader.execute("SELECT key FROM metadata_keys WHERE ns_id=?", (ns,))}

    def fetch(self, rowids: Sequence[int], namespace: str | None = None) -> dict[int, ChunkRow]:
        ns = self._scope(namespace)
        sql = (
            f"SELECT c.id, c.chunk_id, c.doc_id, c.text, c.source, d.metadata, {_TIME_COLUMNS} "
            f"FROM chunks c {_DOC_JOIN} WHERE {'' if ns is None else 'c.ns_id=? AND '}c.id IN ({{marks}}) ORDER BY c.id"
        )
        return {
            r[0]: ChunkRow(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]), r[6], r[7], r[8], r[9])
            for r in _select_in(self.reader, sql, list(rowids), () if ns is None else (ns,))
        }

    def get_document(self, namespace: str, doc_id: str) -> dict[str, Any] | None:
        ns = self.namespace_id(namespace)
        if ns is None:
            return None
        row = self.reader.execute(
            f"SELECT {DOCUMENT_COLUMNS} FROM documents WHERE ns_id=? AND doc_id=?", (ns, doc_id)
        ).fetchone()
        if row is None:
            return None
        chunks = self.reader.execute(
            "SELECT chunk_id, text FROM chunks WHERE ns_id=? AND doc_id=? ORDER BY ord", (ns, doc_id)
        ).fetchall()
        return document_record(row, json.loads(row[2]), chunks)

    def export_documents(self, namespace: str) -> Iterator[dict[str, Any]]:
        """Every document of a namespace with its chunks (rowid, chunk_id, text, text_hash, lang,
        tokens), in doc id order, read in one snapshot (for ``migrate``)."""
        ns = self.namespace_id(namespace)
        if ns is None:
            return
        db = self._connect()  # its own connection: the caller may write elsewhere meanwhile
        try:
            db.execute("BEGIN")
            # in insertion order (first chunk rowid), so a copy keeps the rowid order BM25 ties break on
            docs = db.execute(
                "SELECT doc_id, source, metadata, content_hash FROM documents d WHERE ns_id=? ORDER BY "
                "(SELECT min(id) FROM chunks c WHERE c.ns_id = d.ns_id AND c.doc_id = d.doc_id), doc_id",
                (ns,),
            )
            tok = _tokens(ns)
            for doc_id, source, meta, h in docs.fetchall():
                chunks = db.execute(
                    f"SELECT c.id, c.chunk_id, c.text, c.text_hash, c.lang, f.tokens FROM chunks c JOIN {tok} f "
                    "ON f.rowid = c.id WHERE c.ns_id=? AND c.doc_id=? ORDER BY c.ord",
                    (ns, doc_id),
                ).fetchall()
                yield {
                    "doc_id": doc_id,
                    "source": source,
                    "metadata": json.loads(meta),
                    "content_hash": h,
                    "chunks": chunks,
                }
        finally:
            db.close()

    def rowids_for(self, namespace: str, chunk_ids: Sequence[str]) -> dict[str, int]:
        ns = self.namespace_id(namespace)
        if ns is None:
            return {}
        sql = "SELECT chunk_id, id FROM chunks WHERE ns_id=? AND chunk_id IN ({marks})"
        return dict(_select_in(self.reader, sql, list(chunk_ids), (ns,)))

    def counts(self, namespace: str) -> dict[str, int]:
        ns = self.namespace_id(namespace)
        if ns is None:
            return {"documents": 0, "chunks": 0, "vectors": 0, "pending_vectors": 0}
        db = self.reader
        return {
            # current memories (a retired version is history, not a document); chunks and vectors: all stored
            "documents": db.execute(
                "SELECT count(*) FROM documents WHERE ns_id=? AND valid_to IS NULL", (ns,)
            ).fetchone()[0],
            "chunks": db.execute("SELECT count(*) FROM chunks WHERE ns_id=?", (ns,)).fetchone()[0],
            "vectors": db.execute(
                "SELECT count(*) FROM vectors v JOIN chunks c ON c.id = v.chunk_rowid WHERE c.ns_id=?", (ns,)
            ).fetchone()[0],
            "pending_vectors": self.pending_count(namespace),
        }

    # ------------------------------------------------------------------ versions (store/history_sql.py)
    def history(self, namespace: str, doc_id: str) -> list[tuple[Any, ...]]:
        ns = self.namespace_id(namespace)
        return [] if ns is None else history_sql.versions(self.reader, ns, doc_id)

    def has_history(self, namespace: str) -> bool:
        ns = self.namespace_id(namespace)
        return ns is not None and history_sql.has_history(self.reader, ns)

    def key_holder(self, namespace: str, mem_key: str) -> str | None:
        ns = self.namespace_id(namespace)
        return None if ns is None else history_sql.current_by_key(self.reader, ns, mem_key)

    def retire(self, namespace: str, doc_id: str, reason: str | None) -> WriteResult:
        """A soft delete: the memory's current version stops being current now, and stays in its
        history (``as_of`` before now still sees it). NotFoundError when there is none."""
        res = WriteResult()
        with self.write_transaction() as db:
            ns = self.namespace_id(namespace, db)
            retired = None if ns is None else history_sql.retire(db, ns, doc_id, history_sql.now_epoch(), reason)
            if ns is None or retired is None:
                raise NotFoundError(f"no memory {doc_id!r} in namespace {namespace!r}")
            acc = _Changes(retired=retired[1])
            self._log_changes(db, namespace, ns, acc, res)
        return res

    def export_times(self, namespace: str) -> dict[str, tuple[Any, ...]]:
        """doc id -> times, version bookkeeping and chunk context (``history_sql.export_times``)."""
        ns = self.namespace_id(namespace)
        return {} if ns is None else history_sql.export_times(self.reader, ns)

    def restore_times(self, namespace: str, rows: dict[str, tuple[Any, ...]]) -> WriteResult:
        """Copied documents get the source's times and versions (``migrate``), in one transaction."""
        res = WriteResult()
        with self.write_transaction() as db:
            ns = self.namespace_id(namespace, db)
            if ns is None:
                raise NotFoundError(f"no namespace {namespace!r}")
            self._log_changes(db, namespace, ns, _Changes(retired=history_sql.restore_times(db, ns, rows)), res)
        return res

    def any_match(self, namespace: str, flt: Filter) -> bool:
        """True when some document of the namespace passes ``flt`` (an unknown scope is an error)."""
        ns = self.namespace_id(namespace)
        if ns is None:
            return False
        where, params = to_sql(flt, "d.metadata")
        sql = f"SELECT 1 FROM documents d WHERE d.ns_id=? AND {where} LIMIT 1"
        return self.reader.execute(sql, [ns, *params]).fetchone() is not None

    def latest_occurred(self, namespace: str, flt: Filter | None) -> float | None:
        """The latest occurred_at among the documents ``flt`` allows (relative times resolve from it)."""
        ns = self.namespace_id(namespace)
        if ns is None:
            return None
        where, params = to_sql(flt, "d.metadata")
        row = self.reader.execute(
            f"SELECT max(d.occurred_at) FROM documents d WHERE d.ns_id=? AND {where}", [ns, *params]
        )
        t = row.fetchone()[0]
        return None if t is None else float(t)

    def recent(self, namespace: str, flt: Filter | None, k: int) -> list[tuple[int, float]]:
        """Top-k (rowid, occurred_at) of the allowed chunks, newest first (the recency leg)."""
        ns = self.namespace_id(namespace)
        if ns is None or k <= 0:
            return []
        where, params = to_sql(flt, "d.metadata")
        rows = self.reader.execute(
            f"SELECT c.id, d.occurred_at FROM chunks c {_DOC_JOIN} WHERE c.ns_id=? AND {where} "
            "ORDER BY d.occurred_at DESC, c.id LIMIT ?",
            [ns, *params, k],
        ).fetchall()
        return [(int(r), float(t or 0.0)) for r, t in rows]

    def session_turns(self, namespace: str, session_id: str, lo: int, hi: int, as_of: float | None) -> list[int]:
        """Rowids of the chunks of a session's turns ``lo``..``hi`` visible now (or ``as_of``), in order."""
        ns = self.namespace_id(namespace)
        if ns is None:
            return []
        vis, vparams = _visible(as_of)
        rows = self.reader.execute(
            f"SELECT c.id FROM documents d JOIN chunks c ON c.ns_id = d.ns_id AND c.doc_id = d.doc_id "
            "WHERE d.ns_id=? AND json_extract(d.metadata, '$.session_id') = ? "
            f"AND json_extract(d.metadata, '$.turn') BETWEEN ? AND ? AND {vis} "
            "ORDER BY json_extract(d.metadata, '$.turn'), c.ord",
            [ns, session_id, lo, hi, *vparams],
        ).fetchall()
        return [int(r[0]) for r in rows]

    def max_turn(self, namespace: str, session_id: str) -> int | None:
        """The last turn index of a session (its next message continues from it)."""
        ns = self.namespace_id(namespace)
        if ns is None:
            return None
        row = self.reader.execute(
            "SELECT max(json_extract(metadata, '$.turn')) FROM documents WHERE ns_id=? "
            "AND json_extract(metadata, '$.session_id') = ?",
            (ns, session_id),
        ).fetchone()
        return None if row[0] is None else int(row[0])

    def chunk_count(self, namespace: str) -> int:
        """The namespace's chunks (one indexed count: what a query needs, not all of :meth:`counts`)."""
        ns = self.namespace_id(namespace)
        if ns is None:
            return 0
        return int(self.reader.execute("SELECT count(*) FROM chunks WHERE ns_id=?", (ns,)).fetchone()[0])

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

    # ------------------------------------------------------------------ the file: open checks, check, backup
    @staticmethod
    def _empty_file(p: Path) -> bool:
        """A 0-byte file and no write-ahead log holding pages for it: nothing is stored there."""
        wal = Path(f"{p}-wal")
        return p.stat().st_size == 0 and not (wal.exists() and wal.stat().st_size > 0)

    def _read_only_uri(self, asked: bool) -> str | None:
        """The URI of this store's connections when it is opened for reads only (None: read-write,
        by path): when asked (``read_only``), or when this process may not write the file or its
        directory (SQLite would then fail on the first write, or already on opening a WAL store)."""
        p = Path(self.path)
        if self.path == ":memory:" or not p.exists():
            return None
        directory = p.resolve().parent
        if asked:
            reason = "it was opened read-only (read_only=True)"
        elif not os.access(p, os.W_OK):
            reason = "this user may not write the file"
        elif not os.access(directory, os.W_OK):
            reason = f"this user may not write its directory {directory}"
        else:
            return None
        self.read_only, self._read_only_reason = True, reason
        # Which read-only open:
        # - a -wal beside the file: a writer has the store open (or crashed) and committed pages may
        #   be in the log only: read through it, `mode=ro` (locks: a consistent snapshot while the
        #   writer goes on). SQLite then needs the -shm index; missing in a directory this user may
        #   not write, the store cannot be read as it is: say so rather than read a stale file.
        # - no -wal and the file or its directory not writable: `immutable=1`: no lock, nothing
        #   created. `mode=ro` cannot open a WAL store in a read-only directory at all (it must
        #   create the -shm), and in a writable one it creates -wal/-shm with the file's read-only
        #   permissions, whose -shm left behind then refuses every write once the file is writable
        #   again. Immutable assumes nobody writes meanwhile: no -wal says no writer has it open now;
        #   one starting later (whoever may write the file) goes unseen by this process.
        # - asked, on a store this user may write: `mode=ro`, with locks, as other processes may write.
        uri = p.resolve().as_uri()
        wal, shm = Path(f"{self.path}-wal"), Path(f"{self.path}-shm")
        if wal.exists():
            if not shm.exists() and not os.access(directory, os.W_OK):
                raise StoreError(
                    f"the store {self.path} is read-only ({reason}) and cannot be read: its write-ahead log "
                    f"{wal.name} needs {shm.name} beside it, which this user may not create; open it once "
                    "with write access (that folds the log into the file)"
                )
            return f"{uri}?mode=ro"
        if asked and os.access(p, os.W_OK) and os.access(directory, os.W_OK):
            return f"{uri}?mode=ro"
        return f"{uri}?immutable=1"

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

    @staticmethod
    def _pragma_problems(db: sqlite3.Connection, pragma: str) -> list[str]:
        """The problems ``PRAGMA quick_check`` or ``integrity_check`` reports, one per line ([]: ok)."""
        try:
            rows = db.execute(f"PRAGMA {pragma}").fetchall()
        except sqlite3.DatabaseError as e:
            if getattr(e, "sqlite_errorcode", None) == sqlite3.SQLITE_INTERRUPT:
                raise
            return [str(e)]
        lines = [line.strip() for (text,) in rows for line in str(text).splitlines()]
        return [line for line in lines if line and line != "ok" and not line.startswith("*** in database")]

    def _verify_once(self) -> None:
        """``PRAGMA quick_check`` of an existing file at open (pages, b-trees, records; not whether
        indexes agree with their tables: ``check`` adds that): a damaged store is refused before
        anything reads it. Once per process and state of the file (device, inode, size, mtime): the
        CLI opens a store twice per command. It costs about 1.2 ms per MB when the file is in the
        page cache (0.45 s for 100,000 chunks, 370 MB), so it stops after OPEN_CHECK_SECONDS: a
        bigger store is checked in part at open (whole by ``hybridmem check``)."""
        if self.path == ":memory:":
            return
        st = os.stat(self.path)
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        if st.st_size == 0 or key in _VERIFIED:
            return
        running, lock = [True], threading.Lock()

        def stop() -> None:
            with lock:  # never a statement after the check's: an interrupt then would stop that one
                if running[0]:
                    self._w.interrupt()

        timer = threading.Timer(OPEN_CHECK_SECONDS, stop)
        timer.daemon = True
        timer.start()
        try:
            problems = self._pragma_problems(self._w, "quick_check(1)")
        except sqlite3.OperationalError:  # interrupted: the budget is spent; not verified, not refused
            return
        finally:
            with lock:
                running[0] = False
            timer.cancel()
        if problems:
            raise StoreError(self._damaged(problems[0]))
        _VERIFIED.add(key)

    def check(self) -> dict[str, Any]:
        """A full check of the file (``hybridmem check``): ``PRAGMA integrity_check`` (quick_check
        plus every index against its table), the foreign keys, and the store's own invariants: each
        namespace has its BM25 table, each chunk its BM25 row, its document, and a vector or a place
        in the embedding queue; no BM25 row, vector or queue entry outlives its chunk; every vector
        has the recorded dimension. Returns ``{"ok", "problems", "namespaces": {name: counts}, "seconds"}``."""
        t0 = time.perf_counter()
        db = self._connect()  # its own connection: no deadline handler, nothing else interleaved
        try:
            db.execute("BEGIN")  # one snapshot, while other processes may write
            problems = self._pragma_problems(db, "integrity_check(100)")
            try:
                bad_fk = db.execute('SELECT "table", parent, count(*) FROM pragma_foreign_key_check GROUP BY 1, 2')
                problems += [f"{n} rows of {t} refer to missing rows of {parent}" for t, parent, n in bad_fk]
                namespaces = {
                    name: self._check_namespace(db, ns, name, problems)
                    for ns, name in db.execute("SELECT id, name FROM namespaces ORDER BY name").fetchall()
                }
                problems += self._check_orphans(db)
            except sqlite3.DatabaseError as e:
                problems.append(f"the store's tables cannot be read: {e}")
                namespaces = {}
        finally:
            db.close()
        return {
            "ok": not problems,
            "problems": problems,
            "namespaces": namespaces,
            "seconds": round(time.perf_counter() - t0, 3),
        }

    @staticmethod
    def _check_namespace(db: sqlite3.Connection, ns: int, name: str, problems: list[str]) -> dict[str, int]:
        """The counts of one namespace, adding what is inconsistent in it to ``problems``."""

        def one(sql: str, *args: Any) -> int:
            return int(db.execute(sql, (ns, *args)).fetchone()[0])

        counts = {
            "documents": one("SELECT count(*) FROM documents WHERE ns_id=?"),
            "chunks": one("SELECT count(*) FROM chunks WHERE ns_id=?"),
            "vectors": one("SELECT count(*) FROM vectors v JOIN chunks c ON c.id = v.chunk_rowid WHERE c.ns_id=?"),
            "pending_vectors": one(
                "SELECT count(*) FROM embed_queue q JOIN chunks c ON c.id = q.chunk_rowid WHERE c.ns_id=?"
            ),
        }
        kept = one("SELECT n_pending FROM namespaces WHERE id=?")
        if kept != counts["pending_vectors"]:
            problems.append(
                f"namespace {name!r}: its count of chunks waiting for a vector is {kept}, "
                f"the embedding queue holds {counts['pending_vectors']}"
            )
        tok = _tokens(ns)
        if db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (tok,)).fetchone() is None:
            problems.append(f"namespace {name!r}: its BM25 table {tok} is missing")
            return counts
        checks = [
            (
                f"SELECT count(*) FROM chunks c WHERE c.ns_id=? AND NOT EXISTS (SELECT 1 FROM {tok} f "
                "WHERE f.rowid = c.id)",
                "chunks without their BM25 row",
            ),
            (
                f"SELECT count(*) FROM {tok} f WHERE NOT EXISTS (SELECT 1 FROM chunks c WHERE c.id = f.rowid "
                "AND c.ns_id=?)",
                "BM25 rows of missing chunks",
            ),
            (
                "SELECT count(*) FROM chunks c WHERE c.ns_id=? AND NOT EXISTS (SELECT 1 FROM documents d "
                "WHERE d.ns_id = c.ns_id AND d.doc_id = c.doc_id)",
                "chunks without their document",
            ),
            (
                "SELECT count(*) FROM chunks c WHERE c.ns_id=? AND NOT EXISTS (SELECT 1 FROM vectors v "
                "WHERE v.chunk_rowid = c.id) AND NOT EXISTS (SELECT 1 FROM embed_queue q WHERE q.chunk_rowid = c.id)",
                "chunks with neither a vector nor a place in the embedding queue",
            ),
        ]
        for sql, what in checks:
            n = one(sql)
            if n:
                problems.append(f"namespace {name!r}: {n} {what}")
        return counts

    @classmethod
    def _check_orphans(cls, db: sqlite3.Connection) -> list[str]:
        """Rows of the store-wide tables whose chunk is gone, and vectors of the wrong size."""
        problems = []
        for table, what in (("vectors", "vectors"), ("embed_queue", "embedding queue entries")):
            n = db.execute(
                f"SELECT count(*) FROM {table} t WHERE NOT EXISTS (SELECT 1 FROM chunks c WHERE c.id = t.chunk_rowid)"
            ).fetchone()[0]
            if n:
                problems.append(f"{n} {what} of missing chunks")
        dim = cls._meta_get(db, "dim")
        if dim:
            n = db.execute("SELECT count(*) FROM vectors WHERE length(vec) != ?", (4 * int(dim),)).fetchone()[0]
            if n:
                problems.append(f"{n} vectors whose size is not the recorded dimension {dim}")
        return problems

    def backup(self, dest: str | Path) -> dict[str, Any]:
        """An online copy of the store to ``dest`` (a file, or a directory to put it in), with the
        SQLite backup API: consistent while this and other processes write (the copy is one read
        snapshot of the WAL store: writers go on, a later commit is not in it), atomic (written to
        ``DEST.tmp``, synced, checked with ``PRAGMA quick_check``, then renamed over DEST), and never
        over a store in use. Returns ``{"path", "bytes", "seconds", "documents", "chunks"}``."""
        if self.path == ":memory:":
            raise ValidationError("an in-memory store has no file to back up")
        target = Path(dest)
        if target.is_dir():
            target = target / Path(self.path).name
        if target.resolve() == Path(self.path).resolve():
            raise ValidationError(f"the backup destination {target} is the store itself")
        busy = [f"{target.name}{s}" for s in ("-wal", "-shm") if Path(f"{target}{s}").exists()]
        if busy:
            raise StoreError(
                f"{target} looks in use ({', '.join(busy)} beside it): replacing it under a process that has it "
                "open would damage it; pick another destination, or stop that process first"
            )
        tmp = target.with_name(target.name + ".tmp")
        t0 = time.perf_counter()
        src = self._connect()
        try:
            tmp.parent.mkdir(parents=True, exist_ok=True)
            tmp.unlink(missing_ok=True)
            copy = sqlite3.connect(tmp)
            try:
                # every page in one step (pages=-1): one read snapshot, so writers never restart it
                src.backup(copy)
            finally:
                copy.close()
            copied = self._verified_copy(tmp)
            os.replace(tmp, target)
            self._sync_dir(target.parent)
        except (sqlite3.Error, OSError) as e:
            for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm"), Path(f"{tmp}-journal")):
                leftover.unlink(missing_ok=True)
            raise StoreError(f"backup of {self.path} to {target} failed: {e}") from None
        finally:
            src.close()
        return {"path": str(target), "bytes": target.stat().st_size, "seconds": time.perf_counter() - t0, **copied}

    def _verified_copy(self, path: Path) -> dict[str, int]:
        """Sync a finished copy to disk, quick_check it, count what it holds; a damaged copy raises."""
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        # immutable: the check leaves no -wal/-shm beside the copy (its header says WAL, as the store's)
        db = sqlite3.connect(f"{path.resolve().as_uri()}?immutable=1", uri=True)
        try:
            problems = self._pragma_problems(db, "quick_check(1)")
            if problems:
                raise sqlite3.DatabaseError(f"the copy fails its quick_check: {problems[0]}")
            documents, chunks = db.execute(
                "SELECT (SELECT count(*) FROM documents), (SELECT count(*) FROM chunks)"
            ).fetchone()
        finally:
            db.close()
        return {"documents": int(documents), "chunks": int(chunks)}

    @staticmethod
    def _sync_dir(directory: Path) -> None:
        """Make a rename in ``directory`` durable (where the platform can open a directory)."""
        try:
            fd = os.open(directory, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(fd)
        except OSError:
            pass
        finally:
            os.close(fd)


SQLiteStore.schema_version = SCHEMA_VERSION
#: files (device, inode, size, mtime) whose quick_check passed in this process
_VERIFIED: set[tuple[int, int, int, int]] = set()
#: the time the quick_check at open may take; past it the store opens without a full check
OPEN_CHECK_SECONDS = 1.0


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
