"""How the MCP server serves a call: argument aliases agents try (:data:`ALIASES`,
:func:`tool_arguments`), the caller of each call (its key's Principal over HTTP) and the namespace
it may use, one-line argument errors."""

from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any

from . import common
from .auth import AuthError, KeyRing, Principal

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
