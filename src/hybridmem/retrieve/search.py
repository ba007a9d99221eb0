"""One query: validate the filter, run the BM25 and dense legs concurrently behind the same
pre-filter, fuse them with weighted RRF, and build the contract response with per-leg provenance."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Executor, Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass

import numpy as np

from ..errors import FilterError, HybridMemError
from ..models import LegReport, QueryRequest, QueryResponse, QueryResult
from ..store.base import Store
from ..text.tokenize import is_identifier, query_tokens
from .filters import Filter, filter_keys, parse_filter
from .fusion import rrf

__all__ = ["Searcher", "LegHit"]

LegHit = tuple[int, float]  # (chunk rowid, raw score)


@dataclass
class Searcher:
    store: Store
    executor: Executor
    #: (namespace, query text, filter allowed rowids or None, k) -> hits; raises if unavailable
    dense_search: Callable[[str, str, np.ndarray | None, int], list[LegHit]]
    #: (namespace, query terms, filter allowed rowids or None, k) -> BM25 hits
    sparse_search: Callable[[str, list[str], np.ndarray | None, int], list[LegHit]]
    #: (namespace, parsed filter) -> rowids the filter allows (computed once per query, shared by legs)
    allowed_for: Callable[[str, Filter], np.ndarray]
    pending_count: Callable[[str], int]
    leg_timeout: float = 30.0
    #: (namespace, query text, filter allowed rowids or None, k) -> graph-leg hits (hybridmem.graph)
    graph_search: Callable[[str, str, np.ndarray | None, int], list[LegHit]] | None = None
    #: the store runs BM25 and dense search itself (PostgreSQL): those legs get the parsed filter,
    #: compiled into their SQL, instead of an allowed-rowid array; the graph leg still gets rowids
    native: bool = False
    #: called with (namespace, mode) before the legs start, outside their timeout: loads what the
    #: legs need and this process has not loaded yet (a cold index load is not a slow leg)
    prepare: Callable[[str, str], None] | None = None

    def validate_filter(self, namespace: str, spec: dict) -> Filter | None:
        flt = parse_filter(spec)
        unknown = filter_keys(flt) - self.store.metadata_keys(namespace)
        if unknown:
            known = sorted(self.store.metadata_keys(namespace))
            raise FilterError(
                f"unknown metadata key{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, sorted(unknown)))} "
                f"in namespace {namespace!r}; known keys: {', '.join(known) if known else '(none yet)'}"
            )
        return flt

    def search(self, req: QueryRequest, namespace: str, *, fetch_k: int | None = None,
               keep: int | None = None) -> QueryResponse:
        """``fetch_k``: depth of each leg (default ``req.effective_fetch_k()``); ``keep``: fused
        results returned (default ``req.top_k``; a reranker asks for its whole candidate list)."""
        t0 = time.perf_counter()
        flt = self.validate_filter(namespace, req.metadata_filter)
        k = fetch_k or req.effective_fetch_k()
        hp = req.hybrid_params
        # the legs of mode "rerank" are the hybrid ones; reordering is the caller's (Memory's) job
        mode = "hybrid" if req.mode == "rerank" else req.mode
        if self.prepare is not None:
            self.prepare(namespace, mode)
        # the filter is evaluated once, before ranking, and the same allowed set bounds every leg
        allowed: np.ndarray | Filter | None = None
        if flt is not None:
            allowed = flt if self.native else self.allowed_for(namespace, flt)
        empty = allowed is not None and not self.native and len(allowed) == 0
        legs: dict[str, Callable[[], list[LegHit]]] = {}
        terms = query_tokens(req.search_text) if mode in ("bm25", "hybrid") else []
        if mode in ("bm25", "hybrid"):
            legs["bm25"] = lambda: [] if empty else self.sparse_search(namespace, terms, allowed, k)
        if mode in ("vector", "hybrid"):
            legs["dense"] = lambda: [] if empty else self.dense_search(namespace, req.search_text, allowed, k)
        # the query is tokenized once: identifiers are the identifier-shaped terms of the BM25 leg
        idents = [t for t in terms if is_identifier(t)] if mode == "hybrid" and hp.exact_weight > 0 else []
        if idents:
            # chunks holding an identifier the query cites, ranked by BM25 over those identifiers only
            legs["exact"] = lambda: [] if empty else self.sparse_search(namespace, idents, allowed, k)
        graph_search = self.graph_search
        if graph_search is not None and (mode == "graph" or (mode == "hybrid" and hp.graph_weight > 0)):
            def graph_leg() -> list[LegHit]:
                scope = self.allowed_for(namespace, flt) if self.native and flt is not None else allowed
                return [] if empty or (scope is not None and len(scope) == 0) else graph_search(
                    namespace, req.search_text, scope, k)

            legs["graph"] = graph_leg

        def timed(fn: Callable[[], list[LegHit]]) -> tuple[list[LegHit], float]:
            s = time.perf_counter()
            out = fn()
            return out, (time.perf_counter() - s) * 1000

        futures: dict[str, Future] = {name: self.executor.submit(timed, fn) for name, fn in legs.items()}
        hits: dict[str, list[LegHit]] = {}
        reports: dict[str, LegReport] = {}
        errors: list[BaseException] = []
        deadline = time.perf_counter() + self.leg_timeout
        for name, fut in futures.items():
            try:
                out, ms = fut.result(timeout=max(0.0, deadline - time.perf_counter()))
                hits[name] = out
                reports[name] = LegReport(status="ok", took_ms=round(ms, 3), returned=len(out))
            except FutureTimeout:
                reports[name] = LegReport(status="timeout", error=f"no answer within {self.leg_timeout:g}s")
            except Exception as e:  # one failing leg must not sink the other
                errors.append(e)
                reports[name] = LegReport(status="error", error=f"{type(e).__name__}: {e}")
        if not hits and errors:
            err = errors[0]
            raise err if isinstance(err, HybridMemError) else HybridMemError(str(err))
        for name in ("bm25", "dense"):
            reports.setdefault(name, LegReport(status="skipped"))

        order = [n for n in ("bm25", "dense", "exact", "graph") if n in hits]
        weights = {"bm25": hp.sparse_weight, "dense": hp.dense_weight, "exact": hp.exact_weight,
                   "graph": 1.0 if mode == "graph" else hp.graph_weight}
        fused = rrf([[r for r, _ in hits[n]] for n in order], k=hp.rrf_k_constant, weights=[weights[n] for n in order])
        # weight 0 removes a leg's contribution; a chunk only that leg found scores 0 and is dropped
        fused = [(r, s) for r, s in fused if s > 0][: keep or req.top_k]
        rows = self.store.fetch([r for r, _ in fused])
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
                )
            )
        return QueryResponse(
            query_id=req.query_id,
            results=results,
            mode=req.mode,
            namespace=namespace,
            legs=reports,
            pending_vectors=self.pending_count(namespace) if mode not in ("bm25", "graph") else 0,
            took_ms=round((time.perf_counter() - t0) * 1000, 3),
        )
