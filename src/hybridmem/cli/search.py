"""``hybridmem search`` and ``hybridmem ask``: retrieval and grounded answers.

A search that needs a query vector (modes hybrid and vector) is sent to a running ``hybridmem
serve`` of the same store when there is one (its discovery file, :func:`.serve.running_server`):
the server's model embeds the query, and this process loads none. Otherwise, or when the server
does not answer, the search runs here. The footer says which, and how long the model took to load."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from ..errors import HybridMemError, NotFoundError, ValidationError
from .common import CliContext, cli_context, err, fail
from .parsing import filter_option, json_object, parse_meta
from .render import emit, print_answer, print_global, print_response
from .serve import ServerInfo, running_server

if TYPE_CHECKING:
    from ..memory import Memory
    from ..models import QueryRequest, QueryResponse

__all__ = ["API_KEY_ENV", "register"]

#: the API key ``search`` sends to a running server that needs one
API_KEY_ENV = "HYBRIDMEM_API_KEY"
#: seconds to wait for a running server's answer before searching here instead
SERVER_TIMEOUT = 30.0

_LLM_HELP = (
    "Chat model: openai:MODEL (OpenAI, Ollama, vLLM, llama.cpp, LM Studio; endpoint from "
    "HYBRIDMEM_LLM_BASE_URL / OPENAI_BASE_URL), gemini:MODEL, anthropic:MODEL, or none. "
    "Default: HYBRIDMEM_LLM, else no LLM (offline paths)."
)
_RERANKER_HELP = (
    "auto (the LLM when configured, else identifier), llm or identifier. Default: HYBRIDMEM_RERANKER, else auto."
)

# agent memory (docs/agent-memory.md): scopes and times, pre-filters of every leg
_Sessions = Annotated[
    list[str], typer.Option("--session", metavar="ID", help="Only this conversation session (repeatable).")
]
_User = Annotated[Optional[str], typer.Option("--user", metavar="ID", help="Only this user's memories.")]
_Agent = Annotated[Optional[str], typer.Option("--agent", metavar="ID", help="Only this agent's memories.")]
_Since = Annotated[
    Optional[str], typer.Option("--since", metavar="TIME", help="Only what occurred at TIME or later (ISO 8601).")
]
_Until = Annotated[Optional[str], typer.Option("--until", metavar="TIME", help="Only what occurred before TIME.")]
_AsOf = Annotated[
    Optional[str],
    typer.Option(
        "--as-of", metavar="TIME", help="The memory as it stood at TIME (later writes and supersessions unseen)."
    ),
]
_Superseded = Annotated[
    bool, typer.Option("--include-superseded", help="Also superseded and forgotten versions (they show valid_to).")
]
_Context = Annotated[
    Optional[int],
    typer.Option("--context", metavar="N", help="Show the N turns before and after each conversation hit."),
]
_Now = Annotated[
    Optional[str],
    typer.Option(
        "--now", metavar="TIME", help='What "last week" in TEXT counts from (default: the latest memory in scope).'
    ),
]


def _agent_fields(
    sessions: list[str],
    user: Optional[str],
    agent: Optional[str],
    times: tuple[Optional[str], Optional[str], Optional[str], Optional[str]],
    include_superseded: bool,
    context: Optional[int],
) -> dict[str, Any]:
    """The request fields of the agent-memory options (None: not given). ``times``: since, until, as-of, now."""
    since, until, as_of, now = times
    span = {k: v for k, v in (("from", since), ("to", until)) if v is not None}
    return {
        "session_id": (sessions[0] if len(sessions) == 1 else list(sessions)) if sessions else None,
        "user_id": user,
        "agent_id": agent,
        "time_range": span or None,
        "as_of": as_of,
        "now": now,
        "include_superseded": include_superseded,
        "context_window": None if context is None else {"before": context, "after": context},
    }


def _read_request(request: Optional[Path]) -> dict[str, Any]:
    """The ``--request`` file (or stdin for '-') as a JSON object; {} without one."""
    if request is None:
        return {}
    if str(request) == "-":
        raw = sys.stdin.read()
    elif not request.is_file():
        raise NotFoundError(f"--request: no such file: {request}")
    else:
        raw = request.read_text(encoding="utf-8", errors="replace")
    return json_object(raw, "--request")


def _request_data(
    text: Optional[str],
    request: Optional[Path],
    filters: list[str],
    filter_json: Optional[str],
    fields: dict[str, Any],
    hybrid: dict[str, Any],
) -> dict[str, Any]:
    """The query of the contract: the ``--request`` file, or the text, with the options over it."""
    if text is not None and request is not None:
        raise ValidationError("give the text to search for or --request FILE, not both", field="--request")
    data = _read_request(request)
    if text is not None:
        data["search_text"] = text
    if "search_text" not in data:
        raise ValidationError("give the text to search for, or --request FILE", field="search_text")
    flt: dict[str, Any] = dict(data.get("metadata_filter") or {})
    if filter_json:
        flt.update(json_object(filter_json, "--filter-json"))
    flt.update(parse_meta(filters, "--filter") if filters else {})
    data["metadata_filter"] = flt
    data.update({k: v for k, v in fields.items() if v is not None and v is not False})
    data["hybrid_params"] = {**(data.get("hybrid_params") or {}), **{k: v for k, v in hybrid.items() if v is not None}}
    return data


def _validated(data: dict[str, Any]) -> QueryRequest:
    """``data`` as a QueryRequest; its first problem a ValidationError naming the field (as ``Memory.search``)."""
    from pydantic import ValidationError as PydanticError

    from ..models import QueryRequest

    try:
        return QueryRequest.model_validate(data)
    except PydanticError as e:
        first = e.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "request"
        raise ValidationError(first["msg"].removeprefix("Value error, "), field=field) from None


# ------------------------------------------------------------------------------- a running server


def _http(info: ServerInfo, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """One loopback request to the server: (status, JSON body). Proxies are never used."""
    import urllib.error
    import urllib.request

    headers = {"Content-Type": "application/json"}
    key = os.environ.get(API_KEY_ENV)
    if key:
        headers["Authorization"] = f"Bearer {key}"
    data = None if body is None else json.dumps(body).encode("utf-8")
    req = urllib.request.Request(info.url + path, data=data, headers=headers, method=method)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=SERVER_TIMEOUT) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        try:
            return e.code, json.loads(e.read())
        except ValueError:
            return e.code, None


def _server_refusal(cli: CliContext, req: QueryRequest, info: ServerInfo) -> str | None:
    """Why this query cannot go to ``info`` (None: it can)."""
    if info.api_key_required and not os.environ.get(API_KEY_ENV):
        return f"it needs an API key (set {API_KEY_ENV})"
    if req.top_k > info.max_top_k or (req.fetch_k or 0) > 10 * info.max_top_k:
        return f"top_k/fetch_k above its limit ({info.max_top_k})"
    if cli.embedder and info.embedder and cli.embedder not in (info.spec, info.embedder):
        from ..embed.registry import embedder_name

        if embedder_name(cli.embedder) != info.embedder:
            return f"it embeds with {info.embedder}, not {cli.embedder}"
    return None


def _search_server(cli: CliContext, data: dict[str, Any], info: ServerInfo) -> QueryResponse | str:
    """The response of the running server, or why there is none (then the search runs here).
    The server's answer to a bad request is the error the local search would raise."""
    from ..models import QueryResponse

    try:
        status, body = _http(info, "POST", "/v1/query", {"namespace": cli.namespace, **data})
    except Exception as e:  # noqa: BLE001 - refused, reset, timed out, not HTTP: search here instead
        return f"it did not answer ({getattr(e, 'reason', None) or e or type(e).__name__})"
    error = body.get("error") if isinstance(body, dict) and isinstance(body.get("error"), dict) else None
    if status == 200:
        try:
            return QueryResponse.model_validate(body)
        except ValueError:
            return "its answer was not a query response"
    if error and status == 422:
        field, message = error.get("field"), str(error.get("message"))
        raise ValidationError(message.removeprefix(f"{field}: ") if field else message, field=field)
    if error and status == 404:
        raise NotFoundError(str(error.get("message")))
    return f"it answered HTTP {status}" + (f" ({error.get('message')})" if error else "")


