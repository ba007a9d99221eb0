"""Extraction over the server's surfaces (issue 46): ``POST /v1/messages`` with ``extract`` (the
report's ``extraction``, usage in ``/metrics``, 422 naming the field without an LLM, a failing
model leaving the batch pending), and MCP's ``remember`` with ``messages`` and ``extract``."""

from __future__ import annotations

import json
from pathlib import Path

from test_extract import TURNS, Router, _fact, _facts

from hybridmem import Memory
from hybridmem.extract import pending_count
from hybridmem.server.config import ServerConfig
from llm_fakes import FakeLLMServer, ScriptedChatModel
from server_utils import LiveServer, assert_error


def test_http_messages_with_extract_report_facts_usage_and_metrics(tmp_path: Path) -> None:
    router = Router(lambda prompt: _facts(_fact("Caroline adopted a cat named Luna.", ["s1:2"], key="caroline.pet")))
    llm = ScriptedChatModel([router] * 20)
    with Memory(tmp_path / "h.db", embedder="hash", auto_embed=False, llm=llm) as m:
        with LiveServer(m, ServerConfig(api_keys={"key-extract-1": ("team",)})) as s, s.client("key-extract-1") as c:
            body = {"messages": TURNS, "session_id": "s1", "user_id": "u1", "extract": True, "extract_batch": 2}
            r = c.post("/v1/messages", json=body)
            assert r.status_code == 200, r.text
            got = r.json()
            assert got["added"] == ["s1:0", "s1:1", "s1:2", "s1:3"] and got["namespace"] == "team"
            ex = got["extraction"]
            assert [b["turns"] for b in ex["batches"]] == [["s1:0", "s1:1"], ["s1:2", "s1:3"]]
            first, second = ex["batches"]
            assert first["facts"] == [] and first["dropped"][0]["reason"].startswith("no source turn")
            (fact,) = second["facts"]
            assert fact["source_turns"] == ["s1:2"] and fact["key"] == "caroline.pet" and fact["event"] == "ADD"
            assert ex["usage"]["calls"] == 2 and ex["usage"]["prompt_tokens"] == 200 and ex["pending"] == 0
            history = c.get(f"/v1/memories/{fact['id']}/history").json()["versions"]
            assert history[0]["reason"].endswith("from turns s1:2")
            hits = c.post(
                "/v1/query", json={"search_text": "cat Luna", "mode": "bm25", "metadata_filter": {"kind": "fact"}}
            )
            assert [(h["doc_id"], h["kind"]) for h in hits.json()["results"]] == [(fact["id"], "fact")]
            metrics = c.get("/metrics").text
            assert 'hybridmem_llm_calls_total{model="scripted:test",purpose="extract",status="ok"} 2' in metrics
            assert 'hybridmem_llm_tokens_total{model="scripted:test",purpose="extract",type="prompt"} 200' in metrics
            plain = c.post("/v1/messages", json={"messages": TURNS[:1], "session_id": "s2"}).json()
            assert plain["extraction"] is None and len(router.prompts) == 2  # no extract: no call
            for bad, field in (
                ({"extract": "yes"}, "extract"),
                ({"extract": True, "extract_batch": 0}, "extract_batch"),
                ({"extract_batch": True}, "extract_batch"),
            ):
                assert_error(
                    c.post("/v1/messages", json={"messages": TURNS, "session_id": "s3", **bad}), 422, field=field
                )
            assert len(router.prompts) == 2 and m.store.max_turn("team", "s3") is None


