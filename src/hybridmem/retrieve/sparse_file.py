"""A namespace's BM25 postings saved next to its SQLite store, so a new process reads them back
instead of reading and counting every chunk's tokens again (at 1M chunks that load took ~20 s
before the first BM25 query could run).

File: ``<store>.bm25/<key>.postings``: a magic line, a JSON description (format, namespace,
tokenizer version, the store's chunk version it reflects, sizes, checksum of the body: XXH3-64, CRC-32 in older files), then the
body (:meth:`SparseIndex.dump`; since 2026-12 it ends with each term's MaxScore weight bound, which
a new process puts in its bound cache instead of computing it over the term's postings at first
use; a file without that section loads as before). A restored index reads its postings in place from the file's
memory map (copying a term's only when a write adds to it): processes on one store share them in
the page cache, and each holds in memory only the chunks' lengths and ids. Saving is crash-safe: written aside, synced, renamed into place,
so a crash leaves the old file or the new one, and a torn one fails its checksum.

A snapshot is used only when it reflects the store exactly: the same namespace and tokenizer, the
chunk version the store has now (every committed change to a namespace's chunks bumps it) — or an
older one the store's change log brings forward (the writes since the save, replayed) — the same
number of live chunks, and a sample of chunks whose stored tokens match the snapshot's postings (a
store file replaced by another that happens to have reached the same version fails there).
Anything else — missing, foreign, stale past the log, truncated, corrupt — is logged and the
postings load from the store, which is the truth, as before; results are never those of a stale
snapshot.
"""

from __future__ import annotations

import hashlib
import json
import logging
import mmap
import os
import threading
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .files import CHECKSUM, Checksum, fsync_dir, recorded, stamp_verified, sweep_tmp, verified
from .sparse import SparseIndex

__all__ = ["SparseFile", "SNAPSHOT_MIN"]

log = logging.getLogger(__name__)

#: 2: sections padded to 8 bytes, the postings mapped as int32 views (a format-1 file loads from the store once)
FORMAT = 2
MAGIC = b"hybridmem-bm25-postings\n"
#: namespaces with fewer live chunks load from the store (well under a second) and are not saved
SNAPSHOT_MIN = 20_000
#: chunk changes after which a loaded index is saved again (and at least a tenth of the namespace)
RESAVE_MIN = 2_000
#: chunks whose tokens are read from the store and checked against a snapshot before it is used
PROBE = 32