# ------------------------------------------------------------------------------- here


def _load_query_model(mem: Memory) -> str:
    """Load the query embedder now, timed; the footer's note on where the query vector comes from."""
    t0 = time.perf_counter()
    try:
        mem.embedder  # noqa: B018 - the property loads the model
    except Exception as e:  # noqa: BLE001 - the dense leg reports the failure in the response
        return f"query model {mem.embedder_name} failed to load ({type(e).__name__})"
    return f"query embedded here by {mem.embedder_name}, model loaded in {time.perf_counter() - t0:.2f} s"


def _search_local(cli: CliContext, req: QueryRequest, llm: Optional[str]) -> tuple[QueryResponse, str | None]:
    """The search in this process: the response, and where its query vector came from."""
    with cli.open_memory(create=False, llm=llm) as mem:
        note = _load_query_model(mem) if req.mode in ("hybrid", "vector", "rerank") else None
        return mem.search(req), note


#: the options of ``search`` whose help takes more than a line
_Mode = Annotated[
    Optional[str],
    typer.Option(
        "--mode", "-m", metavar="MODE", help="hybrid (default), bm25, vector, rerank (hybrid + rerank) or graph."
    ),
]
_Rerank = Annotated[
    bool, typer.Option("--rerank", help="Rerank the fused candidates of --mode (same as --mode rerank for hybrid).")
]
_GraphWeight = Annotated[
    Optional[float], typer.Option("--graph-weight", metavar="W", help="Weight of the graph leg (hybrid).")
]
_FeedbackWeight = Annotated[
    Optional[float],
    typer.Option("--feedback-weight", metavar="W", help="Weight of the feedback leg (hybrid; 0 = off)."),
]
_DenseCentering = Annotated[
    Optional[float],
    typer.Option(
        "--dense-centering",
        metavar="S",
        help="Share of the scope's mean vector taken off the query's when the dense leg ranks turns (0 = off).",
    ),
]
_SubstanceWeight = Annotated[
    Optional[float],
    typer.Option(
        "--substance-weight",
        metavar="W",
        help="Weight of the substance leg: turns that say more first, when the top results are turns (0 = off).",
    ),
]
_Fusion = Annotated[
    Optional[str],
    typer.Option(
        "--fusion",
        metavar="NAME",
        help="rrf (default), adaptive (per-query leg weights), or dbsf, combsum, combmnz (normalized scores).",
    ),
]
_Filters = Annotated[
    list[str], typer.Option("--filter", "-f", metavar="KEY=VALUE", help="key=value equality filter (repeatable).")
]
_FilterJson = Annotated[
    Optional[str], typer.Option("--filter-json", metavar="JSON", help='A filter object, e.g. {"severity": {"$gte": 2}}')
]
_RequestFile = Annotated[
    Optional[Path],
    typer.Option("--request", metavar="PATH", help="A JSON request file of the contract ('-' = stdin); no TEXT then."),
]
_Local = Annotated[
    bool, typer.Option("--local", help="Search in this process even when a `hybridmem serve` of this store runs.")
]


