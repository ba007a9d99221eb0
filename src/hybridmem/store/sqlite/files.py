"""The SQLite store's file: the checks before and at open, read-only detection, ``check`` (the
full check of ``hybridmem check``) and ``backup`` (an online, verified copy)."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from ...errors import StoreError, ValidationError
from .core import _Core
from .migrations import SCHEMA_VERSION
from .schema import _tokens

__all__ = ["_Files"]

#: files (device, inode, size, mtime) whose quick_check passed in this process
_VERIFIED: set[tuple[int, int, int, int]] = set()
#: the time the quick_check at open may take; past it the store opens without a full check
OPEN_CHECK_SECONDS = 1.0


class _Files(_Core):
    """Open checks, ``check`` and ``backup`` of the store's file."""

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
