"""Human-readable output: result tables, answers, usage lines, reports.

Results are a table on a terminal and plain lines (one per result, then a one-line snippet) when
stdout is a pipe or a file. rich's tables load on first use, and the models only for type checking."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .common import err, out

if TYPE_CHECKING:
    from rich.table import Table

    from ..models import Answer, QueryResponse, QueryResult, Usage

__all__ = [
    "emit",
    "plural",
    "print_answer",
    "print_answer_eval",
    "print_eval",
    "print_global",
    "print_graph_report",
    "print_history",
    "print_migrate",
    "print_response",
    "usage_line",
]


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 chunk``, ``2 chunks``, ``0 chunks`` (``many``: an irregular plural, e.g. ``entities``)."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


def usage_line(u: Usage) -> str:
    return (
        f"usage: {plural(u.calls, 'LLM call')} ({plural(u.http_requests, 'HTTP request')}), "
        f"{u.prompt_tokens} prompt + {u.completion_tokens} completion tokens, {u.latency_ms:.0f} ms"
    )


def _when(iso: str | None) -> str:
    """``2026-03-03T09:41:00.000Z`` -> ``2026-03-03 09:41Z`` (what a line has room for)."""
    return f"{iso[:10]} {iso[11:16]}Z" if iso and len(iso) >= 16 else iso or ""


def _said(r: QueryResult) -> str:
    """A conversation memory's place: ``session s1 · turn 3 · Priya · 2026-03-03 09:41Z`` ("" for another)."""
    if r.session_id is None and r.speaker is None:
        return ""
    parts = [f"session {r.session_id}" if r.session_id is not None else ""]
    parts += [f"turn {r.turn}" if r.turn is not None else "", r.speaker or "", _when(r.occurred_at)]
    if r.valid_to:
        parts.append(f"superseded {_when(r.valid_to)}")
    return " · ".join(p for p in parts if p)


def _context_turns(r: QueryResult) -> list[tuple[str, str]]:
    """The hit's neighbouring turns (``context_window``), the hit left out: (``turn 2 · time``, text
    on one line; a message's text starts with its speaker)."""
    return [
        (f"turn {c.get('turn', '?')} · {_when(c.get('occurred_at'))}", " ".join(str(c.get("text", "")).split()))
        for c in r.context or []
        if c.get("chunk_id") != r.chunk_id
    ]


def _results_table(resp: QueryResponse) -> Table:
    from rich.table import Table

    table = Table(show_lines=False, header_style="bold", expand=True)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("chunk_id", no_wrap=True, overflow="fold")
    table.add_column("rrf", justify="right", no_wrap=True)
    table.add_column("bm25", justify="right", no_wrap=True)
    table.add_column("dense", justify="right", no_wrap=True)
    table.add_column("exact", justify="right", no_wrap=True)
    if "graph" in resp.legs:
        table.add_column("graph", justify="right", no_wrap=True)
    said = any(_said(r) for r in resp.results)
    if said:  # conversation memories: where and when it was said instead of the source
        table.add_column("said", no_wrap=True, overflow="ellipsis", max_width=44)
    else:
        table.add_column("source", no_wrap=True, overflow="ellipsis", max_width=28)
    table.add_column("text", no_wrap=True, overflow="ellipsis", ratio=1)
    legs = ["bm25", "dense", "exact", *(["graph"] if "graph" in resp.legs else [])]
    for i, r in enumerate(resp.results, start=1):
        snippet = " ".join(r.text.split())
        ranks = [str(r.ranks.get(n, "–")) for n in legs]
        table.add_row(str(i), r.chunk_id, f"{r.rrf_score:.4f}", *ranks, (_said(r) if said else r.source) or "", snippet)
        for where, text in _context_turns(r):  # the neighbouring turns, dimmed, under the hit
            table.add_row("", "", "", *[""] * len(legs), f"  {where}", text, style="dim")
    return table


def _results_lines(resp: QueryResponse) -> None:
    """The results for a pipe or a file: ``rank  rrf  chunk_id  source  leg=rank…`` on one line,
    then the text on one indented line cut to the width (80 columns unless COLUMNS says more)."""
    width = max(40, out.width)
    for i, r in enumerate(resp.results, start=1):
        # the legs fused (a step such as the dense leg's centering ranks nothing of its own)
        fused = list(resp.leg_weights) or [n for n, leg in resp.legs.items() if leg.status != "skipped"]
        ranks = " ".join(f"{n}={r.ranks.get(n, '–')}" for n in fused)
        said = _said(r)  # a conversation memory: its session, turn, speaker and time replace the source
        head = "  ".join(x for x in (str(i), f"{r.rrf_score:.4f}", r.chunk_id, "" if said else r.source, ranks) if x)
        out.print(head, markup=False, highlight=False)
        if said:
            out.print("    " + said, markup=False, highlight=False)
        out.print("    " + _cut(" ".join(r.text.split()), width - 4), markup=False, highlight=False)
        for where, text in _context_turns(r):
            out.print(_cut(f"        {where}  {text}", width), markup=False, highlight=False)


