"""Fit the adaptive fusion's model on training splits and report it leave-one-dataset-out against
classic RRF, the best single leg and the published alternatives (issue 20; docs/evaluation.md).

    python -m bench fusion_fit                      # collect legs (from the eval cache), fit, report
    python -m bench fusion_fit --write-model        # also refit the shipped fusion_model.json on every training split

1. **Collect**: each query of every set runs once through the product's hybrid search (the eval
   harness's cached index, e5 vectors; its own conversation for LoCoMo), and what each leg returned
   (BM25, dense, the exact-identifier leg; depth = the search's own fetch_k) is kept, with the
   vector mode's list as the dense baseline. Cached per set in ``--legs-dir``.
2. **Splits**: SciFact's train split; LoCoMo's conversations alternately (by id: even → train); the
   harness's fixed halves of every other set (``eval.sweep.split_for_sweep``: alternate within category by
   sha256 order). Nothing is fitted on a report split.
3. **Settings, on training splits only**: the fusion the weights feed (RRF or DBSF), the L2
   penalty and the feature set are chosen among ``CONFIGS`` by leave-one-dataset-out over the
   training splits (fit on the other sets' training splits, score the held-out set's training
   split).
4. **Leave one dataset out, reported**: for each set, the model with those settings (and every
   fitted alternative: convex combination α, dense weight, per-leg RRF k) is fitted on the *other*
   sets' training splits and scored on this set's report split. The shipped model
   (``--write-model``) is fitted on every training split.
5. **Model**: α = σ(b + Σ θ_i z_i) over the standardized features of each query; the legs fused
   with weights 2(1 − α), 2α; θ maximizes the mean (over sets, each set weighted alike) of the
   per-query nDCG@10, interpolated over an α grid, minus an L2 penalty pulling α toward ½.

Fusion runs through the product's own functions (``rrf``, ``score_fusion``, ``query_features``,
``AdaptiveModel``), so the numbers are the product's; the collected legs reproduce the harness's
hybrid nDCG@10 exactly (checked at collection: the script fails otherwise).
"""

from __future__ import annotations

import argparse
import json
import pickle
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import minimize

ROOT = Path(__file__).resolve().parents[1]

from hybridmem.eval.datasets import Dataset, load_dataset  # noqa: E402
from hybridmem.eval.harness import EvalConfig, open_index  # noqa: E402
from hybridmem.eval.metrics import paired_test, per_query  # noqa: E402
from hybridmem.eval.sweep import split_for_sweep  # noqa: E402
from hybridmem.retrieve import search as search_mod  # noqa: E402
from hybridmem.retrieve.fusion import FEATURES, AdaptiveModel, query_features, rrf, score_fusion  # noqa: E402
from hybridmem.text.tokenize import is_identifier, query_tokens  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
SETS = {
    "scifact": (DATA / "beir" / "scifact", "test"),
    "piaf-fr": (DATA / "beir" / "piaf-fr", "test"),
    "xquad-de": (DATA / "beir" / "xquad-de", "test"),
    "xquad-zh": (DATA / "beir" / "xquad-zh", "test"),
    "hotpotqa-100": (DATA / "beir" / "hotpotqa-hipporag-train100", "test"),
    "demo": ("demo", "all"),
    "locomo": (DATA / "agentmem" / "locomo" / "locomo-shared.json", "test"),
}
ALPHAS = np.linspace(0.0, 1.0, 21)
MODEL_PATH = ROOT / "src" / "hybridmem" / "retrieve" / "fusion_model.json"
OUT = ROOT / "bench" / "results" / "fusion"


# ---------------------------------------------------------------------------------------- collect
def _run(mem: Any, ds: Any, capture: dict[str, Any]) -> dict[str, Any]:
    queries = {}
    for qid, text in ds.queries.items():
        req: dict[str, Any] = {
            "query_id": qid,
            "search_text": text,
            "top_k": 10,
            "mode": "hybrid",
            "hybrid_params": {"time_weight": 0.0, "fusion": "rrf"},  # the harness's plain hybrid
            **ds.scopes.get(qid, {}),
        }
        if qid in ds.filters:
            req["metadata_filter"] = ds.filters[qid]
        capture.clear()
        resp = mem.search(req)
        legs = {k: [(int(r), float(s)) for r, s in v] for k, v in capture.items()}
        capture.clear()
        mem.search({**req, "mode": "vector"})
        legs["vector_mode"] = [(int(r), float(s)) for r, s in capture.get("dense", [])]
        queries[qid] = {"text": text, "legs": legs, "hybrid": list(dict.fromkeys(r.doc_id for r in resp.results))}
    return queries


