"""Weighted Reciprocal Rank Fusion (Cormack, Clarke & Büttcher, SIGIR 2009).

    score(d) = Σ_r  w_r / (k + rank_r(d))      ranks start at 1; k = 60; w_r = 1 is classic RRF

Pure functions: no I/O, no state. Scores are only comparable within one query.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

__all__ = ["rrf", "DEFAULT_K"]

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
