"""Ranking metrics per query, their means per category, and paired significance tests.

Definitions follow trec_eval (what BEIR and pytrec_eval report):

* ``ndcg@k``  = DCG@k / IDCG@k with linear gains, DCG = Σ_i rel_i / log2(i + 1), i from 1;
  IDCG uses the query's judged relevance grades sorted descending.
* ``mrr@k``   = 1 / rank of the first relevant document within the top k, else 0.
* ``recall@k`` = |relevant ∩ top k| / |relevant|; relevant means grade > 0.

A query with no relevant document is not evaluated (callers drop it, as trec_eval does).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["CUTOFFS", "METRICS", "means_by_category", "paired_test", "per_query", "recall_curve"]

CUTOFFS = (1, 5, 10, 100)
METRICS = ("mrr@10", "ndcg@10", *(f"recall@{k}" for k in CUTOFFS))


def _dcg(gains: Sequence[float]) -> float:
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains))


def per_query(ranked: Sequence[str], rel: Mapping[str, int]) -> dict[str, float]:
    """All of ``METRICS`` for one ranked list of document ids (duplicates already removed)."""
    relevant = {d for d, g in rel.items() if g > 0}
    if not relevant:
        raise ValueError("a query with no relevant document cannot be evaluated")
    out: dict[str, float] = {}
    first = next((i for i, d in enumerate(ranked[:10], 1) if d in relevant), None)
    out["mrr@10"] = 1.0 / first if first else 0.0
    ideal = _dcg(sorted((g for g in rel.values() if g > 0), reverse=True)[:10])
    out["ndcg@10"] = _dcg([max(rel.get(d, 0), 0) for d in ranked[:10]]) / ideal
    for k in CUTOFFS:
        out[f"recall@{k}"] = len(relevant.intersection(ranked[:k])) / len(relevant)
    return out


def recall_curve(ranked: Sequence[str], rel: Mapping[str, int], ks: Sequence[int]) -> list[float]:
    """``recall@k`` (as in ``per_query``) for every k in ``ks``; k < 1 gives 0."""
    relevant = {d for d, g in rel.items() if g > 0}
    if not relevant:
        raise ValueError("a query with no relevant document cannot be evaluated")
    found: set[str] = set()
    hits = []  # hits[i]: distinct relevant documents within the top i + 1
    for d in ranked:
        if d in relevant:
            found.add(d)
        hits.append(len(found))
    return [hits[min(k, len(hits)) - 1] / len(relevant) if k >= 1 and hits else 0.0 for k in ks]


def means_by_category(
    scores: Mapping[str, Mapping[str, float]], categories: Mapping[str, str] | None = None
) -> dict[str, dict[str, float]]:
    """``{"all": {metric: mean}, category: {metric: mean}, …}`` over the queries in ``scores``."""
    groups: dict[str, list[str]] = {"all": list(scores)}
    for qid in scores:
        cat = (categories or {}).get(qid)
        if cat and cat != "all":  # "all" already holds every query; don't count one twice
            groups.setdefault(cat, []).append(qid)
    out: dict[str, dict[str, float]] = {}
    for cat, qids in groups.items():
        if not qids:
            continue
        metrics = scores[qids[0]].keys()
        out[cat] = {m: float(np.mean([scores[q][m] for q in qids])) for m in metrics}
        out[cat]["queries"] = len(qids)
    return out


def paired_test(a: Sequence[float], b: Sequence[float], *, resamples: int = 10_000, seed: int = 0) -> dict[str, Any]:
    """Is mean(a) − mean(b) over the same queries more than noise?

    Returns the mean difference, a 95% percentile bootstrap interval of it, a two-sided bootstrap
    p-value (share of resampled differences on the other side of 0, doubled) and a two-sided paired
    randomization (sign-flip) p-value: the chance of a mean difference at least this large if the
    two systems' labels were exchangeable per query (Smucker, Allan & Carterette, CIKM 2007).
    """
    a_, b_ = np.asarray(a, np.float64), np.asarray(b, np.float64)
    # check before subtracting: numpy would broadcast a one-element list against the other
    if a_.ndim != 1 or a_.shape != b_.shape or len(a_) == 0:
        raise ValueError("paired_test needs two equally long, non-empty score lists")
    d = a_ - b_
    rng = np.random.default_rng(seed)
    n = len(d)
    obs = float(d.mean())
    boot = d[rng.integers(0, n, size=(resamples, n))].mean(axis=1)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    if obs > 0:
        p_boot = 2 * float((boot <= 0).mean())
    elif obs < 0:
        p_boot = 2 * float((boot >= 0).mean())
    else:
        p_boot = 1.0
    signs = rng.choice(np.array([-1.0, 1.0]), size=(resamples, n))
    perm = np.abs((signs * d).mean(axis=1))
    p_rand = float((np.count_nonzero(perm >= abs(obs) - 1e-12) + 1) / (resamples + 1))
    return {
        "mean_diff": obs,
        "ci95": [float(lo), float(hi)],
        "p_bootstrap": min(1.0, p_boot),
        "p_randomization": min(1.0, p_rand),
        "queries": n,
    }