def collect(name: str, legs_dir: Path, cache_dir: Path) -> dict[str, Any]:
    path = legs_dir / f"{name}.pkl"
    spec, split = SETS[name]
    splits = [split, "train"] if name == "scifact" else [split]
    if path.is_file():
        with path.open("rb") as f:
            data: dict[str, Any] = pickle.load(f)
        return data
    capture: dict[str, Any] = {}
    original = search_mod.Searcher._collect_legs

    def collect_legs(self: Any, *args: Any) -> Any:  # what every leg returned, before fusion
        hits, reports = original(self, *args)
        capture.update(hits)
        return hits, reports

    data = {"name": name, "sets": {}}
    search_mod.Searcher._collect_legs = collect_legs  # type: ignore[method-assign]
    try:
        for sp in splits:
            ds = load_dataset(str(spec), sp)
            mem, _ = open_index(ds, EvalConfig(cache_dir=cache_dir), True)
            with mem:
                t = time.perf_counter()
                queries = _run(mem, ds, capture)
                rows = mem.store.fetch(sorted({r for q in queries.values() for h in q["legs"].values() for r, _ in h}))
            data["sets"][sp] = {
                "queries": queries,
                "doc_of": {r: row.doc_id for r, row in rows.items()},
                "qrels": ds.qrels,
                "categories": ds.categories,
                "tags": ds.tags,
                "scopes": ds.scopes,
            }
            print(f"  {name}/{sp}: {len(queries)} queries collected in {time.perf_counter() - t:.1f} s", flush=True)
    finally:
        search_mod.Searcher._collect_legs = original  # type: ignore[method-assign]
    legs_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("wb") as f:
        pickle.dump(data, f)
    tmp.replace(path)
    return data


# ---------------------------------------------------------------------------------------- queries
class Query:
    __slots__ = ("qid", "legs", "rel", "cat", "x", "doc_of", "hybrid")

    def __init__(self, qid: str, q: dict[str, Any], part: dict[str, Any]) -> None:
        self.qid = qid
        self.legs = q["legs"]
        self.rel = part["qrels"][qid]
        self.cat = part["categories"].get(qid, "")
        self.doc_of = part["doc_of"]
        self.hybrid = q["hybrid"]
        terms = query_tokens(q["text"])
        f = query_features(
            self.legs.get("bm25", []), self.legs.get("dense", []), len(terms), any(map(is_identifier, terms))
        )
        self.x = np.array([f[k] for k in FEATURES])

    def ndcg(self, fused: list[tuple[int, float]]) -> float:
        docs = list(dict.fromkeys(self.doc_of[r] for r, _ in fused))[:10]
        return per_query(docs, self.rel)["ndcg@10"]

    def names(self) -> list[str]:
        return [n for n in ("bm25", "dense", "exact") if n in self.legs]

    def fuse_rrf(
        self, alpha: float = 0.5, k: float = 60.0, k_bm25: float | None = None, k_dense: float | None = None
    ) -> float:
        w = {"bm25": 2 * (1 - alpha), "dense": 2 * alpha, "exact": 1.0}
        names = self.names()
        if k_bm25 is None:
            live = [n for n in names if w[n] > 0]
            return self.ndcg(rrf([[r for r, _ in self.legs[n]] for n in live], k=k, weights=[w[n] for n in live]))
        ks = {"bm25": k_bm25, "dense": k_dense, "exact": k_bm25}
        tot: dict[int, float] = {}
        first: dict[int, tuple[int, int]] = {}
        for li, n in enumerate(names):
            for rank, (r, _) in enumerate(self.legs[n], start=1):
                tot[r] = tot.get(r, 0.0) + w[n] / (ks[n] + rank)
                first.setdefault(r, (rank, li))
        return self.ndcg(sorted(tot.items(), key=lambda kv: (-kv[1], first[kv[0]])))

    def fuse_scores(self, method: str, alpha: float = 0.5) -> float:
        w = {"bm25": 2 * (1 - alpha), "dense": 2 * alpha, "exact": 1.0}
        names = self.names()
        return self.ndcg(score_fusion([self.legs[n] for n in names], method, [w[n] for n in names]))

    def single(self, leg: str) -> float:
        return self.ndcg(self.legs.get("bm25" if leg == "bm25" else "vector_mode", []))


