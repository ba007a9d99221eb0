"""Precomputed vectors over real HTTP (``embedding`` per memory on ``POST /v1/memories``, ``PUT
/v1/memories/{id}``, ``POST /v1/remember``) on both backends, and through the MCP ``remember`` tool:
stored without a model call, a bad one a 422 whose field is its exact place."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from hybridmem import Memory
from hybridmem.embed.hashing import HashEmbedder
from hybridmem.server.config import ServerConfig
from server_utils import LiveServer, assert_error

DIM = 32
QUERY = "zebra quantum harbour"


class Counted(HashEmbedder):
    """The hash embedder, counting the document texts it embeds."""

    def __init__(self, dim: int = DIM) -> None:
        super().__init__(dim)
        self.documents = 0

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.documents += len(texts)
        return super().embed_documents(texts)


def _vec(text: str, dim: int = DIM) -> list[float]:
    return [float(x) for x in HashEmbedder(dim).embed_query(text)]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[httpx.Client, Memory, Counted]]:
    target = tmp_path / "m.db" if request.param == "sqlite" else request.getfixturevalue("pg_url")
    emb = Counted()
    mem = Memory(target, embedder=emb, auto_embed=False)
    try:
        with LiveServer(mem, ServerConfig()) as srv, srv.client() as c:
            yield c, mem, emb
    finally:
        mem.close()


def test_memories_with_embeddings_are_stored_and_found_by_them(served: tuple[httpx.Client, Memory, Counted]) -> None:
    c, mem, emb = served
    body = {
        "memories": [
            {"id": "menu", "text": "The cafeteria menu changes on Mondays.", "embedding": _vec(QUERY)},
            {"id": "backup", "text": "Backups run nightly at 02:00.", "embedding": _vec("backups nightly")},
            {"id": "plain", "text": "Zebra crossings near the quantum lab harbour."},
        ]
    }
    r = c.post("/v1/memories", json=body)
    assert r.status_code == 200, r.text
    assert sorted(r.json()["added"]) == ["backup", "menu", "plain"]
    assert mem.store.pending_count(mem.namespace) == 1 and emb.documents == 0
    mem.wait_for_vectors()
    assert emb.documents == 1
    hits = c.post("/v1/query", json={"query_id": "q", "search_text": QUERY, "mode": "vector", "top_k": 3}).json()
    assert hits["results"][0]["doc_id"] == "menu"  # its text shares nothing with the query: its vector does
    r = c.put("/v1/memories/backup", json={"text": "Backups run hourly.", "embedding": _vec(QUERY)})
    assert r.status_code == 200 and r.json()["updated"] == ["backup"], r.text
    r = c.post("/v1/remember", json={"text": "Priya prefers green tea.", "user_id": "u1", "embedding": _vec(QUERY)})
    assert r.status_code == 200 and r.json()["event"] == "ADD", r.text
    assert mem.store.pending_count(mem.namespace) == 0 and emb.documents == 1
    hits = c.post("/v1/query", json={"query_id": "q", "search_text": QUERY, "mode": "vector", "top_k": 5}).json()
    assert {h["doc_id"] for h in hits["results"][:3]} == {"menu", "backup", r.json()["id"]}


def test_bad_embeddings_are_422_naming_their_place(served: tuple[httpx.Client, Memory, Counted]) -> None:
    c, mem, _ = served
    good = _vec("good")
    ok = {"text": "fine", "embedding": good}

    def batch(bad: Any) -> dict[str, Any]:
        return {"memories": [ok, {"text": "second", "id": "s"}, ok | {"id": "t"}, {"text": "bad", "embedding": bad}]}

    e = assert_error(c.post("/v1/memories", json=batch(good[:-1])), 422, "validation_error", "memories.3.embedding")
    assert f"dimension {DIM - 1}" in e["message"] and f"hash:{DIM}" in e["message"] and str(DIM) in e["message"]
    assert_error(c.post("/v1/memories", json=batch([0.0] * DIM)), 422, field="memories.3.embedding")
    assert_error(c.post("/v1/memories", json=batch(["0.5"] * DIM)), 422, field="memories.3.embedding.0")
    assert_error(c.post("/v1/memories", json=batch([True] * DIM)), 422, field="memories.3.embedding.0")
    assert_error(c.post("/v1/memories", json=batch([0.5] * 16_001)), 422, field="memories.3.embedding")
    assert_error(c.post("/v1/memories", json=batch([])), 422, field="memories.3.embedding")
    marked = [0.25] * 5 + [0.125] + [0.25] * (DIM - 6)
    raw = json.dumps(batch(marked)).replace("0.125", "NaN")  # Python's JSON reads NaN: refused
    r = c.post("/v1/memories", content=raw, headers={"content-type": "application/json"})
    assert_error(r, 422, field="memories.3.embedding.5")
    long_text = "\n\n".join(f"Paragraph {i} " + "word " * 200 for i in range(10))
    r = c.post("/v1/memories", json={"memories": [{"text": long_text, "embedding": good}]})
    assert "chunk" in assert_error(r, 422, field="memories.0.embedding")["message"]
    assert mem.stats().documents == 0  # nothing of any refused batch was written
    assert_error(c.post("/v1/remember", json={"text": "x", "embedding": good[:3]}), 422, field="embedding")
    c.post("/v1/memories", json={"memories": [{"id": "m", "text": "stored"}]}).raise_for_status()
    assert_error(c.put("/v1/memories/m", json={"text": "new", "embedding": [1.0]}), 422, field="embedding")


def test_mcp_remember_takes_an_embedding(tmp_path: Path) -> None:
    asyncio.run(_mcp_session(tmp_path / "m.db"))


async def _mcp_session(db: Path) -> None:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    args = ["-m", "hybridmem.cli", "--db", str(db), "--embedder", "hash", "mcp"]  # hash: 256 dimensions
    env = {"PYTHONUNBUFFERED": "1", **{k: os.environ[k] for k in ("PYTHONPATH",) if k in os.environ}}
    params = StdioServerParameters(command=sys.executable, args=args, env=env)  # this checkout's hybridmem
    with open(os.devnull, "w") as devnull:
        async with stdio_client(params, errlog=devnull) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            tools = {t.name: t for t in (await s.list_tools()).tools}
            assert "embedding" in tools["remember"].input_schema["properties"]
            text = "The cafeteria menu changes on Mondays."
            r = await s.call_tool("remember", {"text": text, "id": "menu", "embedding": _vec(QUERY, 256)})
            assert not r.is_error and json.loads(r.content[0].text)["pending_vectors"] == 0, r.content
            await s.call_tool("remember", {"text": "Backups run nightly.", "id": "backup"})
            for _ in range(100):  # the worker embeds the one without a vector
                stats = json.loads((await s.read_resource("hybridmem://stats")).contents[0].text)
                if stats["pending_vectors"] == 0:
                    break
                await asyncio.sleep(0.1)
            hits = await s.call_tool("recall", {"search_text": QUERY, "mode": "vector", "top_k": 2})
            assert json.loads(hits.content[0].text)["results"][0]["doc_id"] == "menu"
            bad = await s.call_tool("remember", {"text": "x", "embedding": _vec(QUERY, 255)})
            assert (
                bad.is_error and "embedding: dimension 255, but the store's embedder hash:256" in bad.content[0].text
            ), bad.content
            msgs = {"messages": [{"role": "user", "content": "hi"}], "session_id": "s1", "embedding": [1.0]}
            bad = await s.call_tool("remember", msgs)
            assert bad.is_error and "embedding" in bad.content[0].text, bad.content
