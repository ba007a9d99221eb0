"""``hybridmem demo``: the Helio demo memory, BM25 vs vectors vs hybrid side by side."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from .. import config
from ..errors import HybridMemError
from .common import embed_with_progress, err, fail, out, progress
from .render import plural

if TYPE_CHECKING:
    from ..memory import Memory

__all__ = ["register"]


def _key_question(mem: Memory, q: dict[str, Any]) -> bool:
    """Print one key question's table (each mode's top documents); True when hybrid ranks a gold document first."""
    from rich.table import Table

    t = Table(title=f"« {q['question']} »  (gold: {', '.join(q['gold'])})", title_justify="left")
    for col in ("mode", "top-1 document", "rank of gold", "top-3"):
        t.add_column(col)
    win = False
    for mode in ("bm25", "vector", "hybrid"):
        resp = mem.search(q["question"], mode=mode, top_k=5)
        docs_ranked = list(dict.fromkeys(r.doc_id for r in resp.results))
        gold_rank = next((i for i, d in enumerate(docs_ranked, 1) if d in q["gold"]), None)
        ok = gold_rank == 1
        if mode == "hybrid":
            win = ok
        t.add_row(
            mode,
            f"[{'green' if ok else 'red'}]{docs_ranked[0] if docs_ranked else '–'}[/]",
            str(gold_rank or "not in top 5"),
            ", ".join(docs_ranked[:3]),
        )
    out.print(t)
    return win


def _demo_scores(mem: Memory, questions: list[dict[str, Any]]) -> None:
    """MRR@10 (document level) per question category and mode over the whole demo question set
    (``hybridmem eval demo`` gives every metric, latency and significance tests)."""
    from rich.table import Table

    from ..eval.metrics import per_query

    cats: dict[str, dict[str, list[float]]] = {}
    with progress() as prog:
        task = prog.add_task("scoring the demo questions", total=len(questions))
        for q in questions:
            for mode in ("bm25", "vector", "hybrid"):
                resp = mem.search(q["question"], mode=mode, top_k=10, metadata_filter=q.get("metadata_filter") or {})
                ranked = list(dict.fromkeys(r.doc_id for r in resp.results))
                rr = per_query(ranked, dict.fromkeys(q["gold"], 1))["mrr@10"]
                cats.setdefault(q["category"], {}).setdefault(mode, []).append(rr)
            prog.advance(task, 1)
    t = Table(title="MRR@10 by question category (document level)", title_justify="left")
    t.add_column("category")
    t.add_column("n", justify="right")
    for mode in ("bm25", "vector", "hybrid"):
        t.add_column(mode, justify="right")
    allm: dict[str, list[float]] = {}
    for cat in sorted(cats):
        row = cats[cat]
        t.add_row(
            cat, str(len(row["bm25"])), *(f"{sum(row[m]) / len(row[m]):.3f}" for m in ("bm25", "vector", "hybrid"))
        )
        for m in row:
            allm.setdefault(m, []).extend(row[m])
    t.add_row(
        "all", str(len(allm["bm25"])), *(f"{sum(allm[m]) / len(allm[m]):.3f}" for m in ("bm25", "vector", "hybrid"))
    )
    out.print(t)


def demo(
    db: Path = typer.Option(Path(".hybridmem") / "demo.db", "--demo-db", help="Where to build the demo store."),
    embedder: str = typer.Option(config.DEFAULT_EMBEDDER, "--embedder", help="Embedder for the demo store."),
) -> None:
    """Build the Helio demo memory in a fresh store and show BM25 vs vectors vs hybrid."""
    from ..demo import KEY_QUESTIONS, load_documents, load_questions
    from ..embed.cache import CachedEmbedder
    from ..embed.registry import create_embedder
    from ..memory import Memory

    try:
        for suffix in ("", "-wal", "-shm"):
            Path(str(db) + suffix).unlink(missing_ok=True)
        docs = load_documents()
        questions = {q["id"]: q for q in load_questions()}
        out.print(f"[bold]hybridmem demo[/] — {len(docs)} Helio documents (fr, en, de, es, zh) into {db}")
        # vectors are kept in the evaluation's cache: a second demo and `hybridmem eval demo` reuse them
        cache = Path(".hybridmem") / "eval-cache" / "embeddings.db"
        emb = CachedEmbedder(create_embedder(embedder), cache)
        with Memory(db, embedder=emb, auto_embed=False) as mem:
            with progress() as prog:
                task = prog.add_task("indexing", total=len(docs))
                mem.add_documents(docs, progress=lambda n: prog.advance(task, n))
            pending = mem.store.pending_count()
            err.print(
                f"embedding {plural(pending, 'chunk')} with {emb.name} on this CPU: a few minutes the first time "
                f"on 2 cores; the vectors are cached in {cache.parent} for later runs and `hybridmem eval demo`",
                highlight=False,
            )
            embed_with_progress(mem)
            s = mem.stats()
            out.print(
                f"{plural(s.documents, 'document')}, {plural(s.chunks, 'chunk')}, {plural(s.vectors, 'vector')} "
                f"({s.embedder})\n",
                highlight=False,
            )
            wins: dict[str, bool] = {qid: _key_question(mem, questions[qid]) for qid in KEY_QUESTIONS}
            # a filtered query: the same incident exists in production and staging
            resp = mem.search(
                "HTTP 504 gateway timeout billing-service PostgreSQL pool",
                metadata_filter={"environment": "production"},
                top_k=5,
            )
            envs = {r.metadata.get("environment") for r in resp.results}
            out.print(
                f"\nfiltered query environment=production → {plural(resp.total_retrieved, 'result')}, environments seen: "
                f"{', '.join(sorted(map(str, envs)))}",
                highlight=False,
            )
            _demo_scores(mem, list(questions.values()))
        verdict = all(wins.values()) and envs <= {"production"}
        out.print(
            (
                "[bold green]hybrid ranks both gold documents first[/]"
                if verdict
                else "[bold red]hybrid missed a gold document[/]"
            )
            + f' — try: hybridmem --db {db} search "HEL-4040"'
        )
        if not verdict:
            raise typer.Exit(1)
    except HybridMemError as e:
        raise fail(e) from None


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)
