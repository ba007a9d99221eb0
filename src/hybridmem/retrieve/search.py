"""One query: validate the filter, run the legs of the leg table (:mod:`.leg_table`) concurrently behind
the same pre-filter, fuse them (weighted RRF by default), and build the contract response with per-leg provenance."""

from __future__ import annotations

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
from .fusion import SCORE_FUSIONS, query_features, shipped_model
from .language import cross_language
from .later_legs import FEEDBACK_DOCS, FEEDBACK_TERMS, WHEN_DEPTH, top_turns
from .leg_table import LATER_LEGS, LEGS, Fusion, Query
from .legs import Legs
from .scope import (
    check_scopes,
    combine,
    context_turns,
    conversation_fields,
    scope_filter,
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
    #: drop | none (_dense_scale; each measured in docs/evaluation.md)
    partial_dense: str = "impute"
    #: retries of a query whose database connection was lost (a PostgreSQL restart)
    read_retries: int = 4
    #: the policy ``drop``'s threshold (share of the namespace's chunks that have a vector)
    min_dense_coverage: float = 0.5
    #: the fusion of a query whose hybrid_params name none (Memory(fusion=), HYBRIDMEM_FUSION)
    default_fusion: str = "rrf"
    #: a leg's call made to run in its thread as in the caller's (a read replica's route:
    #: ``PostgresStore.bind_route``); None: as it is
    carry: Callable[[Callable[..., Any]], Callable[..., Any]] | None = None
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
        q, warnings = self._query(req, namespace, fetch_k)
        # the legs start at once; what this thread does meanwhile (reading the question's time
        # expressions, which start the time legs, and counting the chunks without a vector) no
        # longer waits before them
        legs_t0 = time.perf_counter()
        running = self._start_legs(self._calls(q, 0))
        try:
            if q.mode == "hybrid":
                running.update(self._start_legs({**self._calls(q, 1), **self._calls(q, 2)}))
            pending = self.store.pending_count(namespace) if q.mode in ("vector", "hybrid") else 0
        except BaseException:
            for fut in running.values():
                fut.cancel()  # those already running finish on their own; nothing waits for them
            raise
        hits, reports = self._collect_legs(running, legs_t0)
        for name in ("bm25", "dense"):
            reports.setdefault(name, LegReport(status="skipped"))
        f = self._fusion(q, hits, pending, warnings)
        fused = f.fuse()
        # the fused top, read once for the steps that run only when it is conversation turns
        later = [leg for leg in LATER_LEGS if leg.applies(q)]
        center = q.mode == "hybrid" and q.hp.dense_centering > 0 and f.weights["dense"] > 0 and bool(hits.get("dense"))
        wants_turns = center or any(leg.needs in ("fused", "turns") for leg in later)
        turns = top_turns(self.store, namespace, fused) if wants_turns and fused else []
        if center and turns:
            centered, reports["centering"] = self._centered_dense(req, namespace, q.flt, q.allowed, q.k)
            if centered is not None:
                hits["dense"] = centered
                fused = f.fuse()
                if [r for r, _ in fused[:FEEDBACK_DOCS]] != turns:  # the top moved: read it again
                    turns = top_turns(self.store, namespace, fused)
        for leg in later:
            if (leg.needs == "fused" and not fused) or (leg.needs == "turns" and not turns):
                continue
            out, reports[leg.name] = leg.run(self, q, fused, turns)
            if out or leg.always:
                hits[leg.name] = out
                f.order.append(leg.name)
                fused = f.fuse()
        # weight 0 removes a leg's contribution; a chunk only such legs found is dropped
        live = {r for n in f.order if f.weights[n] > 0 for r, _ in hits[n]}
        fused = [(r, sc) for r, sc in fused if r in live][: keep or req.top_k]
        return QueryResponse(
            query_id=req.query_id,
            results=self._results(q, fused, hits, f.order),
            mode=req.mode,
            namespace=namespace,
            legs=reports,
            pending_vectors=pending,
            took_ms=round((time.perf_counter() - t0) * 1000, 3),
            warnings=warnings,
            fusion=f.used,
            leg_weights={n: round(f.weights[n], 6) for n in f.order},
            language=q.language,
        )

    def _query(self, req: QueryRequest, namespace: str, fetch_k: int | None) -> tuple[Query, list[str]]:
        """The query's inputs to its legs, and the warnings so far (an unknown namespace or filter key)."""
        warnings = self._namespace_warning(namespace)
        flt = combine(
            self.validate_filter(namespace, req.metadata_filter, warnings), scope_filter(req, self.store, namespace)
        )
        # the legs of mode "rerank" are the hybrid ones; reordering is the caller's (Memory's) job
        mode = "hybrid" if req.mode == "rerank" else req.mode
        self.legs.prepare(namespace, mode)
        # the filter is evaluated once, before ranking, and the same allowed set bounds every leg
        allowed = self.legs.allowed(namespace, flt) if flt is not None else None
        if allowed is not None and (allowed.rowids is None or allowed.empty):
            check_scopes(req, self.store, namespace)
        terms = query_tokens(req.search_text) if mode in ("bm25", "hybrid") else []
        k = fetch_k or req.effective_fetch_k()
        return Query(req, namespace, mode, flt, allowed, k, terms), warnings

    def _calls(self, q: Query, stage: int) -> dict[str, Callable[[], list[LegHit]]]:
        """The legs of ``stage`` (:data:`LEGS`) the query runs, each a call bound to its inputs."""
        calls = {leg.name: call for leg in LEGS if leg.stage == stage and (call := leg.start(self, q)) is not None}
        if stage == 0 and q.allowed is not None and q.allowed.empty:  # the filter allows nothing: every leg
            return {name: list for name in calls}  # answers empty
        return calls

    def _fusion(self, q: Query, hits: dict[str, list[LegHit]], pending: int, warnings: list[str]) -> Fusion:
        """How the legs' answers are fused: the method, the legs in order and their weights (adaptive
        fusion's dense share, the partial-coverage policy of the dense leg)."""
        hp, mode = q.hp, q.mode
        order = [leg.name for leg in LEGS if leg.name in hits]
        weights = {leg.name: leg.weight(hp, mode) for leg in LEGS}
        weights.update({leg.name: leg.weight(hp, mode) for leg in LATER_LEGS})
        scale = self._dense_scale(q.namespace, pending, mode, warnings)
        fusion: str = hp.fusion if "fusion" in hp.model_fields_set else self.default_fusion
        method, used = fusion, fusion
        if fusion == "adaptive":
            method = shipped_model().base
            if "bm25" in hits and "dense" in hits:
                alpha = self._dense_share(hits, q.terms)
                weights["bm25"] *= 2 * (1 - alpha)
                weights["dense"] *= 2 * alpha
        weights["dense"] *= scale[0]
        if mode == "hybrid" and hp.language_aware and weights["bm25"] > 0 and hits.get("bm25") and hits.get("dense"):
            q.language = cross_language(self.store, q.namespace, q.req.search_text, hits["dense"])
            if q.language is not None:
                weights["bm25"] *= 1 - q.language.cross_share
        if method in SCORE_FUSIONS and pending and "dense" in hits:
            # the dense leg sees only the chunks embedded so far: its scores would favour them over the
            # same chunks waiting for their vectors; RRF's partial-coverage policy handles that
            warnings.append(f"fusion {fusion} runs as rrf while {pending} chunks wait for their vectors")
            method = used = "rrf"
        stand_in = (
            self._stand_in_dense_ranks(q.namespace, hits)
            if method not in SCORE_FUSIONS and pending and mode == "hybrid" and "dense" in hits
            else []
        )
        return Fusion(hits, order, weights, method, used, hp.rrf_k_constant, scale[1], stand_in)

    def _results(
        self, q: Query, fused: list[tuple[int, float]], hits: dict[str, list[LegHit]], order: list[str]
    ) -> list[QueryResult]:
        """The fused chunks as results, with each leg's rank and score of them (per-leg provenance)."""
        rows = self.store.fetch([r for r, _ in fused], q.namespace)
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
        context_turns(self.store, q.namespace, q.req, results)
        return results

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
        return out, LegReport(status="ok", took_ms=ms(), returned=len(out), plan=getattr(out, "plan", None))

    def _scope_mean(self, namespace: str, flt: Filter | None, allowed: Allowed | None) -> np.ndarray | None:
        """The mean vector of the query's scope (what its pre-filter allows, else the namespace),
        over at most :data:`CENTER_SAMPLE` of its chunks evenly spaced by rowid (deterministic: the
        same store state gives the same mean in every process); cached until a vector is written."""
        key = (namespace, repr(flt), self.store.vector_version(namespace))  # repr: 0 and False differ
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

        run = deadline.bind(timed)
        if self.carry is not None:
            run = self.carry(run)
        return {name: self.executor.submit(run, fn) for name, fn in legs.items()}

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
                reports[name] = LegReport(
                    status="ok", took_ms=round(ms, 3), returned=len(out), plan=getattr(out, "plan", None)
                )
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
        key = (namespace, repr(flt), self.store.chunk_version(namespace))  # repr: 0 and False differ
        hit = self._latest.get(key)
        if hit is None:
            hit = (self.store.latest_occurred(namespace, flt),)
            self._latest.put(key, hit)
        value: float | None = hit[0]
        return value


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