def _cut(line: str, width: int) -> str:
    return line if len(line) <= width else line[: width - 1] + "…"


def print_response(resp: QueryResponse, embedding: str | None = None) -> None:
    """The results (a table on a terminal, plain lines otherwise) and a footer: the count, mode,
    time and each leg's status; ``embedding`` says where the query vector came from."""
    if out.is_terminal:
        out.print(_results_table(resp))
    else:
        _results_lines(resp)
    legs = ", ".join(
        f"{n}: {leg.status}"
        + (f" {leg.took_ms:.1f} ms" if leg.status == "ok" else f" ({leg.error})" if leg.error else "")
        for n, leg in resp.legs.items()
    )
    out.print(
        f"{plural(resp.total_retrieved, 'result')}, mode {resp.mode}, {resp.took_ms:.1f} ms — {legs}"
        + (f" · {embedding}" if embedding else ""),
        highlight=False,
        markup=False,
    )
    if resp.fusion != "rrf":
        weights = " · ".join(f"{n} {w:.2f}" for n, w in resp.leg_weights.items())
        out.print(f"fusion {resp.fusion}: {weights}", highlight=False, markup=False)
    if resp.reranker:
        state_ = "reranked" if resp.reranked else "NOT reranked (fused order)"
        out.print(f"{state_} by {resp.reranker}; rrf is the fused score", highlight=False, markup=False)
    if resp.rerank_note:
        out.print(f"rerank note: {resp.rerank_note}", highlight=False, markup=False)
    if resp.usage:
        out.print(usage_line(resp.usage), highlight=False, markup=False)
    if resp.pending_vectors:
        n = resp.pending_vectors
        out.print(
            f"note: {plural(n, 'chunk')} still wait{'s' if n == 1 else ''} for vectors (not in the dense leg yet)",
            highlight=False,
        )


def print_history(memory_id: str, versions: list[dict[str, Any]]) -> None:
    """A memory's versions, oldest first: a table on a terminal, plain lines otherwise."""
    if out.is_terminal:
        from rich.table import Table

        t = Table(header_style="bold", expand=True, title=f"history of {memory_id}", title_justify="left")
        for col in ("v", "id", "state", "occurred", "recorded", "valid to", "reason"):
            t.add_column(col, no_wrap=True)
        t.add_column("text", no_wrap=True, overflow="ellipsis", ratio=1)
        for v in versions:
            t.add_row(*_version_cells(v), " ".join(str(v.get("text", "")).split()))
        out.print(t)
        return
    width = max(40, out.width)
    for v in versions:
        version, vid, state, occurred, recorded, valid_to, reason = _version_cells(v)
        cells = [f"v{version}", vid, state, f"occurred {occurred}", f"recorded {recorded}"]
        cells += [f"valid to {valid_to}" if valid_to else "", f"({reason})" if reason else ""]
        out.print("  ".join(c for c in cells if c), markup=False, highlight=False)
        out.print("    " + _cut(" ".join(str(v.get("text", "")).split()), width - 4), markup=False, highlight=False)


def _version_cells(v: dict[str, Any]) -> tuple[str, str, str, str, str, str, str]:
    state = "current" if v.get("current") else "superseded" if v.get("valid_to") else "past"
    return (
        str(v.get("version", "")),
        str(v.get("id", "")),
        state,
        _when(v.get("occurred_at")),
        _when(v.get("recorded_at")),
        _when(v.get("valid_to")),
        str(v.get("reason") or ""),
    )


