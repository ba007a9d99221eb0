"""The ``hybridmem`` command line: a thin adapter over :class:`hybridmem.Memory`."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from . import config
from .errors import HybridMemError, NotFoundError, ValidationError
from .memory import Memory
from .models import Answer, Document, QueryResponse, Usage
from .store import display_target, open_store, store_exists

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="hybridmem: long-term memory for AI agents (BM25 ‖ dense, fused by RRF, behind metadata filters).",
    rich_markup_mode=None,
)
out = Console(soft_wrap=True)
err = Console(stderr=True)

_NAME_TO_SPEC = {"e5:multilingual-e5-small-q4": "e5", "use:multilingual-v3": "use"}


class State:
    db: str = str(config.DEFAULT_DB)  # a file path or a postgresql:// URL
    namespace: str = config.DEFAULT_NAMESPACE
    embedder: Optional[str] = None


state = State()


def _fail(e: Exception) -> typer.Exit:
    code = e.exit_code if isinstance(e, HybridMemError) else 1
    err.print(f"[bold red]error:[/] {e}", highlight=False)
    return typer.Exit(code)


def _open(*, create: bool = True, auto_embed: bool = False, **kw: Any) -> Memory:
    # reuse the embedder the store was built with, so commands need no --embedder
    spec = state.embedder or _stored_embedder(state.db)
    if not create and not store_exists(state.db):
        raise NotFoundError(f"no memory store at {state.db} (ingest something first, or pass --db)")
    return Memory(state.db, embedder=spec, namespace=state.namespace, auto_embed=auto_embed, create=create, **kw)


def _stored_embedder(target: str) -> str | None:
    """The embedder spec a store was built with (None for a new store)."""
    if not store_exists(target):
        return None
    try:
        s = open_store(target, create=False)
    except NotFoundError:
        return None
    try:
        name, _ = s.embedder_info()
    finally:
        s.close()
    return _NAME_TO_SPEC.get(name, name) if name else None


def _progress() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=False,
        disable=not err.is_terminal,
    )


@app.callback()
def main_options(
    db: str = typer.Option(str(config.DEFAULT_DB), "--db", envvar="HYBRIDMEM_DB",
                           help="The memory: an SQLite file, or a postgresql://user@host/db URL."),
    namespace: str = typer.Option(config.DEFAULT_NAMESPACE, "--namespace", "-n", envvar="HYBRIDMEM_NAMESPACE"),
    embedder: Optional[str] = typer.Option(
        None, "--embedder", envvar="HYBRIDMEM_EMBEDDER",
        help="e5 (default), use, st:NAME_OR_PATH, openai:MODEL, hash[:DIM]. Defaults to the store's own.",
    ),
) -> None:
    state.db, state.namespace, state.embedder = db, namespace, embedder


def _parse_meta(items: list[str]) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValidationError(f"expected key=value, got {item!r}", field="--meta")
        try:
            meta[key.strip()] = json.loads(value)  # numbers, booleans, null
        except json.JSONDecodeError:
            meta[key.strip()] = value
    return meta


def _json_object(raw: str, field: str) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ValidationError(f"not valid JSON: {e.msg} at line {e.lineno} column {e.colno}", field=field) from None
    except RecursionError:
        raise ValidationError("JSON nested too deeply", field=field) from None
    if not isinstance(data, dict):
        raise ValidationError(f"expected a JSON object, got {type(data).__name__}", field=field)
    return data


def _embed_with_progress(mem: Memory) -> None:
    pending = mem.store.pending_count()
    if not pending:
        return
    with _progress() as prog:
        task = prog.add_task("embedding", total=pending)
        mem.wait_for_vectors(progress=lambda n: prog.advance(task, n))


@app.command()
def ingest(
    paths: list[str] = typer.Argument(..., help="Files or directories; '-' reads text from stdin."),
    doc_id: Optional[str] = typer.Option(None, "--id", help="Document id (one file or stdin only)."),
    meta: list[str] = typer.Option([], "--meta", help="key=value metadata for every document (repeatable)."),
    source: Optional[str] = typer.Option(None, "--source", help="Source name for stdin text."),
    wait: bool = typer.Option(False, "--wait", help="Block until every chunk has its vector."),
    chunk_size: int = typer.Option(config.DEFAULT_CHUNK_SIZE, "--chunk-size", help="Characters per chunk (0 = whole)."),
    chunk_overlap: int = typer.Option(config.DEFAULT_CHUNK_OVERLAP, "--chunk-overlap"),
    as_json: bool = typer.Option(False, "--json", help="Print the ingest report as JSON."),
) -> None:
    """Store files, directories or stdin text. Writes are BM25-searchable at once; vectors follow."""
    try:
        metadata = _parse_meta(meta)
        docs: list[Document] = []
        skipped: list[dict[str, str]] = []
        from .text.loaders import load_path

        for p in paths:
            if p == "-":
                text = sys.stdin.read()
                docs.append(Document(text=text, id=doc_id, source=source or "stdin", metadata=dict(metadata)))
                continue
            if doc_id and len(paths) > 1:
                raise ValidationError("--id needs exactly one path", field="--id")
            found, skip = load_path(Path(p), doc_id=doc_id)
            for d in found:
                d.metadata = {**d.metadata, **metadata}
            docs += found
            skipped += [{"path": s.path, "reason": s.reason} for s in skip]
        for s in skipped:
            err.print(f"[yellow]warning:[/] skipped {s['reason']}", highlight=False)
        with _open(chunk_size=chunk_size or None, chunk_overlap=chunk_overlap) as mem:
            with _progress() as prog:
                task = prog.add_task("indexing", total=len(docs))
                report = mem.add_documents(docs, progress=lambda n: prog.advance(task, n))
            report.skipped = skipped
            if wait:
                _embed_with_progress(mem)
            report.pending_vectors = mem.store.pending_count(mem.namespace)
        if as_json:
            out.print_json(report.model_dump_json())
            return
        out.print(
            f"{len(report.added)} added, {len(report.updated)} updated, {len(report.unchanged)} unchanged, "
            f"{len(skipped)} skipped; {report.chunks_written} chunks written"
            + (f" ({report.vectors_reused} vectors reused)" if report.vectors_reused else ""),
            highlight=False,
        )
        if report.pending_vectors:
            out.print(
                f"{report.pending_vectors} chunks wait for vectors (BM25-searchable now); "
                "run `hybridmem embed` or ingest with --wait",
                highlight=False,
            )
    except HybridMemError as e:
        raise _fail(e) from None


def _print_response(resp: QueryResponse) -> None:
    table = Table(show_lines=False, header_style="bold", expand=True)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("chunk_id", no_wrap=True, overflow="fold")
    table.add_column("rrf", justify="right", no_wrap=True)
    table.add_column("bm25", justify="right", no_wrap=True)
    table.add_column("dense", justify="right", no_wrap=True)
    table.add_column("exact", justify="right", no_wrap=True)
    if "graph" in resp.legs:
        table.add_column("graph", justify="right", no_wrap=True)
    table.add_column("source", no_wrap=True, overflow="ellipsis", max_width=28)
    table.add_column("text", no_wrap=True, overflow="ellipsis", ratio=1)
    for i, r in enumerate(resp.results, start=1):
        snippet = " ".join(r.text.split())
        table.add_row(
            str(i), r.chunk_id, f"{r.rrf_score:.4f}",
            str(r.ranks.get("bm25", "–")), str(r.ranks.get("dense", "–")), str(r.ranks.get("exact", "–")),
            *([str(r.ranks.get("graph", "–"))] if "graph" in resp.legs else []),
            r.source or "", snippet,
        )
    out.print(table)
    legs = ", ".join(
        f"{n}: {leg.status}" + (f" {leg.took_ms:.1f} ms" if leg.status == "ok" else f" ({leg.error})" if leg.error else "")
        for n, leg in resp.legs.items()
    )
    out.print(f"{resp.total_retrieved} results, mode {resp.mode}, {resp.took_ms:.1f} ms — {legs}", highlight=False)
    if resp.reranker:
        state_ = "reranked" if resp.reranked else "NOT reranked (fused order)"
        out.print(f"{state_} by {resp.reranker}; rrf is the fused score", highlight=False, markup=False)
    if resp.rerank_note:
        out.print(f"rerank note: {resp.rerank_note}", highlight=False, markup=False)
    if resp.usage:
        out.print(_usage_line(resp.usage), highlight=False, markup=False)
    if resp.pending_vectors:
        out.print(f"note: {resp.pending_vectors} chunks still wait for vectors (not in the dense leg yet)")


def _usage_line(u: Usage) -> str:
    return (f"usage: {u.calls} LLM call{'s' if u.calls != 1 else ''} ({u.http_requests} HTTP request"
            f"{'s' if u.http_requests != 1 else ''}), {u.prompt_tokens} prompt + {u.completion_tokens} completion "
            f"tokens, {u.latency_ms:.0f} ms")


_LLM_HELP = ("Chat model: openai:MODEL (OpenAI, Ollama, vLLM, llama.cpp, LM Studio; endpoint from "
             "HYBRIDMEM_LLM_BASE_URL / OPENAI_BASE_URL), gemini:MODEL, anthropic:MODEL, or none. "
             "Default: HYBRIDMEM_LLM, else no LLM (offline paths).")
_RERANKER_HELP = "auto (the LLM when configured, else identifier), llm or identifier. Default: HYBRIDMEM_RERANKER, else auto."


@app.command()
def search(
    text: Optional[str] = typer.Argument(None, help="What to look for."),
    top_k: Optional[int] = typer.Option(None, "--top-k", "-k"),
    mode: Optional[str] = typer.Option(None, "--mode", "-m", help="hybrid (default), bm25, vector, rerank (hybrid + rerank) or graph."),
    rerank: bool = typer.Option(False, "--rerank", help="Rerank the fused candidates of --mode (same as --mode rerank for hybrid)."),
    reranker: Optional[str] = typer.Option(None, "--reranker", help=_RERANKER_HELP),
    llm: Optional[str] = typer.Option(None, "--llm", help=_LLM_HELP),
    dense_weight: Optional[float] = typer.Option(None, "--dense-weight"),
    sparse_weight: Optional[float] = typer.Option(None, "--sparse-weight"),
    rrf_k: Optional[float] = typer.Option(None, "--rrf-k"),
    graph_weight: Optional[float] = typer.Option(None, "--graph-weight", help="Weight of the graph leg (hybrid)."),
    fetch_k: Optional[int] = typer.Option(None, "--fetch-k"),
    filters: list[str] = typer.Option([], "--filter", "-f", help="key=value equality filter (repeatable)."),
    filter_json: Optional[str] = typer.Option(None, "--filter-json", help='A filter object, e.g. {"severity": {"$gte": 2}}'),
    request: Optional[Path] = typer.Option(None, "--request", help="A JSON request file of the contract ('-' = stdin)."),
    as_json: bool = typer.Option(False, "--json", help="Print the contract response as JSON."),
) -> None:
    """Query the memory (hybrid by default) and show each result's rank in each leg."""
    try:
        data: dict[str, Any] = {}
        if request is not None:
            if str(request) == "-":
                raw = sys.stdin.read()
            elif not request.is_file():
                raise NotFoundError(f"--request: no such file: {request}")
            else:
                raw = request.read_text(encoding="utf-8", errors="replace")
            data = _json_object(raw, "--request")
        if text is not None:
            data["search_text"] = text
        if "search_text" not in data:
            raise ValidationError("give the text to search for, or --request FILE", field="search_text")
        flt: dict[str, Any] = dict(data.get("metadata_filter") or {})
        if filter_json:
            flt.update(_json_object(filter_json, "--filter-json"))
        flt.update(_parse_meta(filters) if filters else {})
        data["metadata_filter"] = flt
        for key, val in (("top_k", top_k), ("mode", mode), ("fetch_k", fetch_k), ("reranker", reranker)):
            if val is not None:
                data[key] = val
        if rerank:
            data["rerank"] = True
        hp = dict(data.get("hybrid_params") or {})
        for key, val in (("dense_weight", dense_weight), ("sparse_weight", sparse_weight), ("rrf_k_constant", rrf_k),
                         ("graph_weight", graph_weight)):
            if val is not None:
                hp[key] = val
        data["hybrid_params"] = hp
        with _open(create=False, llm=llm) as mem:
            resp = mem.search(data)
        if as_json:
            sys.stdout.write(resp.model_dump_json(indent=2) + "\n")
        else:
            _print_response(resp)
    except HybridMemError as e:
        raise _fail(e) from None


