"""Logs that explain (issue 16): one line per request (id, tenant — never the key —, method, route,
status, ms), the exception and its traceback for every 5xx under the id its message gives, an
``X-Request-ID`` on every response, and ``serve``'s ``--log-format json|text`` on stderr."""

from __future__ import annotations

import io
import json
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from hybridmem import Memory
from hybridmem.server.common import JsonFormatter, TextFormatter, configure_logging
from hybridmem.server.config import ServerConfig
from server_utils import LiveServer, assert_error

KEY = "sk-log-team-a-001"
ACCESS = "hybridmem.server.access"
ERRORS = "hybridmem.server.errors"


class Proxy:
    def __init__(self, mem: Memory, **overrides: Any) -> None:
        self._mem, self._over = mem, overrides

    def __getattr__(self, name: str) -> Any:
        return self._over.get(name) or getattr(self._mem, name)


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    m = Memory(tmp_path_factory.mktemp("log") / "m.db", embedder="hash", auto_embed=False)
    m.add_documents([{"id": "fact", "text": "The billing pool holds 200 connections."}], namespace="team-a")
    yield m
    m.close()


def _records(caplog: pytest.LogCaptureFixture, logger: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == logger]


def _wait_for(caplog: pytest.LogCaptureFixture, logger: str, n: int) -> list[logging.LogRecord]:
    """The request line is written once the response is sent: give the server thread a moment."""
    deadline = time.monotonic() + 5
    while len(_records(caplog, logger)) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    return _records(caplog, logger)


def test_one_line_per_request_with_id_tenant_route_status_ms(mem: Memory, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="hybridmem.server")
    with LiveServer(mem, ServerConfig(api_keys={KEY: ("team-a",)})) as s, s.client(KEY) as c:
        ok = c.post("/v1/query", json={"search_text": "billing pool"}, headers={"X-Request-ID": "client-id-42"})
        assert ok.status_code == 200 and ok.headers["x-request-id"] == "client-id-42"
        got = c.get("/v1/memories/fact")
        assert got.status_code == 200
        anon = httpx.get(s.url + "/v1/stats")
        assert_error(anon, 401)
        lines = _wait_for(caplog, ACCESS, 3)
    query, get, unauthorized = lines[:3]
    assert query.request_id == "client-id-42" and query.method == "POST" and query.route == "/v1/query"  # type: ignore[attr-defined]
    assert query.status == 200 and isinstance(query.ms, float) and query.ms >= 0  # type: ignore[attr-defined]
    assert query.tenant != "anonymous" and len(query.tenant) == 12  # type: ignore[attr-defined]
    assert get.route == "/v1/memories/{doc_id}" and get.request_id == got.headers["x-request-id"]  # type: ignore[attr-defined]
    assert unauthorized.status == 401 and unauthorized.tenant == "anonymous"  # type: ignore[attr-defined]
    assert KEY not in caplog.text and "fact" not in get.getMessage()  # never the key, nor the raw path


def test_every_response_has_a_request_id(mem: Memory) -> None:
    with LiveServer(mem, ServerConfig(max_body_bytes=1000)) as s, s.client() as c:
        ids = set()
        for r in (
            c.get("/healthz"),
            c.get("/v1/nothing-here"),  # 404
            c.post("/v1/query", json={"search_text": "x" * 2000}),  # 413 before routing
            c.get("/healthz", headers={"Host": "evil.example"}),  # 421 before anything
            c.post("/v1/query", json={"search_text": "x"}, headers={"X-Request-ID": "x" * 65}),  # too long
            c.get("/healthz", headers={"X-Request-ID": "two words"}),  # not a token
        ):
            rid = r.headers["x-request-id"]
            assert 1 <= len(rid) <= 64 and " " not in rid
            ids.add(rid)
        assert len(ids) == 6  # each its own; a bad client id is replaced
        assert c.get("/healthz", headers={"X-Request-ID": "a.b:c-d_e/1"}).headers["x-request-id"] == "a.b:c-d_e/1"


def test_a_500_logs_its_traceback_under_the_id_it_gives(mem: Memory, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="hybridmem.server")

    def boom(*_: Any, **__: Any) -> None:
        raise RuntimeError("secret internals /etc/passwd")

    with LiveServer(Proxy(mem, search=boom)) as s, s.client() as c:
        r = c.post("/v1/query", json={"search_text": "x"})
        err = assert_error(r, 500, "internal_error")
        rid = r.headers["x-request-id"]
        assert f"request id {rid}" in err["message"] and "server log" in err["message"]
        assert "secret" not in err["message"]
        _wait_for(caplog, ACCESS, 1)
    (failure,) = _records(caplog, ERRORS)
    assert failure.levelno == logging.ERROR and failure.request_id == rid  # type: ignore[attr-defined]
    assert failure.exc_info is not None and failure.exc_info[0] is RuntimeError
    assert "secret internals" in caplog.text and "Traceback" in caplog.text and "boom" in caplog.text
    (line,) = [x for x in _records(caplog, ACCESS) if x.request_id == rid]  # type: ignore[attr-defined]
    assert line.status == 500  # type: ignore[attr-defined]


