"""Run ``hybridmem eval`` on every shared set and the demo set, and write ``docs/evaluation.md``.

    python -m bench eval_all                          # e5 (default embedder), all sets
    python -m bench eval_all --embedder use --sets scifact,piaf-fr,demo
    python -m bench eval_all --summary-only           # rebuild docs/evaluation.md from saved results

Each set's report (markdown, JSON, charts) goes to ``docs/eval/<embedder>/<set>/``; the summary
section of ``docs/evaluation.md`` is regenerated from every ``results.json`` found there. Indexes
and embeddings are cached in ``.bench-cache`` (shared with ``bench/precompute.py``), so a re-run
only queries.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from hybridmem.eval.datasets import load_dataset  # noqa: E402
from hybridmem.eval.harness import EvalConfig, parse_sweep, run_eval  # noqa: E402
from hybridmem.eval.report import render_summary, write_report, write_summary_chart  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "beir"
SETS = {
    "scifact": "test",
    "piaf-fr": "test",
    "xquad-de": "test",
    "xquad-zh": "test",
    "xquad-en2de": "test",
    "xquad-en2zh": "test",
    "hotpotqa-hipporag-train100": "test",
    "demo": "all",
}
DOCS = ROOT / "docs"
BEGIN, END = "<!-- summary:begin -->", "<!-- summary:end -->"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--embedder", default="e5")
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--modes", default="bm25,vector,hybrid,rerank,graph")
    ap.add_argument("--sweep", action="append", default=[], help="as hybridmem eval --sweep (scifact and demo only)")
    ap.add_argument("--cache-dir", default=str(ROOT / ".bench-cache"))
    ap.add_argument("--summary-only", action="store_true")
    args = ap.parse_args()
    if not args.summary_only:
        for name in args.sets.split(","):
            split = SETS[name]
            spec = name if name == "demo" else str(DATA / name)
            ds = load_dataset(spec, split)
            sweep = parse_sweep(args.sweep) if args.sweep and name in ("scifact", "demo") else {}
            cfg = EvalConfig(
                modes=args.modes.split(","), embedder=args.embedder, cache_dir=Path(args.cache_dir), sweep=sweep
            )
            t = time.time()
            print(f"[{name}] {len(ds.docs)} docs, {len(ds.queries)} queries ...", flush=True)
            res = run_eval(ds, cfg, load_split=lambda s, spec=spec: load_dataset(spec, s))
            out = DOCS / "eval" / args.embedder.replace(":", "_") / name
            # docs keep every aggregate; per-query scores (megabytes on PIAF) stay out of the repository
            write_report(slim(res), out)
            ok = {m: r["metrics"]["all"]["ndcg@10"] for m, r in res["modes"].items() if r.get("status") == "ok"}
            print(
                f"[{name}] {time.time() - t:.0f}s nDCG@10 " + ", ".join(f"{m} {v:.4f}" for m, v in ok.items()),
                flush=True,
            )
    write_summary()


def slim(res: dict) -> dict:
    return {**res, "modes": {m: {k: v for k, v in r.items() if k != "per_query"} for m, r in res["modes"].items()}}


def write_summary() -> None:
    runs_by_emb: dict[str, list[dict]] = {}
    for f in sorted((DOCS / "eval").glob("*/*/results.json")):
        runs_by_emb.setdefault(f.parent.parent.name, []).append(json.loads(f.read_text()))
    order = list(SETS)
    parts = []
    for emb, runs in sorted(runs_by_emb.items(), key=lambda kv: (kv[0] != "e5", kv[0])):
        runs.sort(key=lambda r: order.index(r["dataset"]["name"]) if r["dataset"]["name"] in order else 99)
        chart = DOCS / "eval" / emb / "summary.png"
        write_summary_chart(runs, chart)
        links = " · ".join(f"[{r['dataset']['name']}](eval/{emb}/{r['dataset']['name']}/report.md)" for r in runs)
        parts.append(
            f"### Embedder `{emb}`\n\n"
            + render_summary(runs).replace("## Summary across datasets\n", "")
            + f"\nPer-set reports: {links}\n\n![nDCG@10 per set and mode, {emb}](eval/{emb}/summary.png)\n"
        )
    doc = DOCS / "evaluation.md"
    text = doc.read_text() if doc.exists() else f"# Evaluation\n\n{BEGIN}\n{END}\n"
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    doc.write_text(f"{head}{BEGIN}\n" + "\n".join(parts) + f"{END}{tail}")
    print(f"wrote {doc}")


if __name__ == "__main__":
    main()
