"""Comparing modes: paired tests of hybrid against each single leg and of each variant against
its base, and the dataset's published targets against what was measured."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from ..embed import embedder_name
from .datasets import Dataset
from .metrics import paired_test
from .modes import HYBRID_GRAPH, SINGLE_LEGS, EvalConfig
from .references import targets_for


def compare_modes(modes: dict[str, dict[str, Any]], metric: str, seed: int) -> list[dict[str, Any]]:
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


def check_targets(ds: Dataset, cfg: EvalConfig, modes: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
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
