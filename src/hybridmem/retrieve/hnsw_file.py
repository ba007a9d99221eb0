"""The HNSW graph of a namespace saved next to its SQLite store, so a new process restores it instead
of rebuilding it (at 1M vectors a rebuild took 21.5 min on 2 cores).

Files: ``<store>.hnsw/<key>.usearch`` (usearch's own format) and ``<key>.json`` (what it covers: the
format, the embedder, the dimension, the graph's parameters, the byte size and CRC-32 of the
graph file). ``key`` derives from the namespace. Saving is crash-safe: both files are written
aside, synced, and renamed into place, the graph first: a crash leaves the old pair, or a new graph
with the old description, which its checksum refuses. A file that is missing, of another format,
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
import os
import uuid
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .files import fsync_dir, sweep_tmp

if TYPE_CHECKING:
    from usearch.index import Index

__all__ = ["HnswFile"]

log = logging.getLogger(__name__)

FORMAT = 1
#: vectors read back from a restored graph at a time, to compare with the loaded matrix
COMPARE_BATCH = 65_536


def _crc(path: Path) -> int:
    crc = 0
    with open(path, "rb") as f:
        while block := f.read(1 << 24):
            crc = zlib.crc32(block, crc)
    return crc


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
        self.meta = directory / f"{key}.json"
        self.describe = {"format": FORMAT, "namespace": namespace, **describe}
        #: vectors the last restore removed, replaced or added (the saved graph's drift)
        self.changed = 0
        #: the store's vector-log mark of a version (``Store.vector_mark``) and its changes since a
        #: version (``Store.vector_changes_since``): without them every restore compares every vector
        self.mark_of = mark_of
        self.changes_since = changes_since
        #: how the last restore brought the graph to the store: "unchanged", "log" or "compared"
        self.how = ""

    # ---------------------------------------------------------------- save
    def save(self, index: Index, version: int | None = None) -> bool:
        """Write the graph aside, sync, rename into place (the graph first, then its description).
        ``version``: the store's vector version the graph holds exactly (recorded with its mark)."""
        # names of this save alone: two processes saving at once never write into one file
        tag = f".{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp"
        tmp_graph, tmp_meta = self.graph.with_suffix(".usearch" + tag), self.meta.with_suffix(".json" + tag)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            sweep_tmp(self.directory, self.graph.stem)
            index.save(str(tmp_graph))
            with open(tmp_graph, "rb+") as f:
                os.fsync(f.fileno())
            meta = {**self.describe, "size": tmp_graph.stat().st_size, "crc32": _crc(tmp_graph), "count": len(index)}
            if version is not None and self.mark_of is not None:
                meta |= {"version": int(version), "mark": self.mark_of(int(version))}
            with open(tmp_meta, "w", encoding="utf-8") as f:
                json.dump(meta, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp_graph, self.graph)
            os.replace(tmp_meta, self.meta)
            fsync_dir(self.directory)
            return True
        except OSError as e:  # a read-only directory, a full disk: the graph stays in memory only
            log.warning("could not save the HNSW graph to %s: %s", self.graph, e)
            for leftover in (tmp_graph, tmp_meta):
                leftover.unlink(missing_ok=True)
            return False

    # ---------------------------------------------------------------- restore
    def _usable(self) -> tuple[str | None, dict[str, Any]]:
        """(None, its description) when the saved pair matches this index, else (why not, {})."""
        if not self.meta.exists() or not self.graph.exists():
            return "no saved graph", {}
        try:
            meta = json.loads(self.meta.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            return f"its description is unreadable ({e})", {}
        differs = [k for k, v in self.describe.items() if meta.get(k) != v]
        if differs:
            return f"it was saved for another {', '.join(differs)}", {}
        if self.graph.stat().st_size != meta.get("size"):
            return f"its size is {self.graph.stat().st_size} bytes, {meta.get('size')} were written (truncated?)", {}
        if _crc(self.graph) != meta.get("crc32"):
            return "its checksum does not match (corrupt, or a save was interrupted)", {}
        return None, meta

    def restore(
        self,
        dim: int,
        rowids: np.ndarray,
        matrix: np.ndarray,
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
        matrix: np.ndarray,
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
        matrix: np.ndarray,
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