def test_http_extract_without_an_llm_is_a_422_and_a_pending_batch_is_retried_in_its_namespace(tmp_path: Path) -> None:
    with Memory(tmp_path / "n.db", embedder="hash", auto_embed=False, llm="none") as plain:
        with LiveServer(plain) as s, s.client() as c:
            r = c.post("/v1/messages", json={"messages": TURNS, "session_id": "s1", "extract": True})
            err = assert_error(r, 422, field="extract")
            assert "LLM" in err["message"] and plain.stats().documents == 0
        with LiveServer(plain) as s, s.client() as c:
            assert_error(c.post("/v1/extract/pending"), 422, field="extract")
    llm = ScriptedChatModel(["not json", "still not json"])
    with Memory(tmp_path / "f.db", embedder="hash", auto_embed=False, llm=llm) as m:
        with LiveServer(m, ServerConfig(api_keys={"key-extract-a": ("a",), "key-extract-b": ("b",)})) as s:
            with s.client("key-extract-a") as c, s.client("key-extract-b") as other:
                r = c.post("/v1/messages", json={"messages": TURNS, "session_id": "s1", "extract": True})
                assert r.status_code == 200, r.text
                (batch,) = r.json()["extraction"]["batches"]
                assert batch["status"] == "pending" and "invalid output" in batch["error"]
                assert r.json()["extraction"]["pending"] == 1 and r.json()["added"] == ["s1:0", "s1:1", "s1:2", "s1:3"]
                assert 'purpose="extract",status="ok"} 1' in c.get("/metrics").text  # the call answered, badly
                llm.replies.append(_facts(_fact("Caroline moved to Lisbon.", ["s1:0"])))
                theirs = other.post("/v1/extract/pending", json={})
                assert (
                    theirs.status_code == 200 and theirs.json()["batches"] == [] and theirs.json()["namespace"] == "b"
                )
                assert_error(other.post("/v1/extract/pending", json={"namespace": "a"}), 403, "forbidden")
                assert_error(c.post("/v1/extract/pending", json={"limit": 0}), 422, field="limit")
                again = c.post("/v1/extract/pending").json()
                assert again["pending"] == 0 and again["namespace"] == "a"
                assert [f["source_turns"] for b in again["batches"] for f in b["facts"]] == [["s1:0"]]
        assert m.stats(namespace="a").documents == 5


def test_mcp_remember_messages_with_extract_over_the_openai_wire(tmp_path: Path) -> None:
    """``hybridmem mcp`` with an OpenAI-compatible LLM (the local server): the tool extracts."""
    import asyncio
    import os
    import sys

    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    db = tmp_path / "mcp.db"
    with Memory(db, embedder="hash"):
        pass
    with FakeLLMServer() as server:
        server.responder = lambda seen: _facts(_fact("Caroline moved to Lisbon.", ["s1:0"], key="caroline.city"))
        env = {
            "PYTHONUNBUFFERED": "1",
            "HYBRIDMEM_LLM": "openai:test-model",
            "HYBRIDMEM_LLM_BASE_URL": f"{server.url}/v1",
            "OPENAI_API_KEY": "test-key",
        }
        args = ["-m", "hybridmem.cli", "--db", str(db), "--embedder", "hash", "mcp"]

        async def session() -> tuple[dict, str]:
            params = StdioServerParameters(command=sys.executable, args=args, env=env)
            with open(os.devnull, "w") as devnull:
                async with stdio_client(params, errlog=devnull) as (read, write), ClientSession(read, write) as s:
                    await s.initialize()
                    out = await s.call_tool("remember", {"messages": TURNS[:2], "session_id": "s1", "extract": True})
                    assert not out.is_error, out.content
                    bad = await s.call_tool("remember", {"text": "x", "extract": True})
                    assert bad.is_error
                    return json.loads(out.content[0].text), bad.content[0].text

        got, refused = asyncio.run(asyncio.wait_for(session(), timeout=120))
        assert "extract" in refused and "messages" in refused
        (fact,) = got["extraction"]["batches"][0]["facts"]
        assert fact["source_turns"] == ["s1:0"] and got["extraction"]["model"] == "openai:test-model"
        assert server.requests[0].schema_name == "ProposedFacts"
    with Memory(db, embedder="hash") as m:
        assert m.get(fact["id"])["metadata"]["kind"] == "fact"


def test_an_extraction_past_the_request_timeout_is_a_504_and_loses_nothing(tmp_path: Path) -> None:
    import time

    def slow(prompt: str) -> str:
        time.sleep(0.6)
        turn = prompt.split("NEW TURNS:\n[", 1)[1].split("]", 1)[0]
        return _facts(_fact(f"Fact of {turn}.", [turn]))

    llm = ScriptedChatModel([Router(slow)] * 20)
    with Memory(tmp_path / "slow.db", embedder="hash", auto_embed=False, llm=llm) as m:
        with LiveServer(m, ServerConfig(request_timeout=0.5)) as s, s.client() as c:
            body = {"messages": TURNS, "session_id": "s1", "extract": True, "extract_batch": 1}
            assert_error(c.post("/v1/messages", json=body), 504)
            deadline = time.monotonic() + 10  # the request's thread goes on in the background
            while time.monotonic() < deadline and pending_count(m, "default"):
                time.sleep(0.1)
            left = c.post("/v1/extract/pending").json()  # whatever the timed-out request did not finish
            assert left["pending"] == 0, left
        assert m.store.max_turn("default", "s1") == 3  # every turn stored
        facts = m.search({"search_text": "Fact of", "top_k": 20, "mode": "bm25", "metadata_filter": {"kind": "fact"}})
        assert {h.text for h in facts.results} == {f"Fact of s1:{i}." for i in range(4)}
