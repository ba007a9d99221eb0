"""``hybridmem search`` and ``hybridmem ask``: retrieval and grounded answers."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import typer

from ..errors import HybridMemError, NotFoundError, ValidationError
from .common import cli_context, fail
from .parsing import filter_option, json_object, parse_meta
from .render import emit, print_answer, print_global, print_response

__all__ = ["register"]

_LLM_HELP = (
    "Chat model: openai:MODEL (OpenAI, Ollama, vLLM, llama.cpp, LM Studio; endpoint from "
    "HYBRIDMEM_LLM_BASE_URL / OPENAI_BASE_URL), gemini:MODEL, anthropic:MODEL, or none. "
    "Default: HYBRIDMEM_LLM, else no LLM (offline paths)."
)
_RERANKER_HELP = (
    "auto (the LLM when configured, else identifier), llm or identifier. Default: HYBRIDMEM_RERANKER, else auto."
)


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


def search(
    ctx: typer.Context,
    text: Optional[str] = typer.Argument(None, help="What to look for."),
    top_k: Optional[int] = typer.Option(None, "--top-k", "-k"),
    mode: Optional[str] = typer.Option(
        None, "--mode", "-m", help="hybrid (default), bm25, vector, rerank (hybrid + rerank) or graph."
    ),
    rerank: bool = typer.Option(
        False, "--rerank", help="Rerank the fused candidates of --mode (same as --mode rerank for hybrid)."
    ),
    reranker: Optional[str] = typer.Option(None, "--reranker", help=_RERANKER_HELP),
    llm: Optional[str] = typer.Option(None, "--llm", help=_LLM_HELP),
    dense_weight: Optional[float] = typer.Option(None, "--dense-weight"),
    sparse_weight: Optional[float] = typer.Option(None, "--sparse-weight"),
    rrf_k: Optional[float] = typer.Option(None, "--rrf-k"),
    graph_weight: Optional[float] = typer.Option(None, "--graph-weight", help="Weight of the graph leg (hybrid)."),
    fetch_k: Optional[int] = typer.Option(None, "--fetch-k"),
    filters: list[str] = typer.Option([], "--filter", "-f", help="key=value equality filter (repeatable)."),
    filter_json: Optional[str] = typer.Option(
        None, "--filter-json", help='A filter object, e.g. {"severity": {"$gte": 2}}'
    ),
    request: Optional[Path] = typer.Option(
        None, "--request", help="A JSON request file of the contract ('-' = stdin)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the contract response as JSON."),
) -> None:
    """Query the memory (hybrid by default) and show each result's rank in each leg."""
    try:
        data = _read_request(request)
        if text is not None:
            data["search_text"] = text
        if "search_text" not in data:
            raise ValidationError("give the text to search for, or --request FILE", field="search_text")
        flt: dict[str, Any] = dict(data.get("metadata_filter") or {})
        if filter_json:
            flt.update(json_object(filter_json, "--filter-json"))
        flt.update(parse_meta(filters) if filters else {})
        data["metadata_filter"] = flt
        val: int | float | str | None
        for key, val in (("top_k", top_k), ("mode", mode), ("fetch_k", fetch_k), ("reranker", reranker)):
            if val is not None:
                data[key] = val
        if rerank:
            data["rerank"] = True
        hp = dict(data.get("hybrid_params") or {})
        for key, val in (
            ("dense_weight", dense_weight),
            ("sparse_weight", sparse_weight),
            ("rrf_k_constant", rrf_k),
            ("graph_weight", graph_weight),
        ):
            if val is not None:
                hp[key] = val
        data["hybrid_params"] = hp
        with cli_context(ctx).open_memory(create=False, llm=llm) as mem:
            resp = mem.search(data)
        emit(resp, as_json, print_response)
    except HybridMemError as e:
        raise fail(e) from None


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
