"""The legs that run after a first fusion, on what it found (each one more fused list when it
adds anything): the when leg, the feedback leg and the substance leg, and the test they share of
whether the fused top is conversation turns (:func:`top_turns`)."""

from __future__ import annotations

import math
import time

from ..models import LegReport
from ..store.base import Allowed, Store
from .legs import Legs
from .scope import is_turn, time_word_terms
from .types import LegHit

__all__ = ["FEEDBACK_DOCS", "FEEDBACK_TERMS", "WHEN_DEPTH", "feedback_leg", "substance_leg", "top_turns", "when_leg"]

#: fused candidates the when leg looks at (LoCoMo's when-questions: nDCG@10 the same at 50 and 100)
WHEN_DEPTH = 50
#: the feedback leg: the first fused results whose terms it reads, and the terms it adds to the query
FEEDBACK_DOCS = 3
FEEDBACK_TERMS = 10


def when_leg(
    store: Store, legs: Legs, namespace: str, fused: list[tuple[int, float]]
) -> tuple[list[LegHit], LegReport]:
    """The when leg (scope.py): of the fused top :data:`WHEN_DEPTH`, the conversation turns that
    say when, in their fused order; empty when none or all of them do (it would only echo the
    fusion). A document dates its facts ("in 1857"), a turn says "yesterday": only turns count."""
    t0 = time.perf_counter()
    top = fused[:WHEN_DEPTH]
    held = legs.holding(namespace, time_word_terms(), [r for r, _ in top])
    if held:
        held = {r for r, row in store.fetch(sorted(held), namespace).items() if is_turn(row)}
    when = [(r, sc) for r, sc in top if r in held] if held and len(held) < len(top) else []
    return when, LegReport(status="ok", took_ms=round((time.perf_counter() - t0) * 1000, 3), returned=len(when))


def feedback_leg(
    store: Store, legs: Legs, namespace: str, terms: list[str], top: list[int], allowed: Allowed | None, k: int
) -> tuple[list[LegHit], LegReport]:
    """The feedback leg (pseudo-relevance feedback, RM3's idea as one RRF leg): BM25 over the query's
    terms plus the :data:`FEEDBACK_TERMS` terms of the fused top :data:`FEEDBACK_DOCS` that the query
    lacks, each scored by the sum of its idf, ln(N / df), over those results that hold it (ties by
    term). It reaches what shares the best results' words but not the question's (LoCoMo: Recall@10
    +0.015, nDCG@10 +0.009). Only when those results are conversation turns: on the document sets
    it cost nDCG@10 (docs/agent-memory.md). ``top``: those results when they are turns, else
    [] (:func:`top_turns`). Same pre-filter as every leg; one more BM25 query, after the fusion
    it reads."""
    t0 = time.perf_counter()
    if not top:
        return [], LegReport(status="ok", took_ms=round((time.perf_counter() - t0) * 1000, 3), returned=0)
    have = set(terms)
    held: dict[str, int] = {}
    for _, toks in store.tokens_for(namespace, top):
        for t in set(toks.split()) - have:
            held[t] = held.get(t, 0) + 1
    n, df = legs.doc_freqs(namespace, list(held)) if held else (0, {})
    gain = {t: held[t] * math.log(n / f) for t, f in df.items() if 0 < f < n}
    extra = sorted(gain, key=lambda t: (-gain[t], t))[:FEEDBACK_TERMS]
    out = legs.sparse(namespace, [*terms, *extra], allowed, k) if extra else []
    return out, LegReport(status="ok", took_ms=round((time.perf_counter() - t0) * 1000, 3), returned=len(out))


def substance_leg(
    store: Store, namespace: str, fused: list[tuple[int, float]], k: int
) -> tuple[list[LegHit], LegReport]:
    """The substance leg: the fused top ``k`` (the legs' depth) again, the chunks that hold more
    distinct terms (as indexed) first, ties in fused order; its score is that count. A
    query-independent prior (a document prior, as a length or link prior in web search): a
    turn that says little ("See ya!", "Glad it helped ya, Melanie!") matches every question by
    its speaker's name and sits close to every question in e5's space, while a turn that is
    evidence says something (LoCoMo: median 37 words against 24 for all turns). Only when the
    fused top is conversation turns, like the feedback leg. One read of the candidates' tokens."""
    t0 = time.perf_counter()
    top = [r for r, _ in fused[:k]]
    size = {r: len(set(toks.split())) for r, toks in store.tokens_for(namespace, top)}
    pos = {r: i for i, r in enumerate(top)}
    ranked = sorted(top, key=lambda r: (-size.get(r, 0), pos[r]))
    out = [(r, float(size.get(r, 0))) for r in ranked]
    return out, LegReport(status="ok", took_ms=round((time.perf_counter() - t0) * 1000, 3), returned=len(out))


def top_turns(store: Store, namespace: str, fused: list[tuple[int, float]]) -> list[int]:
    """The fused top :data:`FEEDBACK_DOCS` when all of them are conversation turns, else []."""
    top = [r for r, _ in fused[:FEEDBACK_DOCS]]
    rows = store.fetch(top, namespace) if top else {}
    return top if top and all(r in rows and is_turn(rows[r]) for r in top) else []
