"""``hybridmem eval``: score every mode on a dataset and write the report."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from .. import config
from ..errors import HybridMemError
from .common import fail, out, progress
from .render import print_eval

if TYPE_CHECKING:
    from ..eval.datasets import Dataset
    from ..eval.modes import EvalConfig

__all__ = ["register"]

_MODES_HELP = (
    "Comma-separated modes to evaluate (default bm25,vector,hybrid,rerank,graph; with --answer: hybrid; "
    "--answer also takes facts and facts+turns: facts extracted by the --llm model)."
)
_LLM_HELP = (
    "Chat model for mode rerank (default HYBRIDMEM_LLM; none: offline identifier reranker); "
    "with --answer, the model that answers."
)
_ANSWER_HELP = "LoCoMo: answer every question from what each mode retrieves and judge it (J, F1, BLEU-1)."
_PRICES_HELP = 'With --answer: JSON of {"provider:model": {"input": USD, "output": USD}} per 1M tokens.'
_ADVERSARIAL_HELP = "With --answer: include LoCoMo's adversarial questions (left out by default)."


def eval_cmd(
    dataset: str = typer.Argument(
        ..., help="A BEIR-layout folder (corpus.jsonl, queries.jsonl, qrels/), a LoCoMo JSON file or 'demo'."
    ),
    modes: Optional[str] = typer.Option(None, "--modes", metavar="MODES", help=_MODES_HELP),
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
    llm: Optional[str] = typer.Option(None, "--llm", help=_LLM_HELP),
    answer: bool = typer.Option(False, "--answer", help=_ANSWER_HELP),
    judge: Optional[str] = typer.Option(None, "--judge", metavar="SPEC", help="With --answer: the judge model."),
    prices: Optional[Path] = typer.Option(None, "--prices", metavar="FILE.json", help=_PRICES_HELP),
    adversarial: bool = typer.Option(False, "--adversarial", help=_ADVERSARIAL_HELP),
    concurrency: int = typer.Option(
        4, "--concurrency", min=1, max=64, help="With --answer: questions answered at once."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the results JSON (without per-query scores)."),
) -> None:
    """Score every mode on a dataset: MRR/nDCG/Recall by category, latency, paired tests, charts; with
    --answer (LoCoMo), the answers: LLM-judged J, F1 and BLEU-1 by category, tokens and cost."""
    from ..eval.datasets import load_dataset
    from ..eval.harness import EvalConfig, parse_sweep

    try:
        _check_answer_options(answer, llm, judge, prices, adversarial)
        cfg = EvalConfig(
            modes=_wanted_modes(modes, answer, no_rerank),
            embedder=embedder,
            top_k=top_k,
            cache_dir=cache_dir,
            sweep=parse_sweep(sweep),
            metric=metric,
            limit=limit,
            llm=llm,
        )
        ds = load_dataset(dataset, split)
        if answer:
            assert llm is not None and judge is not None  # _check_answer_options
            _answer_eval(ds, cfg, llm, judge, prices, adversarial, concurrency, out_dir, as_json)
        else:
            _retrieval_eval(ds, cfg, lambda s: load_dataset(dataset, s), out_dir, as_json)
    except HybridMemError as e:
        raise fail(e) from None


def _wanted_modes(modes: str | None, answer: bool, no_rerank: bool) -> list[str]:
    if modes is None:
        modes = "hybrid" if answer else "bm25,vector,hybrid,rerank,graph"
    wanted = [m.strip() for m in modes.split(",") if m.strip()]
    return [m for m in wanted if m != "rerank"] if no_rerank else wanted


def _progress_hook(prog: Any) -> Callable[[str, int | None], Callable[[int], None]]:
    def on_progress(desc: str, total: int | None) -> Callable[[int], None]:
        task = prog.add_task(desc, total=total)
        return lambda n: prog.advance(task, n)

    return on_progress


def _retrieval_eval(
    ds: Dataset, cfg: EvalConfig, load_split: Callable[[str], Dataset], out_dir: Path | None, as_json: bool
) -> None:
    from ..eval.harness import run_eval
    from ..eval.report import write_report

    target = out_dir or Path(".hybridmem") / "eval" / f"{ds.name}-{ds.split}"
    with progress() as prog:
        results = run_eval(ds, cfg, load_split=load_split, progress=_progress_hook(prog))
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


def _check_answer_options(
    answer: bool, llm: str | None, judge: str | None, prices: Path | None, adversarial: bool
) -> None:
    from ..errors import ValidationError

    if answer:
        for name, value, what in (("llm", llm, "the model that answers"), ("judge", judge, "the judge model")):
            spec = (value or "").strip()
            if not spec or spec.lower() == "none":
                raise ValidationError(
                    f"--answer needs --{name} SPEC ({what}, e.g. openai:gpt-4o-mini)", field=f"--{name}"
                )
        return
    for name, given in (("judge", judge), ("prices", prices), ("adversarial", adversarial or None)):
        if given is not None:
            raise ValidationError(f"--{name} only applies with --answer", field=f"--{name}")


def _answer_eval(
    ds: Dataset,
    cfg: EvalConfig,
    llm: str,
    judge: str,
    prices: Path | None,
    adversarial: bool,
    concurrency: int,
    out_dir: Path | None,
    as_json: bool,
) -> None:
    """``--answer``: answer, judge and score (see :mod:`hybridmem.eval.answers`), write the report."""
    from ..eval.answers import AnswerConfig, check_answer_run, run_answer_eval
    from ..eval.prices import load_prices
    from ..eval.report.answers import write_answer_report
    from ..llm.registry import create_chat_model
    from .render import print_answer_eval

    acfg = AnswerConfig(
        answerer=create_chat_model(llm),
        judge=create_chat_model(judge),
        prices=load_prices(prices),
        adversarial=adversarial,
        concurrency=concurrency,
    )
    check_answer_run(ds, cfg, acfg)  # before any index is built
    target = out_dir or Path(".hybridmem") / "eval" / f"{ds.name}-{ds.split}-answers"
    with progress() as prog:
        results = run_answer_eval(ds, cfg, acfg, progress=_progress_hook(prog))
    files = write_answer_report(results, target)
    if as_json:
        slim = {
            **results,
            "modes": {
                m: {k: v for k, v in r.items() if k not in ("per_query", "answers")}
                for m, r in results["modes"].items()
            },
        }
        out.print_json(json.dumps(slim, ensure_ascii=False))
        return
    print_answer_eval(results)
    out.print(f"report: {files['markdown']}  json: {files['json']}", highlight=False)


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_cmd)
