"""Weighted Reciprocal Rank Fusion (Cormack, Clarke & Büttcher, SIGIR 2009).

    score(d) = Σ_r  w_r / (k + rank_r(d))      ranks start at 1; k = 60; w_r = 1 is classic RRF

Also the alternatives that fuse normalized scores (:func:`score_fusion`: CombSUM, CombMNZ, DBSF) and
the adaptive fusion's per-query leg weights (:class:`AdaptiveModel` over :func:`query_features`).
Pure functions: no I/O but the shipped model's file, no state. Scores are only comparable within one
query.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, TypeVar

__all__ = [
    "DEFAULT_K",
    "FEATURES",
    "SCORE_FUSIONS",
    "AdaptiveModel",
    "query_features",
    "rrf",
    "score_fusion",
    "shipped_model",
]

DEFAULT_K = 60
T = TypeVar("T", bound=Hashable)


def rrf(
    rankings: Sequence[Sequence[T]],
    k: float = DEFAULT_K,
    weights: Sequence[float] | None = None,
    rank_scales: Sequence[float] | None = None,
    imputed: Sequence[Sequence[tuple[T, float]]] | None = None,
) -> list[tuple[T, float]]:
    """Fuse ranked lists (best first) into ``[(item, score)]``, best first.

    ``rank_scales`` (default 1 each) multiply a list's ranks before fusion: a list that ranks a
    random share ``c`` of the items (a dense leg while vectors are pending) puts its r-th item where
    it would be expected among all items, at rank ``r / c``. ``imputed`` (per list) gives items the
    list could not rank (a chunk without a vector yet) a stand-in rank: ``(item, rank)`` pairs that
    add ``w / (k + rank)`` and count for nothing else.

    An item absent from a list contributes nothing for that list. A repeated item within one list
    counts at its first (best) rank only. Ties are broken by the best rank an item reached, then by
    the order in which items were first seen (leg order, then rank), so the result is deterministic.
    """
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    if weights is None:
        weights = [1.0] * len(rankings)
    if len(weights) != len(rankings):
        raise ValueError(f"{len(weights)} weights for {len(rankings)} rankings")
    if any(w < 0 for w in weights):
        raise ValueError(f"weights must be >= 0, got {list(weights)}")
    scales = [1.0] * len(rankings) if rank_scales is None else list(rank_scales)
    if len(scales) != len(rankings) or any(s <= 0 for s in scales):
        raise ValueError(f"need one positive rank scale per ranking, got {scales}")
    scores: dict[T, float] = {}
    best_rank: dict[T, int] = {}
    for ranking, w, scale in zip(rankings, weights, scales):
        seen: set[T] = set()
        for rank, item in enumerate(ranking, start=1):
            if item in seen:
                continue
            seen.add(item)
            scores[item] = scores.get(item, 0.0) + w / (k + rank * scale)
            if rank < best_rank.get(item, 1 << 30):
                best_rank[item] = rank
    for pairs, w in zip(imputed or [], weights):
        for item, r in pairs:
            if item in scores:
                scores[item] += w / (k + r)
    order = {item: i for i, item in enumerate(scores)}
    return sorted(scores.items(), key=lambda kv: (-kv[1], best_rank[kv[0]], order[kv[0]]))


# ---------------------------------------------------------------------------------------- score fusion
#: fusions that combine the legs' raw scores after normalizing each leg's list (published alternatives
#: to RRF: Fox & Shaw's CombSUM / CombMNZ on min-max scores, Qdrant's distribution-based score fusion)
SCORE_FUSIONS = ("dbsf", "combsum", "combmnz")


def _normalized(scores: list[float], method: str) -> list[float]:
    """A list's scores mapped to [0, 1] (plain Python: lists are a leg's few dozen hits, where numpy's
    per-call overhead costs more than the arithmetic)."""
    n = len(scores)
    if method == "dbsf":  # mean ± 3σ of the list mapped to [0, 1], clipped
        mu = sum(scores) / n
        sd = math.sqrt(sum((x - mu) ** 2 for x in scores) / n)
        if sd <= 0:
            return [1.0] * n
        lo, span = mu - 3 * sd, 6 * sd
        return [min(1.0, max(0.0, (x - lo) / span)) for x in scores]
    lo, hi = min(scores), max(scores)
    if hi <= lo:
        return [1.0] * n
    return [(x - lo) / (hi - lo) for x in scores]


def score_fusion(
    lists: Sequence[Sequence[tuple[T, float]]], method: str, weights: Sequence[float] | None = None
) -> list[tuple[T, float]]:
    """Fuse ``[(item, raw score)]`` lists (best first) by their normalized scores, best first.

    ``combsum``: Σ_r w_r · minmax_r(s); ``combmnz``: that sum times the number of lists (of weight
    > 0) holding the item; ``dbsf``: Σ_r w_r · s normalized by the list's mean ± 3σ. With weights
    (1 − α, α) ``combsum`` is the convex combination. An item absent from a list adds nothing for
    it. Ties: best rank reached, then first seen (as :func:`rrf`)."""
    if method not in SCORE_FUSIONS:
        raise ValueError(f"unknown score fusion {method!r}; one of {', '.join(SCORE_FUSIONS)}")
    if weights is None:
        weights = [1.0] * len(lists)
    if len(weights) != len(lists) or any(w < 0 for w in weights):
        raise ValueError(f"need one weight >= 0 per list, got {list(weights)}")
    scores: dict[T, float] = {}
    hits: dict[T, int] = {}
    best_rank: dict[T, int] = {}
    for lst, w in zip(lists, weights):
        seen: dict[T, float] = {}
        for item, s in lst:
            if item not in seen:
                seen[item] = float(s)
        if not seen:
            continue
        norm = _normalized(list(seen.values()), method)
        for rank, (item, v) in enumerate(zip(seen, norm), start=1):
            scores[item] = scores.get(item, 0.0) + w * v
            if w > 0:
                hits[item] = hits.get(item, 0) + 1
            if rank < best_rank.get(item, 1 << 30):
                best_rank[item] = rank
    if method == "combmnz":
        scores = {item: s * hits.get(item, 0) for item, s in scores.items()}
    order = {item: i for i, item in enumerate(scores)}
    return sorted(scores.items(), key=lambda kv: (-kv[1], best_rank[kv[0]], order[kv[0]]))


# ---------------------------------------------------------------------------------------- adaptive
#: what the adaptive fusion reads of one query (see :func:`query_features`)
FEATURES = (
    "bm25_margin",
    "dense_margin",
    "bm25_found",
    "agreement",
    "top_agree",
    "bm25_top_in_dense",
    "dense_top_in_bm25",
    "query_terms",
    "identifier",
)
#: scores a leg's shape is read from: its first ``SHAPE_DEPTH`` hits
SHAPE_DEPTH = 10


def _margin(scores: Sequence[float]) -> float:
    """(s1 − s2) / (s1 − s_n) over the first ``SHAPE_DEPTH`` scores: how far the top hit stands out
    of the list's own spread (scale-free, 0…1; 0 for fewer than 3 hits)."""
    s = list(scores[:SHAPE_DEPTH])
    if len(s) < 3 or s[0] <= s[-1]:
        return 0.0
    return float((s[0] - s[1]) / (s[0] - s[-1]))


