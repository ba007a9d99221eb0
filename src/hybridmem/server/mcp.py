"""The MCP server: tools ``remember``, ``recall`` (the query contract), ``forget``, ``ask`` and a
stats resource, over one :class:`hybridmem.Memory`. Built on the official ``mcp`` SDK 2.x
(``mcp.server.mcpserver.MCPServer``; 1.x's ``mcp.server.fastmcp`` is gone). stdio by default,
streamable HTTP on request (``hybridmem mcp --transport http``).
"""

# no `from __future__ import annotations`: the SDK evaluates tool signatures, and they use closure values
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any, Literal, cast

from pydantic import Field

from ..errors import HybridMemError
from ..models import HybridParams
from ..models import Namespace as _Namespace
from . import common

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

__all__ = ["ALIASES", "INSTRUCTIONS", "check_transport", "create_server", "run_mcp", "tool_arguments"]

INSTRUCTIONS = (
    "Long-term memory. `remember` stores a fact, note or document (give a stable id to update it "
    "later); `recall` searches it (hybrid BM25 + embeddings: exact identifiers such as HEL-4040 or "
    "max_connections and paraphrases are both found; `metadata_filter` narrows before ranking); "
    "`ask` answers a question from the memory with [chunk_id] citations; `forget` deletes by id. "
    "Read hybridmem://stats for what the memory holds."
)

Namespace = Annotated[_Namespace, Field(None, description="Namespace (default: the server's).")]

#: argument names an agent tends to try first -> the tool's own. Accepted (renamed) when the tool's
#: own name is absent; the published schemas keep only the tool's own names.
ALIASES: dict[str, dict[str, str]] = {
    "recall": {
        "query": "search_text",
        "q": "search_text",
        "text": "search_text",
        "k": "top_k",
        "limit": "top_k",
        "filter": "metadata_filter",
        "filters": "metadata_filter",
    },
    "remember": {"content": "text", "memory": "text", "doc_id": "id", "meta": "metadata"},
    "forget": {"id": "ids", "doc_ids": "ids"},
    "ask": {"query": "question", "q": "question", "k": "top_k", "filter": "metadata_filter"},
    "graph_global": {"query": "question", "q": "question"},
}
#: each tool's required argument, and what it holds (named in the error when it is missing)
_REQUIRED = {
    "recall": ("search_text", "the text to look for"),
    "remember": ("text", "what to remember"),
    "forget": ("ids", "a list of document or chunk ids"),
    "ask": ("question", "the question"),
    "graph_global": ("question", "the corpus-wide question"),
}


