"""Loopback is not a boundary by itself (issue 16): a forged ``Host`` (DNS rebinding) is a 421 and a
cross-site state-changing request (CSRF) a 403, over real HTTP, for reads, writes and the multipart
upload; the MCP endpoint over HTTP takes the HTTP API's keys and checks every namespace; one tenant
cannot take every worker (429 past its share and queue); and the small ones (strict types, the
answer's field names, a body-less graph build, ``serve --host '[::1]'``)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from hybridmem import Memory
from hybridmem.errors import ValidationError
from hybridmem.server import common
from hybridmem.server.auth import HostPolicy
from hybridmem.server.config import ConfigError, ServerConfig, load_config
from hybridmem.server.mcp import check_transport
from server_utils import LiveServer, assert_error, wait_listening

KEY_A = "sk-sec-team-a-01"  # team-a only
KEY_B = "sk-sec-team-b-01"  # team-b only
KEY_ADMIN = "sk-sec-admin-001"  # every namespace
KEYS = {KEY_A: ("team-a",), KEY_B: ("team-b",), KEY_ADMIN: ("*",)}
EVIL = "http://evil.example"


class Proxy:
    """A Memory stand-in that delegates, with some calls overridden (slow ones)."""

    def __init__(self, mem: Memory, **overrides: Any) -> None:
        self._mem, self._over = mem, overrides

    def __getattr__(self, name: str) -> Any:
        return self._over.get(name) or getattr(self._mem, name)


@pytest.fixture(scope="module")
def shared_mem(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    m = Memory(tmp_path_factory.mktemp("sec") / "m.db", embedder="hash", auto_embed=False)
    m.add_documents([{"id": "fact", "text": "The billing pool holds 200 connections."}])
    yield m
    m.close()


@pytest.fixture(scope="module")
def open_srv(shared_mem: Memory) -> Iterator[LiveServer]:
    """A key-less server on 127.0.0.1: the case DNS rebinding and CSRF attack."""
    with LiveServer(shared_mem) as s:
        yield s


def _upload(c: httpx.Client, name: str, **headers: str) -> httpx.Response:
    return c.post(
        "/v1/documents", files=[("files", (f"{name}.txt", b"poisoned memory", "text/plain"))], headers=headers
    )


# ---------------------------------------------------------------------------------------------- Host


def test_a_forged_host_is_421_for_reads_writes_and_uploads(open_srv: LiveServer) -> None:
    with open_srv.client() as c:
        evil = {"Host": "evil.example"}
        err = assert_error(c.get("/v1/stats", headers=evil), 421, "misdirected_request")
        assert "evil.example" in err["message"] and "--allowed-host" in err["message"]
        assert_error(c.post("/v1/query", json={"search_text": "pool"}, headers=evil), 421, "misdirected_request")
        r = c.post("/v1/memories", json={"memories": [{"id": "rebound", "text": "x"}]}, headers=evil)
        assert_error(r, 421)
        assert_error(_upload(c, "rebound-upload", Host="evil.example:%d" % open_srv.port), 421)
        assert_error(c.get("/v1/memories/fact", headers={"Host": "127.0.0.1.evil.example"}), 421)
        assert_error(c.get("/healthz", headers={"Host": "localhost.evil.example:80"}), 421)
        # nothing was written, and the loopback names (with or without a port) are served
        for host in ("127.0.0.1", f"127.0.0.1:{open_srv.port}", f"localhost:{open_srv.port}", f"[::1]:{open_srv.port}"):
            assert c.get("/v1/memories/fact", headers={"Host": host}).status_code == 200, host
        assert_error(c.get("/v1/memories/rebound"), 404)
        assert_error(c.get("/v1/memories/rebound-upload"), 404)
        metrics = c.get("/metrics").text
    assert 'type="misdirected_request"' in metrics  # counted like every error


def test_allowed_hosts_adds_names(shared_mem: Memory) -> None:
    with LiveServer(shared_mem, ServerConfig(allowed_hosts=("memory.internal",))) as s, s.client() as c:
        assert c.get("/v1/stats", headers={"Host": f"memory.internal:{s.port}"}).status_code == 200
        r = c.post(
            "/v1/query",
            json={"search_text": "pool"},
            headers={"Host": f"memory.internal:{s.port}", "Origin": f"http://memory.internal:{s.port}"},
        )
        assert r.status_code == 200, r.text
        assert_error(c.get("/v1/stats", headers={"Host": "evil.example"}), 421)
    with LiveServer(shared_mem, ServerConfig(allowed_hosts=("memory.internal:9999",))) as s, s.client() as c:
        assert_error(c.get("/v1/stats", headers={"Host": "memory.internal:9998"}), 421)  # a port given is exact
        assert c.get("/v1/stats", headers={"Host": "memory.internal:9999"}).status_code == 200


def test_host_policy() -> None:
    p = HostPolicy.for_bind("127.0.0.1")
    for ok in ("127.0.0.1", "127.0.0.1:8080", "LOCALHOST:1", "localhost.", "[::1]", "[::1]:8080"):
        assert p.allows_host(ok), ok
    for bad in (None, "", "evil.example", "127.0.0.2", "[::1", "127.0.0.1:http", "localhost:80:80"):
        assert not p.allows_host(bad), bad
    assert HostPolicy.for_bind("10.1.2.3").allows_host("10.1.2.3:8080")  # the bound address
    assert HostPolicy.for_bind("::1").allows_host("[::1]:1")
    # a wildcard bind (which needs keys) cannot know its names: any Host, unless they are listed
    assert HostPolicy.for_bind("0.0.0.0").allows_host("memory.example.com")
    listed = HostPolicy.for_bind("0.0.0.0", ("memory.example.com",))
    assert listed.allows_host("memory.example.com:8080") and not listed.allows_host("evil.example")
    assert HostPolicy.for_bind("127.0.0.1", ("*",)).allows_host("anything")


def test_allowed_hosts_from_file_env_and_flags(tmp_path: Path) -> None:
    f = tmp_path / "s.toml"
    f.write_text('allowed_hosts = ["a.internal"]\n')
    cfg = load_config(f, env={"HYBRIDMEM_ALLOWED_HOSTS": "b.internal, c.internal:8080"}, allowed_hosts=["d"])
    assert cfg.allowed_hosts == ("a.internal", "b.internal", "c.internal:8080", "d")
    assert load_config(env={"HYBRIDMEM_SERVER_ALLOWED_HOSTS": "x,y"}).allowed_hosts == ("x", "y")
    with pytest.raises(ConfigError, match="allowed_hosts"):
        load_config(env={}, allowed_hosts=["http://evil.example/"])


# ---------------------------------------------------------------------------------------------- Origin


def test_cross_origin_writes_are_403_and_write_nothing(open_srv: LiveServer) -> None:
    with open_srv.client() as c:
        for headers in (
            {"Origin": EVIL},
            {"Origin": "null"},  # a sandboxed frame, a file:// page
            {"Origin": "http://localhost:3000"},  # another local site (another port)
            {"Sec-Fetch-Site": "cross-site"},
            {"Sec-Fetch-Site": "same-site"},
        ):
            err = assert_error(
                c.post("/v1/memories", json={"memories": [{"id": "csrf", "text": "x"}]}, headers=headers),
                403,
                "forbidden",
            )
            assert "cross-origin" in err["message"], headers
            assert_error(_upload(c, "csrf-upload", **headers), 403, "forbidden")  # a form post
            assert_error(c.post("/v1/query", json={"search_text": "pool"}, headers=headers), 403)
            assert_error(c.put("/v1/memories/fact", json={"text": "overwritten"}, headers=headers), 403)
            assert_error(c.delete("/v1/memories/fact", headers=headers), 403)
        assert_error(c.get("/v1/memories/csrf"), 404)
        assert_error(c.get("/v1/memories/csrf-upload"), 404)
        assert c.get("/v1/memories/fact").json()["chunks"][0]["text"].startswith("The billing pool")
        # reads pass (a cross-site page cannot read the answer), and so do the same origin, a
        # browser's own navigation and clients that send no Origin (curl, SDKs)
        assert c.get("/v1/stats", headers={"Origin": EVIL, "Sec-Fetch-Site": "cross-site"}).status_code == 200
        same = {"Origin": f"http://127.0.0.1:{open_srv.port}", "Sec-Fetch-Site": "same-origin"}
        assert c.post("/v1/query", json={"search_text": "pool"}, headers=same).status_code == 200
        assert c.post("/v1/query", json={"search_text": "pool"}, headers={"Sec-Fetch-Site": "none"}).status_code == 200
        r = _upload(c, "no-origin-upload")
        assert r.status_code == 200 and r.json()["added"] == ["no-origin-upload"]


def test_a_keyed_server_checks_host_and_origin_before_the_key(shared_mem: Memory) -> None:
    with LiveServer(shared_mem, ServerConfig(api_keys=KEYS)) as s, s.client(KEY_ADMIN) as c:
        assert_error(c.get("/v1/stats", headers={"Host": "evil.example"}), 421)
        assert_error(c.post("/v1/query", json={"search_text": "x"}, headers={"Origin": EVIL}), 403, "forbidden")
        assert c.post("/v1/query", json={"search_text": "x"}).status_code == 200


# ---------------------------------------------------------------------------------------------- small ones


@pytest.mark.parametrize(
    "path,body,field",
    [
        ("/v1/query", {"search_text": "x", "top_k": True}, "top_k"),
        ("/v1/query", {"search_text": "x", "top_k": 2.0}, "top_k"),
        ("/v1/query", {"search_text": "x", "rerank": "yes"}, "rerank"),
        ("/v1/query", {"search_text": "x", "rerank": 1}, "rerank"),
        ("/v1/query", {"search_text": "x", "fetch_k": "20"}, "fetch_k"),
        ("/v1/query", {"search_text": "x", "hybrid_params": {"dense_weight": True}}, "hybrid_params.dense_weight"),
        ("/v1/query", {"search_text": "x", "hybrid_params": {"rrf_k_constant": "60"}}, "hybrid_params.rrf_k_constant"),
        ("/v1/answer", {"question": "x", "top_k": True}, "top_k"),
        ("/v1/answer", {"question": "x", "rerank": "yes"}, "rerank"),
        ("/v1/graph/global", {"question": "x", "level": True}, "level"),
    ],
)
def test_numbers_and_booleans_are_strict(open_srv: LiveServer, path: str, body: dict, field: str) -> None:
    with open_srv.client() as c:
        assert_error(c.post(path, json=body), 422, "validation_error", field)


def test_an_int_is_still_a_float(open_srv: LiveServer, shared_mem: Memory) -> None:
    with open_srv.client() as c:
        r = c.post(
            "/v1/query", json={"search_text": "pool", "hybrid_params": {"dense_weight": 1, "rrf_k_constant": 60}}
        )
        assert r.status_code == 200, r.text
    # the Python API's keyword weights are ints too
    assert shared_mem.search("billing pool", dense_weight=0, top_k=3).total_retrieved >= 1


@pytest.mark.parametrize("mode,weight", [("bm25", "sparse_weight"), ("vector", "dense_weight")])
def test_a_mode_whose_only_leg_weighs_0_is_422(open_srv: LiveServer, mode: str, weight: str) -> None:
    with open_srv.client() as c:
        r = c.post("/v1/query", json={"search_text": "pool", "mode": mode, "hybrid_params": {weight: 0}})
        err = assert_error(r, 422, "validation_error", f"hybrid_params.{weight}")
        assert mode in err["message"] and "weight" in err["message"]
        ok = c.post("/v1/query", json={"search_text": "pool", "mode": "bm25", "hybrid_params": {"dense_weight": 0}})
        assert ok.status_code == 200 and ok.json()["total_retrieved"] >= 1


@pytest.mark.parametrize("question", ["   ", "nul \u0000 byte"])
def test_answer_errors_name_the_question(open_srv: LiveServer, shared_mem: Memory, question: str) -> None:
    with open_srv.client() as c:
        err = assert_error(c.post("/v1/answer", json={"question": question}), 422, "validation_error", "question")
    assert "search_text" not in err["message"]
    with pytest.raises(ValidationError) as e:  # the MCP ask tool's path
        common.ask(shared_mem, question)
    assert e.value.field == "question" and "search_text" not in str(e.value)


def test_graph_build_without_a_body(shared_mem: Memory) -> None:
    with LiveServer(shared_mem) as s, s.client() as c:
        r = c.post("/v1/graph/build")
        assert r.status_code == 200, r.text
        assert r.json()["namespace"] == "default"
        assert c.post("/v1/graph/update").status_code == 200
        err = assert_error(c.post("/v1/graph/global"), 422, "validation_error", "body")
        assert "JSON object" in err["message"]
        assert_error(c.post("/v1/query"), 422, "validation_error", "body")


def _cli(*args: str, env: dict[str, str] | None = None, background: bool = False) -> Any:
    cmd = [sys.executable, "-m", "hybridmem.cli", *args]
    e = {k: v for k, v in os.environ.items() if not k.startswith("HYBRIDMEM_")}
    e.update(env or {})
    if background:
        return subprocess.Popen(cmd, env=e, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=60)


def _free_port(family: int = socket.AF_INET, host: str = "127.0.0.1") -> int:
    with socket.socket(family) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def test_serve_on_bracketed_ipv6_loopback(tmp_path: Path) -> None:
    try:
        port = _free_port(socket.AF_INET6, "::1")
    except OSError:
        pytest.skip("no IPv6 loopback here")
    db = str(tmp_path / "m.db")
    proc = _cli("--embedder", "hash", "serve", "--db", db, "--host", "[::1]", "--port", str(port), background=True)
    try:
        wait_listening(f"http://[::1]:{port}/healthz", proc)
        assert httpx.get(f"http://[::1]:{port}/healthz").json()["status"] == "ok"
        info = json.loads((tmp_path / "m.db.serve.json").read_text())
        assert info["host"] == "::1"  # the discovery file's address is usable: [::1]:port
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=20)
    assert f"http://[::1]:{port}" in err and "Traceback" not in err


def test_serve_refusal_keeps_its_brackets(tmp_path: Path) -> None:
    r = _cli("--db", str(tmp_path / "m.db"), "--embedder", "hash", "serve", "--host", "0.0.0.0")
    assert r.returncode == 2 and "[api_keys]" in r.stderr and "Traceback" not in r.stderr


# ---------------------------------------------------------------------------------------------- per-tenant share


class Gate:
    """A slow search: each call waits until released (or 10 s), counting the calls in flight."""

    def __init__(self, mem: Memory) -> None:
        self.mem, self.release, self.lock = mem, threading.Event(), threading.Lock()
        self.running = 0

    def search(self, req: Any, *a: Any, **kw: Any) -> Any:
        with self.lock:
            self.running += 1
        try:
            self.release.wait(10)
            return self.mem.search(req, *a, **kw)
        finally:
            with self.lock:
                self.running -= 1

    def wait_running(self, n: int) -> None:
        deadline = time.monotonic() + 10
        while self.running < n:
            assert time.monotonic() < deadline, f"{self.running} of {n} calls started"
            time.sleep(0.01)


def _in_threads(fn: Any, n: int) -> tuple[list[threading.Thread], list[httpx.Response]]:
    out: list[httpx.Response] = []
    threads = [threading.Thread(target=lambda: out.append(fn())) for _ in range(n)]
    for t in threads:
        t.start()
    return threads, out


def test_a_tenant_past_its_share_gets_429_others_do_not(shared_mem: Memory) -> None:
    gate = Gate(shared_mem)
    cfg = ServerConfig(api_keys=KEYS, max_concurrent_per_tenant=2, max_queued_per_tenant=0)
    with LiveServer(Proxy(shared_mem, search=gate.search), cfg) as s, s.client(KEY_A) as a, s.client(KEY_B) as b:
        threads, done = _in_threads(lambda: s.client(KEY_A).post("/v1/query", json={"search_text": "pool"}), 2)
        gate.wait_running(2)
        r = a.post("/v1/query", json={"search_text": "pool"})
        err = assert_error(r, 429, "too_many_requests")
        assert r.headers["retry-after"] == "1" and "max_concurrent_per_tenant" in err["message"]
        assert_error(a.post("/v1/answer", json={"question": "pool?"}), 429)  # answers share the slots
        assert a.get("/v1/stats").status_code == 200  # cheap requests are not counted
        # another tenant is served meanwhile
        other, other_done = _in_threads(lambda: b.post("/v1/query", json={"search_text": "pool"}), 1)
        gate.wait_running(3)
        gate.release.set()
        for t in threads + other:
            t.join(20)
        assert [x.status_code for x in done + other_done] == [200, 200, 200]
        assert a.post("/v1/query", json={"search_text": "pool"}).status_code == 200  # slots came back


def test_over_its_share_a_request_waits_in_the_queue(shared_mem: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    from hybridmem.server import limits

    entered: list[str] = []  # requests that asked the tenant's slots for one (running or queued)
    real = limits.TenantSlots.acquire

    async def counted(self: limits.TenantSlots, tenant: str, timeout: float):  # type: ignore[no-untyped-def]
        entered.append(tenant)
        return await real(self, tenant, timeout)

    monkeypatch.setattr(limits.TenantSlots, "acquire", counted)
    gate = Gate(shared_mem)
    cfg = ServerConfig(max_concurrent_per_tenant=1, max_queued_per_tenant=1)
    with LiveServer(Proxy(shared_mem, search=gate.search), cfg) as s, s.client() as c:
        threads, done = _in_threads(lambda: s.client().post("/v1/query", json={"search_text": "pool"}), 2)
        gate.wait_running(1)
        # the second one has reached the server and is queued, not running
        deadline = time.monotonic() + 10
        while len(entered) < 2:
            assert time.monotonic() < deadline, f"{len(entered)} of 2 requests reached the slots"
            time.sleep(0.01)
        time.sleep(0.05)
        assert gate.running == 1
        assert_error(c.post("/v1/query", json={"search_text": "pool"}), 429, "too_many_requests")
        gate.release.set()
        for t in threads:
            t.join(20)
        assert [x.status_code for x in done] == [200, 200]


@pytest.mark.parametrize("turns", range(4))
def test_a_request_that_just_took_the_free_slot_does_not_fill_the_queue(turns: int) -> None:
    """A second request arriving while the first one's acquire is still returning (``turns`` loop
    turns later) is queued, and only a third gets 429 (the first used to count as waiting until
    its acquire returned: the second got 429 and the third the queue)."""
    import asyncio

    from hybridmem.server.limits import TenantSlots, TooManyRequests

    async def scenario() -> tuple[bool, str, bool]:
        slots = TenantSlots(1, 1)
        first = asyncio.create_task(slots.acquire("t", 5))
        for _ in range(turns):
            await asyncio.sleep(0)
        second = asyncio.create_task(slots.acquire("t", 5))
        for _ in range(3):
            await asyncio.sleep(0)
        try:
            (await slots.acquire("t", 5))()
            third = "served"
        except TooManyRequests:
            third = "429"
        release = await first
        second_waits = not second.done()
        release()
        (await asyncio.wait_for(second, 5))()  # the queued one gets the slot once it is free
        return second_waits, third, slots._waiting["t"] == 0

    assert asyncio.run(scenario()) == (True, "429", True)


def test_a_timed_out_request_keeps_its_slot_until_its_work_ends(shared_mem: Memory) -> None:
    gate = Gate(shared_mem)
    cfg = ServerConfig(max_concurrent_per_tenant=1, max_queued_per_tenant=0, request_timeout=0.3)
    with LiveServer(Proxy(shared_mem, search=gate.search), cfg) as s, s.client() as c:
        assert_error(c.post("/v1/query", json={"search_text": "pool"}), 504, "timeout")
        assert gate.running == 1  # the abandoned call still runs: it still counts
        assert_error(c.post("/v1/query", json={"search_text": "pool"}), 429, "too_many_requests")
        gate.release.set()
        deadline = time.monotonic() + 10
        while gate.running and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.05)  # the slot is released on the event loop
        assert c.post("/v1/query", json={"search_text": "pool"}).status_code == 200


def test_share_settings_are_validated() -> None:
    with pytest.raises(ConfigError, match="max_concurrent_per_tenant"):
        ServerConfig(max_concurrent_per_tenant=0).validate()
    with pytest.raises(ConfigError, match="max_queued_per_tenant"):
        ServerConfig(max_queued_per_tenant=-1).validate()
    assert load_config(env={"HYBRIDMEM_SERVER_MAX_CONCURRENT_PER_TENANT": "3"}).max_concurrent_per_tenant == 3


def test_mcp_http_off_loopback_needs_keys() -> None:
    with pytest.raises(ConfigError, match="without API keys"):
        check_transport("http", "0.0.0.0", {})
    assert check_transport("http", "0.0.0.0", {KEY_A: ("team-a",)}) == "streamable-http"
    assert check_transport("http", "[::1]", {}) == "streamable-http"
