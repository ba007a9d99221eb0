"""The HTTP API over a real uvicorn server on a loopback port, talked to with httpx: the query
contract, memories CRUD, uploads, answers, auth, limits, timeouts, metrics and JSON errors."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import shared_path
from hybridmem import Memory
from hybridmem.server.config import ServerConfig
from server_utils import LiveServer, assert_error

KEY_A = "key-team-a-0001"  # team-a (default) and shared
KEY_ADMIN = "key-admin-0001"  # every namespace
KEYS = {KEY_A: ("team-a", "shared"), KEY_ADMIN: ("*",)}
POOL = {
    "id": "doc_8832",
    "text": "PostgreSQL connection pool exhaustion causes HTTP 504 timeouts. Increase max_connections to 200.",
    "source": "wiki/infrastructure_troubleshooting.md",
    "metadata": {"environment": "production", "service": "billing-service"},
}
STAGING = {**POOL, "id": "doc_8832_staging", "metadata": {"environment": "staging", "service": "billing-service"}}
CACHE = {
    "id": "cache",
    "text": "Purge the connector cache with helio connector purge NAME when data is stale.",
    "metadata": {"environment": "production", "service": "connectors"},
}


class Proxy:
    """A Memory stand-in that delegates, with hooks to slow down, fail, or hide ``ask``."""

    def __init__(self, mem: Memory, *, hide: tuple[str, ...] = (), **overrides: Any) -> None:
        self._mem, self._hide, self._over = mem, hide, overrides

    def __getattr__(self, name: str) -> Any:
        if name in self._hide:
            raise AttributeError(name)
        return self._over.get(name) or getattr(self._mem, name)


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    m = Memory(tmp_path_factory.mktemp("http") / "m.db", embedder="hash", auto_embed=True)
    yield m
    m.close()


@pytest.fixture(scope="module")
def srv(mem: Memory) -> Iterator[LiveServer]:
    cfg = ServerConfig(api_keys=KEYS, max_body_bytes=64_000, max_upload_bytes=200_000, max_top_k=50, max_batch=20)
    with LiveServer(mem, cfg) as s:
        with s.client(KEY_A) as c:
            r = c.post("/v1/memories", json={"memories": [POOL, STAGING, CACHE]})
            assert r.status_code == 200, r.text
        mem.wait_for_vectors()
        yield s


@pytest.fixture()
def a(srv: LiveServer) -> Iterator[httpx.Client]:
    with srv.client(KEY_A) as c:
        yield c


# ---------------------------------------------------------------------------------------------- query


def test_query_speaks_the_contract(a: httpx.Client) -> None:
    req = json.loads(shared_path("contract", "query_request.example.json").read_text())
    r = a.post("/v1/query", json=req)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["query_id"] == "mem_req_99214"
    assert body["total_retrieved"] == len(body["results"]) >= 1
    top = body["results"][0]
    assert top["chunk_id"] == "doc_8832_p1" and top["source"] == POOL["source"]
    assert {"chunk_id", "rrf_score", "text", "source"} <= set(top)
    assert round(top["rrf_score"], 4) == top["rrf_score"]
    # the filter applied inside every leg: the staging twin never shows up
    assert all(x["metadata"]["environment"] == "production" for x in body["results"])
    assert body["namespace"] == "team-a"  # the key's first namespace
    assert body["legs"]["bm25"]["status"] == "ok" and body["legs"]["dense"]["status"] == "ok"


@pytest.mark.parametrize("mode,legs", [("bm25", {"bm25"}), ("vector", {"dense"}), ("hybrid", {"bm25", "dense"})])
def test_query_modes_run_their_legs(a: httpx.Client, mode: str, legs: set[str]) -> None:
    r = a.post("/v1/query", json={"search_text": "HTTP 504 pool", "mode": mode, "top_k": 3})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["mode"] == mode
    ran = {name for name, leg in body["legs"].items() if leg["status"] == "ok"}
    assert legs <= ran and not ({"bm25", "dense"} - legs) & ran
    assert 1 <= body["total_retrieved"] <= 3


def test_query_rerank_is_accepted(a: httpx.Client) -> None:
    for extra in ({"mode": "rerank"}, {"rerank": True}):
        r = a.post("/v1/query", json={"search_text": "HTTP 504 max_connections", "top_k": 2, **extra})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["total_retrieved"] == len(body["results"]) <= 2
        assert body["results"][0]["doc_id"].startswith("doc_8832")


# ---------------------------------------------------------------------------------------------- memories


def test_memories_batch_is_idempotent_by_id_and_crud_works(a: httpx.Client) -> None:
    batch = [
        {"id": f"note-{i}", "text": f"Runbook note {i}: rotate the zorblax{i} credentials weekly."} for i in range(3)
    ]
    r = a.post("/v1/memories", json={"memories": batch})
    assert r.status_code == 200 and sorted(r.json()["added"]) == ["note-0", "note-1", "note-2"]
    r = a.post("/v1/memories", json={"memories": batch})  # the same batch again: nothing changes
    assert r.json()["unchanged"] == ["note-0", "note-1", "note-2"] and r.json()["added"] == []
    # PUT replaces the text (metadata kept), and the index follows at once (BM25)
    r = a.put("/v1/memories/note-1", json={"text": "Runbook note 1: rotate the quuxfrob credentials daily."})
    assert r.status_code == 200 and r.json()["updated"] == ["note-1"]
    got = a.get("/v1/memories/note-1").json()
    assert got["chunks"][0]["text"].endswith("quuxfrob credentials daily.") and got["namespace"] == "team-a"
    hits = a.post("/v1/query", json={"search_text": "quuxfrob", "mode": "bm25"}).json()["results"]
    assert [h["doc_id"] for h in hits] == ["note-1"]
    assert a.post("/v1/query", json={"search_text": "zorblax1", "mode": "bm25"}).json()["results"] == []
    # DELETE, then it is gone from GET and from search; deleting again is a 404
    r = a.delete("/v1/memories/note-2")
    assert r.status_code == 200 and r.json() == {"deleted": ["note-2"], "namespace": "team-a"}
    assert_error(a.get("/v1/memories/note-2"), 404, "not_found")
    assert a.post("/v1/query", json={"search_text": "zorblax2", "mode": "bm25"}).json()["results"] == []
    assert_error(a.delete("/v1/memories/note-2"), 404, "not_found")
    assert_error(a.put("/v1/memories/never-was", json={"text": "x"}), 404, "not_found")


def test_ids_with_slashes_round_trip(a: httpx.Client) -> None:
    r = a.post("/v1/memories", json={"memories": [{"id": "runbooks/db/pool", "text": "Pool runbook: glarbnik."}]})
    assert r.status_code == 200
    assert a.get("/v1/memories/runbooks/db/pool").json()["doc_id"] == "runbooks/db/pool"
    assert a.delete("/v1/memories/runbooks/db/pool").json()["deleted"] == ["runbooks/db/pool"]


def test_documents_upload(a: httpx.Client) -> None:
    files = [
        (
            "files",
            (
                "incident-42.md",
                b"# Incident 42\n\nThe flumox gateway returned HTTP 502 for 4 minutes.\n",
                "text/markdown",
            ),
        ),
        ("files", ("blob.bin", b"\x00\x01\x02\x03binary", "application/octet-stream")),
    ]
    r = a.post("/v1/documents", files=files, data={"metadata": json.dumps({"kind": "incident"})})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["added"] == ["incident-42"] and body["namespace"] == "team-a"
    assert [s["path"] for s in body["skipped"]] == ["blob.bin"] and "binary" in body["skipped"][0]["reason"]
    hits = a.post(
        "/v1/query", json={"search_text": "flumox", "mode": "bm25", "metadata_filter": {"kind": "incident"}}
    ).json()["results"]
    assert hits and hits[0]["doc_id"] == "incident-42" and hits[0]["source"] == "incident-42.md"
    assert_error(a.post("/v1/documents", files=files[1:]), 422, "validation_error", "files")
    assert_error(a.post("/v1/documents", files=files[:1], data={"metadata": "{not json"}), 422, field="metadata")
    assert_error(a.post("/v1/documents", files=files[:1], data={"metadata": "[1]"}), 422, field="metadata")
    big = [("files", ("big.txt", b"a " * 150_000, "text/plain"))]
    assert_error(a.post("/v1/documents", files=big), 413, "payload_too_large")


# ---------------------------------------------------------------------------------------------- answers


def test_answer_is_grounded_or_clearly_unavailable(a: httpx.Client, mem: Memory) -> None:
    r = a.post(
        "/v1/answer",
        json={
            "question": "What causes HTTP 504 on billing?",
            "top_k": 3,
            "metadata_filter": {"environment": "production"},
        },
    )
    if hasattr(mem, "ask"):
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["found"] is True and body["namespace"] == "team-a"
        cited = {c["chunk_id"] for c in body["citations"]}
        assert "doc_8832_p1" in cited and "[doc_8832_p1]" in body["answer"]
        assert all(x["metadata"]["environment"] == "production" for x in body["results"])
    else:
        assert_error(r, 501, "not_implemented")


def test_answer_without_ask_is_501(mem: Memory) -> None:
    with LiveServer(Proxy(mem, hide=("ask",))) as s, s.client() as c:
        err = assert_error(c.post("/v1/answer", json={"question": "anything"}), 501, "not_implemented")
        assert "not available" in err["message"]


# ---------------------------------------------------------------------------------------------- auth


def test_auth_and_namespaces(srv: LiveServer) -> None:
    with srv.client() as anon:
        r = anon.post("/v1/query", json={"search_text": "pool"})
        assert_error(r, 401, "unauthorized")
        assert r.headers["www-authenticate"] == "Bearer"
        assert anon.get("/healthz").json()["auth"] is True  # liveness and metrics need no key
        assert anon.get("/metrics").status_code == 200
    with srv.client("not-a-valid-key") as bad:
        assert_error(bad.get("/v1/stats"), 401, "unauthorized")
    with httpx.Client(base_url=srv.url, headers={"X-API-Key": KEY_A}) as a:
        assert a.get("/v1/stats").json()["namespace"] == "team-a"  # X-API-Key works too
        assert_error(
            a.post("/v1/query", json={"search_text": "pool", "namespace": "team-b"}), 403, "forbidden", "namespace"
        )
        assert_error(a.get("/v1/stats", params={"namespace": "team-b"}), 403, "forbidden")
        assert_error(a.get("/v1/memories/doc_8832", params={"namespace": "team-b"}), 403, "forbidden")
        assert_error(a.post("/v1/memories", json={"memories": [{"text": "x"}], "namespace": "team-b"}), 403)
        assert_error(a.delete("/v1/memories/doc_8832", params={"namespace": "team-b"}), 403)
        assert_error(a.post("/v1/answer", json={"question": "x", "namespace": "team-b"}), 403)
        assert_error(
            a.post("/v1/documents", files=[("files", ("a.txt", b"hello", "text/plain"))], data={"namespace": "team-b"}),
            403,
        )
        r = a.post("/v1/memories", json={"memories": [{"id": "s1", "text": "shared fact"}], "namespace": "shared"})
        assert r.status_code == 200 and r.json()["namespace"] == "shared"
    with srv.client(KEY_ADMIN) as admin:
        admin.post("/v1/memories", json={"memories": [{"id": "b1", "text": "team b secret"}], "namespace": "team-b"})
        s = admin.get("/v1/stats").json()
        assert s["namespace"] == "default" and {"team-a", "team-b", "shared"} <= set(s["namespaces"]) and s["path"]
    with srv.client(KEY_A) as a:
        s = a.get("/v1/stats").json()
        assert "team-b" not in s["namespaces"] and set(s["namespaces"]) <= {"team-a", "shared"}
        assert s["path"] == ""  # a tenant does not learn where the store lives


# ---------------------------------------------------------------------------------------------- limits and errors


def test_body_size_limit_is_413(srv: LiveServer, a: httpx.Client) -> None:
    big = {"search_text": "x" * 70_000}
    assert_error(a.post("/v1/query", json=big), 413, "payload_too_large")

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted while streaming
        yield b'{"search_text": "'
        for _ in range(70):
            yield b"y" * 1000
        yield b'"}'

    r = a.post("/v1/query", content=chunks(), headers={"content-type": "application/json"})
    assert_error(r, 413, "payload_too_large")
    assert a.get("/healthz").status_code == 200  # the server is fine afterwards
    # counted under their endpoint although refused before routing
    assert 'hybridmem_http_errors_total{endpoint="/v1/query",type="payload_too_large"} 2' in a.get("/metrics").text


def test_limits_name_the_field(a: httpx.Client) -> None:
    err = assert_error(a.post("/v1/query", json={"search_text": "x", "top_k": 51}), 422, "validation_error", "top_k")
    assert "50" in err["message"]
    assert_error(a.post("/v1/query", json={"search_text": "x", "top_k": 10, "fetch_k": 501}), 422, field="fetch_k")
    assert_error(a.post("/v1/answer", json={"question": "x", "top_k": 51}), 422, field="top_k")
    many = {"memories": [{"text": f"m{i}"} for i in range(21)]}
    err = assert_error(a.post("/v1/memories", json=many), 422, "validation_error", "memories")
    assert "20" in err["message"]


@pytest.mark.parametrize(
    "body,field",
    [
        ({"search_text": "x", "bogus": 1}, "bogus"),
        ({"top_k": 3}, "search_text"),
        ({"search_text": "   "}, "search_text"),
        ({"search_text": "x", "top_k": "many"}, "top_k"),
        ({"search_text": "x", "top_k": 0}, "top_k"),
        ({"search_text": "x", "hybrid_params": {"dense_weight": -1}}, "hybrid_params.dense_weight"),
        ({"search_text": "x", "mode": "magic"}, "mode"),
        ({"search_text": "x", "hybrid_params": {"fusion": "borda"}}, "hybrid_params.fusion"),
        ({"search_text": "x", "metadata_filter": {"environment": {"$regex": "p.*"}}}, "metadata_filter"),
        ({"search_text": "x", "namespace": ""}, "namespace"),
    ],
)
def test_bad_queries_are_422_naming_the_field(a: httpx.Client, body: dict, field: str) -> None:
    assert_error(a.post("/v1/query", json=body), 422, field=field)


def test_malformed_requests_are_json_errors(a: httpx.Client) -> None:
    r = a.post("/v1/query", content=b'{"search_text": ', headers={"content-type": "application/json"})
    assert "not valid JSON" in assert_error(r, 422, "validation_error")["message"]
    assert_error(a.post("/v1/query", content=b"[[[[" * 5000, headers={"content-type": "application/json"}), 422)
    assert_error(a.post("/v1/query", json=[1, 2]), 422)
    assert_error(a.post("/v1/query", content=b"search_text=x", headers={"content-type": "text/plain"}), 422)
    assert_error(
        a.post("/v1/memories", json={"memories": [{"id": "x", "text": "ok", "metadata": {"$bad": 1}}]}),
        422,
        field="metadata",
    )
    assert_error(a.post("/v1/memories", json={"memories": []}), 422, field="memories")
    assert_error(a.post("/v1/memories", json={"memories": [{"text": "nul \u0000 byte"}]}), 422, field="text")
    assert_error(a.get("/v1/nothing-here"), 404, "not_found")
    assert_error(a.delete("/v1/query"), 405, "method_not_allowed")


def test_unexpected_failure_is_a_500_without_details(mem: Memory) -> None:
    def boom(*_: Any, **__: Any) -> None:
        raise RuntimeError("secret internals /etc/passwd")

    with LiveServer(Proxy(mem, search=boom)) as s, s.client() as c:
        for _ in range(2):  # the keep-alive connection survives a 500
            err = assert_error(c.post("/v1/query", json={"search_text": "x"}), 500, "internal_error")
            assert "secret" not in err["message"] and "RuntimeError" not in err["message"]
        assert c.get("/healthz").status_code == 200
        assert 'hybridmem_http_errors_total{endpoint="/v1/query",type="internal_error"} 2' in c.get("/metrics").text


def test_request_timeout_is_504(mem: Memory) -> None:
    release = threading.Event()

    def slow(*_: Any, **__: Any) -> None:
        release.wait(5)

    with LiveServer(Proxy(mem, search=slow), ServerConfig(request_timeout=0.3)) as s, s.client() as c:
        t0 = time.monotonic()
        err = assert_error(c.post("/v1/query", json={"search_text": "x"}), 504, "timeout")
        assert time.monotonic() - t0 < 3 and "0.3" in err["message"]
        assert c.get("/healthz").status_code == 200  # the event loop was never blocked
        release.set()


def test_locked_store_is_retried_then_503(mem: Memory) -> None:
    calls = {"n": 0}

    def flaky(docs: Any, **kw: Any) -> Any:
        calls["n"] += 1
        if calls["n"] <= 2:
            raise sqlite3.OperationalError("database is locked")
        return mem.add_documents(docs, **kw)

    def locked(*_: Any, **__: Any) -> Any:
        raise sqlite3.OperationalError("database is locked")

    with LiveServer(Proxy(mem, add_documents=flaky)) as s, s.client() as c:
        r = c.post("/v1/memories", json={"memories": [{"id": "retried", "text": "written after two retries"}]})
        assert r.status_code == 200 and r.json()["added"] == ["retried"] and calls["n"] == 3
    with LiveServer(Proxy(mem, add_documents=locked), ServerConfig(write_retries=1)) as s, s.client() as c:
        r = c.post("/v1/memories", json={"memories": [{"text": "never"}]})
        assert_error(r, 503, "busy")
        assert r.headers["retry-after"] == "1"


# ---------------------------------------------------------------------------------------------- introspection


def test_metrics_count_requests_errors_and_legs(srv: LiveServer, a: httpx.Client) -> None:
    for _ in range(3):
        assert a.post("/v1/query", json={"search_text": "HTTP 504", "mode": "hybrid"}).status_code == 200
    a.post("/v1/query", json={"search_text": "x", "top_k": 999})
    a.get("/v1/memories/doc_8832")
    with srv.client() as anon:
        r = anon.get("/metrics")
    assert r.headers["content-type"].startswith("text/plain")
    text = r.text

    def value(prefix: str) -> float:
        line = next(ln for ln in text.splitlines() if ln.startswith(prefix))
        return float(line.rsplit(" ", 1)[1])

    assert value('hybridmem_http_requests_total{method="POST",endpoint="/v1/query",status="200"}') >= 3
    assert value('hybridmem_http_errors_total{endpoint="/v1/query",type="validation_error"}') >= 1
    assert value('hybridmem_http_request_duration_seconds_count{endpoint="/v1/query"}') >= 4
    for leg in ("bm25", "dense", "exact"):
        assert value(f'hybridmem_leg_duration_seconds_count{{leg="{leg}"}}') >= 3
        assert value(f'hybridmem_leg_total{{leg="{leg}",status="ok"}}') >= 3
    # labelled by route template (bounded cardinality), not by the raw path
    assert value('hybridmem_http_requests_total{method="GET",endpoint="/v1/memories/{doc_id}",status="200"}') >= 1
    assert "doc_8832" not in text
    # histogram buckets are cumulative and end at the count
    buckets = [
        float(ln.rsplit(" ", 1)[1])
        for ln in text.splitlines()
        if ln.startswith('hybridmem_leg_duration_seconds_bucket{leg="bm25"')
    ]
    assert buckets == sorted(buckets) and buckets[-1] == value('hybridmem_leg_duration_seconds_count{leg="bm25"}')


def test_openapi_and_docs(srv: LiveServer) -> None:
    with srv.client() as c:
        spec = c.get("/openapi.json").json()
        assert {
            "/v1/query",
            "/v1/answer",
            "/v1/memories",
            "/v1/memories/{doc_id}",
            "/v1/documents",
            "/v1/stats",
            "/healthz",
            "/metrics",
        } <= set(spec["paths"])
        q = spec["paths"]["/v1/query"]["post"]
        assert q["responses"]["422"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorResponse")
        docs = c.get("/docs")
        assert docs.status_code == 200 and "swagger" in docs.text.lower()


def test_factory_memory_is_opened_at_startup_and_closed_at_shutdown(tmp_path: Path) -> None:
    opened: list[Memory] = []

    class Tracked(Memory):
        closed = False

        def close(self) -> None:
            self.closed = True
            super().close()

    def factory() -> Memory:
        opened.append(Tracked(tmp_path / "f.db", embedder="hash", auto_embed=False))
        return opened[-1]

    server = LiveServer(factory)
    assert opened == []  # nothing happens before the server starts
    with server, server.client() as c:
        assert c.post("/v1/memories", json={"memories": [{"id": "f", "text": "factory fact"}]}).status_code == 200
        assert len(opened) == 1 and not opened[0].closed
    assert opened[0].closed  # closed at shutdown


# ---------------------------------------------------------------------------------------------- graph


def test_graph_endpoints_build_status_global_and_tenancy(srv: LiveServer, a: httpx.Client) -> None:
    r = a.post("/v1/graph/build", json={})
    assert r.status_code == 200, r.text
    rep = r.json()
    assert rep["namespace"] == "team-a" and rep["entities"] > 0 and rep["llm_calls"] == 0
    st = a.get("/v1/graph/status").json()
    assert st["built"] and st["stale_communities"] == 0 and st["entities"] == rep["entities"]
    ans = a.post("/v1/graph/global", json={"question": "Which services have connection pool or cache problems?"})
    assert ans.status_code == 200, ans.text
    body = ans.json()
    assert body["answer"] and set(body) >= {"question", "answer", "found"}
    # only team-a's chunks can be cited
    cited = json.dumps(body)
    assert "team b secret" not in cited and "b1_p1" not in cited
    up = a.post("/v1/graph/update", json={}).json()
    assert up["llm_calls"] == 0
    # another tenant's graph is out of reach, and bad input names its field
    assert_error(a.post("/v1/graph/build", json={"namespace": "team-b"}), 403, "forbidden", "namespace")
    assert_error(a.get("/v1/graph/status", params={"namespace": "team-b"}), 403, "forbidden")
    assert_error(a.post("/v1/graph/global", json={"question": ""}), 422)
    assert_error(a.post("/v1/graph/global", json={"question": "x", "level": -1}), 422)
    assert_error(a.post("/v1/graph/build", json={"bogus": 1}), 422)


def test_healthz_and_stats_report_the_embedding_worker(tmp_path: Path) -> None:
    with Memory(tmp_path / "w.db", embedder="hash", auto_embed=False) as m:
        m.add_documents([{"id": f"w{i}", "text": f"worker progress note {i}"} for i in range(12)])
        m.embed_pending(limit=5)
        with LiveServer(m) as s, s.client() as c:
            w = c.get("/healthz").json()["embedding_worker"]
            assert w["pending"] == 7 and w["vectors_last_minute"] == 5 and w["error"] is None
            assert c.get("/v1/stats").json()["worker"]["stored_total"] == 5


def test_a_starting_server_loads_the_default_namespaces_indexes_before_any_query(tmp_path: Path) -> None:
    with Memory(tmp_path / "w.db", embedder="hash") as w:
        w.add_documents([{"id": f"n{i}", "text": f"note {i} on the billing pool"} for i in range(50)])
        w.wait_for_vectors()
    m = Memory(tmp_path / "w.db", embedder="hash")
    try:
        assert "default" not in m.legs.sparse_indexes  # nothing loaded by opening
        with LiveServer(m):
            deadline = time.monotonic() + 20
            while not ("default" in m.legs.sparse_indexes and "default" in m.legs.dense_indexes):
                assert time.monotonic() < deadline, "the warm-up did not load the indexes"
                time.sleep(0.02)
            assert len(m.legs.sparse_indexes["default"]) == 50 and len(m.legs.dense_indexes["default"]) == 50
    finally:
        m.close()