def test_a_store_error_also_gives_its_id(mem: Memory, caplog: pytest.LogCaptureFixture) -> None:
    import sqlite3

    caplog.set_level(logging.INFO, logger="hybridmem.server")

    def broken(*_: Any, **__: Any) -> None:
        raise sqlite3.DatabaseError("database disk image is malformed")

    with LiveServer(Proxy(mem, search=broken)) as s, s.client() as c:
        r = c.post("/v1/query", json={"search_text": "x"})
        err = assert_error(r, 500, "store_error")
    assert f"request id {r.headers['x-request-id']}" in err["message"]
    (failure,) = _records(caplog, ERRORS)
    assert failure.request_id == r.headers["x-request-id"] and failure.exc_info  # type: ignore[attr-defined]


def test_formats_json_and_text() -> None:
    def record(**extra: Any) -> logging.LogRecord:
        try:
            raise ValueError("bad\nthing")
        except ValueError:
            rec = logging.getLogger("t").makeRecord("t", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
        rec.__dict__.update(extra)
        return rec

    rec = record(request_id="abc", tenant="anonymous", path='/x y\n"forged" status=200', status=500)
    j = JsonFormatter().format(rec)
    assert "\n" not in j
    data = json.loads(j)
    assert data["request_id"] == "abc" and data["status"] == 500 and "Traceback" in data["exception"]
    assert data["level"] == "error" and data["message"] == "failed" and data["time"].endswith("Z")
    t = TextFormatter().format(rec)
    first = t.splitlines()[0]
    assert "ERROR t failed request_id=abc tenant=anonymous" in first and "status=500" in first
    assert 'path="/x y\\n\\"forged\\" status=200"' in first  # quoted: a client cannot forge a field
    assert "Traceback" in t


def test_configure_logging_sends_the_request_id_along() -> None:
    out = io.StringIO()
    configure_logging("info", "json", stream=out)
    try:
        logging.getLogger("hybridmem.server.test").info("hello", extra={"tenant": "t1"})
        logging.getLogger("hybridmem.server.test").debug("hidden")
    finally:
        for name in ("hybridmem", "uvicorn", "mcp"):  # leave the loggers as the other tests expect them
            lg = logging.getLogger(name)
            for h in [h for h in lg.handlers if h.get_name() == "hybridmem"]:
                lg.removeHandler(h)
            lg.propagate, lg.level = True, logging.NOTSET
    (line,) = out.getvalue().splitlines()
    assert json.loads(line)["tenant"] == "t1"


def _serve(tmp_path: Path, *flags: str) -> tuple[subprocess.Popen, str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("HYBRIDMEM_")}
    env["HYBRIDMEM_API_KEYS"] = f"{KEY}:team-a"
    cmd = [sys.executable, "-m", "hybridmem.cli", "--embedder", "hash", "serve", "--db", str(tmp_path / "m.db")]
    proc = subprocess.Popen(
        [*cmd, "--port", str(port), *flags], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.2)


def _traffic(url: str) -> str:
    h = {"Authorization": f"Bearer {KEY}", "X-Request-ID": "traffic-1"}
    r = httpx.post(url + "/v1/memories", headers=h, json={"memories": [{"id": "f", "text": "logged fact"}]})
    assert r.status_code == 200
    assert httpx.get(url + "/v1/nothing here", headers=h).status_code == 404
    return r.headers["x-request-id"]


def test_serve_logs_json_lines(tmp_path: Path) -> None:
    proc, url = _serve(tmp_path, "--log-format", "json")
    try:
        rid = _traffic(url)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=20)
    lines = [json.loads(line) for line in err.splitlines() if line.strip()]  # every line is JSON
    (write,) = [x for x in lines if x.get("request_id") == rid and x.get("route") == "/v1/memories"]
    assert write["status"] == 200 and write["method"] == "POST" and write["tenant"] not in ("anonymous", KEY)
    assert any(x.get("route") == "unmatched" and x.get("status") == 404 for x in lines)
    assert any("hybridmem serving" in x["message"] for x in lines)  # the banner too
    assert any(x["logger"].startswith("uvicorn") for x in lines) and KEY not in err


def test_serve_logs_text_by_default_and_honours_the_level(tmp_path: Path) -> None:
    proc, url = _serve(tmp_path)
    try:
        rid = _traffic(url)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=20)
    (line,) = [x for x in err.splitlines() if f"request_id={rid}" in x and "route=/v1/memories" in x]
    assert "hybridmem.server.access" in line and "route=/v1/memories" in line and "status=200" in line
    assert " ms=" in line and "tenant=" in line and KEY not in err
    assert '"POST /v1/memories HTTP/1.1" 200' not in err  # uvicorn's own access line is replaced
    (missing,) = [x for x in err.splitlines() if "route=unmatched" in x]
    assert 'path="/v1/nothing here"' in missing and "status=404" in missing
    proc, url = _serve(tmp_path, "--log-level", "warning")
    try:
        _traffic(url)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=20)
    assert "request_id=" not in err


def test_bad_log_settings_are_one_line(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "hybridmem.cli", "--db", str(tmp_path / "m.db"), "serve", "--log-format", "xml"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "log_format must be text or json" in r.stderr and "Traceback" not in r.stderr
