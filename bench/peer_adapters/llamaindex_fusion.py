"""LlamaIndex: ``QueryFusionRetriever(mode="reciprocal_rerank", num_queries=1)`` over a
``VectorStoreIndex`` retriever (default in-memory ``SimpleVectorStore``, exact cosine) and the
``llama-index-retrievers-bm25`` ``BM25Retriever`` (bm25s inside, English Snowball stemmer), each
returning ``depth`` nodes. ``num_queries=1`` generates no extra queries, so no LLM is called
(``MockLLM`` is passed so nothing tries to resolve an OpenAI default).

llama-index-retrievers-bm25 0.8.0 declares ``PyStemmer<3``; it is installed with ``--no-deps`` next
to hybridmem's PyStemmer 3.x (the ``Stemmer.Stemmer`` API it uses is unchanged)."""

from __future__ import annotations

from pathlib import Path

import Stemmer
from llama_index.core import Settings, VectorStoreIndex
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.llms import MockLLM
from llama_index.core.retrievers import QueryFusionRetriever
from llama_index.core.schema import TextNode
from llama_index.retrievers.bm25 import BM25Retriever


class _LookupEmbedding(BaseEmbedding):
    def __init__(self, emb, **kw) -> None:
        super().__init__(model_name=emb.name, embed_batch_size=1000, **kw)
        self._emb = emb

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._emb.embed_query(query).tolist()

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._emb.embed_documents([text])[0].tolist()

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._emb.embed_documents(texts).tolist()


class Peer:
    name = "llamaindex-fusion"
    notes = (
        "llama-index-core QueryFusionRetriever(mode='reciprocal_rerank', num_queries=1, use_async=False, "
        "llm=MockLLM()) of VectorStoreIndex(nodes).as_retriever(similarity_top_k=depth) (SimpleVectorStore, "
        "exact) and llama-index-retrievers-bm25 BM25Retriever.from_defaults(nodes, "
        "stemmer=Stemmer('english'), language='english', similarity_top_k=depth)"
    )

    def __init__(self, emb, workdir: Path, depth: int) -> None:
        self.embed_model = _LookupEmbedding(emb)
        Settings.embed_model = self.embed_model
        Settings.llm = MockLLM()
        self.depth = depth

    def build(self, docs: list[dict]) -> None:
        nodes = [TextNode(text=d["text"], id_=d["id"]) for d in docs]
        index = VectorStoreIndex(nodes, embed_model=self.embed_model, show_progress=False)
        vec = index.as_retriever(similarity_top_k=self.depth)
        bm25 = BM25Retriever.from_defaults(
            nodes=nodes, similarity_top_k=self.depth, stemmer=Stemmer.Stemmer("english"), language="english"
        )
        self.retriever = QueryFusionRetriever(
            [vec, bm25],
            llm=MockLLM(),
            mode="reciprocal_rerank",
            similarity_top_k=self.depth,
            num_queries=1,
            use_async=False,
        )

    def search(self, text: str, k: int) -> list[str]:
        nodes = self.retriever.retrieve(text)
        return list(dict.fromkeys(n.node.node_id for n in nodes))[:k]