def print_answer(ans: Answer) -> None:
    out.print(ans.answer, markup=False, highlight=False)
    out.print()
    if ans.citations:
        out.print("[bold]sources[/]")
        for c in ans.citations:
            out.print(
                f"  [{c.chunk_id}] {c.doc_id}" + (f" — {c.source}" if c.source else ""), markup=False, highlight=False
            )
    elif ans.results:
        out.print(
            "closest passages (not cited): " + ", ".join(r.chunk_id for r in ans.results[:3]),
            markup=False,
            highlight=False,
        )
    if ans.invented_citations:
        out.print(f"removed invented citations: {', '.join(ans.invented_citations)}", markup=False, highlight=False)
    rr = f"{ans.reranker} ({'reranked' if ans.reranked else 'fused order kept'})" if ans.reranker else "none"
    out.print(
        f"answerer: {ans.answerer} · reranker: {rr} · {plural(len(ans.results), 'chunk')} of context · "
        f"{ans.took_ms:.0f} ms",
        markup=False,
        highlight=False,
    )
    _notes_and_usage(ans)


def _notes_and_usage(ans: Any) -> None:
    """The notes of an answer, one a line, then its token usage when a model ran."""
    for note in ans.notes:
        out.print(f"note: {note}", markup=False, highlight=False)
    if ans.usage:
        out.print(usage_line(ans.usage), markup=False, highlight=False)


def emit(obj: Any, as_json: bool, printer: Callable[[Any], None]) -> None:
    """``obj`` (a pydantic model) as indented JSON on stdout with ``--json``, else by ``printer``."""
    if as_json:
        sys.stdout.write(obj.model_dump_json(indent=2) + "\n")
    else:
        printer(obj)


def print_global(ans: Any) -> None:
    """A :class:`hybridmem.graph.GlobalAnswer` (``ask --global``)."""
    out.print(ans.answer, markup=False, highlight=False)
    out.print()
    out.print(
        f"communities: {', '.join(ans.community_ids) or '–'} · chunks: {', '.join(ans.chunk_ids) or '–'}",
        markup=False,
        highlight=False,
    )
    out.print(
        f"answerer: {ans.answerer} · level {ans.level} · {ans.communities_used}/{ans.communities_total} "
        f"community summaries read · ~{ans.prompt_tokens} prompt tokens · {ans.took_ms:.0f} ms",
        markup=False,
        highlight=False,
    )
    _notes_and_usage(ans)


def print_graph_report(rep: Any) -> None:
    """A :class:`hybridmem.graph.GraphReport` (``graph build`` / ``graph update``)."""
    out.print(
        f"namespace {rep.namespace!r}: {plural(rep.chunks_extracted, 'chunk')} extracted ({rep.extractor}) in "
        f"{rep.extract_s:.2f}s · {plural(rep.entities, 'entity', 'entities')}, "
        f"{plural(rep.relations, 'typed relation')}, {plural(rep.cooccurrence_edges, 'co-occurrence edge')} · "
        f"{plural(rep.communities, 'community', 'communities')} on {plural(rep.levels, 'level')} in "
        f"{rep.detect_s:.2f}s · summaries: {rep.summaries_made} made ({rep.summarizer}), {rep.summaries_reused} "
        f"reused, {rep.summaries_pruned} pruned · LLM calls: {rep.llm_calls} · {rep.took_s:.2f}s",
        markup=False,
        highlight=False,
    )
    if rep.usage:
        out.print(usage_line(rep.usage), markup=False, highlight=False)


def print_migrate(rep: Any) -> None:
    """A :class:`hybridmem.migrate` report: counts per namespace, the verdict, the first mismatches."""
    from rich.table import Table

    t = Table("namespace", "documents", "chunks", "vectors", "pending", "entities", "relations", "communities")
    for ns, c in rep.namespaces.items():
        t.add_row(
            ns,
            *(
                str(c[k])
                for k in (
                    "documents",
                    "chunks",
                    "vectors",
                    "pending_vectors",
                    "graph_entities",
                    "graph_relations",
                    "graph_communities",
                )
            ),
        )
    out.print(t)
    verdict = "verified" if rep.ok else "VERIFICATION FAILED"
    out.print(
        f"{verdict}: {plural(rep.queries_checked, 'sample query', 'sample queries')} compared, "
        f"{plural(len(rep.mismatches), 'mismatch', 'mismatches')}; "
        f"{rep.source} -> {rep.destination} in {rep.seconds:.1f} s",
        highlight=False,
        markup=False,
    )
    for m in rep.mismatches[:20]:
        err.print(f"  {m}", highlight=False, markup=False)


