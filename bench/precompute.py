"""Embed the shared BEIR sets once into the bench cache (``.bench-cache/embeddings.db``).

    python bench/precompute.py e5 scifact piaf-fr xquad-de xquad-zh

Documents are embedded as ``title\\n\\ntext`` (the text hybridmem indexes for a BEIR record), queries
as their text, so later runs of bench/ and eval read them from the cache.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from hybridmem.embed import create_embedder  # noqa: E402
from hybridmem.embed.cache import CachedEmbedder  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "beir"
CACHE = ROOT / ".bench-cache" / "embeddings.db"


def doc_text(rec: dict) -> str:
    title = (rec.get("title") or "").strip()
    return f"{title}\n\n{rec['text']}" if title else rec["text"]


def main() -> None:
    spec, *sets = sys.argv[1:]
    emb = CachedEmbedder(create_embedder(spec), CACHE)
    for name in sets:
        docs = [doc_text(json.loads(line)) for line in open(DATA / name / "corpus.jsonl")]
        queries = [json.loads(line)["text"] for line in open(DATA / name / "queries.jsonl")]
        t = time.time()
        for q in queries:
            emb.embed_query(q)
        docs.sort(key=len)  # similar lengths per batch: less padding
        for i in range(0, len(docs), 64):
            emb.embed_documents(docs[i : i + 64])
            print(f"{name}: {i + 64}/{len(docs)} docs, {time.time() - t:.0f}s", flush=True)
        print(f"{name}: done in {time.time() - t:.0f}s (hits {emb.hits}, misses {emb.misses})", flush=True)


if __name__ == "__main__":
    main()
