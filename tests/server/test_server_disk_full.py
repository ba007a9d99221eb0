"""A full disk (issue 43): a write refused for space is a 507 naming the cause with Retry-After,
not a 500; ``/healthz`` says ``degraded`` with the reason meanwhile; nothing acknowledged is lost
and nothing of the refused write is kept; once there is space again writes succeed by themselves
and the health is ``ok``. Real SQLite file, real HTTP over loopback; the full disk is SQLite's
own (``PRAGMA max_page_count`` on the writer: the same SQLITE_FULL a full file system gives)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from hybridmem import Memory
from hybridmem.errors import NotFoundError, StoreFullError
from server_utils import LiveServer


def _fill(m: Memory) -> int:
    """Cap the store at the pages it has: the next write that needs a page is refused."""
    pages = int(m.store._w.execute("PRAGMA page_count").fetchone()[0])
    m.store._w.execute(f"PRAGMA max_page_count = {pages}")
    return pages


def _big(i: int) -> dict[str, str]:
    rng = random.Random(i)
    return {"id": f"big-{i}", "text": " ".join(f"w{rng.randrange(10**6)}" for _ in range(20_000))}


def test_a_full_disk_is_a_507_the_health_says_so_and_writes_resume(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder="hash") as m, LiveServer(m) as srv, srv.client() as c:
        assert (
            c.post("/v1/memories", json={"memories": [{"id": "kept", "text": "HTTP 504 on billing"}]}).status_code
            == 200
        )
        pages = _fill(m)
        r = c.post("/v1/memories", json={"memories": [_big(1)]})
        assert r.status_code == 507, r.text
        assert r.headers["retry-after"] == "30"
        body = r.json()
        assert body["error"]["type"] == "insufficient_storage" and "full" in body["error"]["message"]
        health = c.get("/healthz").json()
        assert health["status"] == "degraded" and "full" in health["reason"]
        # nothing acknowledged is lost, nothing of the refused write is kept
        assert m.get("kept") is not None
        with pytest.raises(NotFoundError):
            m.get("big-1")
        hits = c.post("/v1/query", json={"query_id": "q", "search_text": "HTTP 504", "top_k": 3}).json()
        assert [h["chunk_id"] for h in hits["results"]][:1] == ["kept_p1"]
        # space again: the next write succeeds and the health is ok, no restart
        m.store._w.execute(f"PRAGMA max_page_count = {pages * 1000}")
        assert c.post("/v1/memories", json={"memories": [_big(2)]}).status_code == 200
        health = c.get("/healthz").json()  # (its worker figures move between two calls: not compared)
        assert health["status"] == "ok" and health["reason"] is None
        assert m.get("big-2") is not None


def test_the_python_surface_raises_the_store_full_error(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder="hash") as m:
        m.add("first", id="a")
        _fill(m)
        with pytest.raises(StoreFullError, match="full"):
            m.add_documents([_big(3)])
        assert m.store.full is not None and m.get("a") is not None
