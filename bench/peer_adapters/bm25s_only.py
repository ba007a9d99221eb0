"""bm25s alone (the sparse single-leg baseline): ``bm25s.tokenize`` with English stop words and the
Snowball English stemmer (PyStemmer), ``BM25()`` defaults (Lucene variant, k1 = 1.5, b = 0.75)."""

from __future__ import annotations

from pathlib import Path

import bm25s
import Stemmer


class Peer:
    name = "bm25s"
    notes = "bm25s.tokenize(stopwords='en', stemmer=Stemmer('english')); bm25s.BM25().index(); retrieve(k)"

    def __init__(self, emb, workdir: Path, depth: int) -> None:
        self.stemmer = Stemmer.Stemmer("english")

    def build(self, docs: list[dict]) -> None:
        self.ids = [d["id"] for d in docs]
        tokens = bm25s.tokenize([d["text"] for d in docs], stopwords="en", stemmer=self.stemmer, show_progress=False)
        self.retriever = bm25s.BM25()
        self.retriever.index(tokens, show_progress=False)

    def search(self, text: str, k: int) -> list[str]:
        q = bm25s.tokenize([text], stopwords="en", stemmer=self.stemmer, show_progress=False)
        if not q.vocab:  # nothing left after stop words
            return []
        idx, scores = self.retriever.retrieve(q, k=k, show_progress=False, n_threads=1)
        return [self.ids[i] for i, s in zip(idx[0], scores[0]) if s > 0]