def search(
    ctx: typer.Context,
    text: Optional[str] = typer.Argument(None, metavar="TEXT", help="What to look for."),
    top_k: Optional[int] = typer.Option(None, "--top-k", "-k", metavar="N", help="Results to return (default 5)."),
    mode: _Mode = None,
    rerank: _Rerank = False,
    reranker: Optional[str] = typer.Option(None, "--reranker", metavar="NAME", help=_RERANKER_HELP),
    llm: Optional[str] = typer.Option(None, "--llm", metavar="SPEC", help=_LLM_HELP),
    dense_weight: Optional[float] = typer.Option(None, "--dense-weight", metavar="W"),
    sparse_weight: Optional[float] = typer.Option(None, "--sparse-weight", metavar="W"),
    rrf_k: Optional[float] = typer.Option(None, "--rrf-k", metavar="K"),
    graph_weight: _GraphWeight = None,
    feedback_weight: _FeedbackWeight = None,
    dense_centering: _DenseCentering = None,
    substance_weight: _SubstanceWeight = None,
    fusion: _Fusion = None,
    fetch_k: Optional[int] = typer.Option(None, "--fetch-k", metavar="N"),
    filters: _Filters = [],  # noqa: B006 - typer's default, never mutated
    filter_json: _FilterJson = None,
    request: _RequestFile = None,
    local: _Local = False,
    as_json: bool = typer.Option(False, "--json", help="Print the contract response as JSON."),
    session: _Sessions = [],  # noqa: B006 - typer's default, never mutated
    user: _User = None,
    agent: _Agent = None,
    since: _Since = None,
    until: _Until = None,
    as_of: _AsOf = None,
    include_superseded: _Superseded = False,
    context: _Context = None,
    now: _Now = None,
) -> None:
    """Query the memory (hybrid by default) and show each result's rank in each leg.

    Modes hybrid and vector use a running `hybridmem serve` of the same store when there is one:
    its model embeds the query, so none loads here (the footer says which did)."""
    cli = cli_context(ctx)
    try:
        data = _request_data(
            text,
            request,
            filters,
            filter_json,
            {
                "top_k": top_k,
                "mode": mode,
                "fetch_k": fetch_k,
                "reranker": reranker,
                "rerank": rerank,
                **_agent_fields(session, user, agent, (since, until, as_of, now), include_superseded, context),
            },
            {
                "dense_weight": dense_weight,
                "sparse_weight": sparse_weight,
                "rrf_k_constant": rrf_k,
                "graph_weight": graph_weight,
                "feedback_weight": feedback_weight,
                "dense_centering": dense_centering,
                "substance_weight": substance_weight,
                "fusion": fusion,
            },
        )
        req = _validated(data)
        resp, note = _search(cli, data, req, llm, local)
        emit(resp, as_json, lambda r: print_response(r, embedding=note))
        if as_json and note:
            err.print(note, markup=False, highlight=False)
        for warning in resp.warnings:  # e.g. a namespace that does not exist, with those that do
            err.print(f"warning: {warning}", markup=False, highlight=False)
    except HybridMemError as e:
        raise fail(e) from None


