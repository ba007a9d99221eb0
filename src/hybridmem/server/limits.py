"""Request limits: body size (413), per-request deadline (504), bounded retries of a locked store (503).

Memory calls are blocking (SQLite, numpy): they run on a bounded thread pool. A request past its
deadline is answered 504 at once; its thread cannot be killed and finishes in the background (a
write that timed out may still land: writes are idempotent by id, so a client may simply retry).
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

from ..errors import HybridMemError, StoreError

__all__ = [
    "BodySizeLimit",
    "PayloadTooLarge",
    "RequestTimeoutError",
    "Runner",
    "StartTracker",
    "StoreBusyError",
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


def is_locked(e: BaseException) -> bool:
    """SQLite's "database is locked" / "busy", raw or wrapped in a StoreError."""
    if isinstance(e, (sqlite3.OperationalError, StoreError)):
        msg = str(e).lower()
        return "locked" in msg or "busy" in msg
    return False


class Runner:
    """Runs blocking Memory calls on a bounded pool under a deadline."""

    def __init__(self, threads: int, timeout: float, write_retries: int = 3) -> None:
        self.threads, self.timeout, self.write_retries = threads, timeout, write_retries
        self._executor: ThreadPoolExecutor | None = None

    @property
    def executor(self) -> ThreadPoolExecutor:
        # created on first use (and again after a shutdown: an app may be started twice)
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="hybridmem-http")
        return self._executor

    async def __call__(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        fut = loop.run_in_executor(self.executor, functools.partial(fn, *args, **kwargs))
        try:
            return await asyncio.wait_for(fut, self.timeout)
        except TimeoutError:
            raise RequestTimeoutError(f"the request took longer than {self.timeout:g} s") from None

    async def write(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """A write, retried with back-off while another process holds the store's write lock."""

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

        return await self(attempt)

    def shutdown(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
