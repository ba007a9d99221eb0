"""The legs of one query as a table: which legs run, when each applies, its weight from
``hybrid_params`` and the order they are fused in. :data:`LEGS` start on the executor (in parallel,
behind one pre-filter); :data:`LATER_LEGS` run after the fusion, on the fused list. A new leg is one
entry in a table (and, when it needs one, the function that runs it)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ..filters import Filter
from ..models import HybridParams, LanguageReport, LegReport, QueryRequest
from ..store.base import Allowed, Store
from ..text.tokenize import is_identifier
from ..timeexpr import asks_when
from .fusion import SCORE_FUSIONS, rrf, score_fusion
from .later_legs import feedback_leg, substance_leg, when_leg
from .legs import Legs
from .scope import combine, time_filter, time_mentions
from .types import LegHit, QueryEncoder

__all__ = ["LATER_LEGS", "LEGS", "Fusion", "LaterLeg", "Leg", "Query", "Runner"]


class Runner(Protocol):
    """What the legs are run with (the searcher is one)."""

    store: Store
    legs: Legs
    encoder: QueryEncoder
    graph_leg: Callable[[str, str, np.ndarray | None, int], list[LegHit]] | None

    def _latest_occurred(self, namespace: str, flt: Filter | None) -> float | None: ...


def time_scope(s: Runner, q: Query) -> Allowed | None:
    """What the question's time expressions allow within the query's scope (the time legs' pre-filter,
    see :mod:`.scope`), read once per query; None when the legs would not help: no time named, the
    weight 0, or a scope holding nothing or everything the query's own filter allows."""
    if q.time_scope is None:
        q.time_scope = (_read_time_scope(s, q),)
    return q.time_scope[0]


def _read_time_scope(s: Runner, q: Query) -> Allowed | None:
    namespace, flt = q.namespace, q.flt
    if q.hp.time_weight <= 0:
        return None
    named = time_filter(time_mentions(q.req, namespace, flt, s._latest_occurred))
    if named is None:
        return None
    tflt = combine(flt, named)
    assert tflt is not None
    allowed = s.legs.allowed(namespace, tflt)
    n_time = len(s.legs.allowed_rowids(namespace, allowed))
    base = q.allowed  # what the query's own filter allows (already evaluated)
    n_all = len(s.legs.allowed_rowids(namespace, base)) if base is not None else s.store.chunk_count(namespace)
    if n_time == 0 or n_time >= n_all:  # nothing then, or everything: the leg would only echo BM25
        return None
    return allowed


def graph_call(s: Runner, q: Query) -> Call | None:
    """The graph leg (hybridmem.graph) in mode graph, or in hybrid with a graph weight (None otherwise, or when the searcher has no graph leg)."""
    graph_leg = s.graph_leg
    if graph_leg is None or not (q.mode == "graph" or (q.mode == "hybrid" and q.hp.graph_weight > 0)):
        return None

    def graph() -> list[LegHit]:
        rows = s.legs.allowed_rowids(q.namespace, q.allowed) if q.allowed is not None else None
        return [] if rows is not None and len(rows) == 0 else graph_leg(q.namespace, q.req.search_text, rows, q.k)

    return graph


@dataclass
class Query:
    """One query's inputs to its legs: the request, namespace and mode (``rerank`` runs the hybrid
    legs), the filter and what it allows (evaluated once; it bounds every leg), the legs' depth and
    the query's BM25 terms (modes bm25 and hybrid)."""

    req: QueryRequest
    namespace: str
    mode: str
    flt: Filter | None
    allowed: Allowed | None
    k: int
    terms: list[str]
    #: what the question's time expressions allow, once read (:func:`time_scope`)
    time_scope: tuple[Allowed | None] | None = None
    #: what language-aware fusion read (:mod:`.language`), once the legs answered
    language: LanguageReport | None = None

    @property
    def hp(self) -> HybridParams:
        return self.req.hybrid_params

    def idents(self) -> list[str]:
        """The identifier-shaped terms of the BM25 leg (the query is tokenized once)."""
        return [t for t in self.terms if is_identifier(t)] if self.mode == "hybrid" and self.hp.exact_weight > 0 else []


@dataclass
class Fusion:
    """The fusion of one query: the legs' hits, the legs fused in order, their weights, and the method."""

    hits: dict[str, list[LegHit]]
    order: list[str]
    weights: dict[str, float]
    method: str
    used: str
    rrf_k: float
    dense_rank_scale: float
    stand_in: list[tuple[int, float]]

    def fuse(self) -> list[tuple[int, float]]:
        hits, order, weights = self.hits, self.order, self.weights
        if self.method in SCORE_FUSIONS:
            return score_fusion([hits[n] for n in order], self.method, [weights[n] for n in order])
        return rrf(
            [[r for r, _ in hits[n]] for n in order],
            k=self.rrf_k,
            weights=[weights[n] for n in order],
            rank_scales=[self.dense_rank_scale if n == "dense" else 1.0 for n in order],
            imputed=[self.stand_in if n == "dense" else [] for n in order],
        )


