"""The MCP server's tools and resources, in groups: ``remember`` / ``forget`` / ``history``,
``recall``, ``ask`` / ``graph_global``, and the stats resources. Each gets its namespace through
``ns_of(namespace)`` and runs inside :func:`_tool_errors`."""

# no `from __future__ import annotations`: the SDK evaluates tool signatures, and they use closure values
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any, Literal, cast

from pydantic import Field

from ..errors import HybridMemError, ValidationError
from ..models import ContextWindow, Embedding, HybridParams, IngestReport, Message, TimeRange
from ..models import Namespace as _Namespace
from . import common

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

Namespace = Annotated[_Namespace, Field(None, description="Namespace (default: the server's).")]


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
    memory: Any, ns: str, messages: list[Message], scope: dict[str, Any], text_args: dict[str, Any], extract: bool
) -> dict[str, Any]:
    """``remember`` with ``messages``: ``Memory.add_messages`` into the session of ``scope`` (with
    ``extract``, the server's LLM then extracts facts from the new turns)."""
    given = [name for name, value in text_args.items() if value is not None]
    if given:
        raise ValidationError(
            f"{', '.join(given)}: only with `text` (with `messages`, each message has its own)", "messages"
        )
    if scope["session_id"] is None:
        raise ValidationError("`messages` need a `session_id` (the conversation they belong to)", "session_id")
    msgs = [m.model_dump(exclude_none=True) for m in messages]
    try:
        report = memory.add_messages(msgs, **scope, namespace=ns, extract=extract)
    except ValidationError as e:
        raise common.dotted(e) from None
    ids = report.added + report.updated + report.unchanged
    return {"ids": ids, "session_id": scope["session_id"], "namespace": ns, **report.model_dump()}


def _remember_text(
    memory: Any, ns: str, scope: dict[str, Any], args: dict[str, Any], checks: dict[str, bool]
) -> dict[str, Any]:
    """``remember`` with ``text``: ``Memory.remember`` with the conflict check, else ``Memory.add``
    (the scopes into its metadata); ``args``: text, id, metadata, source, embedding; ``checks``:
    reconcile and dedupe."""
    text, vector = args["text"], args["embedding"]
    if text is None:
        raise ValidationError("remember needs `text` or `messages`", "text")
    if checks["reconcile"] or checks["dedupe"]:
        d = _vector_named(
            memory.remember,
            text,
            id=args["id"],
            metadata=args["metadata"],
            source=args["source"],
            **checks,
            namespace=ns,
            vector=vector,
            **scope,
        )
        report = (d.report or IngestReport()).model_dump()
        return {"namespace": ns, **d.model_dump(exclude={"report"}), **report}
    if scope["session_id"] is not None:
        raise ValidationError("`session_id` goes with `messages` (a text has no turn in a conversation)", "session_id")
    meta = {**(args["metadata"] or {}), **{k: v for k, v in scope.items() if v is not None}}
    added = _vector_named(
        memory.add, text, id=args["id"], metadata=meta, source=args["source"], namespace=ns, vector=vector
    )
    ids = added.added + added.updated + added.unchanged
    return {"id": ids[0] if ids else args["id"], "namespace": ns, **added.model_dump()}


def _vector_named(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``call``, a bad precomputed vector named ``embedding`` as the tool takes it."""
    try:
        return call(*args, **kwargs)
    except ValidationError as e:
        raise common.embedding_field(e) from None


_Dedupe = Annotated[
    bool, Field(False, description="With `text`: skip it (NONE) if a current memory of the scope says the same.")
]


_Extract = Annotated[
    bool,
    Field(
        False,
        description="With `messages`: let the server's LLM then extract facts from the new turns (stored as "
        "kind: fact, naming their source turns, each through the conflict check).",
    ),
]


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
        embedding: Embedding = None,
        dedupe: _Dedupe = False,
        extract: _Extract = False,
        namespace: Namespace = None,
    ) -> dict[str, Any]:
        with _tool_errors():
            ns = ns_of(namespace)
            scope = {"session_id": session_id, "user_id": user_id, "agent_id": agent_id}
            text_args = {"text": text, "id": id, "metadata": metadata, "source": source, "embedding": embedding}
            if messages is not None:
                return _remember_messages(memory, ns, messages, scope, text_args, extract)
            if extract:
                raise ValidationError("`extract` goes with `messages` (facts are extracted from chat turns)", "extract")
            return _remember_text(memory, ns, scope, text_args, {"reconcile": reconcile, "dedupe": dedupe})

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


def _list_tool(server: "MCPServer", memory: Any, ns_of: Callable[[str | None], str]) -> None:
    @server.tool(
        description="List the stored memories themselves, in order, page by page (no ranking): "
        "`limit` (1-1000) after `cursor` (the `next_cursor` of the previous page; null on the last). "
        "Filters and scopes as `recall`'s; `order` recorded_at (first written), occurred_at or id."
    )
    def list_memories(
        cursor: Annotated[
            str | None, Field(None, max_length=2048, description="next_cursor of the previous page.")
        ] = None,
        limit: Annotated[int, Field(20, ge=1, le=1000)] = 20,
        order: Annotated[Literal["recorded_at", "occurred_at", "id"], Field("recorded_at")] = "recorded_at",
        descending: bool = False,
        metadata_filter: Annotated[dict[str, Any] | None, Field(None, description="As recall's.")] = None,
        user_id: _UserScope = None,
        agent_id: _AgentScope = None,
        session_id: _Sessions = None,
        as_of: _AsOf = None,
        include_superseded: bool = False,
        namespace: Namespace = None,
    ) -> dict[str, Any]:
        fields = {"user_id": user_id, "agent_id": agent_id, "session_id": session_id, "as_of": as_of}
        fields = {k: v for k, v in fields.items() if v is not None}
        with _tool_errors():
            ns = ns_of(namespace)
            page = memory.list(
                cursor, limit, namespace=ns, order=order, descending=descending,
                metadata_filter=metadata_filter or {}, include_superseded=include_superseded, **fields,
            )  # fmt: skip
        return cast(dict[str, Any], page.model_dump())


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
