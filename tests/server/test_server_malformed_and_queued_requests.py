"""Regressions for what the hardening benchmarks found in the server (``bench/fuzz.py``,
``bench/worst_case.py``, ``bench/pg_restarts.py``): a malformed multipart body answered 400, and a
call queued for a worker thread got a fresh deadline when it started."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hybridmem import Memory, deadline
from hybridmem.server.config import ServerConfig
from hybridmem.server.limits import RequestTimeoutError, Runner
from server_utils import LiveServer, assert_error

KEY = "key-hardening-0001"


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    mem = Memory(Path(tmp_path_factory.mktemp("found")) / "m.db", embedder="hash", auto_embed=False)
    with LiveServer(mem, ServerConfig(api_keys={KEY: ("default",)})) as s:
        yield s
    mem.close()


@pytest.mark.parametrize(
    "content_type,body",
    [
        ("multipart/form-data", b"--XX\r\n"),  # no boundary parameter
        ("multipart/form-data; boundary=", b"garbage"),  # an empty one
    ],
)
def test_unparsable_multipart_is_422_not_400(srv: LiveServer, content_type: str, body: bytes) -> None:
    """bench/fuzz.py: a multipart upload Starlette cannot parse was a 400 ``bad_request``, a status
    the error contract (docs/server.md) does not have; a malformed body is a 422."""
    with srv.client(KEY) as c:
        r = c.post("/v1/documents", content=body, headers={"content-type": content_type})
    err = assert_error(r, 422, "validation_error")
    assert err["message"].startswith("request body could not be parsed")


def test_a_call_that_waited_for_a_thread_keeps_its_request_deadline() -> None:
    """bench/worst_case.py: the work's deadline was set when a worker thread took the call, as
    "timeout from now"; a call queued behind busy threads then ran a whole timeout past its 504.
    It now runs only until the request's own deadline, and not at all when that passed."""
    runner = Runner(threads=1, timeout=1.0)
    seen: dict[str, float | None] = {}
    started = threading.Event()

    def hold_the_thread() -> None:
        started.set()
        time.sleep(0.6)

    def second() -> None:
        seen["left"] = deadline.remaining()

    def late() -> None:
        seen["late ran"] = 1.0

    async def scenario() -> None:
        first = asyncio.ensure_future(runner.run(hold_the_thread))
        await asyncio.to_thread(started.wait, 5)
        await runner.run(second)  # waited ~0.6 s of its 1 s for the only thread
        await first
        blocker = asyncio.ensure_future(runner.run(lambda: time.sleep(1.5)))
        await asyncio.sleep(0.05)
        with pytest.raises(RequestTimeoutError):
            await runner.run(late)  # its deadline passes while it waits for the thread
        with pytest.raises(RequestTimeoutError):
            await blocker  # 1.5 s of a 1 s deadline (a sleep: nothing interrupts it)
        await asyncio.sleep(0.1)

    try:
        asyncio.run(scenario())
    finally:
        runner.shutdown()
    assert seen["left"] is not None and seen["left"] < 0.6, seen  # not a fresh 1 s
    assert "late ran" not in seen, "a call whose deadline had passed was started"
