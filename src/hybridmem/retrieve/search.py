"""One query: validate the filter, run the BM25 and dense legs concurrently behind the same
pre-filter, fuse them with weighted RRF, and build the contract response with per-leg provenance."""

from __future__ import annotations

import math
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import deadline
from ..errors import HybridMemError, StoreError, StoreUnavailableError, ValidationError
from ..filters import Filter, filter_keys, parse_filter
from ..lru import LRU
from ..models import LegReport, QueryRequest, QueryResponse, QueryResult
from ..store.base import Allowed, Store
from ..text.tokenize import is_identifier, query_tokens
from ..timeexpr import asks_when
from .fusion import SCORE_FUSIONS, query_features, rrf, score_fusion, shipped_model
from .legs import Legs
from .scope import (
    check_scopes,
    combine,
    context_turns,
    conversation_fields,
    is_turn,
    scope_filter,
    time_filter,
    time_mentions,
    time_word_terms,
)
from .types import LegHit, QueryEncoder

__all__ = [
    "Searcher",
    "LegHit",
    "build_request",
    "CenteredEncoder",
    "CENTER_SAMPLE",
    "FEEDBACK_DOCS",
    "FEEDBACK_TERMS",
    "WHEN_DEPTH",
]

#: fused candidates the when leg looks at (LoCoMo's when-questions: nDCG@10 the same at 50 and 100)
WHEN_DEPTH = 50
#: the feedback leg: the first fused results whose terms it reads, and the terms it adds to the query
FEEDBACK_DOCS = 3
FEEDBACK_TERMS = 10
#: the scope's vectors its mean is taken over, at most (evenly spaced over its rowids): a mean of
#: 1,024 unit vectors is within ~0.001 per dimension of the whole scope's
CENTER_SAMPLE = 1024


@dataclass(frozen=True)
class CenteredEncoder:
    """The query encoder with ``shift`` taken off each query vector, renormalized: the dense leg's
    cosine then ranks a chunk d by d·(q − shift), on every backend and index (exact, HNSW, pgvector)."""

    encoder: QueryEncoder
    shift: np.ndarray

    @property
    def name(self) -> str:
        return self.encoder.name

    def vector(self, text: str) -> np.ndarray:
        q = np.asarray(self.encoder.vector(text), np.float32)
        c = q - self.shift.astype(np.float32)
        n = float(np.linalg.norm(c))
        return c / n if n > 1e-6 else q  # a query that is the mean itself: left as it is