def split_queries(data: dict[str, Any]) -> tuple[list[Query], list[Query], str]:
    """(train, report, how the split was made)."""

    def queries(part: dict[str, Any], qids: list[str] | None = None) -> list[Query]:
        ids = qids if qids is not None else list(part["queries"])
        return [
            Query(q, part["queries"][q], part) for q in ids if any(g > 0 for g in part["qrels"].get(q, {}).values())
        ]

    sets = data["sets"]
    if "train" in sets:
        test = next(s for s in sets if s != "train")
        return queries(sets["train"]), queries(sets[test]), f"train split / {test} split"
    part = next(iter(sets.values()))
    if data["name"] == "locomo":
        convs = sorted({s["user_id"] for s in part["scopes"].values()})
        train_c = set(convs[0::2])
        tr = [q for q in part["queries"] if part["scopes"][q]["user_id"] in train_c]
        rp = [q for q in part["queries"] if part["scopes"][q]["user_id"] not in train_c]
        return (
            queries(part, tr),
            queries(part, rp),
            f"conversations {sorted(train_c)} / the other {len(convs) - len(train_c)}",
        )
    # the halves `hybridmem eval --sweep` tunes and reports on (its own split, not a copy of it)
    ds = Dataset(
        data["name"],
        "",
        "test",
        [],
        {q: part["queries"][q]["text"] for q in part["queries"]},
        part["qrels"],
        part["categories"],
    )
    dev, rest, _, _ = split_for_sweep(ds, lambda _split: ds)
    return queries(part, list(dev.queries)), queries(part, list(rest.queries)), "the harness's dev half / other half"


# ---------------------------------------------------------------------------------------- fitting
def alpha_grid(qs: list[Query], base: str = "rrf") -> np.ndarray:
    if base == "rrf":
        return np.array([[q.fuse_rrf(alpha=a) for a in ALPHAS] for q in qs])
    return np.array([[q.fuse_scores(base, alpha=a) for a in ALPHAS] for q in qs])


def interp(g: np.ndarray, a: np.ndarray) -> np.ndarray:
    pos = np.clip(a, 0.0, 1.0) * (len(ALPHAS) - 1)
    lo = np.floor(pos).astype(int)
    hi = np.minimum(lo + 1, len(ALPHAS) - 1)
    t = pos - lo
    r = np.arange(len(a))
    return np.asarray(g[r, lo] * (1 - t) + g[r, hi] * t)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return np.asarray(1.0 / (1.0 + np.exp(-np.clip(z, -30, 30))))


#: the model's settings chosen among (on training splits only, leave one dataset out): the fusion the
#: weights feed, the L2 penalty, and which features
CONFIGS = [
    {"base": base, "l2": l2, "features": feats}
    for base in ("rrf", "dbsf")
    for l2 in (0.002, 0.02, 0.2)
    for feats in (FEATURES, ("bm25_margin", "dense_margin", "agreement", "query_terms"))
]


def fit_model(
    train: list[tuple[np.ndarray, np.ndarray]],
    l2: float,
    fitted_on: str,
    base: str = "rrf",
    features: tuple[str, ...] = FEATURES,
    starts: int = 4,
) -> AdaptiveModel:
    """train: per set (α grid G, features X with every column of FEATURES). Every set weighs alike."""
    cols = [FEATURES.index(f) for f in features]
    x_all = np.vstack([x for _, x in train])[:, cols]
    mu, sd = x_all.mean(0), x_all.std(0)
    sd[sd <= 1e-9] = 1.0
    zs = [(x[:, cols] - mu) / sd for _, x in train]
    gs = [g for g, _ in train]

    def loss(th: np.ndarray) -> float:
        v = np.mean([interp(g, _sigmoid(th[0] + z @ th[1:])).mean() for g, z in zip(gs, zs)])
        return float(-v + l2 * np.sum(th**2))

    rng = np.random.default_rng(0)
    best = None
    for s in range(starts):
        x0 = np.zeros(len(cols) + 1) if s == 0 else rng.normal(0, 0.5, len(cols) + 1)
        r = minimize(loss, x0, method="Powell", options={"maxiter": 20000, "xtol": 1e-4, "ftol": 1e-8})
        if best is None or r.fun < best.fun:
            best = r
    assert best is not None
    return AdaptiveModel(
        tuple(features),
        tuple(round(float(v), 6) for v in mu),
        tuple(round(float(v), 6) for v in sd),
        tuple(round(float(v), 6) for v in best.x[1:]),
        round(float(best.x[0]), 6),
        fitted_on,
        base,
    )


