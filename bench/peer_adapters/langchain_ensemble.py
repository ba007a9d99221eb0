"""LangChain: ``EnsembleRetriever`` (weighted RRF, c = 60) of ``BM25Retriever`` (rank_bm25 BM25Okapi) and a
FAISS vector store (``IndexFlatL2``, exact; vectors are unit length, so L2 ranks as cosine), weights
0.5 / 0.5, each leg returning ``depth`` documents."""

from __future__ import annotations

from pathlib import Path

from langchain_classic.retrievers import EnsembleRetriever
from langchain_community.retrievers import BM25Retriever
from langchain_community.vectorstores import FAISS
from langchain_core.embeddings import Embeddings

from . import simple_tokens


class _LookupEmbeddings(Embeddings):
    def __init__(self, emb) -> None:
        self.emb = emb

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.emb.embed_documents(texts).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.emb.embed_query(text).tolist()


class Peer:
    name = "langchain-ensemble"
    notes = (
        "langchain-classic EnsembleRetriever(weights=[0.5, 0.5], c=60, id_key='id') of "
        "langchain-community BM25Retriever.from_texts(preprocess_func=lower-cased \\w+ tokens, k=depth) "
        "and FAISS.from_texts(...).as_retriever(k=depth) (IndexFlatL2, exact)"
    )

    def __init__(self, emb, workdir: Path, depth: int) -> None:
        self.emb = _LookupEmbeddings(emb)
        self.depth = depth

    def build(self, docs: list[dict]) -> None:
        texts = [d["text"] for d in docs]
        metas = [{"id": d["id"]} for d in docs]
        bm25 = BM25Retriever.from_texts(texts, metadatas=metas, preprocess_func=simple_tokens)
        bm25.k = self.depth
        faiss = FAISS.from_texts(texts, self.emb, metadatas=metas)
        dense = faiss.as_retriever(search_kwargs={"k": self.depth})
        self.retriever = EnsembleRetriever(retrievers=[bm25, dense], weights=[0.5, 0.5], id_key="id")

    def search(self, text: str, k: int) -> list[str]:
        docs = self.retriever.invoke(text)
        return list(dict.fromkeys(d.metadata["id"] for d in docs))[:k]
