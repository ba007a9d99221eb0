"""The reads of a ``Memory`` over a primary and its streaming replica (``Memory(url, read_url=…)``):
each query (search, ask, get, list, history, stats) runs inside the store's read route
(:mod:`hybridmem.store.postgres.replica` decides: the replica, or the primary and why), and a read
whose replica failed under it is read once more on the primary. The reads a write makes (the
conflict check of ``remember``, a session's last turn, ``supersede``'s old version) stay on the
primary (:meth:`ReadRoutes.primary`)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any, TypeVar

from .errors import StoreUnavailableError, ValidationError
from .store import is_url

__all__ = ["ReadRoutes", "replica_options"]

T = TypeVar("T")


def replica_options(path: str, read_url: str | None, read_your_writes: bool) -> dict[str, Any]:
    """The store options of ``Memory(read_url=, read_your_writes=)``, checked."""
    if not isinstance(read_your_writes, bool):
        raise ValidationError(f"must be true or false, got {read_your_writes!r}", field="read_your_writes")
    if read_url is None:
        return {}  # without a replica every read is the primary's: it sees its writes
    if not is_url(path):
        raise ValidationError(
            "a read replica needs a PostgreSQL store (a postgresql:// URL), not a file", field="read_url"
        )
    if not is_url(read_url):
        raise ValidationError(f"must be a postgresql:// URL, got {read_url!r}", field="read_url")
    return {"read_url": read_url, "read_your_writes": read_your_writes}


class ReadRoutes:
    """Runs the memory's reads on the store's read route (stores without a replica: as they are)."""

    def __init__(self, store: Any) -> None:
        self._route: Callable[..., AbstractContextManager[Any]] | None = getattr(store, "read_route", None)

    def run(self, fn: Callable[[], T], read_your_writes: bool | None = None) -> tuple[T, Any]:
        """(``fn()``, the route it ran on: ``read_from`` and ``notes``; None without a replica)."""
        if self._route is None:
            return fn(), None
        with self._route(read_your_writes) as route:
            started = route.read_from if route is not None else None
            try:
                out = fn()
            except StoreUnavailableError:
                # the replica failed under this read and the route moved to the primary: read there
                if started != "replica" or route.read_from != "primary":
                    raise
                return fn(), route
            if started == "replica" and route.read_from == "primary":
                # the replica failed under this read, which went on on the primary: a leg that failed
                # on the replica may be missing from the answer, so it is read again there, whole
                out = fn()
            return out, route

    def primary(self) -> AbstractContextManager[Any]:
        """A block whose reads are the primary's (those a write makes)."""
        return self._route(primary=True) if self._route is not None else nullcontext(None)
