"""The MCP server: tools ``remember`` (a text, or chat messages), ``recall`` (the query contract,
with the agent-memory scopes and times), ``history``, ``forget``, ``ask`` and a stats resource,
over one :class:`hybridmem.Memory`. Built on the official ``mcp`` SDK 2.x
(``mcp.server.mcpserver.MCPServer``; 1.x's ``mcp.server.fastmcp`` is gone). stdio by default,
streamable HTTP on request (``hybridmem mcp --transport http``).

Over HTTP the endpoint takes the HTTP API's API keys (the same :class:`KeyRing`: 401 without a
valid key) and every tool and resource checks its namespace against the caller's key (a tool
error, as the HTTP API's 403, for a namespace the key may not use); without keys it listens on
loopback only. Host and Origin are checked as by the HTTP API (:class:`LoopbackGuard`), and every
request is logged with its id (:class:`RequestLog`).

The tools and resources are in ``mcp_tools``; aliases, callers and namespaces in ``mcp_dispatch``.
"""

from collections.abc import Mapping
from typing import Any, Literal

from . import common
from .auth import HostPolicy, KeyRing, bare_host
from .mcp_dispatch import ALIASES, _namespaces, _server_class, tool_arguments
from .mcp_tools import _answer_tools, _list_tool, _memory_tools, _recall_tool, _stats_resources

__all__ = ["ALIASES", "INSTRUCTIONS", "check_transport", "create_server", "http_app", "run_mcp", "tool_arguments"]

INSTRUCTIONS = (
    "Long-term memory. `remember` stores a fact, note or document (give a stable id to update it "
    "later); `recall` searches it (hybrid BM25 + embeddings: exact identifiers such as HEL-4040 or "
    "max_connections and paraphrases are both found; `metadata_filter` narrows before ranking); "
    "`ask` answers a question from the memory with [chunk_id] citations; `forget` deletes by id. "
    "Conversations: `remember` with `messages` and a `session_id` stores each message as a memory "
    "(speaker, turn, timestamp); `recall` narrows by `session_id`, `user_id`, `time_range`, sees the "
    "past with `as_of` and returns neighbouring turns with `context_window`; `history` lists a "
    "memory's versions; `list_memories` pages through the memories themselves (no ranking). Read "
    "hybridmem://stats for what the memory holds."
)


def create_server(
    memory: Any,
    *,
    namespace: str | None = None,
    name: str = "hybridmem",
    max_top_k: int = 100,
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "WARNING",
    keys: KeyRing | None = None,
) -> Any:
    """An ``MCPServer`` over ``memory``; ``namespace``: the default one (else the memory's).
    ``keys``: served over HTTP with these API keys (:func:`http_app`): each call's namespace is
    checked against its caller's key."""
    ns_of = _namespaces(namespace or memory.namespace, keys)
    server = _server_class()(name, instructions=INSTRUCTIONS, log_level=log_level)
    _memory_tools(server, memory, ns_of)
    _recall_tool(server, memory, ns_of, max_top_k)
    _list_tool(server, memory, ns_of)
    _answer_tools(server, memory, ns_of, max_top_k)
    _stats_resources(server, memory, ns_of)
    return server


def check_transport(transport: str, host: str, api_keys: KeyRing | Mapping[str, Any] | None = None) -> str:
    """The transport to run (``stdio`` or ``streamable-http``); refuses HTTP off loopback without
    API keys, as ``hybridmem serve`` does."""
    from .auth import is_loopback
    from .config import ConfigError

    if transport == "stdio":
        return transport
    if transport in ("http", "streamable-http"):
        enabled = api_keys.enabled if isinstance(api_keys, KeyRing) else bool(api_keys)
        if not enabled and not is_loopback(host):
            raise ConfigError(
                f"refusing to serve MCP over HTTP on {host!r} without API keys: an open MCP endpoint listens "
                "on loopback only. Configure keys with HYBRIDMEM_API_KEYS='key:namespace[,…];…' or an "
                "[api_keys] table in --config FILE, or bind to 127.0.0.1."
            )
        return "streamable-http"
    raise ConfigError(f"unknown MCP transport {transport!r}: use stdio or http")


def http_app(
    server: Any, keys: KeyRing, *, host: str = "127.0.0.1", path: str = "/mcp", allowed_hosts: tuple[str, ...] = ()
) -> Any:
    """The streamable-HTTP ASGI app of ``server`` behind the request log (ids, one line per
    request), the Host/Origin guard (421/403, on every method: the SDK's own check is replaced by
    it) and the API keys (401)."""
    from mcp.server.transport_security import TransportSecuritySettings

    inner = server.streamable_http_app(
        streamable_http_path=path,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        host=host,
    )
    guarded = common.LoopbackGuard(common.KeyAuth(inner, keys), HostPolicy.for_bind(host, allowed_hosts), True)
    return common.RequestLog(guarded)


def run_mcp(
    memory: Any,
    *,
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = 8765,
    path: str = "/mcp",
    namespace: str | None = None,
    api_keys: Mapping[str, tuple[str, ...]] | None = None,
    allowed_hosts: tuple[str, ...] = (),
    log_level: str = "info",
) -> None:
    """Serve until the client disconnects (stdio) or until interrupted (streamable HTTP, with
    ``api_keys`` -> namespaces as ``hybridmem serve``)."""
    kind = check_transport(transport, host, api_keys)
    if kind == "stdio":
        create_server(memory, namespace=namespace).run("stdio")
        return
    import uvicorn

    keys = KeyRing(dict(api_keys or {}), default_namespace=namespace or memory.namespace)
    server = create_server(memory, namespace=namespace, keys=keys)
    app = http_app(server, keys, host=host, path=path, allowed_hosts=allowed_hosts)
    uvicorn.run(app, host=bare_host(host), port=port, log_level=log_level, log_config=None, access_log=False)