def _search(
    cli: CliContext, data: dict[str, Any], req: QueryRequest, llm: Optional[str], local: bool
) -> tuple[QueryResponse, str | None]:
    """By the running server when there is one and the query needs a vector, else here."""
    info = None if local or llm or req.wants_rerank or req.mode not in ("hybrid", "vector") else running_server(cli.db)
    if info is not None:
        why = _server_refusal(cli, req, info)
        got = _search_server(cli, data, info) if why is None else why
        if not isinstance(got, str):
            return got, f"query embedded by server at {info.address}"
        err.print(
            f"note: not using the hybridmem server at {info.address}: {got}; searching here",
            markup=False,
            highlight=False,
        )
    return _search_local(cli, req, llm)


def ask(
    ctx: typer.Context,
    question: str = typer.Argument(..., help="The question, in any language."),
    llm: Optional[str] = typer.Option(None, "--llm", help=_LLM_HELP),
    no_rerank: bool = typer.Option(False, "--no-rerank", help="Answer from the fused order (no reranking)."),
    reranker: Optional[str] = typer.Option(None, "--reranker", help=_RERANKER_HELP),
    filters: list[str] = typer.Option(
        [], "--filter", "-f", help='A filter: JSON ({"severity": {"$gte": 2}}) or key=value (repeatable).'
    ),
    filter_json: Optional[str] = typer.Option(None, "--filter-json", help="A filter object (as in search)."),
    top_k: int = typer.Option(5, "--top-k", "-k", help="Chunks retrieved as the answer's context."),
    as_json: bool = typer.Option(False, "--json", help="Print the Answer as JSON (with the context chunks)."),
    global_: bool = typer.Option(False, "--global", help="Corpus-wide: map-reduce over graph community summaries."),
    level: Optional[int] = typer.Option(None, "--level", help="--global: community level (default: the top, 0)."),
) -> None:
    """Answer a question from the memory, citing the chunks used as [chunk_id].

    With an LLM: at most 3 sentences in the question's language, grounded in the retrieved chunks.
    Without one (the default): the best sentences of the top chunks, or an honest "not found".
    --global answers from the graph's community summaries (run `hybridmem graph build` first)."""
    cli = cli_context(ctx)
    try:
        if global_:
            with cli.open_memory(create=False, llm=llm) as mem:
                gans = mem.ask_global(question, level=level)
            emit(gans, as_json, print_global)
            return
        flt = filter_option(filters, filter_json)
        with cli.open_memory(create=False, llm=llm) as mem:
            ans = mem.ask(question, top_k=top_k, metadata_filter=flt, rerank=not no_rerank, reranker=reranker)
        emit(ans, as_json, print_answer)
    except HybridMemError as e:
        raise fail(e) from None


def register(app: typer.Typer) -> None:
    app.command("search")(search)
    app.command("ask")(ask)
