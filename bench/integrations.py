"""Latency of the LangChain and LangGraph adapters against ``Memory.search`` on the same store.

    python -m bench integrations [--docs 5000] [--queries 200] [--out bench/results/integrations/langchain-langgraph.json]

One process, one store file, the hash embedder (no model: the numbers are the adapters' overhead on
top of the retrieval pipeline). The LangChain ``HybridMemVectorStore.similarity_search`` and
``HybridMemRetriever.invoke`` share the Memory and namespace of the baseline ``Memory.search``; the
LangGraph ``HybridMemStore.search`` has its own namespace of the same documents as items, and its
baseline is ``Memory.search`` with the request the store sends (the namespace-prefix pre-filter
included), so each ratio compares like with like. ``retriever._get_relevant_documents`` is the
retriever's own code without LangChain's ``invoke`` machinery (callback manager, run events), which
costs about 0.1 ms a call by itself. Each query runs the baseline and the adapter back
to back (the order alternating), after a warm-up, so drift hits both alike. Target: ratio <= 1.10.
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

from hybridmem import Memory  # noqa: E402
from hybridmem.integrations.langchain import HybridMemRetriever, HybridMemVectorStore  # noqa: E402
from hybridmem.integrations.langgraph import HybridMemStore  # noqa: E402

SEED = 20261202
WORDS = """database connection pool timeout latency replica primary failover query index cache eviction
memory leak heap garbage collector thread deadlock lock contention queue consumer producer broker partition
offset retry backoff circuit breaker gateway proxy load balancer upstream downstream certificate expiry rotation
secret vault token session cookie login authentication permission role policy firewall port socket handshake
packet throughput bandwidth disk volume snapshot backup restore migration schema rollback deploy release canary
rollout cluster node pod container image registry scheduler cron job worker batch pipeline stream event""".split()
SERVICES = [f"svc-{i}" for i in range(20)]
K = 10


def corpus(n: int, rng: random.Random) -> list[dict[str, Any]]:
    docs = []
    for i in range(n):
        text = " ".join(rng.choices(WORDS, k=rng.randint(12, 40))) + f" ticket HEL-{1000 + i}"
        docs.append({"id": f"d{i}", "text": text, "metadata": {"service": rng.choice(SERVICES), "sev": i % 5}})
    return docs


def queries(n: int, rng: random.Random) -> list[str]:
    out = []
    for i in range(n):
        if i % 4 == 3:
            out.append(f"HEL-{1000 + rng.randrange(5000)}")
        else:
            out.append(" ".join(rng.choices(WORDS, k=rng.randint(2, 6))))
    return out


def pair(base: Callable[[str], Any], adapter: Callable[[str], Any], qs: list[str]) -> dict[str, Any]:
    """p50/p95 (ms) of both, run back to back per query (order alternating), and their ratios."""
    for q in qs[:20]:  # warm-up: caches, lazily built indexes
        base(q), adapter(q)
    tb: list[float] = []
    ta: list[float] = []
    for i, q in enumerate(qs):
        order = [(base, tb), (adapter, ta)] if i % 2 == 0 else [(adapter, ta), (base, tb)]
        for fn, sink in order:
            t0 = time.perf_counter()
            fn(q)
            sink.append((time.perf_counter() - t0) * 1000)

    def pct(xs: list[float], p: float) -> float:
        return round(statistics.quantiles(xs, n=100, method="inclusive")[int(p) - 1], 3)

    out = {
        "baseline_p50_ms": pct(tb, 50),
        "baseline_p95_ms": pct(tb, 95),
        "adapter_p50_ms": pct(ta, 50),
        "adapter_p95_ms": pct(ta, 95),
    }
    out["ratio_p50"] = round(out["adapter_p50_ms"] / out["baseline_p50_ms"], 3)
    out["ratio_p95"] = round(out["adapter_p95_ms"] / out["baseline_p95_ms"], 3)
    return out


def langchain_rows(mem: Memory, qs: list[str]) -> dict[str, Any]:
    vs = HybridMemVectorStore(mem, namespace="bench")
    retriever = HybridMemRetriever(memory=mem, namespace="bench", top_k=K)

    def base(q: str) -> Any:
        return mem.search({"search_text": q, "top_k": K, "namespace": "bench", "mode": "hybrid"})

    flt = {"service": {"$in": SERVICES[:10]}}

    def base_f(q: str) -> Any:
        return mem.search({"search_text": q, "top_k": K, "namespace": "bench", "metadata_filter": flt})

    return {
        "langchain.similarity_search": pair(base, lambda q: vs.similarity_search(q, k=K), qs),
        "langchain.similarity_search(filter)": pair(base_f, lambda q: vs.similarity_search(q, k=K, filter=flt), qs),
        "langchain.retriever.invoke": pair(base, lambda q: retriever.invoke(q), qs),
        # the adapter's own code, without LangChain's Runnable machinery (callback manager, run events)
        "langchain.retriever._get_relevant_documents": pair(
            base,
            lambda q: retriever._get_relevant_documents(q, run_manager=None),
            qs,  # type: ignore[arg-type]
        ),
    }


def langgraph_rows(mem: Memory, docs: list[dict[str, Any]], qs: list[str]) -> dict[str, Any]:
    store = HybridMemStore(mem, hm_namespace="bench-lg")
    t0 = time.perf_counter()
    for i in range(0, len(docs), 500):
        with_ns = [(("memories", d["metadata"]["service"]), d["id"], {"content": d["text"]}) for d in docs[i : i + 500]]
        store.batch([_put(ns, key, value) for ns, key, value in with_ns])
    put_s = time.perf_counter() - t0
    mem.wait_for_indexes(namespace="bench-lg", timeout=300)
    flt = {"$and": [{"lg.kind": "item"}, {"lg.ns.0": "memories"}, {"lg.indexed": True}]}

    def base(q: str) -> Any:
        return mem.search({"search_text": q, "top_k": K, "namespace": "bench-lg", "metadata_filter": flt})

    flt_user = {"$and": [{"lg.kind": "item"}, {"lg.ns.0": "memories", "lg.ns.1": "svc-3"}, {"lg.indexed": True}]}

    def base_user(q: str) -> Any:
        return mem.search({"search_text": q, "top_k": K, "namespace": "bench-lg", "metadata_filter": flt_user})

    rows = {
        "langgraph.search(('memories',))": pair(base, lambda q: store.search(("memories",), query=q, limit=K), qs),
        "langgraph.search(('memories','svc-3'))": pair(
            base_user, lambda q: store.search(("memories", "svc-3"), query=q, limit=K), qs
        ),
    }
    rows["langgraph.put_batch_docs_per_s"] = round(len(docs) / put_s, 1)
    return rows


def _put(ns: tuple[str, ...], key: str, value: dict[str, Any]) -> Any:
    from langgraph.store.base import PutOp

    return PutOp(ns, key, value)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=5000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "integrations" / "langchain-langgraph.json"))
    args = ap.parse_args()
    rng = random.Random(SEED)
    docs, qs = corpus(args.docs, rng), queries(args.queries, rng)
    with tempfile.TemporaryDirectory() as tmp:
        mem = Memory(Path(tmp) / "bench.db", embedder="hash", chunk_size=None)
        try:
            mem.add_documents(docs, namespace="bench", batch_size=500)
            mem.wait_for_vectors(600)
            mem.wait_for_indexes(namespace="bench", timeout=300)
            rows = {**langchain_rows(mem, qs), **langgraph_rows(mem, docs, qs)}
        finally:
            mem.close()
    result = {
        "docs": args.docs,
        "queries": args.queries,
        "top_k": K,
        "embedder": "hash:256",
        "python": platform.python_version(),
        "machine": platform.machine(),
        "target_ratio": 1.10,
        "results": rows,
    }
    for name, row in rows.items():
        if isinstance(row, dict):
            print(
                f"{name:46s} base p50 {row['baseline_p50_ms']:7.3f} p95 {row['baseline_p95_ms']:7.3f} | adapter p50 "
                f"{row['adapter_p50_ms']:7.3f} p95 {row['adapter_p95_ms']:7.3f} | ratio {row['ratio_p50']:.3f} / "
                f"{row['ratio_p95']:.3f}"
            )
        else:
            print(f"{name:46s} {row}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"saved {out}")


if __name__ == "__main__":
    main()
