"""Exact dense search in numpy alone (the dense single-leg baseline): one float32 matrix of unit
vectors, ``M @ q``, ``argpartition`` for the top k."""

from __future__ import annotations

from pathlib import Path

import numpy as np


class Peer:
    name = "numpy-exact"
    notes = "float32 matrix (N x dim) of unit vectors; scores = M @ q; argpartition + argsort of the top k"

    def __init__(self, emb, workdir: Path, depth: int) -> None:
        self.emb = emb

    def build(self, docs: list[dict]) -> None:
        self.ids = [d["id"] for d in docs]
        self.matrix = np.ascontiguousarray(self.emb.embed_documents([d["text"] for d in docs]), dtype=np.float32)

    def search(self, text: str, k: int) -> list[str]:
        s = self.matrix @ self.emb.embed_query(text)
        k = min(k, len(s))
        top = np.argpartition(-s, k - 1)[:k]
        return [self.ids[i] for i in top[np.argsort(-s[top])]]
