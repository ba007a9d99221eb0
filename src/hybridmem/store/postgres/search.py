"""What the PostgreSQL store offers the SQL legs (``hybridmem.retrieve.pg_legs``): BM25 aggregated
from its postings (:meth:`search_sparse`), pgvector's HNSW with iterative scans
(:meth:`search_dense`), document frequencies, term look-ups, and the filter compiled to the WHERE
fragment they all join on."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ...config import BM25_B as B
from ...config import BM25_IDF_FLOOR
from ...config import BM25_K1 as K1
from ...filters import Filter
from ..base import Allowed, PlannedHits
from ..sql.filters import to_pg_sql
from .core import _Core
from .plan import (
    COSTS,
    ESTIMATE_TTL_S,
    SAMPLE_ROWS,
    SPARSE_COSTS,
    Costs,
    DensePlan,
    SparseCosts,
    choose_plan,
    choose_sparse_plan,
    crossover_rows,
)
from .schema import _DOC_JOIN, _one
from .wire import vec_text

__all__ = ["_Search"]


class _Search(_Core):
    """BM25 and dense search in SQL, under a filter."""

    #: choose the dense plan under a filter from the cost model (off: HNSW, as unfiltered)
    filter_plan: bool = True
    #: the cost model's constants (``plan.COSTS``, measured)
    plan_costs: Costs = COSTS
    #: the BM25 leg's (``plan.SPARSE_COSTS``, measured)
    sparse_costs: SparseCosts = SPARSE_COSTS

    @staticmethod
    def compile_filter(flt: Filter) -> Allowed:
        """``flt`` compiled once per query into the WHERE fragment over ``d.metadata`` every SQL leg
        joins on (``hybridmem.retrieve.pg_legs.PostgresLegs.allowed``)."""
        return Allowed(flt, sql=to_pg_sql(flt, "d.metadata"))

    @staticmethod
    def _where(scope: Allowed | Filter | None) -> tuple[str, list[Any]]:
        """A filter's WHERE fragment over ``d.metadata`` (the chunk's document, joined as
        :data:`_DOC_JOIN`): compiled once per query (``Allowed.sql``), or here for a bare filter."""
        if isinstance(scope, Allowed):
            if scope.sql is not None:
                return scope.sql[0], list(scope.sql[1])
            scope = scope.flt
        return to_pg_sql(scope, "d.metadata")

    def search_sparse(
        self, namespace: str, tokens: Sequence[str], flt: Allowed | Filter | None, k: int, *, plan: str | None = None
    ) -> PlannedHits:
        """Top-k (rowid, BM25) among chunks holding a query term and passing the filter (a pre-filter:
        statistics are the namespace's, ranking is among allowed chunks). Ties go to the lower rowid.
        Under a filter, the cheaper of reading every posting of the terms and joining the filter, or
        the allowed chunks first and their postings by key (``plan.choose_sparse_plan``; ``plan``
        "postings" / "allowed" forces one); which ran is in ``.plan``."""
        ns = self.namespace_id(namespace)
        terms = list(dict.fromkeys(tokens))
        if ns is None or not terms or k <= 0:
            return PlannedHits()
        where, fparams = self._where(flt)
        # statistics and idf once per query (materialized), then float8 arithmetic per posting:
        # tf·(k1+1) / (tf + k1·(1−b) + (k1·b/avgdl)·dl) is the BM25 term weight rearranged
        head = f"""
            WITH s AS MATERIALIZED (
                     SELECT n_chunks::float8 AS n,
                            {K1}::float8 * (1.0::float8 - {B}::float8) AS c1,
                            {K1}::float8 * {B}::float8 / NULLIF(total_len::float8 / NULLIF(n_chunks, 0), 0) AS c2
                     FROM namespace_stats WHERE ns_id = %s),
                 w AS MATERIALIZED (
                     SELECT d.term, CASE WHEN x.idf > 0 THEN x.idf ELSE {BM25_IDF_FLOOR}::float8 END AS idf
                     FROM term_df d CROSS JOIN s,
                          LATERAL (SELECT ln((s.n - d.df::float8 + 0.5::float8) / (d.df::float8 + 0.5::float8)) AS idf) x
                     WHERE d.ns_id = %s AND d.term = ANY(%s))
            SELECT p.chunk_rowid,
                   sum(w.idf * p.tf::float8 * {K1 + 1.0}::float8 / (p.tf::float8 + s.c1 + s.c2 * p.dl::float8)) AS score
            FROM w JOIN postings p ON p.ns_id = %s AND p.term = w.term"""
        tail = " GROUP BY p.chunk_rowid ORDER BY score DESC, p.chunk_rowid LIMIT %s"
        with self._conn() as conn:
            note = self._sparse_plan(conn, ns, terms, where, fparams, plan) if flt is not None else None
            if note is not None and note.startswith("allowed"):
                allowed = f"SELECT c.id FROM chunks c {_DOC_JOIN} AND {where} WHERE c.ns_id = %s"
                sql = f"{head} AND p.chunk_rowid = ANY(ARRAY({allowed})) CROSS JOIN s {tail}"
                params = [ns, ns, terms, ns, *fparams, ns, k]
            else:
                join = f"JOIN chunks c ON c.id = p.chunk_rowid {_DOC_JOIN} AND {where}" if flt is not None else ""
                sql = f"{head} CROSS JOIN s {join} {tail}"
                params = [ns, ns, terms, ns, *fparams, k]
            rows = conn.execute(sql, params).fetchall()
        return PlannedHits(((int(r), float(s)) for r, s in rows), plan=note)

    def _sparse_plan(
        self, conn: Any, ns: int, terms: list[str], where: str, fparams: list[Any], forced: str | None
    ) -> str | None:
        """The BM25 leg's plan under a filter (None with ``filter_plan`` off: the postings, as before)."""
        if forced is None and not self.filter_plan:
            return None
        n, postings = _one(
            conn.execute(
                "SELECT (SELECT n_chunks FROM namespace_stats WHERE ns_id = %s), "
                "(SELECT coalesce(sum(df), 0) FROM term_df WHERE ns_id = %s AND term = ANY(%s))",
                (ns, ns, terms),
            ).fetchone()
        )
        est = self._estimate_allowed(conn, ns, where, fparams, int(n or 0))
        note = choose_sparse_plan(est, len(terms), int(postings), self.sparse_costs)
        if forced is not None and not note.startswith(forced):
            note = f"{forced} (forced); model: {note}"
        return note

    def doc_freqs(self, namespace: str, terms: Sequence[str]) -> tuple[int, dict[str, int]]:
        """(n_chunks, {term: df}) from the namespace's statistics, what :meth:`search_sparse` scores with."""
        ns = self.namespace_id(namespace)
        if ns is None:
            return 0, {}
        with self._conn() as conn:
            row = conn.execute("SELECT n_chunks FROM namespace_stats WHERE ns_id=%s", (ns,)).fetchone()
            rows = (
                conn.execute(
                    "SELECT term, df FROM term_df WHERE ns_id=%s AND term = ANY(%s) AND df > 0",
                    (ns, list(dict.fromkeys(terms))),
                ).fetchall()
                if terms
                else []
            )
        return (int(row[0]) if row else 0), {str(t): int(n) for t, n in rows}

    def holding(self, namespace: str, terms: Sequence[str], rowids: Sequence[int]) -> set[int]:
        """The chunks among ``rowids`` holding at least one of ``terms`` (index look-ups in the postings'
        primary key, one per term and chunk)."""
        ns = self.namespace_id(namespace)
        if ns is None or not terms or not rowids:
            return set()
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT DISTINCT p.chunk_rowid FROM unnest(%s::text[]) t(term) JOIN postings p "
                "ON p.ns_id = %s AND p.term = t.term AND p.chunk_rowid = ANY(%s)",
                (list(dict.fromkeys(terms)), ns, [int(r) for r in rowids]),
            ).fetchall()
        return {int(r[0]) for r in rows}

    def search_dense(
        self,
        namespace: str,
        q: np.ndarray,
        flt: Allowed | Filter | None,
        k: int,
        *,
        exact: bool = False,
        plan: str | None = None,
    ) -> PlannedHits:
        """Top-k (rowid, cosine similarity), the plan that found them in ``.plan``. Unfiltered: the
        HNSW index with iterative scans (exact below ``exact_threshold`` vectors). Filtered: the
        cheaper of an exact scan of the allowed rows and HNSW with ``ef_search`` and
        ``max_scan_tuples`` set from the filter's estimated selectivity (``plan.choose_plan``; with
        ``filter_plan`` off, HNSW as unfiltered). Either way exact when the index returns fewer than
        ``k`` rows while more pass the filter. ``exact`` / ``plan`` ("exact", "hnsw") force one."""
        ns = self.namespace_id(namespace)
        if ns is None or k <= 0:
            return PlannedHits()
        where, fparams = self._where(flt)
        join = f"JOIN chunks c ON c.id = v.chunk_rowid {_DOC_JOIN} AND {where}" if flt is not None else ""
        qv = vec_text(np.asarray(q, np.float32).ravel())
        head = f"SELECT v.chunk_rowid, v.embedding <=> %s::vector AS d FROM vectors v {join} WHERE v.ns_id = %s "
        sql = head + "ORDER BY v.embedding <=> %s::vector LIMIT %s"
        # exact: ordered by an expression the HNSW index does not serve, so the planner scans the
        # namespace's (or the filter's) rows through their own indexes and sorts them. (Turning index
        # scans off instead also turned off that index: every exact query of a small namespace
        # scanned every namespace's vectors — 41 vs 11 ms p50 with 1,000 namespaces, bench/namespaces.py.)
        sql_exact = head + "ORDER BY (v.embedding <=> %s::vector) + 0 LIMIT %s"
        params = [qv, *fparams, ns, qv, k]
        if flt is not None:  # the allowed rows first (the filter's indexes), then their vectors by key
            sql_exact = (
                "SELECT v.chunk_rowid, v.embedding <=> %s::vector AS d FROM vectors v WHERE v.chunk_rowid = ANY(ARRAY("
                f"SELECT c.id FROM chunks c {_DOC_JOIN} AND {where} WHERE c.ns_id = %s)) AND v.ns_id = %s "
                "ORDER BY (v.embedding <=> %s::vector) + 0 LIMIT %s"
            )
            params_exact = [qv, *fparams, ns, ns, qv, k]
        else:
            params_exact = params
        with self._conn() as conn, conn.transaction():
            chosen = self._dense_plan(conn, ns, join, where, fparams, k, "exact" if exact else plan)
            if isinstance(chosen, DensePlan):
                conn.execute(f"SET LOCAL hnsw.max_scan_tuples = {chosen.max_scan_tuples}")
                ef, kind, note = chosen.ef_search, chosen.kind, chosen.describe()
            else:
                ef, kind, note = max(self.hnsw_ef_search, min(int(k), 1000)), chosen, chosen
            conn.execute(f"SET LOCAL hnsw.ef_search = {ef}")
            conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            rows = (conn.execute(sql_exact, params_exact) if kind == "exact" else conn.execute(sql, params)).fetchall()
            if len(rows) < k and kind != "exact":
                n = _one(
                    conn.execute(f"SELECT count(*) FROM vectors v {join} WHERE v.ns_id = %s", [*fparams, ns]).fetchone()
                )[0]
                if n > len(rows):  # the index scan gave up early: exact scan over the allowed rows
                    note = f"{note}; index gave {len(rows)} < {k} of {n} allowed: finished exactly"
                    rows = conn.execute(sql_exact, params_exact).fetchall()
        rows.sort(key=lambda r: (r[1], r[0]))  # relaxed order: re-sort exactly
        return PlannedHits(((int(r), 1.0 - float(d)) for r, d in rows), plan=note)

    def _dense_plan(
        self, conn: Any, ns: int, join: str, where: str, fparams: list[Any], k: int, forced: str | None
    ) -> DensePlan | str:
        """The dense query's plan: "exact" for a small namespace (or when forced), "hnsw" unfiltered
        (or with ``filter_plan`` off), else :func:`choose_plan` on the filter's estimated rows."""
        if forced == "exact":
            return "exact"
        n_vec = self._vector_count(conn, ns)
        if forced is None and n_vec < self.exact_threshold:
            return "exact"
        if not join or (forced is None and not self.filter_plan):
            return "hnsw"
        est = self._estimate_allowed(conn, ns, where, fparams, n_vec)
        chosen = choose_plan(est, n_vec, k, self.hnsw_ef_search, self.plan_costs)
        if forced is not None and forced != chosen.kind:
            chosen = replace(chosen, kind=forced)
        return chosen

    def _vector_count(self, conn: Any, ns: int) -> int:
        """The namespace's vectors, counted once per vector version."""
        version = _one(conn.execute("SELECT vec_version FROM namespace_stats WHERE ns_id=%s", (ns,)).fetchone())[0]
        cached = self._vcount.get(ns)
        if cached is None or cached[0] != version:
            n_vec = _one(conn.execute("SELECT count(*) FROM vectors WHERE ns_id=%s", (ns,)).fetchone())[0]
            cached = self._vcount[ns] = (version, int(n_vec))
        return cached[1]

    def _estimate_allowed(self, conn: Any, ns: int, where: str, fparams: list[Any], n_vec: int) -> float:
        """The vectors the filter allows, cached per (namespace, filter) for ``ESTIMATE_TTL_S``:
        counted exactly up to the plans' crossover (:func:`crossover_rows`: below it the count is
        the exact plan's input, and costs less than the exact scan), above it estimated from a
        sample of the documents' pages (``TABLESAMPLE SYSTEM``, about :data:`SAMPLE_ROWS` rows).
        (The planner's own estimate of the compiled filter was 28 % for a filter every row passes.)"""
        key = (ns, where, repr(fparams))
        now = time.monotonic()
        hit = self._estimates.get(key)
        if hit is not None and now - hit[0] < ESTIMATE_TTL_S:
            return hit[1]
        cap = crossover_rows(n_vec, self.hnsw_ef_search, self.plan_costs)
        # the exact plan's own first step (chunks through the filter's indexes), stopped at the cap
        bounded = f"SELECT count(*) FROM (SELECT 1 FROM chunks c {_DOC_JOIN} AND {where} WHERE c.ns_id = %s LIMIT %s) s"
        est = float(_one(conn.execute(bounded, [*fparams, ns, cap]).fetchone())[0])
        if est >= cap:
            tuples = _one(conn.execute("SELECT reltuples FROM pg_class WHERE relname = 'documents'").fetchone())[0]
            pct = min(100.0, 100.0 * SAMPLE_ROWS / max(float(tuples), 1.0))
            seen, passed = _one(
                conn.execute(
                    f"SELECT count(*), count(*) FILTER (WHERE {where}) FROM documents d TABLESAMPLE SYSTEM ({pct:.6f}) "
                    "WHERE d.ns_id = %s",
                    [*fparams, ns],
                ).fetchone()
            )
            if seen >= 50:  # enough of the namespace sampled to read a share from
                est = max(est, n_vec * passed / seen)
        if len(self._estimates) >= 4096:
            self._estimates.clear()
        self._estimates[key] = (now, est)
        return est

    def bm25(self, namespace: str, tokens: Sequence[str], flt: Filter | None, k: int) -> list[tuple[int, float]]:
        return self.search_sparse(namespace, tokens, flt, k)

    def filter_rowids(
        self, namespace: str, flt: Allowed | Filter | None, among: Iterable[int] | None = None
    ) -> np.ndarray:
        ns = self.namespace_id(namespace)
        if ns is None:
            return np.zeros(0, np.int64)
        where, params = self._where(flt)
        if among is not None:
            where, params = f"{where} AND c.id = ANY(%s)", [*params, [int(r) for r in among]]
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT c.id FROM chunks c {_DOC_JOIN} WHERE c.ns_id=%s AND {where} ORDER BY c.id", [ns, *params]
            ).fetchall()
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