def _reciprocal_rank(a: Sequence[tuple[Hashable, float]], b: Sequence[tuple[Hashable, float]]) -> float:
    """1 / the rank in ``b`` of ``a``'s first hit (0 when ``b`` does not hold it)."""
    if not a:
        return 0.0
    top = a[0][0]
    return next((1.0 / i for i, (item, _) in enumerate(b, start=1) if item == top), 0.0)


def query_features(
    bm25: Sequence[tuple[Hashable, float]],
    dense: Sequence[tuple[Hashable, float]],
    query_terms: int,
    identifier: bool,
) -> dict[str, float]:
    """A query's features, from what its BM25 and dense legs returned (best first) and its terms."""
    b = [i for i, _ in bm25[:SHAPE_DEPTH]]
    d = [i for i, _ in dense[:SHAPE_DEPTH]]
    return {
        "bm25_margin": _margin([s for _, s in bm25]),
        "dense_margin": _margin([s for _, s in dense]),
        "bm25_found": min(len(bm25), SHAPE_DEPTH) / SHAPE_DEPTH,
        "agreement": len(set(b) & set(d)) / SHAPE_DEPTH,
        "top_agree": 1.0 if b and d and b[0] == d[0] else 0.0,
        "bm25_top_in_dense": _reciprocal_rank(bm25, dense),
        "dense_top_in_bm25": _reciprocal_rank(dense, bm25),
        "query_terms": math.log1p(query_terms),
        "identifier": 1.0 if identifier else 0.0,
    }


@dataclass(frozen=True)
class AdaptiveModel:
    """Logistic map from a query's features to the dense leg's share α of the two legs' weight:
    the legs then fuse by ``base`` (RRF or a score fusion) with weights 2(1 − α) (BM25) and 2α
    (dense), so α = ½ is ``base`` with equal weights. Fitted by ``bench/fusion_fit.py`` on training splits only; the numbers ship in
    ``fusion_model.json``."""

    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float
    fitted_on: str = ""
    #: the fusion the weights feed: ``rrf`` or one of :data:`SCORE_FUSIONS`
    base: str = "rrf"

    def dense_share(self, x: dict[str, float]) -> float:
        z = self.intercept + sum(
            c * (x[f] - m) / s for f, m, s, c in zip(self.features, self.mean, self.scale, self.coef)
        )
        return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))

    def to_json(self) -> dict[str, Any]:
        return {
            "features": list(self.features),
            "mean": list(self.mean),
            "scale": list(self.scale),
            "coef": list(self.coef),
            "intercept": self.intercept,
            "fitted_on": self.fitted_on,
            "base": self.base,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AdaptiveModel:
        feats = tuple(data["features"])
        unknown = set(feats) - set(FEATURES)
        if unknown:
            raise ValueError(f"adaptive fusion model names unknown features {sorted(unknown)}")
        n = len(feats)
        vals = [tuple(float(v) for v in data[k]) for k in ("mean", "scale", "coef")]
        if any(len(v) != n for v in vals) or any(s <= 0 for s in vals[1]):
            raise ValueError("adaptive fusion model: mean, scale and coef need one number per feature, scale > 0")
        base = str(data.get("base", "rrf"))
        if base != "rrf" and base not in SCORE_FUSIONS:
            raise ValueError(f"adaptive fusion model: unknown base fusion {base!r}")
        return cls(feats, vals[0], vals[1], vals[2], float(data["intercept"]), str(data.get("fitted_on", "")), base)


@functools.lru_cache(maxsize=1)
def shipped_model() -> AdaptiveModel:
    """The adaptive fusion's coefficients shipped with the package."""
    text = resources.files("hybridmem.retrieve").joinpath("fusion_model.json").read_text(encoding="utf-8")
    return AdaptiveModel.from_json(json.loads(text))