def _filter_option(items: list[str], filter_json: Optional[str]) -> dict[str, Any]:
    """``--filter`` values are JSON objects or key=value pairs; ``--filter-json`` one JSON object."""
    flt: dict[str, Any] = {}
    if filter_json:
        flt.update(_json_object(filter_json, "--filter-json"))
    for item in items:
        flt.update(_json_object(item, "--filter") if item.lstrip().startswith("{") else _parse_meta([item]))
    return flt


@app.command()
def ask(
    question: str = typer.Argument(..., help="The question, in any language."),
    llm: Optional[str] = typer.Option(None, "--llm", help=_LLM_HELP),
    no_rerank: bool = typer.Option(False, "--no-rerank", help="Answer from the fused order (no reranking)."),
    reranker: Optional[str] = typer.Option(None, "--reranker", help=_RERANKER_HELP),
    filters: list[str] = typer.Option([], "--filter", "-f",
                                      help='A filter: JSON ({"severity": {"$gte": 2}}) or key=value (repeatable).'),
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
    try:
        if global_:
            from .graph.cli import print_global

            with _open(create=False, llm=llm) as mem:
                gans = mem.ask_global(question, level=level)
            if as_json:
                sys.stdout.write(gans.model_dump_json(indent=2) + "\n")
            else:
                print_global(gans)
            return
        flt = _filter_option(filters, filter_json)
        with _open(create=False, llm=llm) as mem:
            ans = mem.ask(question, top_k=top_k, metadata_filter=flt, rerank=not no_rerank, reranker=reranker)
        if as_json:
            sys.stdout.write(ans.model_dump_json(indent=2) + "\n")
        else:
            _print_answer(ans)
    except HybridMemError as e:
        raise _fail(e) from None


def _print_answer(ans: Answer) -> None:
    out.print(ans.answer, markup=False, highlight=False)
    out.print()
    if ans.citations:
        out.print("[bold]sources[/]")
        for c in ans.citations:
            out.print(f"  [{c.chunk_id}] {c.doc_id}" + (f" — {c.source}" if c.source else ""), markup=False, highlight=False)
    elif ans.results:
        out.print("closest passages (not cited): " + ", ".join(r.chunk_id for r in ans.results[:3]),
                  markup=False, highlight=False)
    if ans.invented_citations:
        out.print(f"removed invented citations: {', '.join(ans.invented_citations)}", markup=False, highlight=False)
    rr = f"{ans.reranker} ({'reranked' if ans.reranked else 'fused order kept'})" if ans.reranker else "none"
    out.print(f"answerer: {ans.answerer} · reranker: {rr} · {len(ans.results)} chunks of context · {ans.took_ms:.0f} ms",
              markup=False, highlight=False)
    for note in ans.notes:
        out.print(f"note: {note}", markup=False, highlight=False)
    if ans.usage:
        out.print(_usage_line(ans.usage), markup=False, highlight=False)


@app.command()
def delete(ids: list[str] = typer.Argument(..., help="Document ids or chunk ids.")) -> None:
    """Delete documents or single chunks from every index, in one transaction."""
    try:
        with _open(create=False) as mem:
            found = mem.delete(ids)
        missing = [i for i in ids if i not in found]
        out.print(f"deleted {len(found)}: {', '.join(found) or '–'}", highlight=False)
        if missing:
            err.print(f"[yellow]not found in namespace {state.namespace!r}:[/] {', '.join(missing)}", highlight=False)
            raise typer.Exit(NotFoundError.exit_code)
    except HybridMemError as e:
        raise _fail(e) from None


@app.command()
def get(doc_id: str) -> None:
    """Print one stored document (metadata and chunks) as JSON."""
    try:
        with _open(create=False) as mem:
            out.print_json(json.dumps(mem.get(doc_id), ensure_ascii=False))
    except HybridMemError as e:
        raise _fail(e) from None


@app.command()
def stats(as_json: bool = typer.Option(False, "--json")) -> None:
    """Documents, chunks, vectors, chunks still waiting for vectors, embedder, size."""
    try:
        with _open(create=False) as mem:
            s = mem.stats()
        if as_json:
            out.print_json(s.model_dump_json())
            return
        t = Table(show_header=False)
        for k, v in s.model_dump().items():
            t.add_row(k, ", ".join(v) if isinstance(v, list) else str(v))
        out.print(t)
    except HybridMemError as e:
        raise _fail(e) from None


@app.command()
def embed() -> None:
    """Compute the vectors of every chunk still waiting in the queue."""
    try:
        with _open(create=False) as mem:
            n = mem.store.pending_count()
            _embed_with_progress(mem)
        out.print(f"embedded {n} chunks")
    except HybridMemError as e:
        raise _fail(e) from None


@app.command()
def reembed(embedder: str = typer.Option(..., "--embedder", help="The new embedder spec.")) -> None:
    """Switch the store to another embedder and recompute every vector."""
    try:
        with _open(create=False, check_embedder=False) as mem:
            total = mem.store.counts(mem.namespace)["chunks"]

            with _progress() as prog:
                task = prog.add_task(f"re-embedding with {embedder}", total=None)
                n = mem.reembed(embedder, progress=lambda k: prog.advance(task, k))
        out.print(f"re-embedded {n} chunks ({total} in namespace {state.namespace!r}) with {embedder}")
    except HybridMemError as e:
        raise _fail(e) from None


@app.command()
def migrate(
    source: str = typer.Option(..., "--from", help="The store to copy: an SQLite file or a postgresql:// URL."),
    destination: str = typer.Option(..., "--to", help="An empty store to copy into (file or URL)."),
    namespaces: Optional[str] = typer.Option(None, "--namespaces", help="Comma-separated (default: all)."),
    verify_queries: int = typer.Option(20, "--verify-queries", help="Sample queries per namespace compared on "
                                       "both sides (BM25 and dense top-10); 0 skips."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Copy namespaces, documents, chunks, embeddings and the graph between backends, then verify
    counts and identical top-10 results on sample queries. Exits 1 when verification fails."""
    from .migrate import migrate as run

    try:
        with _progress() as prog:
            task = prog.add_task("copying documents", total=None)
            rep = run(source, destination, verify_queries=verify_queries,
                      namespaces=[n.strip() for n in namespaces.split(",")] if namespaces else None,
                      progress=lambda ns, n: prog.update(task, advance=n, description=f"copying {ns}"))
    except HybridMemError as e:
        raise _fail(e) from None
    if as_json:
        out.print_json(json.dumps({"source": rep.source, "destination": rep.destination, "ok": rep.ok,
                                   "namespaces": rep.namespaces, "queries_checked": rep.queries_checked,
                                   "mismatches": rep.mismatches, "seconds": round(rep.seconds, 2)}))
    else:
        t = Table("namespace", "documents", "chunks", "vectors", "pending", "entities", "relations", "communities")
        for ns, c in rep.namespaces.items():
            t.add_row(ns, *(str(c[k]) for k in ("documents", "chunks", "vectors", "pending_vectors", "graph_entities",
                                                "graph_relations", "graph_communities")))
        out.print(t)
        verdict = "verified" if rep.ok else "VERIFICATION FAILED"
        out.print(f"{verdict}: {rep.queries_checked} sample queries compared, {len(rep.mismatches)} mismatches; "
                  f"{rep.source} -> {rep.destination} in {rep.seconds:.1f} s", highlight=False, markup=False)
        for m in rep.mismatches[:20]:
            err.print(f"  {m}", highlight=False, markup=False)
    if not rep.ok:
        raise typer.Exit(1)


@app.command()
def demo(
    db: Path = typer.Option(Path(".hybridmem") / "demo.db", "--demo-db", help="Where to build the demo store."),
    embedder: str = typer.Option(config.DEFAULT_EMBEDDER, "--embedder", help="Embedder for the demo store."),
) -> None:
    """Build the Helio demo memory in a fresh store and show BM25 vs vectors vs hybrid."""
    from .demo import KEY_QUESTIONS, load_documents, load_questions

    try:
        for suffix in ("", "-wal", "-shm"):
            Path(str(db) + suffix).unlink(missing_ok=True)
        docs = load_documents()
        questions = {q["id"]: q for q in load_questions()}
        out.print(f"[bold]hybridmem demo[/] — {len(docs)} Helio documents (fr, en, de, es, zh) into {db}")
        with Memory(db, embedder=embedder, auto_embed=False) as mem:
            with _progress() as prog:
                task = prog.add_task("indexing", total=len(docs))
                mem.add_documents(docs, progress=lambda n: prog.advance(task, n))
            _embed_with_progress(mem)
            s = mem.stats()
            out.print(f"{s.documents} documents, {s.chunks} chunks, {s.vectors} vectors ({s.embedder})\n")
            wins: dict[str, bool] = {}
            for qid in KEY_QUESTIONS:
                q = questions[qid]
                t = Table(title=f"« {q['question']} »  (gold: {', '.join(q['gold'])})", title_justify="left")
                for col in ("mode", "top-1 document", "rank of gold", "top-3"):
                    t.add_column(col)
                for mode in ("bm25", "vector", "hybrid"):
                    resp = mem.search(q["question"], mode=mode, top_k=5)
                    docs_ranked = list(dict.fromkeys(r.doc_id for r in resp.results))
                    gold_rank = next((i for i, d in enumerate(docs_ranked, 1) if d in q["gold"]), None)
                    ok = gold_rank == 1
                    if mode == "hybrid":
                        wins[qid] = ok
                    t.add_row(
                        mode,
                        f"[{'green' if ok else 'red'}]{docs_ranked[0] if docs_ranked else '–'}[/]",
                        str(gold_rank or "not in top 5"),
                        ", ".join(docs_ranked[:3]),
                    )
                out.print(t)
            # a filtered query: the same incident exists in production and staging
            resp = mem.search(
                "HTTP 504 gateway timeout billing-service PostgreSQL pool",
                metadata_filter={"environment": "production"}, top_k=5,
            )
            envs = {r.metadata.get("environment") for r in resp.results}
            out.print(
                f"\nfiltered query environment=production → {resp.total_retrieved} results, environments seen: "
                f"{', '.join(sorted(map(str, envs)))}",
                highlight=False,
            )
            _demo_scores(mem, list(questions.values()))
        verdict = all(wins.values()) and envs <= {"production"}
        out.print(
            ("[bold green]hybrid ranks both gold documents first[/]" if verdict else "[bold red]hybrid missed a gold document[/]")
            + f" — try: hybridmem --db {db} search \"HEL-4040\""
        )
        if not verdict:
            raise typer.Exit(1)
    except HybridMemError as e:
        raise _fail(e) from None


@app.command("eval")
def eval_cmd(
    dataset: str = typer.Argument(..., help="A BEIR-layout folder (corpus.jsonl, queries.jsonl, qrels/) or 'demo'."),
    modes: str = typer.Option("bm25,vector,hybrid,rerank,graph", "--modes", help="Comma-separated modes to evaluate."),
    no_rerank: bool = typer.Option(False, "--no-rerank", help="Skip mode rerank (the LLM, or offline identifier, reranker)."),
    split: str = typer.Option("test", "--split", help="Qrels split (qrels/<split>.tsv)."),
    embedder: str = typer.Option(config.DEFAULT_EMBEDDER, "--embedder", help="Embedder spec for the dataset's index."),
    top_k: int = typer.Option(10, "--top-k", help="Results per query for MRR/nDCG/Recall@≤10 and latency."),
    out_dir: Optional[Path] = typer.Option(None, "--out", help="Report folder (default .hybridmem/eval/<set>-<split>)."),
    sweep: list[str] = typer.Option([], "--sweep", help="NAME=v1,v2,… over dense_weight, sparse_weight, exact_weight, rrf_k (repeatable)."),
    metric: str = typer.Option("ndcg@10", "--metric", help="Metric the sweep and comparisons use."),
    cache_dir: Path = typer.Option(Path(".hybridmem") / "eval-cache", "--cache-dir", envvar="HYBRIDMEM_EVAL_CACHE",
                                   help="Where indexes and embeddings are cached between runs."),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Only the first N queries (a quick look)."),
    llm: Optional[str] = typer.Option(None, "--llm", help="Chat model for mode rerank (default HYBRIDMEM_LLM; none: offline identifier reranker)."),
    as_json: bool = typer.Option(False, "--json", help="Print the results JSON (without per-query scores)."),
) -> None:
    """Score every mode on a dataset: MRR/nDCG/Recall by category, latency, paired tests, charts."""
    from .eval.datasets import load_dataset
    from .eval.harness import EvalConfig, parse_sweep, run_eval
    from .eval.report import write_report

    try:
        wanted = [m.strip() for m in modes.split(",") if m.strip()]
        if no_rerank:
            wanted = [m for m in wanted if m != "rerank"]
        cfg = EvalConfig(modes=wanted, embedder=embedder, top_k=top_k, cache_dir=cache_dir,
                         sweep=parse_sweep(sweep), metric=metric, limit=limit, llm=llm)
        ds = load_dataset(dataset, split)
        target = out_dir or Path(".hybridmem") / "eval" / f"{ds.name}-{ds.split}"
        with _progress() as prog:
            def progress(desc: str, total: int | None):
                task = prog.add_task(desc, total=total)
                return lambda n: prog.advance(task, n)

            results = run_eval(ds, cfg, load_split=lambda s: load_dataset(dataset, s), progress=progress)
        files = write_report(results, target)
        if as_json:
            slim = {**results, "modes": {m: {k: v for k, v in r.items() if k != "per_query"}
                                         for m, r in results["modes"].items()}}
            out.print_json(json.dumps(slim, ensure_ascii=False))
            return
        _print_eval(results)
        out.print(f"report: {files['markdown']}  json: {files['json']}  charts: "
                  f"{', '.join(str(files[k]) for k in ('metric_by_category', 'recall_curve') if k in files)}",
                  highlight=False)
    except HybridMemError as e:
        raise _fail(e) from None


def _print_eval(results: dict[str, Any]) -> None:
    ds, idx = results["dataset"], results["index"]
    out.print(f"[bold]{ds['name']}[/] ({ds['split']}): {ds['docs']} docs, {ds['queries']} queries, "
              f"embedder {results['embedder']}; index "
              + (f"from cache ({idx['key']})" if idx["cached"] else f"built in {idx['index_s']} s")
              + (f", embedded in {idx['embed_s']} s" if idx.get("embed_s") else ""), highlight=False)
    ok = {m: r for m, r in results["modes"].items() if r.get("status") == "ok"}
    cats = [c for c in ds["categories"] if c != "all"]
    t = Table(title="overall", title_justify="left")
    for col in ("mode", "MRR@10", "nDCG@10", "R@1", "R@5", "R@10", "R@100", "p50 ms", "p95 ms"):
        t.add_column(col, justify="right" if col != "mode" else "left")
    for m, r in ok.items():
        a = r["metrics"]["all"]
        t.add_row(m, *(f"{a[k]:.3f}" for k in ("mrr@10", "ndcg@10", "recall@1", "recall@5", "recall@10", "recall@100")),
                  f"{r['latency_ms']['p50']:.1f}", f"{r['latency_ms']['p95']:.1f}")
    out.print(t)
    if cats:
        t = Table(title="MRR@10 by category", title_justify="left")
        t.add_column("category")
        t.add_column("n", justify="right")
        for m in ok:
            t.add_column(m, justify="right")
        for c in [*cats, "all"]:
            t.add_row(c, str(ds["categories"][c]), *(f"{ok[m]['metrics'][c]['mrr@10']:.3f}" for m in ok))
        out.print(t)
    for m, r in results["modes"].items():
        if r.get("status") != "ok":
            out.print(f"{m}: {r.get('note', r.get('status'))}", highlight=False)
    for c in results.get("comparisons", []):
        if c.get("best_single_leg"):
            out.print(f"{c['label']}, {c['metric']}: {c['mean_diff']:+.4f} (95% CI {c['ci95'][0]:+.4f}..{c['ci95'][1]:+.4f}, "
                      f"randomization p={c['p_randomization']:.4f})", highlight=False)
    for tg in results.get("targets", []):
        mark = "[green]met[/]" if tg["met"] else "[red]missed[/]"
        out.print(f"target {tg.get('label', '')} {tg['mode']} {tg['metric']} ≥ {tg['target']}: {tg['measured']} {mark}"
                  + (f" — {tg['why']}" if tg.get("why") else ""), highlight=False)
    if results.get("sweep"):
        out.print(f"sweep: {results['sweep']['verdict']}", highlight=False)
    out.print(f"took {results['took_s']} s", highlight=False)


def _demo_scores(mem: Memory, questions: list[dict[str, Any]]) -> None:
    """MRR@10 (document level) per question category and mode over the whole demo question set
    (``hybridmem eval demo`` gives every metric, latency and significance tests)."""
    from .eval.metrics import per_query

    cats: dict[str, dict[str, list[float]]] = {}
    for q in questions:
        for mode in ("bm25", "vector", "hybrid"):
            resp = mem.search(q["question"], mode=mode, top_k=10, metadata_filter=q.get("metadata_filter") or {})
            ranked = list(dict.fromkeys(r.doc_id for r in resp.results))
            rr = per_query(ranked, dict.fromkeys(q["gold"], 1))["mrr@10"]
            cats.setdefault(q["category"], {}).setdefault(mode, []).append(rr)
    t = Table(title="MRR@10 by question category (document level)", title_justify="left")
    t.add_column("category")
    t.add_column("n", justify="right")
    for mode in ("bm25", "vector", "hybrid"):
        t.add_column(mode, justify="right")
    allm: dict[str, list[float]] = {}
    for cat in sorted(cats):
        row = cats[cat]
        t.add_row(cat, str(len(row["bm25"])), *(f"{sum(row[m]) / len(row[m]):.3f}" for m in ("bm25", "vector", "hybrid")))
        for m in row:
            allm.setdefault(m, []).extend(row[m])
    t.add_row("all", str(len(allm["bm25"])), *(f"{sum(allm[m]) / len(allm[m]):.3f}" for m in ("bm25", "vector", "hybrid")))
    out.print(t)


@app.command()
def serve(
    host: Optional[str] = typer.Option(None, "--host", help="Address to bind (default 127.0.0.1; others need API keys)."),
    port: Optional[int] = typer.Option(None, "--port", help="Port (default 8080)."),
    db: Optional[str] = typer.Option(None, "--db", help="SQLite file or postgresql:// URL (overrides the global --db)."),
    config_file: Optional[Path] = typer.Option(None, "--config", envvar="HYBRIDMEM_SERVER_CONFIG",
                                               help="TOML or JSON server settings (API keys, limits)."),
) -> None:
    """Serve the memory over HTTP: /v1/query, /v1/answer, /v1/memories, /v1/documents, /metrics, /docs."""
    try:
        from .server.auth import check_bind
        from .server.config import load_config
        from .server.http import run_server

        ns = state.namespace if state.namespace != config.DEFAULT_NAMESPACE else None  # the global --namespace
        cfg = load_config(config_file, host=host, port=port, default_namespace=ns)
        check_bind(cfg.host, cfg.api_keys)  # before opening anything: fail fast and clearly
        if db is not None:
            state.db = db
        elif cfg.db and state.db == str(config.DEFAULT_DB):
            state.db = cfg.db
        from .server.embedding import CoalescingEmbedder

        spec = state.embedder or cfg.embedder or _stored_embedder(state.db)  # the store's own, as every command
        # concurrent requests' query embeddings are computed in one batch (a bundled model's cost is per call)
        from .retrieve.blas import limit_process_blas

        # many request threads run numpy at once: one BLAS thread per call (OPENBLAS_NUM_THREADS overrides).
        # Before the embedder is made: the e5 model writes OMP_NUM_THREADS into the environment.
        blas_threads = limit_process_blas(1)
        if blas_threads is not None:
            err.print(f"numpy BLAS: {blas_threads} thread per call (set OPENBLAS_NUM_THREADS to choose)",
                      highlight=False, markup=False)
        emb = CoalescingEmbedder(spec or config.DEFAULT_EMBEDDER)
        try:
            emb.warm_up()
            with Memory(state.db, embedder=emb, namespace=state.namespace, auto_embed=True) as mem:
                # load every namespace's BM25 postings and vectors before taking traffic (and start any
                # HNSW build): the first requests must not each pay, or queue behind, a cold load
                t0 = time.perf_counter()
                names = mem.store.namespaces()
                for ns in names:
                    mem.wait_for_indexes(namespace=ns, timeout=0)
                if names:
                    err.print(f"indexes of {len(names)} namespace(s) loaded in {time.perf_counter() - t0:.1f} s",
                              highlight=False, markup=False)
                err.print(f"hybridmem serving {display_target(state.db)} on http://{cfg.host}:{cfg.port} ({len(cfg.api_keys)} API "
                          "key(s); OpenAPI at /docs)", highlight=False, markup=False, soft_wrap=True)
                run_server(cfg, mem)
        finally:
            emb.close()
    except ModuleNotFoundError as e:
        err.print(f"[bold red]error:[/] the server needs its extra: pip install 'hybridmem[server]' (missing {e.name})")
        raise typer.Exit(1) from None
    except HybridMemError as e:
        raise _fail(e) from None


@app.command("mcp")
def mcp_cmd(
    transport: str = typer.Option("stdio", "--transport", help="stdio (default) or http (streamable HTTP)."),
    host: str = typer.Option("127.0.0.1", "--host", help="http transport: address (loopback only)."),
    port: int = typer.Option(8765, "--port", help="http transport: port."),
) -> None:
    """Serve the memory to an agent over MCP: tools remember, recall, forget, ask; resource hybridmem://stats."""
    try:
        from .server.mcp import check_transport, run_mcp

        check_transport(transport, host)  # before opening anything
        with _open(create=True, auto_embed=True) as mem:
            run_mcp(mem, transport=transport, host=host, port=port)
    except ModuleNotFoundError as e:
        err.print(f"[bold red]error:[/] the MCP server needs its extra: pip install 'hybridmem[server]' (missing {e.name})")
        raise typer.Exit(1) from None
    except HybridMemError as e:
        raise _fail(e) from None


from .graph.cli import register as _register_graph  # noqa: E402  (the `graph` sub-app)

_register_graph(app, sys.modules[__name__])


def main() -> None:
    try:
        app()
    except HybridMemError as e:  # pragma: no cover - commands map their own errors
        err.print(f"error: {e}")
        sys.exit(e.exit_code)


if __name__ == "__main__":
    main()