@dataclass
class Searcher:
    """Runs one query over a store's legs: filter once, legs in parallel, weighted RRF, results."""

    store: Store
    legs: Legs
    encoder: QueryEncoder
    executor: Executor
    leg_timeout: float = 30.0
    #: (namespace, query text, allowed rowids or None, k) -> graph-leg hits (hybridmem.graph)
    graph_leg: Callable[[str, str, np.ndarray | None, int], list[LegHit]] | None = None
    #: how the dense leg is fused while vectors are pending: impute | impute-rank | rank | weight |
    #: drop | none (_dense_scale; bench/partial_coverage.py measures each)
    partial_dense: str = "impute"
    #: retries of a query whose database connection was lost (a PostgreSQL restart)
    read_retries: int = 4
    #: the policy ``drop``'s threshold (share of the namespace's chunks that have a vector)
    min_dense_coverage: float = 0.5
    #: the fusion of a query whose hybrid_params name none (Memory(fusion=), HYBRIDMEM_FUSION)
    default_fusion: str = "rrf"
    #: (namespace, filter, chunk version) -> (latest occurred_at,): a scope's reference time
    _latest: LRU = field(default_factory=lambda: LRU(256))
    #: (namespace, filter, vector version) -> (mean vector of the scope, or None): dense centering
    _means: LRU = field(default_factory=lambda: LRU(256))

    def validate_filter(self, namespace: str, spec: dict[str, Any], warnings: list[str] | None = None) -> Filter | None:
        """The parsed filter. A key no document of the namespace holds is not an error (an agent may
        filter on a key before any memory has it): the filter is applied as written, a missing key
        matching what the operator says of a missing value (``{"k": v}`` nothing, ``$exists: false``
        everything), and ``warnings`` gets a line naming the key and the keys there are."""
        flt = parse_filter(spec)
        unknown = filter_keys(flt) - self.store.metadata_keys(namespace)
        if unknown and warnings is not None:
            known = sorted(self.store.metadata_keys(namespace))
            warnings.append(
                f"no document in namespace {namespace!r} has the metadata key{'s' if len(unknown) > 1 else ''} "
                f"{', '.join(map(repr, sorted(unknown)))} (a typo?); known keys: "
                f"{', '.join(known[:50]) + (' …' if len(known) > 50 else '') if known else '(none yet)'}"
            )
        return flt

    def _dense_scale(self, namespace: str, pending: int, mode: str, warnings: list[str]) -> tuple[float, float]:
        """(weight factor, rank scale) of the dense leg while ``pending`` chunks have no vector.

        The dense leg then ranks only the share ``c`` embedded so far, which after a plain ingest
        is a handful of chunks: ranked 1, 2, 3... for every query, they would take the top of the
        fused list from BM25's answers, and at any c < 1 an embedded chunk gets a boost the same
        chunk waiting for its vector does not. Policy ``impute`` (the default) gives every BM25 hit
        without a vector its BM25 rank in the dense leg (:meth:`_stand_in_dense_ranks`);
        ``impute-rank`` also fuses the dense leg's r-th hit at rank r / c (where it is expected
        among all chunks), as ``rank`` does alone; ``weight`` scales the leg's weight by c;
        ``drop`` leaves the leg out below ``min_dense_coverage``; ``none`` is plain RRF. At c = 1
        every policy is plain RRF. On the demo (e5) at 1-50% coverage ``impute`` stays within
        0.006 nDCG@10 of BM25 alone where plain RRF lost up to 0.17 (docs/evaluation.md)."""
        if not pending or mode != "hybrid":
            return 1.0, 1.0
        total = self.store.chunk_count(namespace)
        c = max(0.0, min(1.0, 1.0 - pending / total)) if total else 1.0
        warnings.append(
            f"{pending} of {total} chunks wait for their vectors: the dense leg ranks the {c:.1%} embedded "
            f"({self.partial_dense} policy)"
        )
        if self.partial_dense in ("rank", "impute-rank"):
            return 1.0, 1.0 / max(c, 1e-6)
        if self.partial_dense == "weight":
            return c, 1.0
        if self.partial_dense == "drop":
            return (0.0 if c < self.min_dense_coverage else 1.0), 1.0
        return 1.0, 1.0

    def _stand_in_dense_ranks(self, namespace: str, hits: dict[str, list[LegHit]]) -> list[tuple[int, float]]:
        """Policies ``impute*``: a BM25 hit that has no vector yet stands in the dense leg at its BM25
        rank (the dense leg is assumed to agree where it cannot see), so the chunks embedded so far
        are not favoured over the same chunks waiting for their vectors."""
        if not self.partial_dense.startswith("impute") or "bm25" not in hits:
            return []
        ranked = [r for r, _ in hits["bm25"]]
        missing = self.store.pending_among(ranked, namespace)
        return [(r, float(i)) for i, r in enumerate(ranked, start=1) if r in missing]

    def _namespace_warning(self, namespace: str) -> list[str]:
        if self.store.namespace_id(namespace) is not None:
            return []
        names = self.store.namespaces()
        return [
            f"namespace {namespace!r} holds no documents; namespaces in this store: "
            + (", ".join(map(repr, names[:50])) if names else "(none yet)")
        ]

    def search(
        self, req: QueryRequest, namespace: str, *, fetch_k: int | None = None, keep: int | None = None
    ) -> QueryResponse:
        """``fetch_k``: depth of each leg (default ``req.effective_fetch_k()``); ``keep``: fused
        results returned (default ``req.top_k``; a reranker asks for its whole candidate list).
        Work stopped at the caller's deadline (:mod:`hybridmem.deadline`) raises DeadlineExceeded."""
        for attempt in range(self.read_retries + 1):
            try:
                return self._search(req, namespace, fetch_k, keep)
            except StoreUnavailableError:
                # a read is idempotent: after a database restart each pooled connection fails once
                if attempt == self.read_retries or deadline.expired():
                    raise
            except deadline.DeadlineExceeded:
                raise
            except Exception as e:
                if deadline.expired():  # e.g. SQLite's "interrupted": the deadline stopped it
                    raise deadline.DeadlineExceeded("the query ran past its deadline and was stopped") from e
                if isinstance(e, sqlite3.DatabaseError) and not isinstance(e, sqlite3.OperationalError):
                    # damage the check at open did not see (an OperationalError is not damage)
                    path = self.store.path
                    raise StoreError(
                        f"reading {path} failed: {e} (run `hybridmem check` on it; restore from a backup)"
                    ) from e
                raise
        raise AssertionError("unreachable")

    def _search(self, req: QueryRequest, namespace: str, fetch_k: int | None, keep: int | None) -> QueryResponse:
        t0 = time.perf_counter()
        warnings = self._namespace_warning(namespace)
        flt = combine(
            self.validate_filter(namespace, req.metadata_filter, warnings), scope_filter(req, self.store, namespace)
        )
        k = fetch_k or req.effective_fetch_k()
        hp = req.hybrid_params
        # the legs of mode "rerank" are the hybrid ones; reordering is the caller's (Memory's) job
        mode = "hybrid" if req.mode == "rerank" else req.mode
        self.legs.prepare(namespace, mode)
        # the filter is evaluated once, before ranking, and the same allowed set bounds every leg
        allowed = self.legs.allowed(namespace, flt) if flt is not None else None
        if allowed is not None and (allowed.rowids is None or allowed.empty):
            check_scopes(req, self.store, namespace)
        terms = query_tokens(req.search_text) if mode in ("bm25", "hybrid") else []
        # the legs start at once; what this thread does meanwhile (reading the question's time
        # expressions, which start the time legs, and counting the chunks without a vector) no
        # longer waits before them
        legs_t0 = time.perf_counter()
        running = self._start_legs(self._legs(req, namespace, mode, allowed, k, terms))
        try:
            if mode == "hybrid":
                running.update(self._start_legs(self._time_legs(req, namespace, flt, allowed, k)))
            pending = self.store.pending_count(namespace) if mode in ("vector", "hybrid") else 0
        except BaseException:
            for fut in running.values():
                fut.cancel()  # those already running finish on their own; nothing waits for them
            raise
        hits, reports = self._collect_legs(running, legs_t0)
        for name in ("bm25", "dense"):
            reports.setdefault(name, LegReport(status="skipped"))

        order: list[str] = [
            n for n in ("bm25", "dense", "exact", "graph", "time", "time_dense", "recency") if n in hits
        ]
        weights = {
            "bm25": hp.sparse_weight,
            "dense": hp.dense_weight,
            "exact": hp.exact_weight,
            "graph": 1.0 if mode == "graph" else hp.graph_weight,
            "time": hp.time_weight,
            "time_dense": hp.time_weight,
            "recency": hp.recency_weight,
        }
        scale = self._dense_scale(namespace, pending, mode, warnings)
        fusion: str = hp.fusion if "fusion" in hp.model_fields_set else self.default_fusion
        method, used = fusion, fusion
        if fusion == "adaptive":
            method = shipped_model().base
            if "bm25" in hits and "dense" in hits:
                alpha = self._dense_share(hits, terms)
                weights["bm25"] *= 2 * (1 - alpha)
                weights["dense"] *= 2 * alpha
        weights["dense"] *= scale[0]
        if method in SCORE_FUSIONS and pending and "dense" in hits:
            # the dense leg sees only the chunks embedded so far: its scores would favour them over the
            # same chunks waiting for their vectors; RRF's partial-coverage policy handles that
            warnings.append(f"fusion {fusion} runs as rrf while {pending} chunks wait for their vectors")
            method = used = "rrf"
        stand_in = (
            self._stand_in_dense_ranks(namespace, hits)
            if method not in SCORE_FUSIONS and pending and mode == "hybrid" and "dense" in hits
            else []
        )

        def fuse() -> list[tuple[int, float]]:
            if method in SCORE_FUSIONS:
                return score_fusion([hits[n] for n in order], method, [weights[n] for n in order])
            return rrf(
                [[r for r, _ in hits[n]] for n in order],
                k=hp.rrf_k_constant,
                weights=[weights[n] for n in order],
                rank_scales=[scale[1] if n == "dense" else 1.0 for n in order],
                imputed=[stand_in if n == "dense" else [] for n in order],
            )

        fused = fuse()
        center = mode == "hybrid" and hp.dense_centering > 0 and weights["dense"] > 0 and bool(hits.get("dense"))
        feed = mode == "hybrid" and hp.feedback_weight > 0 and bool(terms)
        substance = mode == "hybrid" and hp.substance_weight > 0
        # the fused top, read once for the steps that run only when it is conversation turns
        turns = self._top_turns(namespace, fused) if (center or feed or substance) and fused else []
        if center and turns:
            centered, reports["centering"] = self._centered_dense(req, namespace, flt, allowed, k)
            if centered is not None:
                hits["dense"] = centered
                fused = fuse()
                if [r for r, _ in fused[:FEEDBACK_DOCS]] != turns:  # the top moved: read it again
                    turns = self._top_turns(namespace, fused)
        if feed and fused:
            feedback, reports["feedback"] = self._feedback_leg(namespace, terms, turns, allowed, k)
            if feedback:
                hits["feedback"] = feedback
                order.append("feedback")
                weights["feedback"] = hp.feedback_weight
                fused = fuse()
        if mode == "hybrid" and hp.time_weight > 0 and asks_when(req.search_text):
            when, reports["when"] = self._when_leg(namespace, fused)
            if when:
                hits["when"] = when
                order.append("when")
                weights["when"] = hp.time_weight
                fused = fuse()
        if substance and turns:  # last: a prior over the candidates every other leg brought
            hits["substance"], reports["substance"] = self._substance_leg(namespace, fused, k)
            order.append("substance")
            weights["substance"] = hp.substance_weight
            fused = fuse()
        # weight 0 removes a leg's contribution; a chunk only such legs found is dropped
        live = {r for n in order if weights[n] > 0 for r, _ in hits[n]}
        fused = [(r, s) for r, s in fused if r in live][: keep or req.top_k]
        rows = self.store.fetch([r for r, _ in fused], namespace)
        rank_of = {n: {r: i for i, (r, _) in enumerate(hits[n], start=1)} for n in order}
        score_of = {n: dict(hits[n]) for n in order}
        results = []
        for rid, score in fused:
            row = rows.get(rid)
            if row is None:  # deleted between ranking and fetch
                continue
            results.append(
                QueryResult(
                    chunk_id=row.chunk_id,
                    rrf_score=score,
                    text=row.text,
                    source=row.source,
                    doc_id=row.doc_id,
                    metadata=row.metadata,
                    ranks={n: rank_of[n][rid] for n in order if rid in rank_of[n]},
                    scores={n: score_of[n][rid] for n in order if rid in score_of[n]},
                    **conversation_fields(row),
                )
            )
        context_turns(self.store, namespace, req, results)
        return QueryResponse(
            query_id=req.query_id,
            results=results,
            mode=req.mode,
            namespace=namespace,
            legs=reports,
            pending_vectors=pending,
            took_ms=round((time.perf_counter() - t0) * 1000, 3),
            warnings=warnings,
            fusion=used,
            leg_weights={n: round(weights[n], 6) for n in order},
        )

    def _when_leg(self, namespace: str, fused: list[tuple[int, float]]) -> tuple[list[LegHit], LegReport]:
        """The when leg (scope.py): of the fused top :data:`WHEN_DEPTH`, the conversation turns that
        say when, in their fused order; empty when none or all of them do (it would only echo the
        fusion). A document dates its facts ("in 1857"), a turn says "yesterday": only turns count."""
        t0 = time.perf_counter()
        top = fused[:WHEN_DEPTH]
        held = self.legs.holding(namespace, time_word_terms(), [r for r, _ in top])
        if held:
            held = {r for r, row in self.store.fetch(sorted(held), namespace).items() if is_turn(row)}
        when = [(r, sc) for r, sc in top if r in held] if held and len(held) < len(top) else []
        return when, LegReport(status="ok", took_ms=round((time.perf_counter() - t0) * 1000, 3), returned=len(when))

    def _feedback_leg(
        self, namespace: str, terms: list[str], top: list[int], allowed: Allowed | None, k: int
    ) -> tuple[list[LegHit], LegReport]:
        """The feedback leg (pseudo-relevance feedback, RM3's idea as one RRF leg): BM25 over the query's
        terms plus the :data:`FEEDBACK_TERMS` terms of the fused top :data:`FEEDBACK_DOCS` that the query
        lacks, each scored by the sum of its idf, ln(N / df), over those results that hold it (ties by
        term). It reaches what shares the best results' words but not the question's (LoCoMo: Recall@10
        +0.015, nDCG@10 +0.009). Only when those results are conversation turns: on the document sets
        it cost nDCG@10 (bench/feedback_documents.py). ``top``: those results when they are turns, else
        [] (:meth:`_top_turns`). Same pre-filter as every leg; one more BM25 query, after the fusion
        it reads."""
        t0 = time.perf_counter()
        if not top:
            return [], LegReport(status="ok", took_ms=round((time.perf_counter() - t0) * 1000, 3), returned=0)
        have = set(terms)
        held: dict[str, int] = {}
        for _, toks in self.store.tokens_for(namespace, top):
            for t in set(toks.split()) - have:
                held[t] = held.get(t, 0) + 1
        n, df = self.legs.doc_freqs(namespace, list(held)) if held else (0, {})
        gain = {t: held[t] * math.log(n / f) for t, f in df.items() if 0 < f < n}
        extra = sorted(gain, key=lambda t: (-gain[t], t))[:FEEDBACK_TERMS]
        out = self.legs.sparse(namespace, [*terms, *extra], allowed, k) if extra else []
        return out, LegReport(status="ok", took_ms=round((time.perf_counter() - t0) * 1000, 3), returned=len(out))

    def _substance_leg(self, namespace: str, fused: list[tuple[int, float]], k: int) -> tuple[list[LegHit], LegReport]:
        """The substance leg: the fused top ``k`` (the legs' depth) again, the chunks that hold more
        distinct terms (as indexed) first, ties in fused order; its score is that count. A
        query-independent prior (a document prior, as a length or link prior in web search): a
        turn that says little ("See ya!", "Glad it helped ya, Melanie!") matches every question by
        its speaker's name and sits close to every question in e5's space, while a turn that is
        evidence says something (LoCoMo: median 37 words against 24 for all turns). Only when the
        fused top is conversation turns, like the feedback leg. One read of the candidates' tokens."""
        t0 = time.perf_counter()
        top = [r for r, _ in fused[:k]]
        size = {r: len(set(toks.split())) for r, toks in self.store.tokens_for(namespace, top)}
        pos = {r: i for i, r in enumerate(top)}
        ranked = sorted(top, key=lambda r: (-size.get(r, 0), pos[r]))
        out = [(r, float(size.get(r, 0))) for r in ranked]
        return out, LegReport(status="ok", took_ms=round((time.perf_counter() - t0) * 1000, 3), returned=len(out))

    def _top_turns(self, namespace: str, fused: list[tuple[int, float]]) -> list[int]:
        """The fused top :data:`FEEDBACK_DOCS` when all of them are conversation turns, else []."""
        top = [r for r, _ in fused[:FEEDBACK_DOCS]]
        rows = self.store.fetch(top, namespace) if top else {}
        return top if top and all(r in rows and is_turn(rows[r]) for r in top) else []

    def _centered_dense(
        self, req: QueryRequest, namespace: str, flt: Filter | None, allowed: Allowed | None, k: int
    ) -> tuple[list[LegHit] | None, LegReport]:
        """The dense leg again, its query vector less ``dense_centering`` times its scope's mean vector
        (:meth:`_scope_mean`), for a query whose first fused results are conversation turns: short
        generic turns ("Cool, talk soon!") sit close to every question, and the mean is what the
        scope's turns share (hubness; centering as in CSLS, Conneau et al. 2018, and Mu &
        Viswanath's all-but-the-top). LoCoMo: docs/agent-memory.md. On the document sets it cost
        nDCG@10, so documents keep the plain leg. None (and the plain leg stays) when the scope has no
        vector or the second search failed; the report says which."""
        t0 = time.perf_counter()

        def ms() -> float:
            return round((time.perf_counter() - t0) * 1000, 3)

        try:
            mean = self._scope_mean(namespace, flt, allowed)
            if mean is None:
                return None, LegReport(status="ok", took_ms=ms(), returned=0)
            encoder = CenteredEncoder(self.encoder, req.hybrid_params.dense_centering * mean)
            out = self.legs.dense(namespace, req.search_text, encoder, allowed, k)
        except (deadline.DeadlineExceeded, StoreUnavailableError):
            raise
        except Exception as e:  # the plain dense leg's answer stands
            if deadline.expired():
                raise deadline.DeadlineExceeded("the query ran past its deadline and was stopped") from e
            return None, LegReport(status="error", took_ms=ms(), error=f"{type(e).__name__}: {e}")
        return out, LegReport(status="ok", took_ms=ms(), returned=len(out))

    def _scope_mean(self, namespace: str, flt: Filter | None, allowed: Allowed | None) -> np.ndarray | None:
        """The mean vector of the query's scope (what its pre-filter allows, else the namespace),
        over at most :data:`CENTER_SAMPLE` of its chunks evenly spaced by rowid (deterministic: the
        same store state gives the same mean in every process); cached until a vector is written."""
        key = (namespace, flt, self.store.vector_version(namespace))
        hit = self._means.get(key)
        if hit is None:
            rows = (
                self.legs.allowed_rowids(namespace, allowed)
                if allowed is not None
                else self.store.filter_rowids(namespace, None)
            )
            rows = np.unique(np.asarray(rows, np.int64))
            if len(rows) > CENTER_SAMPLE:
                rows = rows[np.linspace(0, len(rows) - 1, CENTER_SAMPLE).round().astype(np.int64)]
            vecs = self.store.vectors_for(rows.tolist(), namespace)[1] if len(rows) else None
            hit = (np.asarray(vecs, np.float32).mean(axis=0) if vecs is not None and len(vecs) else None,)
            self._means.put(key, hit)
        mean: np.ndarray | None = hit[0]
        return mean

    @staticmethod
    def _dense_share(hits: dict[str, list[LegHit]], terms: list[str]) -> float:
        """The adaptive fusion's dense share α of the two legs' weight for this query (½ = equal weights)."""
        feats = query_features(hits["bm25"], hits["dense"], len(terms), any(is_identifier(t) for t in terms))
        return shipped_model().dense_share(feats)

    def _start_legs(self, legs: dict[str, Callable[[], list[LegHit]]]) -> dict[str, Future[tuple[list[LegHit], float]]]:
        """Each leg started on the executor; its future gives (hits, milliseconds it took)."""

        def timed(fn: Callable[[], list[LegHit]]) -> tuple[list[LegHit], float]:
            s = time.perf_counter()
            out = fn()
            return out, (time.perf_counter() - s) * 1000

        return {name: self.executor.submit(deadline.bind(timed), fn) for name, fn in legs.items()}

    def _collect_legs(
        self, futures: dict[str, Future[tuple[list[LegHit], float]]], started: float
    ) -> tuple[dict[str, list[LegHit]], dict[str, LegReport]]:
        """The started legs' answers within one timeout shared from ``started``: the hits of those
        that answered and a report per leg. One failing leg does not sink the others; all failing does."""
        hits: dict[str, list[LegHit]] = {}
        reports: dict[str, LegReport] = {}
        errors: list[BaseException] = []
        legs_end = started + self.leg_timeout
        for name, fut in futures.items():
            try:
                out, ms = fut.result(timeout=max(0.0, legs_end - time.perf_counter()))
                hits[name] = out
                reports[name] = LegReport(status="ok", took_ms=round(ms, 3), returned=len(out))
            except FutureTimeout:
                reports[name] = LegReport(status="timeout", error=f"no answer within {self.leg_timeout:g}s")
            except Exception as e:  # one failing leg must not sink the other
                errors.append(e)
                reports[name] = LegReport(status="error", error=f"{type(e).__name__}: {e}")
        if errors and deadline.expired():  # the legs were stopped at the deadline: say so, not why
            raise deadline.DeadlineExceeded("the query ran past its deadline and was stopped") from errors[0]
        if not hits and errors:
            err = errors[0]
            raise err if isinstance(err, HybridMemError) else HybridMemError(str(err))
        return hits, reports

    def _latest_occurred(self, namespace: str, flt: Filter | None) -> float | None:
        """The latest occurred_at the scope holds, cached per (namespace, filter) until a write."""
        key = (namespace, flt, self.store.chunk_version(namespace))
        hit = self._latest.get(key)
        if hit is None:
            hit = (self.store.latest_occurred(namespace, flt),)
            self._latest.put(key, hit)
        value: float | None = hit[0]
        return value

    def _time_legs(
        self, req: QueryRequest, namespace: str, flt: Filter | None, base: Allowed | None, k: int
    ) -> dict[str, Callable[[], list[LegHit]]]:
        """``base``: what the query's own filter allows (already evaluated). The time leg (BM25 and dense among the memories that occurred when the question says,
        see :mod:`.scope`) and the recency leg, when their weights and the question call for them."""
        legs: dict[str, Callable[[], list[LegHit]]] = {}
        hp = req.hybrid_params
        if hp.recency_weight > 0:
            legs["recency"] = lambda: self.store.recent(namespace, flt, k)
        if hp.time_weight <= 0:
            return legs
        named = time_filter(time_mentions(req, namespace, flt, self._latest_occurred))
        if named is None:
            return legs
        tflt = combine(flt, named)
        assert tflt is not None
        allowed = self.legs.allowed(namespace, tflt)
        n_time = len(self.legs.allowed_rowids(namespace, allowed))
        n_all = (
            len(self.legs.allowed_rowids(namespace, base)) if base is not None else self.store.chunk_count(namespace)
        )
        if n_time == 0 or n_time >= n_all:  # nothing then, or everything: the leg would only echo BM25
            return legs
        terms = query_tokens(req.search_text)
        legs["time"] = lambda: self.legs.sparse(namespace, terms, allowed, k)
        legs["time_dense"] = lambda: self.legs.dense(namespace, req.search_text, self.encoder, allowed, k)
        return legs

    def _legs(
        self, req: QueryRequest, namespace: str, mode: str, allowed: Allowed | None, k: int, terms: list[str]
    ) -> dict[str, Callable[[], list[LegHit]]]:
        """The legs a query of ``mode`` runs, each a call bound to its inputs (``terms``: the query's
        BM25 terms, in modes bm25 and hybrid)."""
        legs: dict[str, Callable[[], list[LegHit]]] = {}
        if mode in ("bm25", "hybrid"):
            legs["bm25"] = lambda: self.legs.sparse(namespace, terms, allowed, k)
        if mode in ("vector", "hybrid"):
            legs["dense"] = lambda: self.legs.dense(namespace, req.search_text, self.encoder, allowed, k)
        # the query is tokenized once: identifiers are the identifier-shaped terms of the BM25 leg
        idents = (
            [t for t in terms if is_identifier(t)] if mode == "hybrid" and req.hybrid_params.exact_weight > 0 else []
        )
        if idents:
            # chunks holding an identifier the query cites, ranked by BM25 over those identifiers only
            legs["exact"] = lambda: self.legs.sparse(namespace, idents, allowed, k)
        graph_leg = self.graph_leg
        hp = req.hybrid_params
        if graph_leg is not None and (mode == "graph" or (mode == "hybrid" and hp.graph_weight > 0)):

            def graph() -> list[LegHit]:
                rows = self.legs.allowed_rowids(namespace, allowed) if allowed is not None else None
                return [] if rows is not None and len(rows) == 0 else graph_leg(namespace, req.search_text, rows, k)

            legs["graph"] = graph
        if allowed is not None and allowed.empty:  # the filter allows nothing: every leg answers empty
            return {name: list for name in legs}
        return legs


