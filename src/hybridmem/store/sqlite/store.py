"""The class :class:`SQLiteStore`: opening a file (checks, read-only detection, migrations),
composed from the parts of the store (core, files, reads, search, writes) and the reads and writes
shared with the PostgreSQL store (store/sql/common.py, store/sql/writes.py)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import threading
import weakref
from pathlib import Path

from ...errors import NotFoundError, StoreError
from ...text.tokenize import TOKENIZER_VERSION
from ..base import Capabilities
from ..sql.common import SQLReads
from ..sql.export import SQLExport
from ..sql.writes import SQLWrites
from .files import _Files
from .migrations import MIGRATIONS, SCHEMA_VERSION
from .reads import _Reads
from .schema import WAL_CHECKPOINT_PAGES
from .search import _Search
from .writes import _Writes

__all__ = ["SQLiteStore"]


class SQLiteStore(_Writes, _Reads, _Search, _Files, SQLReads, SQLExport, SQLWrites):
    """Thread-safe: one serialized writer connection, one reader connection per thread (WAL)."""

    schema_version = SCHEMA_VERSION
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