def alphas_of(model: AdaptiveModel, x: np.ndarray) -> np.ndarray:
    return np.array([model.dense_share(dict(zip(FEATURES, row))) for row in x])


def fit_fixed(train: list[list[Query]], grid: list[Any], score: Callable[[Query, Any], float]) -> Any:
    """The grid value with the best mean (over sets alike) on the training splits."""
    return max(grid, key=lambda v: np.mean([np.mean([score(q, v) for q in qs]) for qs in train]))


# ---------------------------------------------------------------------------------------- report
def evaluate(
    name: str,
    report: list[Query],
    model: AdaptiveModel,
    fixed: dict[str, Any],
    g_report: np.ndarray,
) -> dict[str, Any]:
    alphas = alphas_of(model, np.vstack([q.x for q in report]))

    def fused(q: Query, a: float) -> float:
        return q.fuse_rrf(alpha=a) if model.base == "rrf" else q.fuse_scores(model.base, alpha=a)

    per: dict[str, list[float]] = {
        "bm25": [q.single("bm25") for q in report],
        "dense": [q.single("dense") for q in report],
        "rrf": [q.fuse_rrf() for q in report],
        "adaptive": [fused(q, a) for q, a in zip(report, alphas)],
        "dbsf": [q.fuse_scores("dbsf") for q in report],
        "combsum": [q.fuse_scores("combsum") for q in report],
        "combmnz": [q.fuse_scores("combmnz") for q in report],
        "convex": [q.fuse_scores("combsum", alpha=fixed["convex"]) for q in report],
        "rrf_dense_weight": [q.fuse_rrf(alpha=fixed["rrf_alpha"]) for q in report],
        "rrf_per_leg_k": [q.fuse_rrf(k_bm25=fixed["k"][0], k_dense=fixed["k"][1]) for q in report],
    }
    best_single = max(("bm25", "dense"), key=lambda m: float(np.mean(per[m])))
    cats = sorted({q.cat for q in report if q.cat})
    out: dict[str, Any] = {
        "queries": len(report),
        "ndcg@10": {m: round(float(np.mean(v)), 4) for m, v in per.items()},
        "oracle_alpha": round(float(g_report.max(1).mean()), 4),
        "best_single": best_single,
        "alpha": {
            "mean": round(float(alphas.mean()), 3),
            "p10": round(float(np.percentile(alphas, 10)), 3),
            "p50": round(float(np.percentile(alphas, 50)), 3),
            "p90": round(float(np.percentile(alphas, 90)), 3),
        },
        "alphas": [round(float(a), 4) for a in alphas],
        "fixed": fixed,
        "by_category": {
            c: {m: round(float(np.mean([s for s, q in zip(v, report) if q.cat == c])), 4) for m, v in per.items()}
            | {"queries": sum(q.cat == c for q in report)}
            for c in cats
        },
        "p": {},
    }
    for other in ("rrf", best_single, "dbsf", "convex"):
        t = paired_test(per["adaptive"], per[other])
        out["p"][f"adaptive-vs-{other}"] = {
            "diff": round(t["mean_diff"], 4),
            "p": round(t["p_randomization"], 4),
        }
    for c in cats:
        idx = [i for i, q in enumerate(report) if q.cat == c]
        for other in ("rrf", best_single):
            t = paired_test([per["adaptive"][i] for i in idx], [per[other][i] for i in idx])
            out["p"][f"{c}: adaptive-vs-{other}"] = {
                "diff": round(t["mean_diff"], 4),
                "p": round(t["p_randomization"], 4),
            }
    out["per_query"] = {m: [round(s, 4) for s in v] for m, v in per.items()}
    return out


def fixed_alternatives(train: list[list[Query]]) -> dict[str, Any]:
    return {
        "convex": fit_fixed(
            train, [round(a, 2) for a in np.linspace(0.1, 0.9, 9)], lambda q, a: q.fuse_scores("combsum", a)
        ),
        "rrf_alpha": fit_fixed(train, [round(float(a), 2) for a in ALPHAS], lambda q, a: q.fuse_rrf(alpha=a)),
        "k": fit_fixed(
            train,
            [(kb, kd) for kb in (10, 30, 60, 120) for kd in (10, 30, 60, 120)],
            lambda q, k: q.fuse_rrf(k_bm25=k[0], k_dense=k[1]),
        ),
    }


COLUMNS = (
    "bm25",
    "dense",
    "rrf",
    "adaptive",
    "dbsf",
    "combsum",
    "combmnz",
    "convex",
    "rrf_dense_weight",
    "rrf_per_leg_k",
)