def build_request(request: QueryRequest | dict[str, Any] | str, **kwargs: Any) -> QueryRequest:
    """A :class:`QueryRequest` from a request, its dict, or the search text plus keyword fields
    (``top_k``, ``mode``, ``metadata_filter``, and the ``hybrid_params`` fields by name);
    pydantic's first error becomes a ValidationError naming the field."""
    from pydantic import ValidationError as PydanticError

    if isinstance(request, QueryRequest) and not kwargs:
        return request
    if isinstance(request, QueryRequest):
        data = request.model_dump(exclude_unset=True)
    elif isinstance(request, str):
        data = {"search_text": request}
    elif isinstance(request, dict):
        data = dict(request)
    else:
        raise ValidationError(f"a query is a string, a dict or a QueryRequest, got {type(request).__name__}")
    hp = {
        k: kwargs.pop(k)
        for k in (
            "dense_weight",
            "sparse_weight",
            "rrf_k_constant",
            "exact_weight",
            "graph_weight",
            "feedback_weight",
            "dense_centering",
            "substance_weight",
        )
        if k in kwargs
    }
    if hp:
        data["hybrid_params"] = {**data.get("hybrid_params", {}), **hp}
    data.update(kwargs)
    try:
        return QueryRequest(**data)
    except PydanticError as e:
        err = e.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "request"
        raise ValidationError(err["msg"].removeprefix("Value error, "), field=field) from None
