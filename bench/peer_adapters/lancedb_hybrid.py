"""LanceDB native hybrid search: a local table (id, text, vector), its native full-text index on
``text``, ``search(query_type="hybrid")`` with the query vector and text, fused by ``RRFReranker``
(k = 60). No vector index is created, so the vector side is LanceDB's exact flat scan (cosine)."""

from __future__ import annotations

from pathlib import Path

import lancedb
import pyarrow as pa
from lancedb.rerankers import RRFReranker


class Peer:
    name = "lancedb-hybrid"
    notes = (
        "lancedb.connect(temp dir).create_table(id, text, vector float32[dim]); create_fts_index('text') "
        "(native FTS); search(query_type='hybrid').vector(q).text(q).distance_type('cosine')"
        ".rerank(RRFReranker()).limit(k); no ANN index (exact scan)"
    )

    def __init__(self, emb, workdir: Path, depth: int) -> None:
        self.emb = emb
        self.db = lancedb.connect(str(Path(workdir) / "lancedb"))
        self.depth = depth
        self.reranker = RRFReranker()

    def build(self, docs: list[dict]) -> None:
        texts = [d["text"] for d in docs]
        vecs = self.emb.embed_documents(texts)
        dim = vecs.shape[1]
        table = pa.table(
            {
                "id": pa.array([d["id"] for d in docs], pa.string()),
                "text": pa.array(texts, pa.string()),
                "vector": pa.FixedSizeListArray.from_arrays(pa.array(vecs.reshape(-1), pa.float32()), dim),
            }
        )
        self.table = self.db.create_table("docs", data=table, mode="overwrite")
        self.table.create_fts_index("text", replace=True)

    def search(self, text: str, k: int) -> list[str]:
        q = self.emb.embed_query(text)
        rows = (
            self.table.search(query_type="hybrid")
            .vector(q)
            .text(text)
            .distance_type("cosine")
            .rerank(self.reranker)
            .limit(k)
            .select(["id"])
            .to_list()
        )
        return list(dict.fromkeys(r["id"] for r in rows))[:k]
