"""The dense index's float32 rows by position: in memory (grown in blocks) or read from a mapped
file, and the form a row takes in the HNSW graph (``graph_form``: f32, f16 or scaled i8)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    pass


def graph_form(x: np.ndarray, dtype: str) -> np.ndarray:
    """Vectors (rows, or one query) as a graph of ``dtype`` holds them: float32 as they are; float16;
    int8 scaled by 127·√dim / 4, so a unit vector's components within ±4/√dim (four standard
    deviations of a random direction's; e5's largest is about half of that) keep 127 levels a side."""
    x = np.asarray(x, np.float32)
    if dtype == "f16":
        return np.ascontiguousarray(x, np.float16)
    if dtype == "i8":
        scale = 127.0 * np.sqrt(x.shape[-1]) / 4.0
        return np.ascontiguousarray(np.clip(np.rint(x * scale), -127, 127), np.int8)
    return np.ascontiguousarray(x)


class Rows:
    """The index's float32 rows by position: a read-only ``base`` (the memory map of a saved vectors
    file, or nothing) then an in-memory ``tail`` that writes append to. A reader that took the
    object with its row count ``n`` keeps a consistent view of rows ``< n``: a full tail is replaced
    by a larger copy, never changed below the rows in use."""

    def __init__(
        self,
        dim: int,
        base: np.ndarray | None = None,
        tail: np.ndarray | None = None,
        file: tuple[Any, int] | None = None,
    ) -> None:
        self.dim = dim
        self.base = base if base is not None else np.zeros((0, dim), np.float32)
        self.nb = len(self.base)
        self.tail = tail if tail is not None else np.zeros((0, dim), np.float32)
        #: the open file the base maps and the base's offset in it: a few rows (a compressed graph's
        #: candidates to rescore) are read from it, not through the map, where each page fault also
        #: maps the 15 pages around it (the kernel's fault-around): 200 queries had put 740 MB of a
        #: 1.5 GB vectors file in the process's RSS
        self.file = file

    def __len__(self) -> int:
        return self.nb + len(self.tail)

    def reserve(self, cap: int, n: int) -> None:
        """Room for ``cap`` rows, the first ``n`` in use kept."""
        if cap <= len(self):
            return
        tail = np.zeros((cap - self.nb, self.dim), np.float32)
        tail[: n - self.nb] = self.tail[: n - self.nb]
        self.tail = tail

    def put(self, p: int, vec: np.ndarray) -> None:
        self.tail[p - self.nb] = vec

    def __getitem__(self, pos: np.ndarray) -> np.ndarray:
        """The rows at positions ``pos`` (an integer array), as an in-memory array."""
        pos = np.asarray(pos, np.int64)
        if not self.nb:
            return np.asarray(self.tail[pos])
        if self.file is not None and len(pos) <= PREAD_ROWS:
            out = np.empty((len(pos), self.dim), np.float32)
            f, offset = self.file
            size = self.dim * 4
            for i, p in enumerate(pos.tolist()):
                if p < self.nb:
                    out[i] = np.frombuffer(os.pread(f.fileno(), size, offset + p * size), np.float32)
                else:
                    out[i] = self.tail[p - self.nb]
            return out
        if not len(pos) or int(pos.max()) < self.nb:
            return np.asarray(self.base[pos])
        out = np.empty((len(pos), self.dim), np.float32)
        low = pos < self.nb
        out[low] = self.base[pos[low]]
        out[~low] = self.tail[pos[~low] - self.nb]
        return out

    def dot(self, q: np.ndarray, n: int) -> np.ndarray:
        """Scores of the first ``n`` rows against ``q``."""
        if not self.nb:
            return np.asarray(self.tail[:n] @ q)
        if n <= self.nb:
            return np.asarray(self.base[:n] @ q)
        return np.concatenate([self.base @ q, self.tail[: n - self.nb] @ q])


#: rows of a mapped file read with one ``pread`` each rather than through the map (see ``Rows.file``)
PREAD_ROWS = 512
