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
"""

# no `from __future__ import annotations`: the SDK evaluates tool signatures, and they use closure values
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Annotated, Any, Literal, cast

from pydantic import Field

from ..errors import HybridMemError, ValidationError
from ..models import ContextWindow, HybridParams, IngestReport, Message, TimeRange
from ..models import Namespace as _Namespace
from . import common
from .auth import AuthError, HostPolicy, KeyRing, Principal, bare_host

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

__all__ = ["ALIASES", "INSTRUCTIONS", "check_transport", "create_server", "http_app", "run_mcp", "tool_arguments"]

INSTRUCTIONS = (
    "Long-term memory. `remember` stores a fact, note or document (give a stable id to update it "
    "later); `recall` searches it (hybrid BM25 + embeddings: exact identifiers such as HEL-4040 or "
    "max_connections and paraphrases are both found; `metadata_filter` narrows before ranking); "
    "`ask` answers a question from the memory with [chunk_id] citations; `forget` deletes by id. "
    "Conversations: `remember` with `messages` and a `session_id` stores each message as a memory "
    "(speaker, turn, timestamp); `recall` narrows by `session_id`, `user_id`, `time_range`, sees the "
    "past with `as_of` and returns neighbouring turns with `context_window`; `history` lists a "
    "memory's versions. Read hybridmem://stats for what the memory holds."
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
        "session": "session_id",
    },
    "remember": {"content": "text", "memory": "text", "doc_id": "id", "meta": "metadata", "session": "session_id"},
    "forget": {"id": "ids", "doc_ids": "ids"},
    "history": {"doc_id": "id", "memory_id": "id"},
    "ask": {"query": "question", "q": "question", "k": "top_k", "filter": "metadata_filter"},
    "graph_global": {"query": "question", "q": "question"},
}
#: each tool's required argument, and what it holds (named in the error when it is missing)
_REQUIRED = {
    "recall": ("search_text", "the text to look for"),
    "remember": ("text", "what to remember, or `messages`"),
    "forget": ("ids", "a list of document or chunk ids"),
    "history": ("id", "the memory's id"),
    "ask": ("question", "the question"),
    "graph_global": ("question", "the corpus-wide question"),
}
#: arguments that stand in for a tool's required one
_INSTEAD = {"remember": "messages"}


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
    if required is not None and required[0] not in args and _INSTEAD.get(tool, required[0]) not in args:
        name, what = required
        aliases = [a for a, n in ALIASES.get(tool, {}).items() if n == name]
        got = ", ".join(sorted(arguments)) or "none"
        raise ToolError(
            f"{tool} needs the argument `{name}` ({what})"
            + (f"; `{'`, `'.join(aliases)}` also accepted" if aliases else "")
            + f"; arguments given: {got}"
        )
    return args


#: the caller of the tool call or resource read being served (over HTTP: its key's Principal)
_CALLER: ContextVar[Principal | None] = ContextVar("hybridmem_mcp_caller", default=None)


def _principal_of(context: Any) -> Principal | None:
    """The Principal :class:`~hybridmem.server.common.KeyAuth` put in the scope of the HTTP
    request that carried this message (None over stdio)."""
    request = getattr(getattr(context, "request_context", None), "request", None)
    scope = getattr(request, "scope", None)
    p = scope.get(common.PRINCIPAL_KEY) if isinstance(scope, Mapping) else None
    return p if isinstance(p, Principal) else None


def _one_line(tool: str, e: Exception) -> Exception | None:
    """A tool's arguments the SDK refused (pydantic's multi-line report) as one line naming the
    first bad argument, as the HTTP API's 422 does; None for any other error."""
    from mcp.server.mcpserver.exceptions import ToolError
    from pydantic import ValidationError as PydanticError

    cause = e.__cause__
    if not isinstance(cause, PydanticError) or not cause.errors():
        return None
    errs = cause.errors()
    field = ".".join(str(p) for p in errs[0]["loc"])
    msg = str(errs[0]["msg"]).removeprefix("Value error, ")
    more = f" (and {len(errs) - 1} more problem{'s' if len(errs) > 2 else ''})" if len(errs) > 1 else ""
    return ToolError(f"Error executing tool {tool}: " + (f"{field}: {msg}" if field else msg) + more)


