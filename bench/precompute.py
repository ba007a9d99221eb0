"""Embed the shared BEIR sets once into the bench cache (``.bench-cache/embeddings.db``).

    python -m bench precompute e5 scifact piaf-fr xquad-de xquad-zh

Documents are embedded as ``title\\n\\ntext`` (the text hybridmem indexes for a BEIR record), queries
as their text, so later runs of bench/ and eval read them from the cache.

When a set was actually embedded (cache misses), its cost is written to
``bench/results/embed-cost-<spec>-<set>.json`` (seconds for queries and documents, tokens counted
with the embedder's tokenizer when it has one, tokens/s), which bench/peers.py reports apart.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from hybridmem.embed import create_embedder  # noqa: E402
from hybridmem.embed.cache import CachedEmbedder  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "beir"
CACHE = ROOT / ".bench-cache" / "embeddings.db"
RESULTS = ROOT / "bench" / "results"


def doc_text(rec: dict) -> str:
    title = (rec.get("title") or "").strip()
    return f"{title}\n\n{rec['text']}" if title else rec["text"]


def main() -> None:
    spec, *sets = sys.argv[1:]
    t = time.time()
    inner = create_embedder(spec)
    load_s = time.time() - t
    emb = CachedEmbedder(inner, CACHE)
    for name in sets:
        docs = [doc_text(json.loads(line)) for line in open(DATA / name / "corpus.jsonl")]
        queries = [json.loads(line)["text"] for line in open(DATA / name / "queries.jsonl")]
        misses0 = emb.misses
        t = time.time()
        for q in queries:
            emb.embed_query(q)
        queries_s = time.time() - t
        q_misses = emb.misses - misses0
        docs.sort(key=len)  # similar lengths per batch: less padding
        t_docs = time.time()
        for i in range(0, len(docs), 64):
            emb.embed_documents(docs[i : i + 64])
            print(f"{name}: {i + 64}/{len(docs)} docs, {time.time() - t:.0f}s", flush=True)
        docs_s = time.time() - t_docs
        d_misses = emb.misses - misses0 - q_misses
        print(f"{name}: done in {time.time() - t:.0f}s (hits {emb.hits}, misses {emb.misses})", flush=True)
        if d_misses >= 0.9 * len(docs):  # (nearly) all embedded now, not read from the cache: the cost is real
            write_cost(spec, name, inner, docs, queries, docs_s, queries_s, load_s)


def write_cost(
    spec: str,
    name: str,
    inner,
    docs: list[str],
    queries: list[str],
    docs_s: float,
    queries_s: float,
    load_s: float | None,
    note: str | None = None,
) -> dict:
    count = getattr(inner, "token_count", None)
    doc_tokens = sum(count(d) for d in docs) if count else None
    out = {
        "embedder": getattr(inner, "name", spec),
        "spec": spec,
        "set": name,
        "docs": len(docs),
        "queries": len(queries),
        "docs_s": round(docs_s, 1),
        "queries_s": round(queries_s, 1),
        "model_load_s": round(load_s, 2) if load_s is not None else None,
        "doc_tokens": doc_tokens,
        "token_count": "embedder tokenizer (incl. special tokens, truncated as fed)" if count else None,
        "doc_tokens_per_s": round(doc_tokens / docs_s, 1) if doc_tokens else None,
        "docs_per_s": round(len(docs) / docs_s, 2),
        "query_ms_mean": round(1000 * queries_s / len(queries), 2),
        "threads": getattr(inner, "threads", None) or min(2, os.cpu_count() or 1),
        "cpus": os.cpu_count(),
        "loadavg_end": [round(x, 2) for x in os.getloadavg()],
        "when": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    if note:
        out["note"] = note
    path = RESULTS / f"embed-cost-{spec.replace(':', '_')}-{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2))
    print(f"{name}: embedding cost -> {path}", flush=True)
    return out


if __name__ == "__main__":
    main()
