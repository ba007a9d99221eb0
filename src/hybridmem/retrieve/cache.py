"""The in-memory indexes' cache of values derived from an array (the rowids a filter allows)."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

__all__ = ["ArrayKeyedCache"]


class ArrayKeyedCache:
    """Values derived from an array (e.g. the rowids a filter allows), keyed by the array's identity
    and a state tuple (the index version): Memory hands the same array for a repeated filter until
    the chunks change. The array is held, so its id cannot be reused while the entry lives."""

    def __init__(self, cap: int = 16) -> None:
        self.cap = cap
        self._d: dict[int, tuple[Any, Hashable, Any]] = {}

    def get(self, array: Any, state: Hashable) -> Any | None:
        hit = self._d.get(id(array))
        if hit is not None and hit[0] is array and hit[1] == state:
            return hit[2]
        return None

    def put(self, array: Any, state: Hashable, value: Any) -> None:
        if len(self._d) >= self.cap:
            self._d.pop(next(iter(self._d)), None)
        self._d[id(array)] = (array, state, value)