def tool_arguments(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """``arguments`` with :data:`ALIASES` renamed to ``tool``'s own names (``forget``'s single id
    becomes a list). A missing required argument is a ToolError that names it and its aliases
    (instead of pydantic's "Field required")."""
    from mcp.server.mcpserver.exceptions import ToolError

    args = dict(arguments)
    for alias, name in ALIASES.get(tool, {}).items():
        if alias in args and name not in args:
            args[name] = args.pop(alias)
    if tool == "forget" and isinstance(args.get("ids"), str):
        args["ids"] = [args["ids"]]
    required = _REQUIRED.get(tool)
    if required is not None and required[0] not in args:
        name, what = required
        aliases = [a for a, n in ALIASES.get(tool, {}).items() if n == name]
        got = ", ".join(sorted(arguments)) or "none"
        raise ToolError(
            f"{tool} needs the argument `{name}` ({what})"
            + (f"; `{'`, `'.join(aliases)}` also accepted" if aliases else "")
            + f"; arguments given: {got}"
        )
    return args


def _server_class() -> Any:
    """``MCPServer`` whose tool calls accept :data:`ALIASES` (:func:`tool_arguments`)."""
    from mcp.server.mcpserver import MCPServer

    class AliasingServer(MCPServer):
        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
            return await super().call_tool(name, tool_arguments(name, arguments), context)

    return AliasingServer


def create_server(
    memory: Any,
    *,
    namespace: str | None = None,
    name: str = "hybridmem",
    max_top_k: int = 100,
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "WARNING",
) -> Any:
    """An ``MCPServer`` over ``memory``; ``namespace``: the default one (else the memory's)."""
    default_ns = namespace or memory.namespace
    server = _server_class()(name, instructions=INSTRUCTIONS, log_level=log_level)
    _memory_tools(server, memory, default_ns, max_top_k)
    _answer_tools(server, memory, default_ns, max_top_k)
    _stats_resources(server, memory, default_ns)
    return server


@contextmanager
def _tool_errors() -> Iterator[None]:
    """A hybridmem error becomes the tool's error result, with the message the HTTP API gives."""
    from mcp.server.mcpserver.exceptions import ToolError

    try:
        yield
    except HybridMemError as e:
        raise ToolError(str(e)) from None


def _memory_tools(server: "MCPServer", memory: Any, default_ns: str, max_top_k: int) -> None:
    @server.tool(
        description="Store a memory (fact, note, document). Same id + same text is a no-op; "
        "same id + new text replaces it. Returns what was added/updated."
    )
    def remember(
        text: Annotated[str, Field(min_length=1, description="What to remember.")],
        id: Annotated[
            str | None,
            Field(None, min_length=1, max_length=512, description="Stable id (omitted: derived from the text)."),
        ] = None,
        metadata: Annotated[dict[str, Any] | None, Field(None, description="Filterable metadata.")] = None,
        source: Annotated[str | None, Field(None, max_length=4096)] = None,
        namespace: Namespace = None,
    ) -> dict[str, Any]:
        with _tool_errors():
            report = memory.add(text, id=id, metadata=metadata or {}, source=source, namespace=namespace or default_ns)
        ids = report.added + report.updated + report.unchanged
        return {"id": ids[0] if ids else id, "namespace": namespace or default_ns, **report.model_dump()}

    @server.tool(
        description="Search the memory: the hybridmem query contract (hybrid BM25 + dense fused "
        "by RRF). Returns results with chunk_id, rrf_score, text, source, metadata and "
        "per-leg ranks."
    )
    def recall(
        search_text: Annotated[str, Field(min_length=1, description="What to look for, in any language.")],
        top_k: Annotated[int, Field(5, ge=1, le=max_top_k)] = 5,
        metadata_filter: Annotated[
            dict[str, Any] | None,
            Field(
                None,
                description='e.g. {"environment": "production", "severity": {"$gte": 3}}; '
                "operators $in $nin $ne $gt $gte $lt $lte $exists $and $or",
            ),
        ] = None,
        hybrid_params: Annotated[HybridParams | None, Field(None, description="RRF weights and k")] = None,
        mode: Annotated[Literal["hybrid", "bm25", "vector", "rerank"], Field("hybrid")] = "hybrid",
        query_id: Annotated[str | None, Field(None, max_length=256)] = None,
        fetch_k: Annotated[int | None, Field(None, ge=1, le=10 * max_top_k)] = None,
        namespace: Namespace = None,
    ) -> dict[str, Any]:
        req: dict[str, Any] = {
            "search_text": search_text,
            "top_k": top_k,
            "mode": mode,
            "metadata_filter": metadata_filter or {},
            "namespace": namespace or default_ns,
        }
        if hybrid_params is not None:
            req["hybrid_params"] = hybrid_params.model_dump()
        if query_id is not None:
            req["query_id"] = query_id
        if fetch_k is not None:
            req["fetch_k"] = fetch_k
        with _tool_errors():
            return cast(dict[str, Any], memory.search(req).model_dump(mode="json"))

    @server.tool(description="Delete memories (document ids or chunk ids) from every index.")
    def forget(
        ids: Annotated[list[str], Field(min_length=1, max_length=1000, description="Ids to delete.")],
        namespace: Namespace = None,
    ) -> dict[str, Any]:
        with _tool_errors():
            found = memory.delete(ids, namespace=namespace or default_ns)
        return {"deleted": found, "not_found": [i for i in ids if i not in found], "namespace": namespace or default_ns}


def _answer_tools(server: "MCPServer", memory: Any, default_ns: str, max_top_k: int) -> None:
    @server.tool(
        description="Answer a question from the memory only, citing the chunks used as [chunk_id]. "
        "Says so honestly when the memory does not hold the answer."
    )
    def ask(
        question: Annotated[str, Field(min_length=1, description="The question, in any language.")],
        top_k: Annotated[int, Field(5, ge=1, le=max_top_k, description="Chunks of context.")] = 5,
        metadata_filter: Annotated[dict[str, Any] | None, Field(None)] = None,
        rerank: Annotated[bool, Field(True, description="Rerank the candidates before answering.")] = True,
        namespace: Namespace = None,
    ) -> dict[str, Any]:
        with _tool_errors():
            ans = common.ask(
                memory,
                question,
                top_k=top_k,
                metadata_filter=metadata_filter or {},
                rerank=rerank,
                namespace=namespace or default_ns,
            )
        return cast(dict[str, Any], ans.model_dump(mode="json"))

    @server.tool(
        description='Answer a corpus-wide question ("how do all services handle timeouts?") '
        "by map-reduce over the entity graph's community summaries; cites community "
        "and chunk ids. Needs a graph: it is built offline on first use."
    )
    def graph_global(
        question: Annotated[str, Field(min_length=1, description="The corpus-wide question.")],
        level: Annotated[int | None, Field(None, ge=0, le=16, description="Community level (0 = top).")] = None,
        namespace: Namespace = None,
    ) -> dict[str, Any]:
        ns = namespace or default_ns
        with _tool_errors():
            if memory.graph.status(ns).built is False:
                memory.graph.build(ns)
            ans = memory.graph.ask_global(question, level=level, namespace=ns)
        return cast(dict[str, Any], ans.model_dump(mode="json"))


def _stats_resources(server: "MCPServer", memory: Any, default_ns: str) -> None:
    def _stats(ns: str) -> str:
        from mcp.server.mcpserver.exceptions import ResourceError

        try:
            return cast(str, memory.stats(ns).model_dump_json(indent=2))
        except HybridMemError as e:
            raise ResourceError(str(e)) from None

    @server.resource(
        "hybridmem://stats",
        name="stats",
        mime_type="application/json",
        description="What the memory holds in the default namespace: documents, chunks, "
        "vectors (and pending ones), embedder, metadata keys.",
    )
    def stats() -> str:
        return _stats(default_ns)

    @server.resource(
        "hybridmem://stats/{namespace}",
        name="namespace-stats",
        mime_type="application/json",
        description="The same for one namespace.",
    )
    def namespace_stats(namespace: str) -> str:
        return _stats(namespace)


def check_transport(transport: str, host: str) -> str:
    """The transport to run (``stdio`` or ``streamable-http``); refuses HTTP off loopback: the MCP
    endpoint has no API keys."""
    from .auth import is_loopback
    from .config import ConfigError

    if transport == "stdio":
        return transport
    if transport in ("http", "streamable-http"):
        if not is_loopback(host):
            raise ConfigError(
                f"refusing to serve MCP over HTTP on {host!r}: the MCP endpoint has no API keys, "
                "so it listens on loopback only (use `hybridmem serve` with keys for remote agents)"
            )
        return "streamable-http"
    raise ConfigError(f"unknown MCP transport {transport!r}: use stdio or http")


def run_mcp(
    memory: Any,
    *,
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = 8765,
    path: str = "/mcp",
    namespace: str | None = None,
) -> None:
    """Serve until the client disconnects (stdio) or until interrupted (streamable HTTP)."""
    kind = check_transport(transport, host)
    server = create_server(memory, namespace=namespace)
    if kind == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host=host, port=port, streamable_http_path=path)