def render_markdown(summary: dict[str, Any]) -> str:
    """The report's tables (docs/evaluation.md quotes them)."""
    sets = summary["sets"]
    lines = [
        f"Chosen on training splits: adaptive weights feed `{summary['chosen']['base']}`, L2 {summary['chosen']['l2']}, "
        f"features {', '.join(summary['chosen']['features'])}.",
        "",
        "| set (report split) | queries | " + " | ".join(f"`{c}`" for c in COLUMNS) + " | α p10 / p50 / p90 "
        "| adaptive − rrf (p) | adaptive − best leg (p) |",
        "| --- | ---: | " + " | ".join("---:" for _ in COLUMNS) + " | --- | ---: | ---: |",
    ]
    for n, r in sets.items():
        best = max(r["ndcg@10"][c] for c in COLUMNS)
        cells = [f"**{r['ndcg@10'][c]:.3f}**" if r["ndcg@10"][c] == best else f"{r['ndcg@10'][c]:.3f}" for c in COLUMNS]
        pr, pb = r["p"]["adaptive-vs-rrf"], r["p"][f"adaptive-vs-{r['best_single']}"]
        a = r["alpha"]
        lines.append(
            f"| {n} ({r['split'].split(' / ')[-1] if n != 'scifact' else 'test'}) | {r['queries']:,} | "
            + " | ".join(cells)
            + f" | {a['p10']:.2f} / {a['p50']:.2f} / {a['p90']:.2f} | {pr['diff']:+.4f} ({pr['p']:.3f}) | "
            f"{pb['diff']:+.4f} vs `{r['best_single']}` ({pb['p']:.3f}) |"
        )
    m = summary["macro"]
    lines.append("| **mean over sets** | | " + " | ".join(f"{m[c]:.3f}" for c in COLUMNS) + " | | | |")
    lines += ["", "Per category (report splits; sets with categories):", ""]
    lines.append("| set | category | queries | `bm25` | `dense` | `rrf` | `adaptive` | `dbsf` | adaptive − rrf (p) |")
    lines.append("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for n, r in sets.items():
        for c, v in r["by_category"].items():
            p = r["p"].get(f"{c}: adaptive-vs-rrf", {})
            lines.append(
                f"| {n} | {c} | {v['queries']} | {v['bm25']:.3f} | {v['dense']:.3f} | {v['rrf']:.3f} | "
                f"{v['adaptive']:.3f} | {v['dbsf']:.3f} | {p.get('diff', 0):+.4f} ({p.get('p', 1):.3f}) |"
            )
    return "\n".join(lines) + "\n"


def plot(results: dict[str, Any], path: Path, base: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results)
    fig, ax = plt.subplots(figsize=(9, 4.2))
    ax.violinplot([results[n]["alphas"] for n in names], showmedians=True)
    ax.axhline(0.5, color="grey", lw=0.8, ls="--")
    ax.set_xticks(range(1, len(names) + 1), names, rotation=20)
    ax.set_ylabel("dense share α of the legs' weight")
    ax.set_ylim(0, 1)
    ax.set_title(
        f"Adaptive fusion: per-query α (leave-one-dataset-out models; weights feed {base}; 0.5 = equal weights)"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument(
        "--cache-dir", type=Path, default=ROOT / ".hybridmem" / "eval-cache", help="the eval harness's cache"
    )
    ap.add_argument("--legs-dir", type=Path, default=ROOT / ".hybridmem" / "fusion-legs")
    ap.add_argument("--write-model", action="store_true", help="refit the shipped model on every training split")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument(
        "--base",
        choices=("any", "rrf", "dbsf"),
        default="any",
        help="the fusion the adaptive weights may feed (any: chosen on the training splits)",
    )
    args = ap.parse_args()
    names = [s.strip() for s in args.sets.split(",") if s.strip()]
    splits: dict[str, tuple[list[Query], list[Query], str]] = {}
    for n in names:
        print(f"{n}: legs", flush=True)
        splits[n] = split_queries(collect(n, args.legs_dir, args.cache_dir))
    for n, (tr, rp, _) in splits.items():  # the collected legs fused here = the product's own hybrid ranking
        off = [q.qid for q in tr + rp if abs(q.fuse_rrf() - per_query(q.hybrid[:10], q.rel)["ndcg@10"]) > 1e-9]
        if off:
            raise SystemExit(
                f"{n}: {len(off)} queries fuse differently from the product's hybrid search, e.g. {off[:3]}"
            )
    grids = {
        base: {n: (alpha_grid(tr, base), alpha_grid(rp, base)) for n, (tr, rp, _) in splits.items()}
        for base in ("rrf", "dbsf")
    }
    xs = {n: np.vstack([q.x for q in tr]) for n, (tr, _, _) in splits.items()}

    def train_of(base: str, sets: list[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        return [(grids[base][n][0], xs[n]) for n in sets]

    # 1. the model's settings, chosen leave one dataset out on the training splits only
    selection = []
    for cfg in CONFIGS:
        if args.base != "any" and cfg["base"] != args.base:
            continue
        inner = {}
        for held in names:
            others = [n for n in names if n != held]
            m = fit_model(train_of(cfg["base"], others), cfg["l2"], "", cfg["base"], cfg["features"], starts=2)
            inner[held] = float(interp(grids[cfg["base"]][held][0], alphas_of(m, xs[held])).mean())
        row = {**cfg, "features": list(cfg["features"]), "train_lodo": {k: round(v, 4) for k, v in inner.items()}}
        row["macro"] = round(float(np.mean(list(inner.values()))), 4)
        selection.append(row)
        print(f"  config {cfg['base']} l2={cfg['l2']} {len(cfg['features'])} features: train LODO macro {row['macro']}")
    chosen = max(selection, key=lambda r: r["macro"])
    base, l2, feats = chosen["base"], chosen["l2"], tuple(chosen["features"])
    print(f"chosen on training splits: base {base}, l2 {l2}, features {feats}", flush=True)

    # 2. leave one dataset out, reported on each set's report split
    results: dict[str, Any] = {}
    for held in names:
        others = [n for n in names if n != held]
        model = fit_model(train_of(base, others), l2, "training splits of " + ", ".join(others), base, feats)
        fixed = fixed_alternatives([splits[n][0] for n in others])
        results[held] = evaluate(held, splits[held][1], model, fixed, grids[base][held][1])
        results[held]["split"] = splits[held][2]
        results[held]["model"] = model.to_json()
        r = results[held]
        print(
            f"{held:14s} n={r['queries']:5d} "
            + " ".join(f"{m} {v:.4f}" for m, v in r["ndcg@10"].items())
            + f" | α p50 {r['alpha']['p50']}  p(adaptive-rrf) {r['p']['adaptive-vs-rrf']['p']}",
            flush=True,
        )
    macro = {
        m: round(float(np.mean([results[n]["ndcg@10"][m] for n in names])), 4) for m in results[names[0]]["ndcg@10"]
    }
    print("macro mean over sets:", macro)
    args.out.mkdir(parents=True, exist_ok=True)
    shipped = None
    if args.write_model:
        shipped = fit_model(train_of(base, names), l2, "training splits of " + ", ".join(names), base, feats)
        MODEL_PATH.write_text(json.dumps(shipped.to_json(), indent=2) + "\n")
        print(f"wrote {MODEL_PATH.relative_to(ROOT)}")
        # what `hybridmem eval SET --modes hybrid,hybrid+adaptive` must print for the shipped model
        # (every query of the published split; in-sample for the training halves)
        for n, (tr, rp, _) in splits.items():
            qs = rp if n == "scifact" else tr + rp
            a = alphas_of(shipped, np.vstack([q.x for q in qs]))
            v = [q.fuse_rrf(alpha=x) if base == "rrf" else q.fuse_scores(base, alpha=x) for q, x in zip(qs, a)]
            print(
                f"  shipped model on every query of {n}: nDCG@10 {np.mean(v):.4f} (rrf {np.mean([q.fuse_rrf() for q in qs]):.4f})"
            )
    summary = {
        "command": "python -m bench fusion_fit"
        + (f" --base {args.base}" if args.base != "any" else "")
        + (" --write-model" if args.write_model else ""),
        "selection": selection,
        "chosen": {"base": base, "l2": l2, "features": list(feats)},
        "macro": macro,
        "sets": {n: {k: v for k, v in r.items() if k not in ("per_query", "alphas")} for n, r in results.items()},
        "shipped_model": shipped.to_json() if shipped else None,
    }
    (args.out / "fusion.json").write_text(json.dumps(summary, indent=1) + "\n")
    (args.out / "report.md").write_text(render_markdown(summary))
    plot(results, args.out / "alpha.png", base)
    print(f"wrote {args.out}/fusion.json, report.md, alpha.png")


if __name__ == "__main__":
    main()
