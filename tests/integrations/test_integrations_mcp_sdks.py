"""Agent SDKs over MCP (docs/integrations.md, "Agent SDKs over MCP"): the MCP clients of the OpenAI
Agents SDK (``openai-agents``) and of Pydantic AI (``pydantic-ai-slim[mcp]``) connect to
``hybridmem mcp`` (a subprocess: hash embedder, a temporary store), over stdio and streamable
HTTP, and call ``remember`` then ``recall`` through the SDK's own API, then as an agent's tools.
No LLM and no network: the tool calls are made directly, or by a scripted model."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunContextWrapper, set_tracing_disabled
from agents.mcp import MCPServerStdio, MCPServerStreamableHttp
from agents.tool_context import ToolContext
from fastmcp.client.transports import StdioTransport
from fastmcp.exceptions import ToolError
from packaging.requirements import Requirement
from packaging.version import Version
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from hybridmem import Memory
from server_utils import wait_listening

set_tracing_disabled(True)  # the Agents SDK never exports traces from here

TOOLS = {"remember", "recall", "forget", "ask"}
FACT = {
    "text": "PostgreSQL connection pool exhaustion causes HTTP 504 timeouts. Increase max_connections to 200.",
    "id": "doc_8832",
    "source": "wiki/infrastructure_troubleshooting.md",
    "metadata": {"environment": "production", "service": "billing-service"},
}
RECALL = {
    "search_text": "HTTP 504 gateway timeout postgres connection pool",
    "top_k": 5,
    "hybrid_params": {"dense_weight": 0.6, "sparse_weight": 0.4, "rrf_k_constant": 60},
    "metadata_filter": {"environment": "production", "service": "billing-service"},
}


def _args(db: Path) -> list[str]:
    """``hybridmem mcp`` on a store of its own, with the offline hash embedder."""
    return ["-m", "hybridmem.cli", "--db", str(db), "--embedder", "hash", "mcp"]


def _check_recall(resp: dict[str, Any]) -> None:
    assert resp["total_retrieved"] == 1, resp
    hit = resp["results"][0]
    assert hit["chunk_id"] == "doc_8832_p1" and hit["source"] == FACT["source"] and "bm25" in hit["ranks"]


@pytest.fixture
def http_url(tmp_path: Path) -> Iterator[str]:
    """``hybridmem mcp --transport http`` on a free loopback port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, *_args(tmp_path / "http.db"), "--transport", "http", "--port", str(port)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        wait_listening(url, proc)
        yield url
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=20)
    assert "Traceback" not in err


# ---------------------------------------------------------------- OpenAI Agents SDK
async def _openai_agents_session(server: MCPServerStdio | MCPServerStreamableHttp) -> None:
    async with server:
        tools = {t.name: t for t in await server.list_tools()}
        assert TOOLS <= set(tools) and "search_text" in tools["recall"].input_schema["properties"]
        added = await server.call_tool("remember", FACT)
        assert not added.is_error and added.structured_content["added"] == ["doc_8832"]
        resp = await server.call_tool("recall", RECALL)
        assert not resp.is_error
        _check_recall(resp.structured_content)
        assert json.loads(resp.content[0].text) == resp.structured_content  # the text mirrors it
        bad = await server.call_tool("recall", {"search_text": "x", "top_k": 0})
        assert bad.is_error and "top_k" in bad.content[0].text  # a tool error, and the session goes on

        # the same server as an agent's tools: what the Runner calls when a model picks "recall"
        agent = Agent(name="ops", instructions="Use the memory.", mcp_servers=[server])
        function_tools = {t.name: t for t in await agent.get_mcp_tools(RunContextWrapper(context=None))}
        assert TOOLS <= set(function_tools)
        arguments = json.dumps({**RECALL, "search_text": "max_connections billing"})
        ctx = ToolContext(context=None, tool_name="recall", tool_call_id="call_1", tool_arguments=arguments)
        out = await function_tools["recall"].on_invoke_tool(ctx, arguments)
        text = out["text"] if isinstance(out, dict) else str(out)
        assert "doc_8832_p1" in text


