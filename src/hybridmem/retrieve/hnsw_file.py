"""The HNSW graph of a namespace saved next to its SQLite store, so a new process restores it instead
of rebuilding it (at 1M vectors a rebuild took 21.5 min on 2 cores).

Files: ``<store>.hnsw/<key>.usearch`` (usearch's own format), ``<key>.vectors`` (the float32 rows the
graph was built from, after their int64 rowids: the matrix a new process memory-maps instead of
reading every vector from the store) and ``<key>.json`` (what they cover: the format, the embedder,
the dimension, the graph's parameters, the byte size and checksum (XXH3-64; CRC-32 in older files) of each file). ``key`` derives from
the namespace. Saving is crash-safe: the files are written aside, synced, and renamed into place,
the description last: a crash leaves the old set, or new data files with the old description, which
their checksums refuse.

:meth:`HnswFile.open` maps a set that is current up to the store's vector log (the graph as a
read-only usearch view, the rows as a memory map): nothing is read but the checksums, and several
processes on one store share the page cache's one copy. :meth:`HnswFile.restore` reads the graph
into memory instead, to change it (a build, a merge of the writes made since). A file that is missing, of another format,
embedder, dimension or parameters, truncated or corrupt is not used (the log says why): the graph
is rebuilt from the store's vectors, which are the truth, and exact search answers meanwhile.

A restored graph is brought to the vectors the process loaded. The description records the store's
vector version the graph covers and the change log's mark of it: when the store is still at that
version with that mark, the graph is used as it is (nothing to compare); when it moved on and its
vector log holds every change since, only the rowids those changes touched are taken out and put
back from the loaded vectors. Otherwise (an older file, a pruned log, another store that reached the
same version numbers) every key is checked: keys the store no longer holds are removed, vectors the
graph lacks are added, and every vector both hold is compared bit for bit (a rowid SQLite handed out
again after a delete holds another vector: it is replaced; more than half differing means another
store: rebuilt). Results are therefore those of a graph built from the loaded vectors, give or take
HNSW's approximation, never of stale vectors.
"""

from __future__ import annotations

import hashlib
import json
import logging
import mmap
import os
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from .files import CHECKSUM, Checksum, checksum_of, fsync_dir, recorded, stamp_verified, sweep_tmp, verified

if TYPE_CHECKING:
    from usearch.index import Index

__all__ = ["HnswFile", "Mapped"]

log = logging.getLogger(__name__)

FORMAT = 1
#: vectors read back from a restored graph at a time, to compare with the loaded matrix; rows written
#: to a vectors file at a time
COMPARE_BATCH = 65_536


class RowSource(Protocol):
    """Float32 rows by position (an array, or ``dense.Rows``)."""

    def __getitem__(self, pos: np.ndarray) -> np.ndarray: ...


@dataclass
class Mapped:
    """A saved graph opened in place: its vectors file memory-mapped, the graph a read-only usearch
    view of its file (the page cache holds them once for every process that maps them)."""

    version: int  # the store's vector version they hold
    rowids: np.ndarray  # int64, in memory (8 bytes a row)
    matrix: np.ndarray  # float32 (n, dim), a read-only memory map
    index: Index  # immutable
    file: tuple[Any, int] | None = None  # the vectors file, open, and the offset of its rows


def _check(item: tuple[Path, dict[str, Any]]) -> bool:
    """Whether the file holds the checksum its description recorded."""
    path, m = item
    return verified(path, *recorded(m))