def _server_class() -> Any:
    """``MCPServer`` whose tool calls accept :data:`ALIASES` (:func:`tool_arguments`) and run as
    their caller (:data:`_CALLER`)."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    class AliasingServer(MCPServer):
        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
            token = _CALLER.set(_principal_of(context))
            try:
                return await super().call_tool(name, tool_arguments(name, arguments), context)
            except ToolError as e:
                better = _one_line(name, e)
                if better is None:
                    raise
                raise better from None
            finally:
                _CALLER.reset(token)

        async def read_resource(self, uri: Any, context: Any = None) -> Any:
            token = _CALLER.set(_principal_of(context))
            try:
                return await super().read_resource(uri, context)
            finally:
                _CALLER.reset(token)

    return AliasingServer


def _namespaces(default_ns: str, keys: KeyRing | None) -> Callable[[str | None], str]:
    """``asked`` namespace -> the one a call works in: over HTTP the caller's key decides (its
    default, or ForbiddenError for a namespace it may not use); over stdio ``asked`` or the default."""

    def namespace_of(asked: str | None) -> str:
        p = _CALLER.get()
        if p is not None:
            return p.namespace(asked)
        if keys is not None and keys.enabled:  # a server with keys never serves an unknown caller
            raise AuthError("this MCP server needs an API key")
        return asked or default_ns

    return namespace_of


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
    _answer_tools(server, memory, ns_of, max_top_k)
    _stats_resources(server, memory, ns_of)
    return server


@contextmanager
def _tool_errors() -> Iterator[None]:
    """A hybridmem error becomes the tool's error result, with the message the HTTP API gives."""
    from mcp.server.mcpserver.exceptions import ToolError

    try:
        yield
    except HybridMemError as e:
        raise ToolError(str(e)) from None


#: a scope id (session, user, agent), as the request models take it
_ScopeId = Annotated[str | None, Field(None, min_length=1, max_length=512)]


def _remember_messages(
    memory: Any, ns: str, messages: list[Message], scope: dict[str, Any], text_args: dict[str, Any]
) -> dict[str, Any]:
    """``remember`` with ``messages``: ``Memory.add_messages`` into the session of ``scope``."""
    given = [name for name, value in text_args.items() if value is not None]
    if given:
        raise ValidationError(
            f"{', '.join(given)}: only with `text` (with `messages`, each message has its own)", "messages"
        )
    if scope["session_id"] is None:
        raise ValidationError("`messages` need a `session_id` (the conversation they belong to)", "session_id")
    msgs = [m.model_dump(exclude_none=True) for m in messages]
    try:
        report = memory.add_messages(msgs, **scope, namespace=ns)
    except ValidationError as e:
        raise common.dotted(e) from None
    ids = report.added + report.updated + report.unchanged
    return {"ids": ids, "session_id": scope["session_id"], "namespace": ns, **report.model_dump()}