Call = Callable[[], list[LegHit]]


@dataclass(frozen=True)
class Leg:
    """A leg started on the executor. ``stage`` 0: at once; 1 and 2 (hybrid only): bound once the
    first are running (stage 2 after the question's time expressions are read) and started together.
    ``start(searcher, query)``: the leg's call bound to its inputs, or None when it does not apply;
    ``weight(hybrid_params, mode)``: its weight in the fusion."""

    name: str
    stage: int
    weight: Callable[[HybridParams, str], float]
    start: Callable[[Runner, Query], Call | None]


def _when(applies: bool, call: Call) -> Call | None:
    return call if applies else None


def _time_call(s: Runner, q: Query, dense: bool) -> Call | None:
    allowed = time_scope(s, q)
    if allowed is None:
        return None
    if dense:
        return lambda: s.legs.dense(q.namespace, q.req.search_text, s.encoder, allowed, q.k)
    return lambda: s.legs.sparse(q.namespace, q.terms, allowed, q.k)


def _exact_call(s: Runner, q: Query) -> Call | None:
    idents = q.idents()
    # chunks holding an identifier the query cites, ranked by BM25 over those identifiers only
    return _when(bool(idents), lambda: s.legs.sparse(q.namespace, idents, q.allowed, q.k))


#: the legs started on the executor, in the order they are fused (a new leg is one more entry)
LEGS: tuple[Leg, ...] = (
    Leg(
        "bm25",
        0,
        lambda hp, mode: hp.sparse_weight,
        lambda s, q: _when(q.mode in ("bm25", "hybrid"), lambda: s.legs.sparse(q.namespace, q.terms, q.allowed, q.k)),
    ),
    Leg(
        "dense",
        0,
        lambda hp, mode: hp.dense_weight,
        lambda s, q: _when(
            q.mode in ("vector", "hybrid"),
            lambda: s.legs.dense(q.namespace, q.req.search_text, s.encoder, q.allowed, q.k),
        ),
    ),
    Leg("exact", 0, lambda hp, mode: hp.exact_weight, _exact_call),
    Leg("graph", 0, lambda hp, mode: 1.0 if mode == "graph" else hp.graph_weight, graph_call),
    Leg("time", 2, lambda hp, mode: hp.time_weight, lambda s, q: _time_call(s, q, dense=False)),
    Leg("time_dense", 2, lambda hp, mode: hp.time_weight, lambda s, q: _time_call(s, q, dense=True)),
    Leg(
        "recency",
        1,
        lambda hp, mode: hp.recency_weight,
        lambda s, q: _when(q.hp.recency_weight > 0, lambda: s.store.recent(q.namespace, q.flt, q.k)),
    ),
)


@dataclass(frozen=True)
class LaterLeg:
    """A leg run after the fusion, on the fused list, in hybrid mode when ``applies(query)``; the
    fusion runs again with it when it found anything (``always``: even when not). ``needs``:
    ``fused`` (a fused list), ``turns`` (a fused top of conversation turns) or None.
    ``run(searcher, query, fused, turns)``: its hits and report."""

    name: str
    weight: Callable[[HybridParams, str], float]
    applies: Callable[[Query], bool]
    run: Callable[[Runner, Query, list[tuple[int, float]], list[int]], tuple[list[LegHit], LegReport]]
    needs: str | None = None
    always: bool = False


#: the legs run after the fusion, in this order (each fused in after the ones before)
LATER_LEGS: tuple[LaterLeg, ...] = (
    LaterLeg(
        "feedback",
        lambda hp, mode: hp.feedback_weight,
        lambda q: q.mode == "hybrid" and q.hp.feedback_weight > 0 and bool(q.terms),
        lambda s, q, fused, turns: feedback_leg(s.store, s.legs, q.namespace, q.terms, turns, q.allowed, q.k),
        needs="fused",
    ),
    LaterLeg(
        "when",
        lambda hp, mode: hp.time_weight,
        lambda q: q.mode == "hybrid" and q.hp.time_weight > 0 and asks_when(q.req.search_text),
        lambda s, q, fused, turns: when_leg(s.store, s.legs, q.namespace, fused),
    ),
    LaterLeg(  # last: a prior over the candidates every other leg brought
        "substance",
        lambda hp, mode: hp.substance_weight,
        lambda q: q.mode == "hybrid" and q.hp.substance_weight > 0,
        lambda s, q, fused, turns: substance_leg(s.store, q.namespace, fused, q.k),
        needs="turns",
        always=True,
    ),
)