class HnswFile:
    """Where one namespace's graph is saved, and the description it must match to be used."""

    def __init__(
        self,
        directory: Path,
        namespace: str,
        describe: dict[str, Any],
        mark_of: Callable[[int], str | None] | None = None,
        changes_since: Callable[[int], list[tuple[int, np.ndarray, np.ndarray]] | None] | None = None,
    ) -> None:
        key = hashlib.sha1(namespace.encode("utf-8")).hexdigest()[:20]
        self.directory = directory
        self.graph = directory / f"{key}.usearch"
        self.vectors = directory / f"{key}.vectors"
        self.meta = directory / f"{key}.json"
        #: a build's checkpoint: the graph of the first rows of its insertion order, and what it covers
        self.partial = directory / f"{key}.partial.usearch"
        self.partial_meta = directory / f"{key}.partial.json"
        self.describe = {"format": FORMAT, "namespace": namespace, **describe}
        #: vectors the last restore removed, replaced or added (the saved graph's drift)
        self.changed = 0
        #: the store's vector-log mark of a version (``Store.vector_mark``) and its changes since a
        #: version (``Store.vector_changes_since``): without them every restore compares every vector
        self.mark_of = mark_of
        self.changes_since = changes_since
        #: how the last restore brought the graph to the store: "unchanged", "log" or "compared"
        #: ("mapped": :meth:`open` mapped it, the log's changes left to the caller)
        self.how = ""

    # ---------------------------------------------------------------- save
    def save(
        self,
        index: Index,
        version: int | None = None,
        rows: tuple[np.ndarray, Callable[[int, int], np.ndarray]] | None = None,
    ) -> bool:
        """Write the graph (and, with ``rows``, its vectors) aside, sync, rename into place, the
        description last. ``version``: the store's vector version the graph holds exactly (recorded
        with its mark). ``rows``: the rowids of the graph's vectors and ``rows_of(i, j)``, the
        float32 rows of ``rowids[i:j]`` (written a block at a time: no second copy in memory)."""
        # names of this save alone: two processes saving at once never write into one file
        tag = f".{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp"
        tmp_graph, tmp_meta = self.graph.with_suffix(".usearch" + tag), self.meta.with_suffix(".json" + tag)
        tmp_vecs = self.vectors.with_suffix(".vectors" + tag)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            sweep_tmp(self.directory, self.graph.stem)
            meta = {**self.describe, **_graph_aside(index, tmp_graph), "count": len(index)}
            if version is not None and self.mark_of is not None:
                meta |= {"version": int(version), "mark": self.mark_of(int(version))}
            if rows is not None:
                meta["vectors"] = _write_rows(tmp_vecs, *rows)
            _json_synced(tmp_meta, meta)
            os.replace(tmp_graph, self.graph)
            if rows is not None:
                os.replace(tmp_vecs, self.vectors)
            os.replace(tmp_meta, self.meta)
            fsync_dir(self.directory)
            # hashed as they were written: the next process need not read them whole again
            stamp_verified(self.graph, CHECKSUM, meta[CHECKSUM])
            if rows is not None:
                stamp_verified(self.vectors, CHECKSUM, meta["vectors"][CHECKSUM])
            return True
        except OSError as e:  # a read-only directory, a full disk: the graph stays in memory only
            log.warning("could not save the HNSW graph to %s: %s", self.graph, e)
            for leftover in (tmp_graph, tmp_vecs, tmp_meta):
                leftover.unlink(missing_ok=True)
            return False

    # ---------------------------------------------------------------- a build's checkpoint
    def save_partial(self, index: Index, version: int, rows: str, done: int) -> bool:
        """Checkpoint a build: its graph of the first ``done`` rows of the build's insertion order, for
        the store's vector ``version`` and the live rows whose digest is ``rows``. Written aside,
        synced, renamed, its description last (a stop at any moment leaves the last checkpoint, or
        a graph its description's checksum refuses)."""
        tag = f".{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp"
        tmp_graph, tmp_meta = (
            self.partial.with_name(self.partial.name + tag),
            self.partial_meta.with_name(self.partial_meta.name + tag),
        )
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            meta = {**self.describe, "version": int(version), "rows": rows, "done": int(done)}
            _json_synced(tmp_meta, meta | _graph_aside(index, tmp_graph))
            os.replace(tmp_graph, self.partial)
            os.replace(tmp_meta, self.partial_meta)
            fsync_dir(self.directory)
            return True
        except OSError as e:  # a full disk: the build goes on, without a checkpoint
            log.warning("could not checkpoint the HNSW build to %s: %s", self.partial, e)
            for leftover in (tmp_graph, tmp_meta):
                leftover.unlink(missing_ok=True)
            return False

    def resume_partial(self, version: int, rows: str) -> tuple[Index, int] | None:
        """The last checkpoint of a build of these very rows (the store's vector ``version`` and the
        live rows' digest ``rows``), and how many rows of its order it holds; None when there is
        none, or it is of other rows, truncated or corrupt (the log says why, and it is dropped)."""
        if not self.partial_meta.exists() or not self.partial.exists():
            return None
        why = None
        try:
            meta = json.loads(self.partial_meta.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            meta, why = {}, f"its description is unreadable ({e})"
        if why is None:
            differs = [k for k, v in {**self.describe, "version": version, "rows": rows}.items() if meta.get(k) != v]
            if differs:
                why = f"it was taken for another {', '.join(differs)}"
            elif self.partial.stat().st_size != meta.get("size") or not _check((self.partial, meta)):
                why = "its checksum does not match (truncated or corrupt)"
        index: Index | None = None
        if why is None:
            try:
                from usearch.index import Index

                index = Index.restore(str(self.partial))
                if index is None or len(index) != int(meta["done"]) or index.ndim != int(self.describe.get("dim") or 0):
                    raise ValueError(f"it holds {0 if index is None else len(index)} vectors, not {meta['done']}")
            except Exception as e:  # usearch refuses a file it cannot parse
                why = f"usearch could not read it ({e})"
        if why is not None or index is None:
            log.warning("not resuming the HNSW build from %s: %s; starting over", self.partial, why)
            self.drop_partial()
            return None
        return index, int(meta["done"])

    def drop_partial(self) -> None:
        """Remove a build's checkpoint (the build finished and was saved, or it is of no use)."""
        for path in (self.partial_meta, self.partial, self.partial.with_name(self.partial.name + ".verified")):
            path.unlink(missing_ok=True)

    # ---------------------------------------------------------------- restore
    def _usable(self, with_vectors: bool = False) -> tuple[str | None, dict[str, Any]]:
        """(None, its description) when the saved files match this index (``with_vectors``: the
        vectors file too), else (why not, {}). The checksums of both files are taken at once."""
        if not self.meta.exists() or not self.graph.exists():
            return "no saved graph", {}
        try:
            meta = json.loads(self.meta.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            return f"its description is unreadable ({e})", {}
        differs = [k for k, v in self.describe.items() if meta.get(k) != v]
        if differs:
            return f"it was saved for another {', '.join(differs)}", {}
        files = [(self.graph, meta)]
        if with_vectors:
            if not isinstance(meta.get("vectors"), dict) or not self.vectors.exists():
                return "it has no vectors file", {}
            files.append((self.vectors, meta["vectors"]))
        for path, m in files:
            if path.stat().st_size != m.get("size"):
                return f"{path.name} is {path.stat().st_size} bytes, {m.get('size')} were written (truncated?)", {}
        # hashing releases the GIL: the two checksums (1.5 + 0.5 GB at 1M with an i8 graph) run side by side
        with ThreadPoolExecutor(len(files)) as pool:
            ok = list(pool.map(_check, files))
        for (path, _), good in zip(files, ok):
            if not good:
                return f"the checksum of {path.name} does not match (corrupt, or a save was interrupted)", {}
        return None, meta

    def open(self, version: int, min_count: int = 0) -> Mapped | None:
        """The saved graph and vectors mapped in place, when they hold a version of *this* store at or
        before ``version`` (their mark is the log's); the caller applies the changes since from the
        vector log. None otherwise (the reason logged, but for a missing file, or one of fewer than
        ``min_count`` vectors: an index that size searches exactly and has no use for a graph)."""
        try:
            count = json.loads(self.meta.read_text(encoding="utf-8")).get("count", 0)
        except (OSError, ValueError):
            count = 0  # _usable says why
        if count < min_count:
            return None
        why, meta = self._usable(with_vectors=True)
        saved = int(meta.get("version", -1) if meta.get("version") is not None else -1)
        if why is None and (saved < 0 or self.mark_of is None or meta.get("mark") is None):
            why = "it does not say which version of the store it holds"
        elif why is None and saved > version:
            why = f"it holds vector version {saved}, the store is at {version}"
        elif why is None and self.mark_of is not None and self.mark_of(saved) != meta["mark"]:
            why = "the store's change log does not know its version (another store, or one put back from a backup)"
        if why is not None:
            if why not in ("no saved graph", "it has no vectors file"):
                log.warning("not mapping the saved HNSW graph %s: %s", self.graph, why)
            return None
        dim, n = int(self.describe.get("dim") or 0), int(meta["vectors"]["count"])
        try:
            from usearch.index import Index

            index = Index.restore(str(self.graph), view=True)
            if index is None or index.ndim != dim or len(index) != n:
                raise ValueError(f"the graph holds {0 if index is None else len(index)} vectors, the file {n}")
            rowids = np.fromfile(self.vectors, np.int64, count=n)
            f = open(self.vectors, "rb", buffering=0)  # kept open (closed with the index) for row reads
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            # rows are read a few at a time (rescoring, a filter's rows): no read-ahead around each,
            # which filled the page cache and the process's RSS with rows nobody asked for
            if hasattr(mm, "madvise") and hasattr(mmap, "MADV_RANDOM"):
                mm.madvise(mmap.MADV_RANDOM)
            matrix = np.frombuffer(mm, np.float32, count=n * dim, offset=8 * n).reshape(n, dim)
        except Exception as e:  # usearch refuses a file it cannot parse
            log.warning("not mapping the saved HNSW graph %s: %s", self.graph, e)
            return None
        self.how, self.changed = "mapped", 0
        return Mapped(saved, rowids, matrix, index, (f, 8 * n))

    def restore(
        self,
        dim: int,
        rowids: np.ndarray,
        matrix: RowSource,
        live: np.ndarray,
        to_graph: Callable[[np.ndarray], np.ndarray] = np.ascontiguousarray,
        version: int | None = None,
    ) -> Index | None:
        """The saved graph brought to the live vectors (positions ``live`` of ``rowids`` / ``matrix``,
        the store's vector ``version``), or None (the reason logged). ``to_graph``: float32 rows as
        the graph holds them (its dtype)."""
        why, meta = self._usable()
        if why is None:
            index: Index | None = None
            try:
                from usearch.index import Index

                index = Index.restore(str(self.graph))
            except Exception as e:  # usearch refuses a file it cannot parse
                why = f"usearch could not read it ({e})"
            if index is None:
                why = why or "usearch could not read it"
            elif index.ndim != dim:
                why, index = f"it holds {index.ndim}-dimensional vectors, not {dim}", None
            if index is not None:
                if self._caught_up(index, meta, rowids, matrix, live, to_graph, version):
                    return index
                self.how = "compared"
                why = self._reconcile(index, rowids, matrix, live, to_graph)
                if why is None:
                    return index
        if why != "no saved graph":
            log.warning("not using the saved HNSW graph %s: %s; rebuilding it", self.graph, why)
        return None

    def _caught_up(
        self,
        index: Index,
        meta: dict[str, Any],
        rowids: np.ndarray,
        matrix: RowSource,
        live: np.ndarray,
        to_graph: Callable[[np.ndarray], np.ndarray],
        version: int | None,
    ) -> bool:
        """Bring the graph to ``version`` without comparing every vector, when its description says
        which version of *this* store it holds (the mark matches) and the vector log has every change
        since: only the rowids those changes touched are removed and put back from the loaded rows.
        False when that cannot be known (then every vector is compared)."""
        saved = meta.get("version")
        if version is None or saved is None or self.mark_of is None or int(saved) > version:
            return False
        if meta.get("mark") is None or self.mark_of(int(saved)) != meta["mark"]:
            return False
        keys = np.asarray(rowids[live], np.uint64)
        if int(saved) == version:
            self.how, self.changed = "unchanged", 0
            return len(index) == len(keys)
        changes = self.changes_since(int(saved)) if self.changes_since is not None else None
        if changes is None:
            return False
        touched = np.unique(np.concatenate([np.concatenate([a, r]) for _, a, r in changes]).astype(np.uint64))
        present = touched[np.asarray(index.contains(touched), bool)] if len(touched) else touched
        if len(present):
            index.remove(present)
        back = np.flatnonzero(np.isin(keys, touched))  # touched rows the store (still) holds
        if len(back):
            index.add(keys[back], to_graph(matrix[live[back]]))
        self.how, self.changed = "log", len(present) + len(back)
        return len(index) == len(keys)

    def _reconcile(
        self,
        index: Index,
        rowids: np.ndarray,
        matrix: RowSource,
        live: np.ndarray,
        to_graph: Callable[[np.ndarray], np.ndarray],
    ) -> str | None:
        """Remove the keys the store dropped, replace every vector that differs from the store's (a
        rowid SQLite gave again after a delete), add the missing; None when the graph is usable."""
        keys = np.asarray(rowids[live], np.uint64)
        saved = np.asarray(index.keys, np.uint64)
        gone = np.setdiff1d(saved, keys, assume_unique=True)
        if len(gone):
            index.remove(gone)
        have = np.asarray(index.contains(keys), bool) if len(keys) else np.zeros(0, bool)
        shared = np.flatnonzero(have)
        changed: list[np.ndarray] = []
        for s in range(0, len(shared), COMPARE_BATCH):  # every shared vector, compared bit for bit
            part = shared[s : s + COMPARE_BATCH]
            got: Any = index.get(keys[part])
            if got is None or any(v is None for v in got):
                return "it lost vectors it lists"
            differs = ~np.all(np.vstack(got) == to_graph(matrix[live[part]]), axis=1)
            changed.append(part[differs])
        stale = np.concatenate(changed) if changed else np.zeros(0, np.int64)
        if len(stale) * 2 > max(len(keys), 1):
            return f"{len(stale)} of its {len(shared)} vectors differ from the store's"
        if len(stale):
            index.remove(keys[stale])
        missing = np.concatenate([np.flatnonzero(~have), stale])
        self.changed = len(gone) + len(missing)
        if len(missing):
            index.add(keys[missing], to_graph(matrix[live[missing]]))
        return None


def _graph_aside(index: Index, path: Path) -> dict[str, int]:
    """Write ``index`` to ``path`` (a name of its own, renamed into place later) and sync it; its
    size and checksum, for the description."""
    index.save(str(path))
    with open(path, "rb+") as f:
        os.fsync(f.fileno())
    return {"size": path.stat().st_size, CHECKSUM: checksum_of(path)}


def _json_synced(path: Path, meta: dict[str, Any]) -> None:
    """Write a description to ``path`` and sync it (renamed into place after the files it describes)."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump(meta, f)
        f.flush()
        os.fsync(f.fileno())


def _write_rows(path: Path, rowids: np.ndarray, rows_of: Callable[[int, int], np.ndarray]) -> dict[str, int]:
    """Write ``rowids`` (int64) then their float32 rows, a block at a time; fsync. Its description."""
    n = len(rowids)
    h = Checksum()
    with open(path, "wb") as f:
        for block in (np.ascontiguousarray(rowids, np.int64).tobytes(),):
            f.write(block)
            h.update(block)
        for s in range(0, n, COMPARE_BATCH):
            block = np.ascontiguousarray(rows_of(s, min(n, s + COMPARE_BATCH)), np.float32).tobytes()
            f.write(block)
            h.update(block)
        f.flush()
        os.fsync(f.fileno())
    return {"size": path.stat().st_size, CHECKSUM: h.value(), "count": n}