def _memory_tools(server: "MCPServer", memory: Any, ns_of: Callable[[str | None], str]) -> None:
    @server.tool(
        description="Store a memory (fact, note, document). Same id + same text is a no-op; "
        "same id + new text replaces it (the old version kept in its history). Or store chat "
        "`messages` ({role, content, name?, timestamp?}) of a conversation `session_id`: each "
        "message becomes a memory with its speaker, turn and time. Returns what was added/updated."
    )
    def remember(
        text: Annotated[str | None, Field(None, min_length=1, description="What to remember.")] = None,
        id: Annotated[
            str | None,
            Field(None, min_length=1, max_length=512, description="Stable id (omitted: derived from the text)."),
        ] = None,
        metadata: Annotated[dict[str, Any] | None, Field(None, description="Filterable metadata.")] = None,
        source: Annotated[str | None, Field(None, max_length=4096)] = None,
        messages: Annotated[
            list[Message] | None,
            Field(None, min_length=1, max_length=1000, description="Chat messages, in order (instead of text)."),
        ] = None,
        session_id: Annotated[
            _ScopeId, Field(description="The conversation of `messages` (required with them).")
        ] = None,
        user_id: Annotated[_ScopeId, Field(description="Scope: the user (metadata user_id).")] = None,
        agent_id: Annotated[_ScopeId, Field(description="Scope: the agent (metadata agent_id).")] = None,
        reconcile: Annotated[
            bool,
            Field(
                False,
                description="With `text`: let the server's LLM decide first whether it is new (ADD), changes a "
                "memory of the scope (UPDATE, history kept), retracts one (DELETE, soft) or is known (NONE).",
            ),
        ] = False,
        namespace: Namespace = None,
    ) -> dict[str, Any]:
        with _tool_errors():
            ns = ns_of(namespace)
            scope = {"session_id": session_id, "user_id": user_id, "agent_id": agent_id}
            if reconcile and messages is None and text is not None:
                d = memory.remember(
                    text, id=id, metadata=metadata, source=source, reconcile=True, namespace=ns, **scope
                )
                report = (d.report or IngestReport()).model_dump()
                return {"namespace": ns, **d.model_dump(exclude={"report"}), **report}
            if messages is not None:
                text_args = {"text": text, "id": id, "metadata": metadata, "source": source}
                return _remember_messages(memory, ns, messages, scope, text_args)
            if text is None:
                raise ValidationError("remember needs `text` or `messages`", "text")
            if session_id is not None:
                raise ValidationError(
                    "`session_id` goes with `messages` (a text has no turn in a conversation)", "session_id"
                )
            meta = {**(metadata or {}), **{k: v for k, v in scope.items() if v is not None}}
            report = memory.add(text, id=id, metadata=meta, source=source, namespace=ns)
        ids = report.added + report.updated + report.unchanged
        return {"id": ids[0] if ids else id, "namespace": ns, **report.model_dump()}

    @server.tool(description="Delete memories (document ids or chunk ids) from every index.")
    def forget(
        ids: Annotated[list[str], Field(min_length=1, max_length=1000, description="Ids to delete.")],
        namespace: Namespace = None,
    ) -> dict[str, Any]:
        with _tool_errors():
            ns = ns_of(namespace)
            found = memory.delete(ids, namespace=ns)
        return {"deleted": found, "not_found": [i for i in ids if i not in found], "namespace": ns}

    @server.tool(
        description="Every version of a memory, oldest first: its text, when it occurred, when each "
        "version was recorded and stopped being current (valid_to), and why it was written."
    )
    def history(
        id: Annotated[str, Field(min_length=1, max_length=512, description="The memory's id.")],
        namespace: Namespace = None,
    ) -> dict[str, Any]:
        with _tool_errors():
            ns = ns_of(namespace)
            versions = memory.history(id, namespace=ns)
        return {"id": id, "versions": versions, "namespace": ns}


#: the agent-memory arguments ``recall`` and ``ask`` share
_Sessions = Annotated[
    str | list[str] | None, Field(None, description="Only these conversation sessions (an id or a list).")
]
_UserScope = Annotated[_ScopeId, Field(description="Only this user's memories.")]
_AgentScope = Annotated[_ScopeId, Field(description="Only this agent's memories.")]
_TimeRangeArg = Annotated[
    TimeRange | None,
    Field(None, description='Only what occurred in {"from", "to"} (ISO 8601 or epoch seconds; either end open).'),
]
_AsOf = Annotated[str | float | None, Field(None, description="The memory as it stood then (later writes unseen).")]
_Now = Annotated[str | float | None, Field(None, description='The time "last week" in the text counts from.')]
_ContextArg = Annotated[
    ContextWindow | None,
    Field(None, description='Neighbouring turns of each hit, e.g. {"before": 2, "after": 2}.'),
]


def _recall_request(args: dict[str, Any]) -> dict[str, Any]:
    """``recall``'s arguments as a request of the query contract (None and defaults left out)."""
    req = {k: v for k, v in args.items() if v is not None and v is not False}
    req["metadata_filter"] = req.get("metadata_filter") or {}
    for name in ("hybrid_params", "time_range", "context_window"):
        if name in req:
            req[name] = req[name].model_dump(by_alias=True, exclude_none=True)
    return req


