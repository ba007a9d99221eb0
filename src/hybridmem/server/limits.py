"""Request limits: body size (413), per-request deadline (504), bounded retries of a locked store (503),
expensive requests per tenant (a queue, then 429).

Memory calls are blocking (SQLite, numpy): they run on a bounded thread pool. A request past its
deadline is answered 504 at once; its thread cannot be killed and finishes in the background (a
write that timed out may still land: writes are idempotent by id, so a client may simply retry).
An expensive call keeps its tenant's slot until its thread ends, 504 or not: a tenant's abandoned
work counts against it until it is really over.
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import deadline
from ..errors import HybridMemError, StoreError

__all__ = [
    "BodySizeLimit",
    "PayloadTooLarge",
    "RequestTimeoutError",
    "Runner",
    "StartTracker",
    "StoreBusyError",
    "TenantRunner",
    "TenantSlots",
    "TooManyRequests",
    "error_body",
    "is_locked",
]

T = TypeVar("T")
#: scope key where an error response records its type, for the metrics
ERROR_KEY = "hybridmem.error"


def error_body(type_: str, message: str, field: str | None = None) -> dict[str, Any]:
    """The JSON body of every error response: ``{"error": {"type", "message", "field"}}``."""
    return {"error": {"type": type_, "message": message, "field": field}}


class RequestTimeoutError(HybridMemError):
    http_status = 504
    error_type = "timeout"


class StoreBusyError(HybridMemError):
    """The store stayed locked by another process through every retry (HTTP 503, Retry-After)."""

    http_status = 503
    error_type = "busy"
    http_headers = (("Retry-After", "1"),)


class PayloadTooLarge(HTTPException):
    """Raised from inside ``receive``: FastAPI re-raises HTTPExceptions met while reading a body
    (any other exception there would become a 400)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, self.message(limit))
        self.limit = limit

    @staticmethod
    def message(limit: int) -> str:
        return f"request body larger than the {limit}-byte limit"


class TooManyRequests(HTTPException):
    """A tenant has its share of expensive requests running and its queue full (HTTP 429)."""

    def __init__(self, tenant_limit: int, queued: int, retry_after: int = 1) -> None:
        super().__init__(
            429,
            f"too many concurrent requests for this API key: {tenant_limit} running and {queued} waiting "
            f"(max_concurrent_per_tenant, max_queued_per_tenant); retry after {retry_after} s",
            headers={"Retry-After": str(retry_after)},
        )


class TenantSlots:
    """At most ``limit`` expensive calls of one tenant at once; up to ``queue`` more wait (FIFO)
    for a slot until their deadline (504); past that, :class:`TooManyRequests` at once. Lives on
    the event loop; a slot is released from any thread (:meth:`acquire`'s callback)."""

    def __init__(self, limit: int, queue: int) -> None:
        self.limit, self.queue = limit, queue
        self._sems: dict[str, asyncio.Semaphore] = {}
        self._waiting: dict[str, int] = {}

    def reset(self) -> None:
        """Forget every slot (the app stopped; its semaphores belong to the loop that ended)."""
        self._sems.clear()
        self._waiting.clear()

    async def acquire(self, tenant: str, timeout: float) -> Callable[[], None]:
        """Wait for a slot of ``tenant`` (at most ``timeout`` s); returns its release, callable once
        from any thread."""
        sem = self._sems.setdefault(tenant, asyncio.Semaphore(self.limit))
        if not sem.locked():
            # a free slot is taken without yielding to the loop: only a request that really waits
            # counts as waiting (counting this one until its acquire returned refused, with 429, a
            # request that arrived meanwhile while the queue was empty)
            await sem.acquire()
        else:
            waiting = self._waiting.get(tenant, 0)
            if waiting >= self.queue:
                raise TooManyRequests(self.limit, waiting)
            self._waiting[tenant] = waiting + 1
            try:
                await asyncio.wait_for(sem.acquire(), timeout)
            except TimeoutError:
                raise RequestTimeoutError(
                    f"the request waited {timeout:g} s for one of this API key's {self.limit} slots"
                ) from None
            finally:
                self._waiting[tenant] -= 1
        loop = asyncio.get_running_loop()
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                try:
                    loop.call_soon_threadsafe(sem.release)
                except RuntimeError:  # the loop is closed: the app stopped, its slots are gone
                    pass

        return release


