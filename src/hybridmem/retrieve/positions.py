"""Rowid -> position of an in-process index's live rows (the BM25 postings' and the dense rows').

A dict of every row was built whenever an index was opened from its saved files: at 10M chunks,
``dict(zip(rowids.tolist(), range(n)))`` held the GIL ~2 s and took ~0.9 GB per leg before the
first answer, for a map that only writes and the rescoring of a compressed graph's candidates
read. :class:`Positions` keeps a loaded snapshot's rows as the two arrays they already are (the
*base*: sorted by rowid only when a lookup first needs it, and not at all when they already are)
and the changes since in a small dict over them. An index filled row by row has no base: it is the
dict it always was.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

__all__ = ["Positions"]

_GONE = -1  # in the overlay: a base row removed since


class Positions:
    """A mapping rowid -> position of the live rows: ``get``, ``in``, ``[r] = p``, ``pop``, ``len``."""

    __slots__ = ("_keys", "_vals", "_index", "_over", "_live")

    def __init__(self, rowids: np.ndarray | None = None, positions: np.ndarray | None = None) -> None:
        """``rowids``: the base's rowids (unique), at ``positions`` (default: 0..n-1, in order)."""
        self._over: dict[int, int] = {}  # rowid -> position, or _GONE (a base row removed)
        self._index: tuple[np.ndarray, np.ndarray | None] | None = None  # base sorted: (keys, their positions)
        if rowids is None or len(rowids) == 0:
            self._keys: np.ndarray | None = None
            self._vals: np.ndarray | None = None
            self._live = 0
            return
        self._keys = np.asarray(rowids, np.int64)
        self._vals = None if positions is None else np.asarray(positions, np.int64)
        if self._vals is not None and len(self._vals) != len(self._keys):
            raise ValueError(f"{len(self._keys)} rowids, {len(self._vals)} positions")
        self._live = len(self._keys)

    def _sorted(self) -> tuple[np.ndarray, np.ndarray | None]:
        """The base sorted by rowid (made once; queries may race to make it: same result)."""
        got = self._index
        if got is None:
            keys, vals = self._keys, self._vals
            assert keys is not None
            if len(keys) < 2 or bool(np.all(keys[1:] > keys[:-1])):
                got = (keys, vals)  # rows in rowid order (the common case): nothing to sort
            else:
                order = np.argsort(keys, kind="stable")
                got = (keys[order], order if vals is None else vals[order])
            self._index = got
        return got

    def _base(self, rowid: int) -> int | None:
        if self._keys is None:
            return None
        keys, vals = self._sorted()
        i = int(np.searchsorted(keys, rowid))
        if i < len(keys) and int(keys[i]) == rowid:
            return i if vals is None else int(vals[i])
        return None

    def get(self, rowid: int, default: int | None = None) -> int | None:
        p = self._over.get(rowid)
        if p is None:
            p = self._base(rowid)
        elif p == _GONE:
            p = None
        return default if p is None else p

    def __contains__(self, rowid: object) -> bool:
        return self.get(int(rowid)) is not None  # type: ignore[call-overload]

    def __len__(self) -> int:
        return self._live

    def __setitem__(self, rowid: int, pos: int) -> None:
        if self.get(rowid) is None:
            self._live += 1
        self._over[rowid] = pos

    def pop(self, rowid: int, default: int | None = None) -> int | None:
        p = self.get(rowid)
        if p is None:
            return default
        if self._base(rowid) is not None:
            self._over[rowid] = _GONE
        else:
            del self._over[rowid]
        self._live -= 1
        return p

    def add_new(self, rowids: Iterable[int], start: int) -> None:
        """``rowids`` (none of them held) at ``start``, ``start + 1``, ... (a bulk load's block)."""
        rowids = list(rowids)
        self._over.update(zip(rowids, range(start, start + len(rowids))))
        self._live += len(rowids)

    def holds_any(self, rowids: list[int]) -> bool:
        """Whether any of ``rowids`` is held (one vectorised lookup in the base, not one a rowid)."""
        over = self._over
        if any(over.get(r, _GONE) != _GONE for r in rowids):
            return True
        if self._keys is None or not rowids:
            return False
        keys, _ = self._sorted()
        want = np.asarray([r for r in rowids if r not in over], np.int64)  # a removed base row is not held
        if not len(want):
            return False
        at = np.minimum(np.searchsorted(keys, want), len(keys) - 1)
        return bool(np.any(keys[at] == want))

    def as_dict(self) -> dict[int, int]:
        """Every live rowid and its position (for tests and checks: it builds the dict this class avoids)."""
        out: dict[int, int] = {}
        if self._keys is not None:
            keys, vals = self._sorted()
            out = dict(zip(keys.tolist(), range(len(keys)) if vals is None else vals.tolist()))
        for r, p in self._over.items():
            if p == _GONE:
                out.pop(r, None)
            else:
                out[r] = p
        return out

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Positions):
            return self.as_dict() == other.as_dict()
        return isinstance(other, dict) and self.as_dict() == other

    __hash__ = None  # type: ignore[assignment]

    def positions(self, rowids: np.ndarray) -> np.ndarray:
        """The position of each of ``rowids``, -1 for one not held (vectorised)."""
        want = np.asarray(rowids, np.int64)
        out = np.full(len(want), -1, np.int64)
        if self._keys is not None and len(want):
            keys, vals = self._sorted()
            at = np.minimum(np.searchsorted(keys, want), len(keys) - 1)
            hit = keys[at] == want
            out[hit] = at[hit] if vals is None else vals[at[hit]]
        if self._over:
            for i, r in enumerate(want.tolist()):
                p = self._over.get(r)
                if p is not None:
                    out[i] = p  # _GONE is -1: removed
        return out
