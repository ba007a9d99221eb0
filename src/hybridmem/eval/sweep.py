"""Weight sweeps: settings chosen on one split (train, or a fixed half of the queries) and
reported on the other; a setting is recommended only if it beats classic RRF everywhere."""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import config
from ..errors import ValidationError
from ..memory import Memory
from .datasets import Dataset
from .modes import EvalConfig, Progress
from .runner import run_mode

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


# ---------------------------------------------------------------------------------------- sweep
def split_for_sweep(ds: Dataset, load: Callable[[str], Dataset]) -> tuple[Dataset, Dataset, str, str]:
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


def run_sweep(
    mem: Memory, ds: Dataset, cfg: EvalConfig, load: Callable[[str], Dataset], progress: Progress | None
) -> dict[str, Any]:
    tune, report, tune_name, report_name = split_for_sweep(ds, load)
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
        r = run_mode(mem, d, "hybrid", cfg, params=params, tick=tick, depth=False)
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
