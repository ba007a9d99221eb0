"""Two small caches shared by the memory facade and the in-memory indexes."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

__all__ = ["LRU", "ArrayKeyedCache"]


class LRU:
    """A bounded least-recently-used map, safe to share between query threads without a lock: a
    racing eviction only costs a miss, never a KeyError."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._d: OrderedDict[Hashable, Any] = OrderedDict()

    def get(self, key: Hashable) -> Any | None:
        value = self._d.get(key)
        if value is not None:
            try:
                self._d.move_to_end(key)
            except KeyError:  # evicted by another thread meanwhile: the value is still right
                pass
        return value

    def put(self, key: Hashable, value: Any) -> None:
        self._d[key] = value
        while len(self._d) > self.cap:
            try:
                self._d.popitem(last=False)
            except KeyError:  # emptied by another thread
                break

    def clear(self) -> None:
        self._d.clear()

    def __len__(self) -> int:
        return len(self._d)


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
