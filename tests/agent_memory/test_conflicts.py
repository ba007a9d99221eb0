"""The conflict check on write (issue 17): ``Memory.remember(..., reconcile=True)`` asks the LLM for
ADD / UPDATE / DELETE / NONE against the most similar memories of the same scope, applies it with
history, and never loses a statement (a failing or inventing model ends in ADD)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from hybridmem import Memory
from hybridmem.errors import ValidationError
from hybridmem.llm.openai import OpenAIChatModel
from llm_fakes import FAST, FakeLLMServer, ScriptedChatModel

OLD = "Billing service pool: max_connections is 100 (PgBouncer in front of PostgreSQL)."
NEW = "The billing pool now allows 200 connections; max_connections was raised to 200."


def _memory(tmp_path: Path, replies: list) -> tuple[Memory, ScriptedChatModel]:
    llm = ScriptedChatModel(replies)
    return Memory(tmp_path / "c.db", embedder="hash", llm=llm), llm


def _verdict(event: str, target: str | None = None, text: str | None = None, reason: str = "because") -> str:
    return json.dumps({"event": event, "target_id": target, "text": text, "reason": reason})


def _current_ids(m: Memory, user: str) -> set[str]:
    return {
        r.doc_id for r in m.search({"search_text": "billing pool connections", "top_k": 20, "user_id": user}).results
    }


def test_update_supersedes_the_memory_shown_and_records_why(tmp_path: Path) -> None:
    m, llm = _memory(tmp_path, [])
    with m:
        first = m.remember(OLD, user_id="u1", id="pool")
        assert (first.event, first.id, first.decided_by) == ("ADD", "pool", "rule")
        m.remember("Team b's pool is 50 connections.", user_id="u2", id="other")  # another scope
        llm.replies.append(_verdict("UPDATE", "pool", NEW, "the pool size changed"))
        d = m.remember(NEW, user_id="u1", reconcile=True)
        assert d.event == "UPDATE" and d.id == "pool" and d.decided_by == "scripted:test"
        assert d.candidates == ["pool"]  # u2's memory is never shown for u1
        prompt = " ".join(msg["content"] for msg in llm.seen[0])
        assert OLD in prompt and "Team b" not in prompt and NEW in prompt
        assert d.usage is not None and d.usage.calls == 1
        versions = m.history("pool")
        assert [v["current"] for v in versions] == [False, True]
        assert versions[1]["reason"] == "UPDATE (scripted:test): the pool size changed"
        assert "200 connections" in versions[1]["text"] and "100" in versions[0]["text"]
        assert versions[1]["metadata"]["user_id"] == "u1"
        assert _current_ids(m, "u1") == {"pool"}


def test_delete_is_a_soft_delete_kept_in_the_history_and_none_writes_nothing(tmp_path: Path) -> None:
    m, llm = _memory(tmp_path, [])
    with m:
        m.remember("The user lives in Lyon.", user_id="u1", id="city")
        m.remember("The user drinks tea, not coffee.", user_id="u1", id="drink")
        llm.replies.append(_verdict("NONE", "drink", reason="already known"))
        d = m.remember("User prefers tea over coffee.", user_id="u1", reconcile=True)
        assert (d.event, d.id, d.report) == ("NONE", "drink", None)
        assert m.stats().documents == 2
        llm.replies.append(_verdict("DELETE", "city", reason="the user moved away"))
        d = m.remember("The user no longer lives in Lyon.", user_id="u1", reconcile=True)
        assert (d.event, d.id) == ("DELETE", "city")
        versions = m.history("city")
        assert len(versions) == 1 and not versions[0]["current"]
        assert versions[0]["reason"].startswith("DELETE (scripted:test): the user moved away (retracted by: The user")
        hits = m.search({"search_text": "Lyon", "top_k": 5, "user_id": "u1"}).results
        assert "city" not in {h.doc_id for h in hits}


def test_a_model_that_invents_an_id_fails_or_answers_garbage_ends_in_add(tmp_path: Path) -> None:
    m, llm = _memory(tmp_path, [])
    with m:
        m.remember(OLD, user_id="u1", id="pool")
        llm.replies.append(_verdict("UPDATE", "invented-7", NEW))
        d = m.remember(NEW, user_id="u1", reconcile=True)
        assert d.event == "ADD" and d.decided_by == "rule" and "invented-7" in d.reason
        assert d.id != "pool" and m.history(d.id)[0]["reason"].startswith("ADD (rule): the model answered UPDATE")
        llm.replies.extend(["not json at all", "still not json"])  # the repair attempt fails too
        d = m.remember("The billing pool alerts at 180 connections.", user_id="u1", reconcile=True)
        assert d.event == "ADD" and "conflict check failed" in d.reason
        assert m.get(d.id)["chunks"][0]["text"].startswith("The billing pool alerts")
        llm.replies.extend(['{"event": "UPDATE", "target_id": "pool"', _verdict("NONE", "pool")])  # repaired once
        d = m.remember("Billing pool max_connections is 100.", user_id="u1", reconcile=True)
        assert d.event == "NONE" and d.usage is not None and d.usage.calls == 2


def test_bad_input_is_refused_before_the_model_is_asked_and_nothing_is_written(tmp_path: Path) -> None:
    m, llm = _memory(tmp_path, [_verdict("ADD")])
    with m:
        for kwargs, field in (
            ({"text": "   "}, "text"),
            ({"text": "x", "user_id": ""}, "user_id"),
            ({"text": "x", "agent_id": "a\x00b"}, "agent_id"),
            ({"text": "x", "candidates": 0}, "candidates"),
            ({"text": "x", "candidates": True}, "candidates"),
            ({"text": "x", "metadata": {"k": [1, {"deep": object()}]}}, None),
        ):
            with pytest.raises(ValidationError) as e:
                m.remember(reconcile=True, **kwargs)
            assert field is None or e.value.field == field, (kwargs, e.value)
        assert llm.seen == [] and m.stats().documents == 0
    with Memory(tmp_path / "no-llm.db", embedder="hash", llm="none") as plain:
        with pytest.raises(ValidationError) as e:
            plain.remember("x", reconcile=True)
        assert e.value.field == "reconcile" and plain.stats().documents == 0


@pytest.fixture
def openai_server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as s:
        yield s


def test_the_openai_wire_format_carries_the_structured_decision(tmp_path: Path, openai_server: FakeLLMServer) -> None:
    """The real OpenAI client over HTTP: the decision is asked as a JSON schema and applied."""
    openai_server.responder = lambda seen: _verdict("UPDATE", "pool", NEW, "new size")
    llm = OpenAIChatModel("test-model", base_url=f"{openai_server.url}/v1", api_key="k", retry=FAST)
    with Memory(tmp_path / "o.db", embedder="hash", llm=llm) as m:
        m.remember(OLD, user_id="u1", id="pool")
        d = m.remember(NEW, user_id="u1", reconcile=True)
        assert (d.event, d.id, d.decided_by) == ("UPDATE", "pool", "openai:test-model")
        (seen,) = openai_server.requests
        assert seen.body["model"] == "test-model" and seen.schema_name == "ConflictVerdict"
        assert "200 connections" in m.get("pool")["chunks"][0]["text"]


# ---------------------------------------------------------------------------------------------- surfaces


def test_http_remember_runs_the_check_and_validates_first(tmp_path: Path) -> None:
    from hybridmem.server.config import ServerConfig
    from server_utils import LiveServer, assert_error

    llm = ScriptedChatModel([])
    with Memory(tmp_path / "h.db", embedder="hash", llm=llm) as m:
        with LiveServer(m, ServerConfig(api_keys={"key-remember-1": ("team",)})) as s, s.client("key-remember-1") as c:
            r = c.post("/v1/remember", json={"text": OLD, "user_id": "u1", "id": "pool"})
            assert r.status_code == 200 and r.json()["event"] == "ADD" and r.json()["namespace"] == "team", r.text
            llm.replies.append(_verdict("UPDATE", "pool", NEW, "resized"))
            r = c.post("/v1/remember", json={"text": NEW, "user_id": "u1", "reconcile": True})
            body = r.json()
            assert r.status_code == 200 and (body["event"], body["id"], body["candidates"]) == (
                "UPDATE",
                "pool",
                ["pool"],
            )
            assert (
                c.get("/v1/memories/pool/history").json()["versions"][1]["reason"] == "UPDATE (scripted:test): resized"
            )
            for bad, field in (
                ({"text": NEW, "reconcile": "yes"}, "reconcile"),
                ({"text": NEW, "candidates": 0}, "candidates"),
                ({"text": "", "reconcile": True}, "text"),
                ({"text": NEW, "user_id": ""}, "user_id"),
                ({"text": NEW, "bogus": 1}, "bogus"),
            ):
                assert_error(c.post("/v1/remember", json=bad), 422, field=field)
            assert_error(c.post("/v1/remember", json={"text": NEW, "namespace": "other"}), 403, "forbidden")
            assert len(llm.seen) == 1  # no bad request reached the model
    with Memory(tmp_path / "n.db", embedder="hash", llm="none") as plain:
        with LiveServer(plain) as s, s.client() as c:
            assert_error(c.post("/v1/remember", json={"text": NEW, "reconcile": True}), 422, field="reconcile")


def test_mcp_remember_with_reconcile_over_the_openai_wire(tmp_path: Path, openai_server: FakeLLMServer) -> None:
    """``hybridmem mcp`` spawned with an OpenAI-compatible LLM (the local server) decides and applies."""
    import asyncio
    import os
    import sys

    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    db = tmp_path / "mcp.db"
    with Memory(db, embedder="hash") as m:
        m.remember(OLD, user_id="u1", id="pool")
    openai_server.responder = lambda seen: _verdict("UPDATE", "pool", NEW, "resized")
    env = {
        "PYTHONUNBUFFERED": "1",
        "HYBRIDMEM_LLM": "openai:test-model",
        "HYBRIDMEM_LLM_BASE_URL": f"{openai_server.url}/v1",
    }
    env["OPENAI_API_KEY"] = "test-key"
    args = ["-m", "hybridmem.cli", "--db", str(db), "--embedder", "hash", "mcp"]

    async def session() -> dict:
        params = StdioServerParameters(command=sys.executable, args=args, env=env)
        with open(os.devnull, "w") as devnull:
            async with stdio_client(params, errlog=devnull) as (read, write), ClientSession(read, write) as s:
                await s.initialize()
                out = await s.call_tool("remember", {"text": NEW, "user_id": "u1", "reconcile": True})
                assert not out.is_error, out.content
                return json.loads(out.content[0].text)

    got = asyncio.run(asyncio.wait_for(session(), timeout=120))
    assert (got["event"], got["id"], got["decided_by"]) == ("UPDATE", "pool", "openai:test-model"), got
    with Memory(db, embedder="hash") as m:
        assert [v["current"] for v in m.history("pool")] == [False, True]
