"""Retry with exponential backoff and jitter, bounded in attempts *and* in total time, honouring
the server's ``Retry-After`` (capped): the one retry loop of every outbound HTTP call (the chat
models and the OpenAI-compatible embedder)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeVar

from .errors import HybridMemError, LLMError, ValidationError

__all__ = ["RetryPolicy", "Retryable", "call_with_retry"]

T = TypeVar("T")
_JITTERS = ("equal", "added")


class Retryable(Exception):
    """A transient failure (429, 5xx, timeout, connection error); ``retry_after`` is the server's
    ``Retry-After`` in seconds, when it sent one."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass(frozen=True)
class RetryPolicy:
    #: HTTP requests at most (the first one included)
    max_attempts: int = 4
    #: first backoff in seconds; doubles at each retry, up to ``max_backoff``
    backoff: float = 1.0
    max_backoff: float = 20.0
    #: a ``Retry-After`` longer than this is cut to it, so a server cannot park a caller for minutes
    max_retry_after: float = 30.0
    #: wall-time budget of one call, retries and sleeps included; each request's timeout is cut to
    #: what remains of it, and a retry that cannot start within it is not made (``math.inf``: none)
    total_timeout: float = 120.0
    #: ``"equal"``: half the exponential step fixed, half random; ``"added"``: the whole step plus
    #: up to ``backoff`` at random, the sum capped at ``max_backoff``
    jitter: Literal["equal", "added"] = "equal"

    def __post_init__(self) -> None:
        if not isinstance(self.max_attempts, int) or self.max_attempts < 1:
            raise ValidationError(f"max_attempts must be an integer >= 1, got {self.max_attempts!r}", field="retry")
        for name in ("backoff", "max_backoff", "max_retry_after"):
            if not getattr(self, name) >= 0:
                raise ValidationError(f"{name} must be >= 0, got {getattr(self, name)!r}", field="retry")
        if not self.total_timeout > 0:
            raise ValidationError(f"total_timeout must be > 0, got {self.total_timeout!r}", field="retry")
        if self.jitter not in _JITTERS:
            raise ValidationError(f"jitter must be one of {', '.join(_JITTERS)}, got {self.jitter!r}", field="retry")

    def delay(self, retry: int, retry_after: float | None, rng: random.Random | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (from 1)."""
        if retry_after is not None:
            return min(max(0.0, retry_after), self.max_retry_after)
        # jittered, so parallel clients spread out rather than retry in lockstep
        step: float = min(self.backoff * (2 ** (retry - 1)), self.max_backoff)
        if self.jitter == "added":
            return min(step + (rng or random).uniform(0, self.backoff), self.max_backoff)
        return step / 2 + (rng or random).uniform(0, step / 2)


def call_with_retry(
    fn: Callable[[float], T],
    policy: RetryPolicy,
    *,
    timeout: float,
    what: str = "request",
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    error: type[HybridMemError] = LLMError,
) -> T:
    """Call ``fn(request_timeout)`` until it returns; retry when it raises :class:`Retryable`.

    Any other exception propagates at once (a 400 will not fix itself). Gives up with ``error``
    (:class:`LLMError` unless told otherwise) after ``policy.max_attempts`` requests or when the
    next attempt would start past ``policy.total_timeout``.
    """
    deadline = clock() + policy.total_timeout
    last: Retryable | None = None
    made = 0
    while made < policy.max_attempts:
        if last is not None:
            wait = policy.delay(made, last.retry_after)
            if clock() + wait >= deadline:
                hint = (
                    f" (the server asked to retry after {last.retry_after:g}s)" if last.retry_after is not None else ""
                )
                raise error(
                    f"{what} failed after {made} attempt(s): {last}; the next retry would exceed the "
                    f"{policy.total_timeout:g}s time budget{hint}"
                )
            sleep(wait)
        remaining = deadline - clock()
        if remaining <= 0:
            break
        made += 1
        try:
            return fn(min(timeout, remaining))
        except Retryable as exc:
            last = exc
    raise error(f"{what} failed after {made} attempt(s): {last}")