def _eval_tables(results: dict[str, Any], ok: dict[str, Any]) -> None:
    from rich.table import Table

    ds = results["dataset"]
    cats = [c for c in ds["categories"] if c != "all"]
    t = Table(title="overall", title_justify="left")
    for col in ("mode", "MRR@10", "nDCG@10", "R@1", "R@5", "R@10", "R@100", "p50 ms", "p95 ms"):
        t.add_column(col, justify="right" if col != "mode" else "left")
    for m, r in ok.items():
        a = r["metrics"]["all"]
        t.add_row(
            m,
            *(f"{a[k]:.3f}" for k in ("mrr@10", "ndcg@10", "recall@1", "recall@5", "recall@10", "recall@100")),
            f"{r['latency_ms']['p50']:.1f}",
            f"{r['latency_ms']['p95']:.1f}",
        )
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


def print_eval(results: dict[str, Any]) -> None:
    ds, idx = results["dataset"], results["index"]
    out.print(
        f"[bold]{ds['name']}[/] ({ds['split']}): {plural(ds['docs'], 'doc')}, "
        f"{plural(ds['queries'], 'query', 'queries')}, "
        f"embedder {results['embedder']}; index "
        + (f"from cache ({idx['key']})" if idx["cached"] else f"built in {idx['index_s']} s")
        + (f", embedded in {idx['embed_s']} s" if idx.get("embed_s") else ""),
        highlight=False,
    )
    ok = {m: r for m, r in results["modes"].items() if r.get("status") == "ok"}
    _eval_tables(results, ok)
    for m, r in results["modes"].items():
        if r.get("status") != "ok":
            out.print(f"{m}: {r.get('note', r.get('status'))}", highlight=False)
    for c in results.get("comparisons", []):
        if c.get("best_single_leg"):
            out.print(
                f"{c['label']}, {c['metric']}: {c['mean_diff']:+.4f} (95% CI {c['ci95'][0]:+.4f}..{c['ci95'][1]:+.4f}, "
                f"randomization p={c['p_randomization']:.4f})",
                highlight=False,
            )
    for tg in results.get("targets", []):
        mark = "[green]met[/]" if tg["met"] else "[red]missed[/]"
        out.print(
            f"target {tg.get('label', '')} {tg['mode']} {tg['metric']} ≥ {tg['target']}: {tg['measured']} {mark}"
            + (f" — {tg['why']}" if tg.get("why") else ""),
            highlight=False,
        )
    if results.get("sweep"):
        out.print(f"sweep: {results['sweep']['verdict']}", highlight=False)
    out.print(f"took {results['took_s']} s", highlight=False)


def print_answer_eval(results: dict[str, Any]) -> None:
    """An answer-level run (``hybridmem eval --answer``): J / F1 / BLEU-1 by category, tokens, cost."""
    from rich.table import Table

    ds, tok = results["dataset"], results["tokens"]
    out.print(
        f"[bold]{ds['name']}[/]: {plural(ds['queries'], 'question')} (of {ds['questions_in_set']}), "
        f"answerer {results['answerer']}, judge {results['judge']}, embedder {results['embedder']}, "
        f"top_k {results['top_k']}",
        highlight=False,
    )
    ok = {m: r for m, r in results["modes"].items() if r.get("status") == "ok"}
    cats = [c for c in ds["categories"] if c != "all"] + ["all"]
    t = Table(title="J (share CORRECT) / F1 / BLEU-1 by category", title_justify="left")
    t.add_column("category")
    t.add_column("n", justify="right")
    for m in ok:
        t.add_column(m, justify="right")
    for c in cats:
        cells = []
        for r in ok.values():
            s = r["metrics"].get(c)
            cells.append(f"{s['j']:.3f} / {s['f1']:.3f} / {s['bleu1']:.3f}" if s else "—")
        t.add_row(c, str(ds["categories"].get(c, "")), *cells)
    out.print(t)
    for role in ("answerer", "judge"):
        r = tok[role]
        cost = r["cost_usd"] if isinstance(r["cost_usd"], str) else f"${r['cost_usd']:.4f}"
        out.print(
            f"{role} {r['model']}: {plural(r['calls'], 'call')} now ({r['cached']} cached, {r['errors']} failed), "
            f"{r['prompt_tokens']} prompt + {r['completion_tokens']} completion tokens, cost {cost}",
            highlight=False,
        )
    for c in results.get("comparisons", []):
        if c["metric"] == "j":
            out.print(
                f"{c['label']}, J: {c['mean_diff']:+.4f} (95% CI {c['ci95'][0]:+.4f}..{c['ci95'][1]:+.4f}, "
                f"randomization p={c['p_randomization']:.4f})",
                highlight=False,
            )
    out.print(f"took {results['took_s']} s", highlight=False)
