"""Per-request deadlines that stop the work, not only the answer.

A server answers 504 when a request runs past its deadline, but the thread doing the work cannot be
killed: without more, the query goes on after the 504, holding memory and a core. So the deadline
travels with the work: :func:`within` sets it for the calling thread, :func:`bind` carries it to a
leg's worker thread, SQLite's progress handler (``store/sqlite/core.py``) interrupts a statement once it
has passed, PostgreSQL gets the time left as ``statement_timeout``, and :func:`check` stops Python
loops between steps.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from .errors import HybridMemError

__all__ = ["DeadlineExceeded", "bind", "check", "expired", "remaining", "within"]

T = TypeVar("T")
_local = threading.local()


class DeadlineExceeded(HybridMemError):
    """The request's deadline passed: its work was stopped (HTTP 504)."""

    http_status = 504
    error_type = "timeout"
    exit_code = 9


def _get() -> float | None:
    return getattr(_local, "deadline", None)


@contextmanager
def within(seconds: float | None) -> Iterator[None]:
    """Work in this block must end within ``seconds`` (None: no deadline; nested: the earlier wins)."""
    previous = _get()
    if seconds is not None:
        at = time.monotonic() + seconds
        _local.deadline = at if previous is None else min(previous, at)
    try:
        yield
    finally:
        _local.deadline = previous


def remaining() -> float | None:
    """Seconds left before this thread's deadline (None: no deadline)."""
    at = _get()
    return None if at is None else at - time.monotonic()


def expired() -> bool:
    at = _get()
    return at is not None and time.monotonic() >= at


def check() -> None:
    """Raise :class:`DeadlineExceeded` if this thread's deadline has passed."""
    if expired():
        raise DeadlineExceeded("the request ran past its deadline and was stopped")


def bind(fn: Callable[..., T]) -> Callable[..., T]:
    """``fn`` to run in another thread under the calling thread's deadline."""
    at = _get()
    if at is None:
        return fn

    def run(*args: Any, **kwargs: Any) -> T:
        previous = _get()
        _local.deadline = at
        try:
            return fn(*args, **kwargs)
        finally:
            _local.deadline = previous

    return run
