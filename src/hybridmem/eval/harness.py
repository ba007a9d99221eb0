"""The evaluation harness: build (or reuse) a dataset's index, run every mode, score, compare, sweep.

Every mode answers through ``Memory.search`` exactly as an agent's query would (same contract, same
fusion); nothing is re-implemented here. Each query is asked twice per mode: once with the user's
``top_k`` (MRR@10, nDCG@10, Recall@1/5/10 and the latency) and once with ``depth`` results for
Recall@100 and the recall curve. Results are chunks; they are judged at document level (first
occurrence of a document counts).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import numpy as np

from .. import __version__, config
from ..embed import create_embedder, embedder_name
from ..embed.cache import CachedEmbedder
from ..errors import ValidationError
from ..ingest import TOKENIZER_VERSION
from ..memory import Memory
from ..models import MODES
from .datasets import Dataset
from .metrics import METRICS, means_by_category, paired_test, per_query, recall_curve
from .references import references_for, targets_for

__all__ = ["ALL_MODES", "EvalConfig", "open_index", "parse_sweep", "run_eval"]

#: every mode the harness can run (the query modes of :data:`hybridmem.models.MODES`), and the default
#: plus the agent-memory variants of hybrid: in the harness ``hybrid`` is plain (no time leg, no
#: feedback leg, no centering, no substance leg); ``hybrid+time+feedback+centering+substance`` is
#: the product's default (on conversation turns: the time legs when a question names a time or asks
#: when, the feedback leg, the dense leg centered, the substance leg);
#: ``hybrid+time+feedback+centering`` the default before the substance leg, ``hybrid+substance``
#: plain hybrid with it; ``hybrid+time+feedback`` the default before the centering,
#: ``hybrid+time`` the one before the feedback leg; ``hybrid+centering`` plain hybrid with it; ``hybrid+context`` adds each hit's neighbouring turns after it (conversational sets);
#: ``hybrid+adaptive`` is plain hybrid with the adaptive fusion's per-query leg weights and
#: ``hybrid+time+adaptive`` hybrid+time with them; ``hybrid+feedback`` is plain hybrid with the
#: feedback leg (every other mode runs classic RRF, whatever HYBRIDMEM_FUSION says)
_OFF = {"time_weight": 0.0, "feedback_weight": 0.0, "dense_centering": 0.0, "substance_weight": 0.0, "fusion": "rrf"}
AGENT_MODES: dict[str, tuple[dict[str, Any], dict[str, Any] | None]] = {
    "hybrid+time": ({**_OFF, "time_weight": 1.0}, None),
    "hybrid+context": ({**_OFF, "time_weight": 1.0}, {"before": 1, "after": 1}),
    "hybrid+adaptive": ({**_OFF, "fusion": "adaptive"}, None),
    "hybrid+time+adaptive": ({**_OFF, "time_weight": 1.0, "fusion": "adaptive"}, None),
    "hybrid+feedback": ({**_OFF, "feedback_weight": 1.0}, None),
    "hybrid+time+feedback": ({**_OFF, "time_weight": 1.0, "feedback_weight": 1.0}, None),
    "hybrid+centering": ({**_OFF, "dense_centering": 0.75}, None),
    "hybrid+time+feedback+centering": (
        {**_OFF, "time_weight": 1.0, "feedback_weight": 1.0, "dense_centering": 0.75},
        None,
    ),
    "hybrid+substance": ({**_OFF, "substance_weight": 1.0}, None),
    # the product's default for conversation turns
    "hybrid+time+feedback+centering+substance": (
        {**_OFF, "time_weight": 1.0, "feedback_weight": 1.0, "dense_centering": 0.75, "substance_weight": 1.0},
        None,
    ),
}
ALL_MODES: tuple[str, ...] = (*MODES, *AGENT_MODES)
#: the single-leg modes hybrid is compared with
SINGLE_LEGS = ("bm25", "vector")
#: hybrid with the graph leg fused in, evaluated alongside ``graph`` (the weight that did best on
#: HotpotQA in docs/graphrag.md; the default weight is 0)
HYBRID_GRAPH = ("hybrid+graph", {"graph_weight": 0.5})
CURVE_KS = (1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 70, 100)
#: bump when the index a dataset builds would differ for the same corpus and embedder
INDEX_FORMAT = 1
SWEEP_KEYS = {
    "dense_weight": "dense_weight",
    "sparse_weight": "sparse_weight",
    "exact_weight": "exact_weight",
    "feedback_weight": "feedback_weight",
    "time_weight": "time_weight",
    "dense_centering": "dense_centering",
    "substance_weight": "substance_weight",
    "rrf_k": "rrf_k_constant",
    "rrf_k_constant": "rrf_k_constant",
}
CLASSIC = {
    "dense_weight": 1.0,
    "sparse_weight": 1.0,
    "exact_weight": 1.0,
    "feedback_weight": 0.0,  # the sweep runs plain hybrid: no feedback leg unless swept
    "time_weight": 0.0,  # nor time legs
    "dense_centering": 0.0,  # nor centering
    "substance_weight": 0.0,  # nor the substance leg
    "rrf_k_constant": float(config.DEFAULT_RRF_K),
}

Progress = Callable[[str, int | None], Callable[[int], None]]


@dataclass
class EvalConfig:
    modes: Sequence[str] = MODES
    embedder: str = config.DEFAULT_EMBEDDER
    top_k: int = 10
    depth: int = 100
    cache_dir: Path = Path(".hybridmem") / "eval-cache"
    sweep: dict[str, list[float]] = field(default_factory=dict)
    metric: str = "ndcg@10"
    limit: int | None = None  # evaluate only the first N queries (quick looks; never for published numbers)
    #: chat model for mode ``rerank`` (a spec); None = HYBRIDMEM_LLM, and without one the offline
    #: identifier reranker runs (the report says which)
    llm: str | None = None
    seed: int = 0


def parse_sweep(specs: Sequence[str]) -> dict[str, list[float]]:
    """``["dense_weight=0.25,0.5,1,2", "rrf_k=10,30,60,100"]`` → ``{"dense_weight": [...], "rrf_k_constant": [...]}``."""
    grid: dict[str, list[float]] = {}
    for spec in specs:
        key, sep, values = spec.partition("=")
        key = key.strip()
        if not sep or key not in SWEEP_KEYS:
            raise ValidationError(
                f"--sweep {spec!r}: expected NAME=v1,v2,… with NAME one of {', '.join(sorted(SWEEP_KEYS))}",
                field="sweep",
            )
        try:
            vals = [float(v) for v in values.split(",") if v.strip()]
        except ValueError:
            raise ValidationError(f"--sweep {spec!r}: values must be numbers", field="sweep") from None
        if not vals or any(v < 0 or not np.isfinite(v) for v in vals):
            raise ValidationError(f"--sweep {spec!r}: give at least one finite value ≥ 0", field="sweep")
        grid[SWEEP_KEYS[key]] = vals
    return grid


# ---------------------------------------------------------------------------------------- index
def index_key(ds: Dataset, embedder: str) -> str:
    blob = json.dumps(
        {
            "corpus": ds.fingerprint,
            "embedder": embedder,
            "chunk_size": ds.chunk_size,
            "overlap": config.DEFAULT_CHUNK_OVERLAP,
            "format": INDEX_FORMAT,
            "tokenizer": TOKENIZER_VERSION,
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def open_index(
    ds: Dataset, cfg: EvalConfig, need_vectors: bool, progress: Progress | None = None
) -> tuple[Memory, dict[str, Any]]:
    """The dataset's memory, from the cache when corpus, chunking and embedder are unchanged."""
    cache = Path(cfg.cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    name = embedder_name(cfg.embedder)
    key = index_key(ds, name)
    final = cache / f"{ds.name}-{key}"
    manifest_path = final / "manifest.json"
    info: dict[str, Any] = {"key": key, "path": str(final), "cached": manifest_path.is_file()}
    embedder = CachedEmbedder(create_embedder(cfg.embedder), cache / "embeddings.db")
    t0 = time.perf_counter()
    if not manifest_path.is_file():
        # built aside and renamed into place: an interrupted build never looks like a cached index
        tmp = cache / f".{ds.name}-{key}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        with Memory(tmp / "memory.db", embedder=embedder, chunk_size=ds.chunk_size, auto_embed=False) as mem:
            tick = progress(f"indexing {ds.name}", len(ds.docs)) if progress else None
            mem.add_documents(ds.docs, batch_size=512, progress=tick)
        (tmp / "manifest.json").write_text(
            json.dumps(
                {
                    "dataset": ds.name,
                    "fingerprint": ds.fingerprint,
                    "embedder": name,
                    "docs": len(ds.docs),
                    "chunk_size": ds.chunk_size,
                    "format": INDEX_FORMAT,
                    "built": _now(),
                    "index_s": round(time.perf_counter() - t0, 2),
                },
                indent=2,
            )
        )
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
    info["index_s"] = round(time.perf_counter() - t0, 2)
    mem = Memory(final / "memory.db", embedder=embedder, chunk_size=ds.chunk_size, auto_embed=False, llm=cfg.llm)
    pending = mem.store.pending_count()
    t1 = time.perf_counter()
    if need_vectors and pending:
        tick = progress(f"embedding {ds.name} ({name})", pending) if progress else None
        mem.wait_for_vectors(progress=tick)
    info["embed_s"] = round(time.perf_counter() - t1, 2)
    info["embedded_now"] = pending if need_vectors else 0
    info["cached_vectors"] = embedder.hits
    s = mem.stats()
    info.update(chunks=s.chunks, vectors=s.vectors)
    return mem, info


# ---------------------------------------------------------------------------------------- running
def _doc_ranking(resp: Any) -> list[str]:
    """Document ids in rank order; a hit's context turns (``context_window``) follow it."""
    ids: list[str] = []
    for r in resp.results:
        ids.append(r.doc_id)
        ids += [c["doc_id"] for c in r.context or [] if c["doc_id"] != r.doc_id]
    return list(dict.fromkeys(ids))


def _run_mode(
    mem: Memory,
    ds: Dataset,
    mode: str,
    cfg: EvalConfig,
    params: dict[str, Any] | None = None,
    tick: Callable[[int], None] | None = None,
    depth: bool = True,
) -> dict[str, Any]:
    scores: dict[str, dict[str, float]] = {}
    curves: list[list[float]] = []
    lat: list[float] = []
    leg_trouble: dict[str, int] = {}
    rerankers: dict[str, int] = {}  # reranker -> queries it actually reordered
    rerank_notes: dict[str, int] = {}
    # every mode names its fusion: a HYBRIDMEM_FUSION in the environment does not change what is measured
    plain = _OFF if mode == "hybrid" else {"fusion": "rrf"}
    agent, window = AGENT_MODES.get(mode, (plain, None))
    for qid, text in ds.queries.items():
        req: dict[str, Any] = {
            "query_id": qid,
            "search_text": text,
            "top_k": cfg.top_k,
            "mode": "hybrid" if mode in AGENT_MODES else mode,
            **ds.scopes.get(qid, {}),
        }
        if qid in ds.filters:
            req["metadata_filter"] = ds.filters[qid]
        if params or agent:
            req["hybrid_params"] = {**agent, **(params or {})}
        if window:
            req["context_window"] = window
        t = time.perf_counter()
        resp = mem.search(req)
        lat.append((time.perf_counter() - t) * 1000)
        if resp.reranker:
            rerankers[resp.reranker] = rerankers.get(resp.reranker, 0) + (1 if resp.reranked else 0)
        if resp.rerank_note:
            rerank_notes[resp.rerank_note] = rerank_notes.get(resp.rerank_note, 0) + 1
        for leg, rep in resp.legs.items():
            if rep.status in ("error", "timeout"):
                leg_trouble[f"{leg} {rep.status}"] = leg_trouble.get(f"{leg} {rep.status}", 0) + 1
        ranked = _doc_ranking(resp)
        if depth:
            deep = _doc_ranking(mem.search({**req, "top_k": max(cfg.depth, cfg.top_k)}))
            curves.append(recall_curve(deep, ds.qrels[qid], CURVE_KS))
        else:
            deep = ranked
        s = per_query(ranked, ds.qrels[qid])
        s["recall@100"] = per_query(deep, ds.qrels[qid])["recall@100"]
        scores[qid] = s
        if tick:
            tick(1)
    out: dict[str, Any] = {
        "status": "ok",
        "queries": len(scores),
        "per_query": scores,
        "metrics": means_by_category(scores, ds.categories),
    }
    for tag in sorted({t for ts in ds.tags.values() for t in ts}):  # scored apart, e.g. time-constrained
        tagged = {q: s for q, s in scores.items() if tag in ds.tags.get(q, ())}
        if tagged:
            out["metrics"][tag] = means_by_category(tagged)["all"]
    if curves:
        out["recall_curve"] = {"k": list(CURVE_KS), "recall": [float(x) for x in np.mean(curves, axis=0)]}
    a = np.asarray(lat)
    out["latency_ms"] = {
        "p50": round(float(np.percentile(a, 50)), 3),
        "p95": round(float(np.percentile(a, 95)), 3),
        "mean": round(float(a.mean()), 3),
    }
    if leg_trouble:
        out["leg_failures"] = leg_trouble
    if rerankers or rerank_notes:
        out["rerankers"] = rerankers
        out["rerank_notes"] = rerank_notes
    return out


def _warm_query_vectors(mem: Memory, ds: Dataset, progress: Progress | None) -> dict[str, float] | None:
    """Embed every query once before any mode is timed, so no mode pays the model and the others
    not; the model's own cost (cache misses only) is reported apart."""
    emb: Any = mem.embedder  # counts its cache misses when it is a CachedEmbedder
    tick = progress("embedding queries", len(ds.queries)) if progress else None
    model_ms = []
    for text in ds.queries.values():
        before = getattr(emb, "misses", None)
        t = time.perf_counter()
        emb.embed_query(text)
        ms = (time.perf_counter() - t) * 1000
        if before is None or emb.misses > before:
            model_ms.append(ms)
        if tick:
            tick(1)
    if not model_ms:
        return None
    a = np.asarray(model_ms)
    return {
        "p50": round(float(np.percentile(a, 50)), 2),
        "p95": round(float(np.percentile(a, 95)), 2),
        "queries": len(model_ms),
    }


def _graph_line(rep: Any) -> str:
    keys = ("entities", "relations", "communities", "chunks_extracted")
    data = rep.model_dump() if hasattr(rep, "model_dump") else {}
    return ", ".join(f"{k.replace('_', ' ')} {data[k]}" for k in keys if k in data) or type(rep).__name__


def _compare(modes: dict[str, dict[str, Any]], metric: str, seed: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    singles = [m for m in SINGLE_LEGS if modes.get(m, {}).get("status") == "ok"]
    if modes.get("hybrid", {}).get("status") != "ok" or not singles:
        return out
    best = max(singles, key=lambda m: modes[m]["metrics"]["all"][metric])
    qids = list(modes["hybrid"]["per_query"])
    for m in singles:
        for met in dict.fromkeys((metric, "mrr@10")):
            a = [modes["hybrid"]["per_query"][q][met] for q in qids]
            b = [modes[m]["per_query"][q][met] for q in qids]
            res = paired_test(a, b, seed=seed)
            label = f"hybrid vs best single leg ({m})" if m == best else f"hybrid vs {m}"
            out.append({"a": "hybrid", "b": m, "metric": met, "label": label, "best_single_leg": m == best, **res})
    # (mode, the mode it is compared with, label): the adaptive fusion against the best leg, then
    # each variant of hybrid against plain hybrid
    for other, base, label in (
        ("hybrid+adaptive", best, f"adaptive fusion vs best single leg ({best})"),
        ("rerank", "hybrid", "rerank vs hybrid (fused order)"),
        (HYBRID_GRAPH[0], "hybrid", "hybrid + graph leg vs hybrid"),
        ("hybrid+time", "hybrid", "hybrid + time leg vs hybrid"),
        ("hybrid+context", "hybrid", "hybrid + context window vs hybrid"),
        ("hybrid+adaptive", "hybrid", "adaptive fusion vs classic RRF"),
        ("hybrid+time+adaptive", "hybrid+time", "adaptive fusion vs classic RRF, both with the time leg"),
        ("hybrid+feedback", "hybrid", "hybrid + feedback leg vs hybrid"),
        ("hybrid+time+feedback", "hybrid+time", "feedback leg, both with the time leg"),
        ("hybrid+centering", "hybrid", "hybrid + dense centering vs hybrid"),
        ("hybrid+time+feedback+centering", "hybrid+time+feedback", "dense centering, both with time + feedback"),
        ("hybrid+substance", "hybrid", "hybrid + substance leg vs hybrid"),
        (
            "hybrid+time+feedback+centering+substance",
            "hybrid+time+feedback+centering",
            "substance leg, both with time + feedback + centering",
        ),
    ):
        if modes.get(other, {}).get("status") != "ok" or modes.get(base, {}).get("status") != "ok":
            continue
        for met in dict.fromkeys((metric, "mrr@10")):
            a = [modes[other]["per_query"][q][met] for q in qids]
            b = [modes[base]["per_query"][q][met] for q in qids]
            out.append(
                {
                    "a": other,
                    "b": base,
                    "metric": met,
                    "label": label,
                    "best_single_leg": False,
                    **paired_test(a, b, seed=seed),
                }
            )
    return out


def _targets(ds: Dataset, cfg: EvalConfig, modes: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    ok = {m: r for m, r in modes.items() if r.get("status") == "ok"}
    for t in targets_for(ds.name, ds.split, embedder_name(cfg.embedder)):
        if t["mode"] not in ok:
            continue
        measured = ok[t["mode"]]["metrics"]["all"][t["metric"]]
        row = {
            **t,
            "measured": round(measured, 4),
            "met": measured >= t["target"] - 1e-9,
            "gap": round(measured - t["target"], 4),
        }
        if not row["met"]:
            row["why"] = _why(ok, t["metric"])
        out.append(row)
    if "hybrid" in ok and any(m in ok for m in SINGLE_LEGS):
        best = max((m for m in SINGLE_LEGS if m in ok), key=lambda m: ok[m]["metrics"]["all"][cfg.metric])
        h, b = ok["hybrid"]["metrics"]["all"][cfg.metric], ok[best]["metrics"]["all"][cfg.metric]
        row = {
            "mode": "hybrid",
            "metric": cfg.metric,
            "target": round(b, 4),
            "measured": round(h, 4),
            "met": h >= b - 1e-9,
            "gap": round(h - b, 4),
            "label": f"hybrid ≥ best single leg ({best})",
        }
        if not row["met"]:
            row["why"] = _why(ok, cfg.metric)
        out.append(row)
    return out


def _why(ok: dict[str, dict[str, Any]], metric: str) -> str:
    legs = {m: ok[m]["metrics"]["all"][metric] for m in SINGLE_LEGS if m in ok}
    if len(legs) == 2:
        weak, strong = sorted(legs, key=cast("Callable[[str], float]", legs.get))  # every key is in legs
        gap = legs[strong] - legs[weak]
        if gap > 0.05:
            return (
                f"the {weak} leg ({legs[weak]:.3f}) is {gap:.3f} below {strong} ({legs[strong]:.3f}): "
                f"a weak leg drags equal-weight RRF down"
            )
        return f"both legs are close ({', '.join(f'{m} {v:.3f}' for m, v in legs.items())}): fusion has little to add"
    return "run the bm25 and vector modes too to see which leg holds hybrid back"


# ---------------------------------------------------------------------------------------- sweep
def _split_for_sweep(ds: Dataset, load: Callable[[str], Dataset]) -> tuple[Dataset, Dataset, str, str]:
    """Tune on the train split when the dataset has one, else on a fixed half of the queries."""
    if "train" in ds.splits and ds.split != "train":
        return load("train"), ds, "train", ds.split
    qids = sorted(ds.queries, key=lambda q: hashlib.sha256(q.encode()).hexdigest())
    # keep categories represented on both sides: alternate within each category
    by_cat: dict[str, list[str]] = {}
    for q in qids:
        by_cat.setdefault(ds.categories.get(q, ""), []).append(q)
    dev = [q for group in by_cat.values() for q in group[0::2]]
    rest = [q for group in by_cat.values() for q in group[1::2]]
    return ds.subset(dev, f"{ds.split}:dev-half"), ds.subset(rest, f"{ds.split}:other-half"), "dev half", "other half"


def _sweep(
    mem: Memory, ds: Dataset, cfg: EvalConfig, load: Callable[[str], Dataset], progress: Progress | None
) -> dict[str, Any]:
    tune, report, tune_name, report_name = _split_for_sweep(ds, load)
    if cfg.limit:
        tune = tune.subset(list(tune.queries)[: cfg.limit], tune.split)
    keys = list(cfg.sweep)
    combos = [dict(zip(keys, vals)) for vals in itertools.product(*(cfg.sweep[k] for k in keys))]
    settings = [{**CLASSIC, **c} for c in combos]
    if CLASSIC not in settings:
        settings.insert(0, dict(CLASSIC))
    total = len(settings) * (len(tune.queries) + len(report.queries))
    tick = progress("sweep", total) if progress else None

    def score(d: Dataset, params: dict[str, Any]) -> dict[str, float]:
        r = _run_mode(mem, d, "hybrid", cfg, params=params, tick=tick, depth=False)
        return {cat: round(v[cfg.metric], 4) for cat, v in r["metrics"].items()}

    grid: list[dict[str, Any]] = []
    for p in settings:
        grid.append(
            {
                "params": {k: p[k] for k in keys},
                "full_params": p,
                "classic": p == CLASSIC,
                "tune": score(tune, p),
                "report": score(report, p),
            }
        )
    base = next(g for g in grid if g["classic"])
    winners = [g for g in grid if not g["classic"] and all(g["tune"][c] > base["tune"][c] for c in base["tune"])]
    rec = max(winners, key=lambda g: g["tune"]["all"]) if winners else None
    if rec is None:
        verdict = (
            f"classic RRF stays (k={config.DEFAULT_RRF_K}, weights 1): no setting beats it on {cfg.metric} "
            f"in every category and overall on the {tune_name} split"
        )
    else:
        holds = all(rec["report"][c] >= base["report"][c] for c in base["report"])
        verdict = (
            f"recommended {rec['params']}: beats classic RRF in every category on the {tune_name} split "
            f"({rec['tune']['all']:.4f} vs {base['tune']['all']:.4f}); on the {report_name} split "
            f"{rec['report']['all']:.4f} vs {base['report']['all']:.4f}"
            + ("" if holds else " — the gain does not hold in every category there: treat it as noise")
        )
    return {
        "metric": cfg.metric,
        "tune_split": tune_name,
        "report_split": report_name,
        "params": keys,
        "tune_queries": len(tune.queries),
        "report_queries": len(report.queries),
        "grid": grid,
        "baseline": base,
        "recommended": rec,
        "verdict": verdict,
    }


# ---------------------------------------------------------------------------------------- entry
def run_eval(
    ds: Dataset,
    cfg: EvalConfig,
    *,
    load_split: Callable[[str], Dataset] | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Evaluate ``cfg.modes`` on ``ds``; returns the results dict the report writes."""
    _check_config(cfg)
    started, t0 = _now(), time.perf_counter()
    if cfg.limit:
        ds = ds.subset(list(ds.queries)[: cfg.limit], ds.split)
    need_vectors = any(m in ("vector", "hybrid", "rerank", *AGENT_MODES) for m in cfg.modes) or bool(cfg.sweep)
    mem, index = open_index(ds, cfg, need_vectors, progress)
    notes: list[str] = []
    try:
        if need_vectors:
            qemb = _warm_query_vectors(mem, ds, progress)
            if qemb:
                index["query_embed_ms"] = qemb
        modes = _run_modes(mem, ds, cfg, progress, notes)
        sweep = _sweep(mem, ds, cfg, load_split or (lambda s: ds), progress) if cfg.sweep else None
    finally:
        mem.close()
    notes += _index_notes(index, cfg)
    results: dict[str, Any] = {
        "dataset": {
            "name": ds.name,
            "path": ds.path,
            "split": ds.split,
            "docs": len(ds.docs),
            "chunks": index.get("chunks"),
            "queries": len(ds.queries),
            "categories": _category_counts(ds),
        },
        "embedder": embedder_name(cfg.embedder),
        "top_k": cfg.top_k,
        "depth": cfg.depth,
        "metric": cfg.metric,
        "index": {
            k: index[k]
            for k in ("cached", "key", "index_s", "embed_s", "path", "chunks", "vectors", "query_embed_ms")
            if k in index
        },
        "modes": modes,
        "comparisons": _compare(modes, cfg.metric, cfg.seed),
        "references": references_for(ds.name, ds.split),
        "targets": _targets(ds, cfg, modes),
        "notes": notes,
        "started": started,
        "took_s": round(time.perf_counter() - t0, 2),
        "hybridmem_version": __version__,
    }
    if ds.languages:
        results["by_language"] = {
            m: means_by_category(r["per_query"], ds.languages) for m, r in modes.items() if r.get("status") == "ok"
        }
    if sweep:
        results["sweep"] = sweep
    return results


def _check_config(cfg: EvalConfig) -> None:
    unknown = [m for m in cfg.modes if m not in ALL_MODES]
    if unknown:
        raise ValidationError(f"unknown mode(s) {', '.join(unknown)}; known: {', '.join(ALL_MODES)}", field="modes")
    if cfg.metric not in METRICS:
        raise ValidationError(f"unknown metric {cfg.metric!r}; known: {', '.join(METRICS)}", field="metric")
    if not 1 <= cfg.top_k <= config.MAX_TOP_K:
        raise ValidationError(f"top_k must be 1..{config.MAX_TOP_K}", field="top_k")


def _run_modes(
    mem: Memory, ds: Dataset, cfg: EvalConfig, progress: Progress | None, notes: list[str]
) -> dict[str, dict[str, Any]]:
    """Every mode of ``cfg.modes``, in order (``graph`` also runs hybrid + graph leg); what a reader
    should know about a run is appended to ``notes``."""
    modes: dict[str, dict[str, Any]] = {}
    for mode in cfg.modes:
        if mode == "graph":
            t = time.perf_counter()
            try:
                rep = mem.graph.update()  # offline extraction + Leiden + summaries; a no-op when fresh
            except Exception as e:  # noqa: BLE001 - reported, never fatal for the other modes
                modes[mode] = {"status": "skipped", "note": f"skipped: graph build failed: {e}"}
                continue
            notes.append(f"graph: built or refreshed offline in {time.perf_counter() - t:.1f} s ({_graph_line(rep)})")
            tick = progress("graph queries", 2 * len(ds.queries)) if progress else None
            modes["graph"] = _run_mode(mem, ds, "graph", cfg, tick=tick)
            label, params = HYBRID_GRAPH
            modes[label] = _run_mode(mem, ds, "hybrid", cfg, params=params, tick=tick)
            continue
        tick = progress(f"{mode} queries", len(ds.queries)) if progress else None
        modes[mode] = _run_mode(mem, ds, mode, cfg, tick=tick)
        if mode == "rerank":
            used = (
                ", ".join(
                    f"{name} (applied to {n} of {len(ds.queries)} queries)"
                    for name, n in modes[mode].get("rerankers", {}).items()
                )
                or "none"
            )
            notes.append(f"rerank: hybrid candidates reordered by {used}")
            notes += [f"rerank: {note} ({n} queries)" for note, n in modes[mode].get("rerank_notes", {}).items()]
        if modes[mode].get("leg_failures"):
            notes.append(f"{mode}: leg failures during the run {modes[mode]['leg_failures']}")
    return modes


def _index_notes(index: dict[str, Any], cfg: EvalConfig) -> list[str]:
    notes = []
    if index["cached"]:
        notes.append(f"index reused from the cache ({index['path']}); built earlier")
    if index.get("embedded_now"):
        notes.append(
            f"embedded {index['embedded_now']} chunks in {index['embed_s']} s "
            f"({index['cached_vectors']} vectors came from the embedding cache)"
        )
    notes.append(
        "latency is the wall time of Memory.search at top_k; query vectors were embedded before "
        "timing and come from the embedding cache, so it excludes the model's query embedding cost"
        + (
            f" (measured on this run: p50 {index['query_embed_ms']['p50']} ms, p95 "
            f"{index['query_embed_ms']['p95']} ms over {index['query_embed_ms']['queries']} queries)"
            if index.get("query_embed_ms")
            else ""
        )
    )
    if cfg.limit:
        notes.append(f"only the first {cfg.limit} queries were evaluated (--limit): not a publishable number")
    return notes


def _category_counts(ds: Dataset) -> dict[str, int]:
    counts = {"all": len(ds.queries)}
    for q in ds.queries:
        c = ds.categories.get(q)
        if c:
            counts[c] = counts.get(c, 0) + 1
    return counts


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
