"""The MCP server as an agent reaches it: ``hybridmem mcp`` spawned as a subprocess and driven with
the official ``mcp`` client SDK over stdio (and once over streamable HTTP)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from hybridmem import Memory
from server_utils import wait_listening

TOOLS = {"remember", "recall", "forget", "ask"}


def _server(db: Path, *extra: str) -> list[str]:
    return ["-m", "hybridmem.cli", "--db", str(db), "--embedder", "hash", *extra, "mcp"]


def _data(result: Any) -> dict:
    """A tool result as JSON: the structured content, which the text content mirrors."""
    assert not result.is_error, result.content
    text = json.loads(result.content[0].text)
    assert result.structured_content == text
    return text


async def _wait_vectors(session: ClientSession, uri: str = "hybridmem://stats") -> dict:
    for _ in range(100):  # the background worker embeds (hash embedder: fast)
        stats = json.loads((await session.read_resource(uri)).contents[0].text)
        if stats["pending_vectors"] == 0:
            return stats
        await asyncio.sleep(0.1)
    raise AssertionError("vectors never arrived")


async def _stdio_session(db: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=_server(db, "--namespace", "agent-7"), env={"PYTHONUNBUFFERED": "1"}
    )
    with open(os.devnull, "w") as devnull:
        async with stdio_client(params, errlog=devnull) as (read, write), ClientSession(read, write) as session:
            init = await session.initialize()
            assert init.server_info.name == "hybridmem" and "recall" in (init.instructions or "")
            tools = {t.name: t for t in (await session.list_tools()).tools}
            assert TOOLS <= set(tools)
            assert {"search_text", "top_k", "hybrid_params", "metadata_filter"} <= set(
                tools["recall"].input_schema["properties"]
            )

            r = _data(
                await session.call_tool(
                    "remember",
                    {
                        "text": "PostgreSQL connection pool exhaustion causes HTTP 504 timeouts. Increase max_connections to 200.",
                        "id": "doc_8832",
                        "source": "wiki/infrastructure_troubleshooting.md",
                        "metadata": {"environment": "production", "service": "billing-service"},
                    },
                )
            )
            assert r["added"] == ["doc_8832"] and r["id"] == "doc_8832" and r["namespace"] == "agent-7"
            r = _data(
                await session.call_tool(
                    "remember",
                    {
                        "text": "Staging pool is 20 connections.",
                        "id": "staging-pool",
                        "metadata": {"environment": "staging"},
                    },
                )
            )
            assert r["added"] == ["staging-pool"]
            again = _data(
                await session.call_tool(
                    "remember",
                    {
                        "text": "Staging pool is 20 connections.",
                        "id": "staging-pool",
                        "metadata": {"environment": "staging"},
                    },
                )
            )
            assert again["unchanged"] == ["staging-pool"]  # idempotent by id
            stats = await _wait_vectors(session)
            assert stats["documents"] == 2 and stats["namespace"] == "agent-7"

            # recall speaks the contract (the reference request, verbatim)
            contract = Path(__file__).resolve().parents[2].parent / "shared" / "contract" / "query_request.example.json"
            req = (
                json.loads(contract.read_text())
                if contract.exists()
                else {
                    "query_id": "mem_req_99214",
                    "search_text": "HTTP 504 gateway timeout postgres connection pool",
                    "top_k": 5,
                    "hybrid_params": {"dense_weight": 0.6, "sparse_weight": 0.4, "rrf_k_constant": 60},
                    "metadata_filter": {"environment": "production", "service": "billing-service"},
                }
            )
            resp = _data(await session.call_tool("recall", req))
            assert resp["query_id"] == "mem_req_99214" and resp["total_retrieved"] == len(resp["results"]) == 1
            hit = resp["results"][0]
            assert hit["chunk_id"] == "doc_8832_p1" and hit["source"] == "wiki/infrastructure_troubleshooting.md"
            assert set(hit["ranks"]) >= {"bm25", "dense"} and round(hit["rrf_score"], 4) == hit["rrf_score"]
            resp = _data(await session.call_tool("recall", {"search_text": "pool connections", "mode": "bm25"}))
            assert {h["doc_id"] for h in resp["results"]} == {"doc_8832", "staging-pool"} and resp["mode"] == "bm25"

            # errors come back as tool errors with a clear message, and the session goes on
            empty = _data(await session.call_tool("recall", {"search_text": "x", "metadata_filter": {"region": "eu"}}))
            assert empty["results"] == [] and "'region'" in empty["warnings"][0]  # no memory has it yet
            bad = await session.call_tool("recall", {"search_text": "x", "top_k": 0})
            assert bad.is_error and "top_k" in bad.content[0].text
            bad = await session.call_tool("remember", {"text": "   "})
            assert bad.is_error and "empty" in bad.content[0].text

            ans = await session.call_tool("ask", {"question": "What should I raise when HTTP 504 hits billing?"})
            if hasattr(Memory, "ask"):
                a = _data(ans)
                assert a["found"] and "doc_8832_p1" in {c["chunk_id"] for c in a["citations"]}
            else:
                assert ans.is_error and "not available" in ans.content[0].text

            # corpus-wide questions: the graph is built offline on first use, in this namespace only
            g = _data(await session.call_tool("graph_global", {"question": "How are connection pools sized?"}))
            assert g["answer"] and g["question"] == "How are connection pools sized?"
            bad = await session.call_tool("graph_global", {"question": ""})
            assert bad.is_error

            # the memories themselves, page by page, and a bad cursor is a tool error naming it
            page = _data(await session.call_tool("list_memories", {"limit": 1, "order": "id"}))
            assert [m["doc_id"] for m in page["memories"]] == ["doc_8832"] and page["next_cursor"]
            rest = _data(
                await session.call_tool("list_memories", {"limit": 5, "order": "id", "cursor": page["next_cursor"]})
            )
            assert [m["doc_id"] for m in rest["memories"]] == ["staging-pool"] and rest["next_cursor"] is None
            bad = await session.call_tool("list_memories", {"cursor": "garbage"})
            assert bad.is_error and "cursor" in bad.content[0].text

            gone = _data(await session.call_tool("forget", {"ids": ["staging-pool", "never-was"]}))
            assert gone["deleted"] == ["staging-pool"] and gone["not_found"] == ["never-was"]
            resp = _data(await session.call_tool("recall", {"search_text": "staging pool", "mode": "bm25"}))
            assert "staging-pool" not in {h["doc_id"] for h in resp["results"]}

            # the stats resource, also per namespace
            uris = {str(r.uri) for r in (await session.list_resources()).resources}
            assert "hybridmem://stats" in uris
            other = json.loads((await session.read_resource("hybridmem://stats/elsewhere")).contents[0].text)
            assert other["namespace"] == "elsewhere" and other["documents"] == 0


def test_mcp_over_stdio(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    asyncio.run(asyncio.wait_for(_stdio_session(db), timeout=120))
    with Memory(db, embedder="hash", auto_embed=False) as mem:  # it really was the store on disk
        assert mem.get("doc_8832", namespace="agent-7")["n_chunks"] == 1
        assert mem.stats("agent-7").documents == 1


def test_mcp_over_streamable_http(tmp_path: Path) -> None:
    from mcp.client.streamable_http import streamable_http_client

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, *_server(tmp_path / "m.db")[:-1], "mcp", "--transport", "http", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}/mcp"

    async def session() -> None:
        async with streamable_http_client(url) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            assert TOOLS <= {t.name for t in (await s.list_tools()).tools}
            assert _data(await s.call_tool("remember", {"text": "Kafka lag alert at 10k messages.", "id": "kafka"}))[
                "added"
            ]
            hits = _data(await s.call_tool("recall", {"search_text": "kafka lag", "mode": "bm25"}))["results"]
            assert hits[0]["doc_id"] == "kafka"

    try:
        wait_listening(url, proc)
        asyncio.run(asyncio.wait_for(session(), timeout=60))
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=20)
    assert "Traceback" not in err


def test_mcp_http_refuses_public_address(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, *_server(tmp_path / "m.db")[:-1], "mcp", "--transport", "http", "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "loopback only" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "m.db").exists()  # refused before opening anything


@pytest.mark.parametrize("transport", ["carrier-pigeon"])
def test_mcp_unknown_transport(tmp_path: Path, transport: str) -> None:
    r = subprocess.run(
        [sys.executable, *_server(tmp_path / "m.db")[:-1], "mcp", "--transport", transport],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "unknown MCP transport" in r.stderr


async def _alias_session(db: Path) -> None:
    params = StdioServerParameters(command=sys.executable, args=_server(db), env={"PYTHONUNBUFFERED": "1"})
    with open(os.devnull, "w") as devnull:
        async with stdio_client(params, errlog=devnull) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            tools = {t.name: t for t in (await session.list_tools()).tools}
            assert "query" not in tools["recall"].input_schema["properties"]  # the schema keeps its own names
            assert "search_text" in tools["recall"].input_schema.get("required", [])
            r = _data(await session.call_tool("remember", {"content": "Kafka lag alert at 10k messages.", "id": "k"}))
            assert r["added"] == ["k"]
            # an agent's first guesses: query, k, filter
            hits = _data(
                await session.call_tool("recall", {"query": "kafka lag", "mode": "bm25", "k": 1, "filter": {}})
            )
            assert [h["doc_id"] for h in hits["results"]] == ["k"]
            ans = _data(await session.call_tool("ask", {"query": "When does the Kafka lag alert fire?"}))
            assert "k_p1" in {c["chunk_id"] for c in ans["citations"]}
            # a missing argument names the tool's own, not pydantic's "Field required"
            bad = await session.call_tool("recall", {"mode": "bm25"})
            text = bad.content[0].text
            assert bad.is_error and "`search_text`" in text and "`query`" in text and "Field required" not in text
            bad = await session.call_tool("forget", {})
            assert bad.is_error and "`ids`" in bad.content[0].text
            gone = _data(await session.call_tool("forget", {"id": "k"}))  # one id, not a list
            assert gone["deleted"] == ["k"]


def test_mcp_accepts_the_argument_names_agents_guess(tmp_path: Path) -> None:
    asyncio.run(asyncio.wait_for(_alias_session(tmp_path / "m.db"), timeout=120))


def test_tool_arguments_renames_aliases_only_when_the_name_is_absent() -> None:
    from hybridmem.server.mcp import ALIASES, tool_arguments

    assert tool_arguments("recall", {"query": "x", "k": 3}) == {"search_text": "x", "top_k": 3}
    assert tool_arguments("recall", {"search_text": "own", "query": "alias"}) == {
        "search_text": "own",
        "query": "alias",
    }
    assert tool_arguments("forget", {"ids": "a"}) == {"ids": ["a"]}
    assert tool_arguments("unknown-tool", {"query": "x"}) == {"query": "x"}
    assert all(target != alias for table in ALIASES.values() for alias, target in table.items())


# ---------------------------------------------------------------------------------------------- MCP over HTTP with keys

MCP_KEY_A = "sk-mcp-team-a-01"  # team-a only
MCP_KEY_ADMIN = "sk-mcp-admin-001"  # every namespace


def _mcp_http(tmp_path: Path, env: dict[str, str], *extra: str) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, *_server(tmp_path / "m.db")[:-1], "mcp", "--transport", "http", "--port", str(port), *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("HYBRIDMEM_")}, **env},
    )
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(url, timeout=1)
            return proc, url
        except httpx.TransportError:
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.2)


async def _keyed_session(url: str, key: str, check: Any) -> None:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {key}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120)) as client:
        async with streamable_http_client(url, http_client=client) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            await check(s)


async def _as_team_a(s: ClientSession) -> None:
    r = _data(await s.call_tool("remember", {"text": "Team A rotates keys on Mondays.", "id": "a-fact"}))
    assert r["namespace"] == "team-a" and r["added"] == ["a-fact"]  # the key's namespace by default
    hits = _data(await s.call_tool("recall", {"search_text": "rotates keys", "mode": "bm25"}))
    assert hits["namespace"] == "team-a" and [h["doc_id"] for h in hits["results"]] == ["a-fact"]
    stats = json.loads((await s.read_resource("hybridmem://stats")).contents[0].text)
    assert stats["namespace"] == "team-a" and stats["documents"] == 1
    # another tenant's namespace: every tool and the resource refuse it
    for tool, args in (
        ("remember", {"text": "poison", "namespace": "team-b"}),
        ("recall", {"search_text": "secret", "namespace": "team-b"}),
        ("forget", {"ids": ["b-fact"], "namespace": "team-b"}),
        ("ask", {"question": "What is the secret?", "namespace": "team-b"}),
        ("graph_global", {"question": "What is there?", "namespace": "team-b"}),
    ):
        bad = await s.call_tool(tool, args)
        assert bad.is_error and "may not use namespace 'team-b'" in bad.content[0].text, (tool, bad.content)
    with pytest.raises(Exception, match="team-b"):
        await s.read_resource("hybridmem://stats/team-b")


async def _as_admin(s: ClientSession) -> None:
    r = _data(await s.call_tool("remember", {"text": "Team B secret: 0xB0B.", "id": "b-fact", "namespace": "team-b"}))
    assert r["namespace"] == "team-b"
    other = json.loads((await s.read_resource("hybridmem://stats/team-b")).contents[0].text)
    assert other["documents"] == 1


def test_mcp_over_http_takes_api_keys_and_checks_namespaces(tmp_path: Path) -> None:
    env = {"HYBRIDMEM_API_KEYS": f"{MCP_KEY_A}:team-a;{MCP_KEY_ADMIN}:*"}
    proc, url = _mcp_http(tmp_path, env, "--log-format", "json")
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    accept = {"Accept": "application/json, text/event-stream"}
    try:
        r = httpx.post(url, json=init, headers=accept)
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
        assert r.json()["error"]["type"] == "unauthorized" and r.headers["x-request-id"]
        r = httpx.post(url, json=init, headers={**accept, "X-API-Key": "sk-not-a-key-000"})
        assert r.status_code == 401
        # Host and Origin are checked before the key
        r = httpx.post(url, json=init, headers={**accept, "Host": "evil.example", "X-API-Key": MCP_KEY_A})
        assert r.status_code == 421 and r.json()["error"]["type"] == "misdirected_request"
        r = httpx.post(url, json=init, headers={**accept, "Origin": "http://evil.example", "X-API-Key": MCP_KEY_A})
        assert r.status_code == 403 and r.json()["error"]["type"] == "forbidden"
        asyncio.run(asyncio.wait_for(_keyed_session(url, MCP_KEY_ADMIN, _as_admin), timeout=60))
        asyncio.run(asyncio.wait_for(_keyed_session(url, MCP_KEY_A, _as_team_a), timeout=60))
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=20)
    assert "Traceback" not in err
    lines = [json.loads(line) for line in err.splitlines() if line.strip()]  # json logs: every line
    requests = [x for x in lines if x["logger"] == "hybridmem.server.access"]
    assert {x["status"] for x in requests} >= {200, 401, 403, 421}
    assert {x["tenant"] for x in requests} >= {"anonymous"} and len({x["tenant"] for x in requests}) == 3
    assert all(MCP_KEY_A not in line and MCP_KEY_ADMIN not in line for line in err.splitlines())  # never a key
    with Memory(tmp_path / "m.db", embedder="hash", auto_embed=False) as mem:
        assert mem.stats("team-b").documents == 1 and mem.stats("team-a").documents == 1


def test_mcp_http_refusal_says_how_to_configure_keys(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, *_server(tmp_path / "m.db")[:-1], "mcp", "--transport", "http", "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "without API keys" in r.stderr and "[api_keys]" in r.stderr
    assert "HYBRIDMEM_API_KEYS" in r.stderr and not (tmp_path / "m.db").exists()
