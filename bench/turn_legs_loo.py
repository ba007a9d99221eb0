"""The conversation legs' weights judged leave-one-conversation-out on LoCoMo (issue 42, item 3).

    python -m bench turn_legs_loo            # the grid below, e5, the eval cache's LoCoMo index

The legs that run only when the fused top is conversation turns (dense centering, the feedback
leg, the substance leg) and the time legs have weights chosen on LoCoMo, the only conversation set
shared here, so leaving one *dataset* out leaves them nothing to be fitted on. They are judged one
conversation out instead: for each conversation, the grid point with the best mean nDCG@10 over the
*other* conversations' questions is scored on this one's. The product's default and plain hybrid
are the baselines (same process, same index); paired randomization p-values from the harness.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from hybridmem.eval.datasets import load_dataset
from hybridmem.eval.index import open_index
from hybridmem.eval.metrics import paired_test
from hybridmem.eval.modes import AGENT_MODES, PLAIN_HYBRID, EvalConfig
from hybridmem.eval.runner import run_mode

LOCOMO = "../shared/data/agentmem/locomo/locomo-shared.json"
DEFAULT_MODE = "hybrid+time+feedback+centering+substance"
GRID = {
    "dense_centering": (0.0, 0.5, 0.75, 1.0),
    "feedback_weight": (0.0, 0.5, 1.0, 2.0),
    "substance_weight": (0.0, 0.5, 1.0, 2.0),
    "time_weight": (0.0, 1.0),
}


def _scores(mem: Any, ds: Any, cfg: EvalConfig, params: dict[str, Any]) -> dict[str, float]:
    r = run_mode(mem, ds, "hybrid", cfg, {**PLAIN_HYBRID, **params}, depth=False)
    return {q: s["ndcg@10"] for q, s in r["per_query"].items()}


def _conv(qid: str) -> str:
    return qid.split(":", 1)[0]


def leave_one_out(grid: dict[tuple[float, ...], dict[str, float]], qids: list[str]) -> tuple[dict[str, float], dict]:
    """Each conversation's questions scored with the grid point best on the other conversations."""
    convs = sorted({_conv(q) for q in qids})
    held: dict[str, float] = {}
    chosen = {}
    for c in convs:
        train = [q for q in qids if _conv(q) != c]
        best = max(grid, key=lambda p: (float(np.mean([grid[p][q] for q in train])), p))
        chosen[c] = dict(zip(GRID, best, strict=True))
        held.update({q: grid[best][q] for q in qids if _conv(q) == c})
    return held, chosen


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=LOCOMO)
    ap.add_argument("--cache-dir", default=".bench-cache")
    ap.add_argument("--out", default="bench/results/turn-legs-loo.json")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    ds = load_dataset(a.data)
    cfg = EvalConfig(cache_dir=Path(a.cache_dir), embedder="e5")
    mem, _ = open_index(ds, cfg, need_vectors=True)
    try:
        grid = {p: _scores(mem, ds, cfg, dict(zip(GRID, p, strict=True))) for p in itertools.product(*GRID.values())}
        default = _scores(mem, ds, cfg, AGENT_MODES[DEFAULT_MODE][0])
        plain = _scores(mem, ds, cfg, {})
    finally:
        mem.close()
    qids = sorted(default)
    held, chosen = leave_one_out(grid, qids)
    in_sample = max(grid, key=lambda p: (float(np.mean([grid[p][q] for q in qids])), p))

    def mean(s: dict[str, float], cat: str | None = None) -> float:
        return round(float(np.mean([s[q] for q in qids if cat is None or ds.categories.get(q) == cat])), 4)

    cats = sorted({ds.categories.get(q, "") for q in qids})
    rows = {
        "leave-one-conversation-out": held,
        "default": default,
        "in-sample best": grid[in_sample],
        "plain hybrid": plain,
    }
    out = {
        "data": a.data,
        "questions": len(qids),
        "grid": {k: list(v) for k, v in GRID.items()},
        "grid_points": len(grid),
        "ndcg@10": {name: {"all": mean(s), **{c: mean(s, c) for c in cats}} for name, s in rows.items()},
        "in_sample_best": dict(zip(GRID, in_sample, strict=True)),
        "chosen_per_held_out_conversation": chosen,
        "loo_vs_default": paired_test([held[q] for q in qids], [default[q] for q in qids]),
        "loo_vs_plain": paired_test([held[q] for q in qids], [plain[q] for q in qids]),
        "seconds": round(time.perf_counter() - t0, 1),
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=1))
    print(json.dumps({k: out[k] for k in ("ndcg@10", "in_sample_best", "loo_vs_default", "loo_vs_plain")}, indent=1))
    print(f"chosen per held-out conversation: {chosen}\n{out['seconds']} s -> {a.out}")


if __name__ == "__main__":
    main()
