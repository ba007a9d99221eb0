"""``hybridmem eval``: score every mode on a dataset and write the report."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Optional

import typer

from .. import config
from ..errors import HybridMemError
from .common import fail, out, progress
from .render import print_eval

__all__ = ["register"]


def eval_cmd(
    dataset: str = typer.Argument(..., help="A BEIR-layout folder (corpus.jsonl, queries.jsonl, qrels/) or 'demo'."),
    modes: str = typer.Option("bm25,vector,hybrid,rerank,graph", "--modes", help="Comma-separated modes to evaluate."),
    no_rerank: bool = typer.Option(
        False, "--no-rerank", help="Skip mode rerank (the LLM, or offline identifier, reranker)."
    ),
    split: str = typer.Option("test", "--split", help="Qrels split (qrels/<split>.tsv)."),
    embedder: str = typer.Option(config.DEFAULT_EMBEDDER, "--embedder", help="Embedder spec for the dataset's index."),
    top_k: int = typer.Option(10, "--top-k", help="Results per query for MRR/nDCG/Recall@≤10 and latency."),
    out_dir: Optional[Path] = typer.Option(
        None, "--out", help="Report folder (default .hybridmem/eval/<set>-<split>)."
    ),
    sweep: list[str] = typer.Option(
        [],
        "--sweep",
        help="NAME=v1,v2,… over dense_weight, sparse_weight, exact_weight, feedback_weight, time_weight, dense_centering, substance_weight, rrf_k (repeatable).",
    ),
    metric: str = typer.Option("ndcg@10", "--metric", help="Metric the sweep and comparisons use."),
    cache_dir: Path = typer.Option(
        Path(".hybridmem") / "eval-cache",
        "--cache-dir",
        envvar="HYBRIDMEM_EVAL_CACHE",
        help="Where indexes and embeddings are cached between runs.",
    ),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Only the first N queries (a quick look)."),
    llm: Optional[str] = typer.Option(
        None, "--llm", help="Chat model for mode rerank (default HYBRIDMEM_LLM; none: offline identifier reranker)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the results JSON (without per-query scores)."),
) -> None:
    """Score every mode on a dataset: MRR/nDCG/Recall by category, latency, paired tests, charts."""
    from ..eval.datasets import load_dataset
    from ..eval.harness import EvalConfig, parse_sweep, run_eval
    from ..eval.report import write_report

    try:
        wanted = [m.strip() for m in modes.split(",") if m.strip()]
        if no_rerank:
            wanted = [m for m in wanted if m != "rerank"]
        cfg = EvalConfig(
            modes=wanted,
            embedder=embedder,
            top_k=top_k,
            cache_dir=cache_dir,
            sweep=parse_sweep(sweep),
            metric=metric,
            limit=limit,
            llm=llm,
        )
        ds = load_dataset(dataset, split)
        target = out_dir or Path(".hybridmem") / "eval" / f"{ds.name}-{ds.split}"
        with progress() as prog:

            def on_progress(desc: str, total: int | None) -> Callable[[int], None]:
                task = prog.add_task(desc, total=total)
                return lambda n: prog.advance(task, n)

            results = run_eval(ds, cfg, load_split=lambda s: load_dataset(dataset, s), progress=on_progress)
        files = write_report(results, target)
        if as_json:
            slim = {
                **results,
                "modes": {m: {k: v for k, v in r.items() if k != "per_query"} for m, r in results["modes"].items()},
            }
            out.print_json(json.dumps(slim, ensure_ascii=False))
            return
        print_eval(results)
        out.print(
            f"report: {files['markdown']}  json: {files['json']}  charts: "
            f"{', '.join(str(files[k]) for k in ('metric_by_category', 'recall_curve') if k in files)}",
            highlight=False,
        )
    except HybridMemError as e:
        raise fail(e) from None


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_cmd)
