"""A bounded least-recently-used map shared by the layers that cache (query vectors, filters)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

__all__ = ["LRU"]


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