def test_openai_agents_sdk_over_stdio(tmp_path: Path) -> None:
    params = {"command": sys.executable, "args": _args(tmp_path / "m.db"), "env": {"PYTHONUNBUFFERED": "1"}}
    server = MCPServerStdio(params=params, name="hybridmem", client_session_timeout_seconds=60)
    asyncio.run(asyncio.wait_for(_openai_agents_session(server), timeout=120))
    with Memory(tmp_path / "m.db", embedder="hash", auto_embed=False) as mem:  # the store on disk
        assert mem.get("doc_8832")["metadata"] == FACT["metadata"]


def test_openai_agents_sdk_over_streamable_http(http_url: str) -> None:
    server = MCPServerStreamableHttp(params={"url": http_url}, name="hybridmem", client_session_timeout_seconds=60)
    asyncio.run(asyncio.wait_for(_openai_agents_session(server), timeout=120))


# ---------------------------------------------------------------- Pydantic AI
async def _pydantic_ai_session(toolset: MCPToolset[Any]) -> None:
    async with toolset:
        tools = {t.name: t for t in await toolset.list_tools()}
        assert TOOLS <= set(tools)
        added = await toolset.direct_call_tool("remember", FACT)
        assert added["added"] == ["doc_8832"]  # the structured content, as a dict
        _check_recall(await toolset.direct_call_tool("recall", RECALL))
        with pytest.raises(ToolError, match="top_k"):  # tool_error_behavior="error": the server's message
            await toolset.direct_call_tool("recall", {"search_text": "x", "top_k": 0})


def _script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """A model without a model: remember, then recall, then answer with what recall returned."""
    assert TOOLS <= {t.name for t in info.function_tools}
    returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
    if not returns:
        return ModelResponse(parts=[ToolCallPart("remember", {**FACT, "id": "via-agent"})])
    if len(returns) == 1:
        return ModelResponse(parts=[ToolCallPart("recall", {"search_text": "max_connections 504", "mode": "bm25"})])
    return ModelResponse(parts=[TextPart(json.dumps(returns[-1].content))])


def test_pydantic_ai_over_stdio(tmp_path: Path) -> None:
    def toolset() -> MCPToolset[Any]:
        transport = StdioTransport(command=sys.executable, args=_args(tmp_path / "m.db"), env={"PYTHONUNBUFFERED": "1"})
        return MCPToolset(transport, id="hybridmem", tool_error_behavior="error")

    asyncio.run(asyncio.wait_for(_pydantic_ai_session(toolset()), timeout=120))

    async def agent_run() -> str:
        agent = PydanticAgent(FunctionModel(_script), toolsets=[toolset()])
        async with agent:
            return (await agent.run("Remember the fix, then look it up.")).output

    out = json.loads(asyncio.run(asyncio.wait_for(agent_run(), timeout=120)))
    assert {r["doc_id"] for r in out["results"]} == {"doc_8832", "via-agent"}


def test_pydantic_ai_over_streamable_http(http_url: str) -> None:
    asyncio.run(asyncio.wait_for(_pydantic_ai_session(MCPToolset(http_url, tool_error_behavior="error")), timeout=120))


# ---------------------------------------------------------------- what the SDKs bring along
def _closure(name: str, extras: frozenset[str] = frozenset()) -> set[str]:
    """The installed distributions ``name`` (with ``extras``) requires, recursively."""
    seen: set[str] = set()
    todo = [(name, extras)]
    while todo:
        dist, ex = todo.pop()
        key = dist.lower().replace("_", "-")
        if key in seen:
            continue
        seen.add(key)
        try:
            requires = metadata.requires(dist) or []
        except metadata.PackageNotFoundError:
            continue
        for line in requires:
            req = Requirement(line)
            if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in ex | {""}):
                todo.append((req.name, frozenset(req.extras)))
    return seen


@pytest.mark.parametrize(("dist", "extras"), [("openai-agents", frozenset()), ("pydantic-ai-slim", frozenset({"mcp"}))])
def test_sdks_pull_no_torch_and_keep_the_mcp_pin(dist: str, extras: frozenset[str]) -> None:
    deps = _closure(dist, extras)
    assert "mcp" in deps
    assert not {d for d in deps if d == "torch" or d.startswith("nvidia-")}, deps
    assert Version("2.0") <= Version(metadata.version("mcp")) < Version("3")  # pyproject's mcp>=2.0,<3
