"""What the LlamaIndex adapter costs: the same queries on the same store, in one process, through

- ``Memory.search`` (the reference),
- ``HybridMemRetriever.retrieve`` (hybridmem.integrations.llamaindex),
- ``index.as_retriever(...)`` of a ``VectorStoreIndex`` on ``HybridMemVectorStore`` (LlamaIndex's
  own ``VectorIndexRetriever`` building a ``VectorStoreQuery``),

    python -m bench integrations_llamaindex [--docs 5000] [--queries 200] [--top-k 10]
        [--out bench/results/integrations/llamaindex.json]

The corpus is synthetic (seeded): short incident notes with metadata, one hybridmem document per
LlamaIndex node, the hash embedder (no model: the numbers are the store, the retrieval pipeline and
the adapter). Every query runs once untimed first (the query vector is then cached for every path
alike), then each path in turn, the order rotated from query to query so drift falls on all paths.
Reported: p50 / p95 / mean per path and mode, and each adapter's p50 and p95 over Memory.search's
(target: at most 1.10x). Needs ``pip install -e '.[llamaindex]'``.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

from llama_index.core import StorageContext, VectorStoreIndex  # noqa: E402
from llama_index.core.schema import TextNode  # noqa: E402

from hybridmem import Memory  # noqa: E402
from hybridmem.integrations.llamaindex import HybridMemEmbedding, HybridMemRetriever, HybridMemVectorStore  # noqa: E402

SEED = 20260619
WORDS = """database connection pool timeout latency replica primary failover query index cache eviction memory
leak heap thread deadlock lock queue consumer producer broker partition offset retry backoff circuit breaker
gateway proxy balancer upstream certificate expiry rotation secret token session login permission firewall
socket handshake throughput disk volume snapshot backup restore migration schema rollback deploy release
canary cluster node container registry scheduler worker batch pipeline stream webhook endpoint payload""".split()
MODES = {"hybrid": "hybrid", "vector": "default", "bm25": "text_search"}  # contract mode -> LlamaIndex mode


def corpus(n: int, rng: random.Random) -> list[TextNode]:
    envs = ("production", "staging", "dev")
    return [
        TextNode(
            id_=f"n{i}",
            text=" ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 60))) + f" HEL-{rng.randint(1000, 9999)}.",
            metadata={"environment": rng.choice(envs), "service": f"svc-{rng.randrange(20)}", "severity": i % 4 + 1},
        )
        for i in range(n)
    ]


def _stats(ms: list[float]) -> dict[str, float]:
    ms = sorted(ms)
    return {
        "p50_ms": round(statistics.median(ms), 3),
        "p95_ms": round(ms[min(len(ms) - 1, int(0.95 * len(ms)))], 3),
        "mean_ms": round(statistics.fmean(ms), 3),
    }


def _queries(rng: random.Random, n: int) -> list[str]:
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 5))) for _ in range(n)]


def measure(paths: dict[str, Callable[[str], Any]], queries: list[str], fresh: list[str] | None) -> dict[str, Any]:
    """p50/p95/mean per path. ``fresh`` None: every path runs ``queries`` (each once untimed first, so
    the query vector is cached for all alike). Else each round gives each path a query of its own
    from ``fresh`` (never seen: the query embedding is timed too), the assignment rotated."""
    names = list(paths)
    for q in queries:  # warm-up: the indexes loaded (and, without fresh, the query vectors cached)
        for fn in paths.values():
            fn(q)
    times: dict[str, list[float]] = {n: [] for n in names}
    for i in range(len(queries)):
        order = names[i % len(names) :] + names[: i % len(names)]
        for j, name in enumerate(order):
            q = queries[i] if fresh is None else fresh[i * len(names) + j]
            t = time.perf_counter()
            paths[name](q)
            times[name].append((time.perf_counter() - t) * 1000)
    stats: dict[str, Any] = {n: _stats(t) for n, t in times.items()}
    base = stats[names[0]]
    for name in names[1:]:
        stats[name]["ratio_p50"] = round(stats[name]["p50_ms"] / base["p50_ms"], 3)
        stats[name]["ratio_p95"] = round(stats[name]["p95_ms"] / base["p95_ms"], 3)
        stats[name]["overhead_p50_us"] = round((stats[name]["p50_ms"] - base["p50_ms"]) * 1000, 1)
    return stats


def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    rng = random.Random(SEED)
    nodes = corpus(args.docs, rng)
    store = HybridMemVectorStore(path=workdir / "li.db", embedder=args.embedder)
    ctx = StorageContext.from_defaults(vector_store=store)
    embed_model = HybridMemEmbedding(store, skip_documents=True)
    VectorStoreIndex([], storage_context=ctx, embed_model=embed_model)  # LlamaIndex's lazy imports, untimed
    t = time.perf_counter()
    index = VectorStoreIndex(nodes, storage_context=ctx, embed_model=embed_model)
    build_s = time.perf_counter() - t
    mem: Memory = store.client
    mem.wait_for_indexes()
    top_k = args.top_k
    results: dict[str, Any] = {}
    for mode, li_mode in MODES.items():
        retriever = HybridMemRetriever(store, mode=mode, top_k=top_k)
        vir = index.as_retriever(vector_store_query_mode=li_mode, similarity_top_k=top_k)
        paths: dict[str, Callable[[str], Any]] = {
            "Memory.search": lambda q, m=mode: mem.search({"search_text": q, "mode": m, "top_k": top_k}),
            "HybridMemRetriever": retriever.retrieve,
            "VectorStoreIndex.as_retriever": vir.retrieve,
        }
        fresh = _queries(rng, args.queries * len(paths)) if args.fresh_queries else None
        results[mode] = measure(paths, _queries(rng, args.queries), fresh)
    store.close()
    return {"build_s": round(build_s, 2), "retrieve_floor_us": retrieve_floor_us(top_k), "modes": results}


def retrieve_floor_us(top_k: int, n: int = 3000) -> float:
    """What LlamaIndex's ``BaseRetriever.retrieve`` costs around any retriever (its instrumentation
    spans and events, the callback manager): a retriever returning ``top_k`` ready nodes, p50 in µs."""
    from llama_index.core.retrievers import BaseRetriever  # noqa: PLC0415
    from llama_index.core.schema import NodeWithScore, QueryBundle  # noqa: PLC0415

    ready = [NodeWithScore(node=TextNode(text="x"), score=1.0) for _ in range(top_k)]

    class Ready(BaseRetriever):
        def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            return list(ready)

    r, times = Ready(), []
    for _ in range(n):
        t = time.perf_counter()
        r.retrieve("q")
        times.append((time.perf_counter() - t) * 1e6)
    return round(statistics.median(times), 1)


def report(data: dict[str, Any]) -> None:
    vectors = "query embedding timed" if data["fresh_queries"] else "query vectors cached"
    print(
        f"{data['docs']} docs, {data['queries']} queries, top_k {data['top_k']}, {data['embedder']} embedder, {vectors}"
    )
    print(f"index build (VectorStoreIndex over HybridMemVectorStore, vectors waited for): {data['build_s']} s")
    print(
        f"LlamaIndex's BaseRetriever.retrieve around a retriever of {data['top_k']} ready nodes: "
        f"{data['retrieve_floor_us']} µs (p50)"
    )
    head = f"{'mode':7} {'path':31} {'p50 ms':>8} {'p95 ms':>8} {'mean ms':>8} {'p50 x':>6} {'p95 x':>6} {'+p50 µs':>8}"
    print(head)
    for mode, stats in data["modes"].items():
        for name, s in stats.items():
            r50, r95, extra = s.get("ratio_p50", ""), s.get("ratio_p95", ""), s.get("overhead_p50_us", "")
            print(
                f"{mode:7} {name:31} {s['p50_ms']:8.3f} {s['p95_ms']:8.3f} {s['mean_ms']:8.3f} "
                f"{r50:>6} {r95:>6} {extra:>8}"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=5000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--top-k", type=int, default=10)
    ap.add_argument("--embedder", default="hash", help="hybridmem embedder spec (hash, e5, ...)")
    ap.add_argument("--fresh-queries", action="store_true", help="time the query embedding too (no cached vector)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "integrations" / "llamaindex.json")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = run(args, Path(tmp))
    import llama_index.core  # noqa: PLC0415

    data = {
        "docs": args.docs,
        "queries": args.queries,
        "top_k": args.top_k,
        "embedder": args.embedder,
        "fresh_queries": args.fresh_queries,
        "llama_index_core": llama_index.core.__version__,
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}",
        **data,
    }
    report(data)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=2) + "\n")
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