class StartTracker:
    """An ASGI ``send`` that remembers whether the response has started: after that, a failure can
    no longer be turned into an error response."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.started = False

    async def __call__(self, msg: Message) -> None:
        if msg["type"] == "http.response.start":
            self.started = True
        await self._send(msg)


class BodySizeLimit:
    """Reject bodies over ``limit`` bytes (``upload_limit`` for ``upload_paths``) with 413: at once
    when Content-Length says so, else while the body streams in."""

    def __init__(self, app: ASGIApp, limit: int, upload_limit: int, upload_paths: tuple[str, ...] = ()) -> None:
        self.app, self.limit, self.upload_limit, self.upload_paths = app, limit, upload_limit, upload_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.upload_limit if scope.get("path", "") in self.upload_paths else self.limit
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None:
            try:
                declared = int(length)
            except ValueError:
                declared = -1
            if declared > limit:
                await self._reject(scope, send, limit)
                return
        seen = 0

        async def limited_receive() -> Message:
            nonlocal seen
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > limit:
                    raise PayloadTooLarge(limit)
            return msg

        tracked = StartTracker(send)
        try:
            await self.app(scope, limited_receive, tracked)
        except PayloadTooLarge:
            if tracked.started:
                raise
            await self._reject(scope, send, limit)

    async def _reject(self, scope: Scope, send: Send, limit: int) -> None:
        import json

        scope[ERROR_KEY] = "payload_too_large"  # read by the metrics middleware
        body = json.dumps(error_body("payload_too_large", PayloadTooLarge.message(limit))).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def _within(until: float, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn`` under the request's deadline, ``until`` on ``time.monotonic()`` (the clock of
    hybridmem.deadline): its reads are stopped when it passes, so the work ends with the 504 instead
    of going on in the background. The deadline is the request's, not "timeout from when a worker
    thread took the call": a call that waited for a thread past it is not started at all."""
    left = until - time.monotonic()
    if left <= 0:
        raise deadline.DeadlineExceeded("the request waited for a worker thread past its deadline; not run")
    with deadline.within(left):
        return fn(*args, **kwargs)


def is_locked(e: BaseException) -> bool:
    """SQLite's "database is locked" / "busy", raw or wrapped in a StoreError."""
    if isinstance(e, (sqlite3.OperationalError, StoreError)):
        msg = str(e).lower()
        return "locked" in msg or "busy" in msg
    return False


class Runner:
    """Runs blocking Memory calls on a bounded pool under a deadline; :meth:`for_tenant` also
    within the tenant's share (:class:`TenantSlots`)."""

    def __init__(
        self, threads: int, timeout: float, write_retries: int = 3, per_tenant: int = 8, queued_per_tenant: int = 16
    ) -> None:
        self.threads, self.timeout, self.write_retries = threads, timeout, write_retries
        self.slots = TenantSlots(per_tenant, queued_per_tenant)
        self._executor: ThreadPoolExecutor | None = None

    @property
    def executor(self) -> ThreadPoolExecutor:
        # created on first use (and again after a shutdown: an app may be started twice)
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="hybridmem-http")
        return self._executor

    async def __call__(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await self.run(functools.partial(fn, *args, **kwargs))

    async def run(self, call: Callable[[], T], tenant: str | None = None) -> T:
        """``call()`` on the pool, answered within the deadline (a wait for the tenant's slot
        included); the tenant's slot is held until the thread is done."""
        loop = asyncio.get_running_loop()
        deadline_at = loop.time() + self.timeout
        until = time.monotonic() + self.timeout  # the same deadline, for the worker thread
        release = await self.slots.acquire(tenant, self.timeout) if tenant is not None else None
        left = max(0.001, deadline_at - loop.time())
        try:
            cf = self.executor.submit(_within, until, call)
        except BaseException:
            if release is not None:
                release()
            raise
        if release is not None:
            cf.add_done_callback(lambda _: release())
        try:
            return await asyncio.wait_for(asyncio.wrap_future(cf), left)
        except TimeoutError:
            raise RequestTimeoutError(f"the request took longer than {self.timeout:g} s") from None

    def for_tenant(self, tenant: str) -> TenantRunner:
        """This runner for an expensive request of ``tenant`` (an API key's id, or "anonymous")."""
        return TenantRunner(self, tenant)

    async def write(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """A write, retried with back-off while another process holds the store's write lock."""
        return await self.run(self._retrying(fn, *args, **kwargs))

    def _retrying(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> Callable[[], T]:
        def attempt() -> T:
            for i in range(self.write_retries + 1):
                try:
                    return fn(*args, **kwargs)
                except Exception as e:
                    if not is_locked(e):
                        raise
                    if i == self.write_retries:
                        raise StoreBusyError("the store is busy (locked by another writer); retry shortly") from None
                    time.sleep(0.05 * 2**i)
            raise AssertionError("unreachable")

        return attempt

    def shutdown(self) -> None:
        self.slots.reset()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None


class TenantRunner:
    """A :class:`Runner` whose calls take one of the tenant's slots (429 when they are all taken
    and its queue is full)."""

    def __init__(self, runner: Runner, tenant: str) -> None:
        self.runner, self.tenant = runner, tenant

    async def __call__(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await self.runner.run(functools.partial(fn, *args, **kwargs), self.tenant)

    async def write(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await self.runner.run(self.runner._retrying(fn, *args, **kwargs), self.tenant)
