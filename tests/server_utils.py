"""A real uvicorn server on a free loopback port, in a thread, for the server tests."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import httpx
import uvicorn

from hybridmem.server.config import ServerConfig
from hybridmem.server.http import create_app


class LiveServer:
    """``with LiveServer(memory, config) as srv: httpx.get(srv.url + "/healthz")``"""

    def __init__(self, memory: Any, config: ServerConfig | None = None) -> None:
        self.app = create_app(memory, config or ServerConfig())

    def __enter__(self) -> "LiveServer":
        # uvicorn binds the port itself: handing it a pre-bound socket made every request ~40 ms
        # slower here (small writes delayed); a port taken meanwhile by someone else is retried
        for _ in range(5):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind(("127.0.0.1", 0))
                self.port = s.getsockname()[1]
            self.url = f"http://127.0.0.1:{self.port}"
            self.server = uvicorn.Server(
                uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="on")
            )
            self.thread = threading.Thread(target=self.server.run, daemon=True)
            self.thread.start()
            deadline = time.monotonic() + 20
            while not self.server.started and self.thread.is_alive() and time.monotonic() < deadline:
                time.sleep(0.02)
            if self.server.started:
                return self
            self.server.should_exit = True
            self.thread.join(timeout=5)
        raise RuntimeError("the test server did not start")

    def __exit__(self, *exc: Any) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)

    def client(self, key: str | None = None, **kw: Any) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=kw.pop("timeout", 30), **kw)


def wait_listening(url: str, proc: Any, seconds: float = 60) -> None:
    """Until ``url`` answers HTTP (any status); fails with the server's stderr if ``proc`` exits or
    ``seconds`` pass first."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.2)


def assert_error(resp: httpx.Response, status: int, type_: str | None = None, field: str | None = None) -> dict:
    """The response is a JSON error of the contract with this status (and type / field)."""
    assert resp.status_code == status, (resp.status_code, resp.text)
    assert resp.headers["content-type"].startswith("application/json"), resp.headers
    body = resp.json()
    assert set(body) == {"error"} and set(body["error"]) == {"type", "message", "field"}, body
    assert body["error"]["message"] and "Traceback" not in body["error"]["message"]
    if type_ is not None:
        assert body["error"]["type"] == type_, body
    if field is not None:
        assert body["error"]["field"] == field, body
    return body["error"]