class SparseFile:
    """Where one namespace's postings are saved, and the description they must match to be used."""

    def __init__(
        self,
        directory: Path,
        namespace: str,
        describe: dict[str, Any],
        mark_of: Callable[[int], str | None] | None = None,
        identity: str | None = None,
    ) -> None:
        # a directory beside one SQLite file holds its namespaces; one shared by database servers'
        # stores (``identity``: which database) keys and describes each file by its store too
        key = hashlib.sha1(((identity + "\0") if identity else "").encode("utf-8") + namespace.encode("utf-8"))
        key_hex = key.hexdigest()[:20]
        #: the store's change-log mark of a version (``Store.chunk_mark``): saved with the postings,
        #: it tells this store's history from another one that reached the same version numbers
        self.mark_of = mark_of
        self.directory = directory
        self.path = directory / f"{key_hex}.postings"
        self.describe = {"format": FORMAT, "namespace": namespace, **describe}
        if identity:
            self.describe["store"] = identity
        #: the index version last saved or restored here (a save of the same version is skipped)
        self.saved_version = -1
        #: chunks added or removed since the last save began (a long-running process re-saves after
        #: a tenth of the namespace changed: a crash then costs a load, not every write since start)
        self.unsaved = 0
        self._saving = threading.Lock()

    def save_in_background(self, idx: SparseIndex) -> None:
        """:meth:`save` in a daemon thread, unless a save of this file is already running."""
        if not self._saving.acquire(blocking=False):
            return
        self.unsaved = 0

        def run() -> None:
            try:
                self._save(idx)
            finally:
                self._saving.release()

        threading.Thread(target=run, name="hybridmem-bm25-save", daemon=True).start()

    def due(self, size: int) -> bool:
        """Enough of a namespace of ``size`` chunks changed since the last save to save again."""
        return self.unsaved >= max(RESAVE_MIN, size // 10)

    # ---------------------------------------------------------------- save
    def save(self, idx: SparseIndex) -> bool:
        """Write the snapshot aside, sync, rename into place, after any save of this file still
        running (saves land in order: an older one never replaces a newer). False (logged) when it
        cannot be written."""
        with self._saving:
            if idx.version == self.saved_version:  # a background save just wrote this version
                return True
            return self._save(idx)

    def _save(self, idx: SparseIndex) -> bool:
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            sweep_tmp(self.directory, self.path.name)
            with open(tmp, "wb") as f:
                f.write(MAGIC)
                f.write(b"\0" * 16)  # the body's and the description's lengths, filled in below
                start = f.tell()
                h = Checksum()

                def write(piece: Any) -> None:
                    h.update(piece)
                    f.write(piece)

                meta = idx.dump(write)
                body = f.tell() - start
                mark = self._mark(int(meta["version"]))
                described = {**self.describe, **meta, "body": body, CHECKSUM: h.value(), "mark": mark}
                head = json.dumps(described).encode("utf-8")
                f.write(head)
                f.seek(len(MAGIC))
                f.write(body.to_bytes(8, "little") + len(head).to_bytes(8, "little"))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
            fsync_dir(self.directory)
            stamp_verified(self.path, CHECKSUM, described[CHECKSUM], start, body)  # hashed as written
            # only once stamped: a close that sees this version saved no longer waits for this save,
            # and the next process would hash the postings whole without the stamp
            self.saved_version = int(meta["version"])
            return True
        except OSError as e:  # a read-only directory, a full disk: the postings stay in memory only
            log.warning("could not save the BM25 postings to %s: %s", self.path, e)
            tmp.unlink(missing_ok=True)
            return False

    def _mark(self, version: int) -> str | None:
        try:
            return self.mark_of(version) if self.mark_of is not None else None
        except Exception as e:  # the store went away under a background save: a snapshot without mark
            log.debug("no change-log mark for version %d: %s", version, e)
            return None

    # ---------------------------------------------------------------- restore
    def restore(
        self,
        version: int,
        live: int,
        tokens_for: Callable[[Sequence[int]], list[tuple[int, str]]],
        replay: Callable[[SparseIndex], int | None] | None = None,
    ) -> SparseIndex | None:
        """The saved index if it reflects the store at ``version`` with ``live`` chunks (checked on a
        sample through ``tokens_for``), else None (the reason logged, unless there is no file).

        A snapshot of an older version is brought forward by ``replay(index)`` (the store's change
        log: the chunks changed since, or None when the log no longer holds them all), only when the
        store's change-log mark of the snapshot's version is the one saved with it (the same
        history); the live count and the probe are checked after it."""
        if not self.path.exists():
            return None
        try:
            idx, why, mark = self._read(version, live, replay is not None)
            saved = idx.version if idx is not None else -1
            past_log = (
                f"it reflects chunk version {saved}, the store is at {version}, and the store's change "
                "log no longer holds every change in between"
            )
            have = self._mark(saved) if idx is not None and mark is not None else None
            if have is not None and have != mark:
                idx, why = None, "it was saved from another history of the store (its change-log mark differs)"
            elif idx is not None and idx.version != version and have is None:
                # without the mark (pruned, or a snapshot written without one) nothing proves the
                # changes since are this snapshot's continuation
                idx, why = None, past_log
            if idx is not None and idx.version != version:
                assert replay is not None
                changed = replay(idx)
                if changed is None:
                    why = past_log
                elif len(idx) != live:
                    why = f"brought forward from version {saved} it holds {len(idx)} live chunks, the store {live}"
                else:
                    self.unsaved += changed
                    log.info("BM25 postings %s: version %d brought forward to %d", self.path, saved, idx.version)
            if idx is not None and why is None:
                why = _probe(idx, tokens_for)
        except (OSError, ValueError, KeyError, UnicodeDecodeError) as e:
            idx, why = None, f"it cannot be read ({type(e).__name__}: {e})"
        if why is not None:
            log.warning("not using the saved BM25 postings %s: %s; loading them from the store", self.path, why)
            return None
        assert idx is not None
        self.saved_version = saved
        return idx

    def _read(self, version: int, live: int, older_ok: bool) -> tuple[SparseIndex | None, str | None, str | None]:
        """The snapshot parsed; its postings stay views of the file's memory map (the map lives as
        long as the index does). The checksum is taken by reading the file, not through the map,
        so the process holds in memory only the postings its queries touch."""
        with open(self.path, "rb") as f:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            got: tuple[SparseIndex | None, str | None, str | None] = (None, "it cannot be read", None)
            try:
                got = self._parse(memoryview(mm), version, live, older_ok, mm)
            finally:
                if got[0] is None:  # nothing refers to the map: close it now
                    try:
                        mm.close()
                    except BufferError:  # a view still referenced from the traceback: the GC closes it
                        pass
            return got

    def _parse(
        self,
        data: memoryview,
        version: int,
        live: int,
        older_ok: bool,
        mapping: object = None,
    ) -> tuple[SparseIndex | None, str | None, str | None]:
        """(index, None, its change-log mark) or (None, why it is refused, None)."""
        if bytes(data[: len(MAGIC)]) != MAGIC or len(data) < len(MAGIC) + 16:
            return None, "it is not a postings snapshot", None
        at = len(MAGIC)
        start = at + 16
        n_body = int.from_bytes(data[at : at + 8], "little")
        n_head = int.from_bytes(data[at + 8 : at + 16], "little")
        if not n_head or len(data) != start + n_body + n_head:
            return None, f"it is {len(data)} bytes, {start + n_body + n_head} were written (truncated?)", None
        meta = json.loads(bytes(data[len(data) - n_head :]))
        differs = [k for k, v in self.describe.items() if meta.get(k) != v]
        if differs:
            return None, f"it was saved for another {', '.join(differs)}", None
        if meta["version"] > version or (meta["version"] < version and not older_ok):
            return None, f"it reflects chunk version {meta['version']}, the store is at {version}", None
        if meta["version"] == version and meta["live"] != live:
            return None, f"it holds {meta['live']} live chunks, the store {live}", None
        body = data[start : len(data) - n_head]
        made = False
        try:
            if len(body) != meta["body"]:
                return None, f"its body is {len(body)} bytes, {meta['body']} were written (truncated?)", None
            kind, want = recorded(meta)
            if not verified(self.path, kind, want, start, len(body)):
                return None, "its checksum does not match (corrupt, or a save was interrupted)", None
            idx = SparseIndex.undump(body, meta, mapping)
            made = mapping is not None  # its postings are views of ``body``: it stays
            return idx, None, meta.get("mark")
        finally:
            if not made:
                body.release()


def _probe(idx: SparseIndex, tokens_for: Callable[[Sequence[int]], list[tuple[int, str]]]) -> str | None:
    """None when a sample of live chunks holds, in the store, exactly the tokens the snapshot has
    for them (each term's tf at the chunk's position, and the chunk's length)."""
    sample = idx.sample_rowids(PROBE, seed=len(idx))
    got = dict(tokens_for(sample))
    for rowid in sample:
        if rowid not in got:
            return f"chunk {rowid} is not in the store"
        if (why := idx.differs(rowid, got[rowid])) is not None:
            return f"chunk {rowid}: the store's tokens differ from the snapshot's ({why})"
    return None