def _recall_tool(server: "MCPServer", memory: Any, ns_of: Callable[[str | None], str], max_top_k: int) -> None:
    @server.tool(
        description="Search the memory: the hybridmem query contract (hybrid BM25 + dense fused "
        "by RRF). Returns results with chunk_id, rrf_score, text, source, metadata and "
        "per-leg ranks; conversation memories also carry session_id, turn, speaker and occurred_at."
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
        session_id: _Sessions = None,
        user_id: _UserScope = None,
        agent_id: _AgentScope = None,
        time_range: _TimeRangeArg = None,
        as_of: _AsOf = None,
        include_superseded: Annotated[bool, Field(False, description="Also superseded/forgotten versions.")] = False,
        now: _Now = None,
        context_window: _ContextArg = None,
        namespace: Namespace = None,
    ) -> dict[str, Any]:
        args = {
            "search_text": search_text,
            "top_k": top_k,
            "metadata_filter": metadata_filter,
            "hybrid_params": hybrid_params,
            "mode": mode,
            "query_id": query_id,
            "fetch_k": fetch_k,
            "session_id": session_id,
            "user_id": user_id,
            "agent_id": agent_id,
            "time_range": time_range,
            "as_of": as_of,
            "include_superseded": include_superseded,
            "now": now,
            "context_window": context_window,
        }
        with _tool_errors():
            args["namespace"] = ns_of(namespace)
            return cast(dict[str, Any], memory.search(_recall_request(args)).model_dump(mode="json"))


def _answer_tools(server: "MCPServer", memory: Any, ns_of: Callable[[str | None], str], max_top_k: int) -> None:
    @server.tool(
        description="Answer a question from the memory only, citing the chunks used as [chunk_id]. "
        "Says so honestly when the memory does not hold the answer."
    )
    def ask(
        question: Annotated[str, Field(min_length=1, description="The question, in any language.")],
        top_k: Annotated[int, Field(5, ge=1, le=max_top_k, description="Chunks of context.")] = 5,
        metadata_filter: Annotated[dict[str, Any] | None, Field(None)] = None,
        rerank: Annotated[bool, Field(True, description="Rerank the candidates before answering.")] = True,
        session_id: _Sessions = None,
        user_id: _UserScope = None,
        agent_id: _AgentScope = None,
        time_range: _TimeRangeArg = None,
        as_of: _AsOf = None,
        now: _Now = None,
        context_window: _ContextArg = None,
        namespace: Namespace = None,
    ) -> dict[str, Any]:
        scope: dict[str, Any] = {"session_id": session_id, "user_id": user_id, "agent_id": agent_id}
        scope.update({"as_of": as_of, "now": now, "time_range": time_range, "context_window": context_window})
        with _tool_errors():
            ans = common.ask(
                memory,
                question,
                top_k=top_k,
                metadata_filter=metadata_filter or {},
                rerank=rerank,
                namespace=ns_of(namespace),
                **{k: v for k, v in _recall_request(scope).items() if k != "metadata_filter"},
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
        with _tool_errors():
            ns = ns_of(namespace)
            if memory.graph.status(ns).built is False:
                memory.graph.build(ns)
            ans = memory.graph.ask_global(question, level=level, namespace=ns)
        return cast(dict[str, Any], ans.model_dump(mode="json"))


def _stats_resources(server: "MCPServer", memory: Any, ns_of: Callable[[str | None], str]) -> None:
    def _stats(asked: str | None) -> str:
        from mcp.server.mcpserver.exceptions import ResourceError

        try:
            return cast(str, memory.stats(ns_of(asked)).model_dump_json(indent=2))
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
        return _stats(None)

    @server.resource(
        "hybridmem://stats/{namespace}",
        name="namespace-stats",
        mime_type="application/json",
        description="The same for one namespace.",
    )
    def namespace_stats(namespace: str) -> str:
        return _stats(namespace)


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
