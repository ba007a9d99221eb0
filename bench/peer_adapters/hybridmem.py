"""hybridmem: ``Memory`` in a temporary SQLite file, ``mode="hybrid"`` (BM25 + dense + exact-identifier
legs, weighted RRF, k = 60), defaults otherwise (``fetch_k`` = 2 × top_k per leg; exact dense search
below 50,000 chunks, HNSW above)."""

from __future__ import annotations

from pathlib import Path

from hybridmem import Memory


class Peer:
    name = "hybridmem"
    exact_threshold: int | None = None  # None: Memory's default
    notes = (
        "Memory(sqlite temp file, chunk_size=None, auto_embed=False), add_documents (1000 docs a call, each "
        "with its vector from the same embedder as the peers: the precomputed-vector bulk path), then one bm25 and one vector query to load the BM25 postings and the dense index "
        "(waiting for the HNSW build above 50k chunks): all inside build time; search(mode='hybrid', "
        "top_k=k, fetch_k=depth)"
    )

    def __init__(self, emb, workdir: Path, depth: int) -> None:
        kw = {} if self.exact_threshold is None else {"exact_threshold": self.exact_threshold}
        self.mem = Memory(Path(workdir) / "hybridmem.db", embedder=emb, chunk_size=None, auto_embed=False, **kw)
        self.emb = emb
        self.depth = depth
        self.last = None

    def build(self, docs: list[dict]) -> None:
        # the same vectors as the peers, given with the documents (the bulk path: no embedding queue)
        for i in range(0, len(docs), 1000):
            part = docs[i : i + 1000]
            vecs = self.emb.embed_documents([d["text"] for d in part])
            self.mem.add_documents([{**d, "vector": v} for d, v in zip(part, vecs)])
        self.mem.embed_pending()  # nothing left to embed: a no-op kept for a corpus given without vectors
        # make every leg ready, as the other systems are after build(): the first BM25 query loads the
        # postings; the first vector query loads the vectors and, above exact_threshold, starts the
        # HNSW build in the background (answered exactly meanwhile): wait until the graph is ready.
        probe = next(iter(self.emb.queries))  # a text the look-up embedder knows
        self.mem.search({"search_text": probe, "top_k": 10, "mode": "bm25"})
        self.mem.search({"search_text": probe, "top_k": 10, "mode": "vector"})
        self.mem.wait_for_indexes()
        self.dense_kind = self.mem.stats().dense_index

    def search(self, text: str, k: int) -> list[str]:
        resp = self.mem.search({"search_text": text, "top_k": k, "mode": "hybrid", "fetch_k": self.depth})
        self.last = resp
        bad = [f"{n} {r.status}" for n, r in resp.legs.items() if r.status in ("error", "timeout")]
        if bad:
            raise RuntimeError(f"hybridmem legs failed: {bad}")
        return list(dict.fromkeys(r.doc_id for r in resp.results))

    def legs_ms(self) -> dict[str, float]:
        return {n: r.took_ms for n, r in self.last.legs.items()} if self.last else {}


class PeerExact(Peer):
    """Same, with exact dense search at every size (no HNSW): like-for-like with the exact peers."""

    name = "hybridmem-exact"
    exact_threshold = 10**12
    notes = Peer.notes.replace("(HNSW build above 50k chunks)", "(exact_threshold=1e12: exact dense search, no HNSW)")
