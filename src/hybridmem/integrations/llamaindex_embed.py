"""Embedding bridges, both ways: hybridmem's embedder as a LlamaIndex ``BaseEmbedding``
(:class:`HybridMemEmbedding`), a LlamaIndex embed model as a hybridmem embedder
(:class:`LlamaIndexEmbedder`)."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import PrivateAttr

from hybridmem.embed.base import BaseEmbedder, Embedder
from hybridmem.errors import EmbedderError
from hybridmem.memory import Memory

from .llamaindex_store import HybridMemVectorStore


class HybridMemEmbedding(BaseEmbedding):
    """hybridmem's embedder as a LlamaIndex embed model (``Settings.embed_model``, the
    ``embed_model`` of a ``VectorStoreIndex``): the vectors LlamaIndex computes are the ones hybridmem
    stores (same model, same query/passage prefixes), so they have the store's dimension.

    ``source``: an :class:`~hybridmem.embed.base.Embedder`, a Memory or a HybridMemVectorStore (its
    embedder). ``skip_documents``: return an empty vector for texts, leaving nodes for the store to
    embed once (a ``VectorStoreIndex`` on a HybridMemVectorStore needs no vector of its own; with
    e5 this halves the cost of an ingest). Queries are always embedded."""

    skip_documents: bool = False
    _embedder: Embedder = PrivateAttr()

    def __init__(self, source: Embedder | Memory | HybridMemVectorStore, *, skip_documents: bool = False, **kw: Any):
        if isinstance(source, HybridMemVectorStore):
            source = source.client
        embedder = source.embedder if isinstance(source, Memory) else source
        fields: dict[str, Any] = {"model_name": kw.pop("model_name", embedder.name), "skip_documents": skip_documents}
        super().__init__(**fields, **kw)
        self._embedder = embedder

    @classmethod
    def class_name(cls) -> str:
        return "HybridMemEmbedding"

    def _get_query_embedding(self, query: str) -> list[float]:
        return [float(x) for x in self._embedder.embed_query(query)]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return await asyncio.to_thread(self._get_query_embedding, query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        if self.skip_documents:
            return [[] for _ in texts]
        return [[float(x) for x in row] for row in self._embedder.embed_documents(texts)]


class LlamaIndexEmbedder(BaseEmbedder):
    """A LlamaIndex embed model as a hybridmem :class:`~hybridmem.embed.base.Embedder` (``Memory(...,
    embedder=LlamaIndexEmbedder(model))``): hybridmem then embeds with that model.

    ``name`` defaults to ``llamaindex:<class>:<model_name>`` (recorded in the store: another model is
    refused); ``dim`` is found by embedding a probe text once (pass it to skip the call). Vectors are
    checked (shape, finite) and L2-normalised."""

    batch_size = 256  # the embed model batches its own calls

    def __init__(self, embed_model: BaseEmbedding, *, name: str | None = None, dim: int | None = None) -> None:
        self.embed_model = embed_model
        self.name = name or f"llamaindex:{embed_model.class_name()}:{embed_model.model_name}"
        self.dim = int(dim) if dim else len(embed_model.get_query_embedding("dimension probe"))
        if self.dim <= 0:
            raise EmbedderError(f"embedder {self.name!r} returned an empty vector for the probe text")

    def _embed(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        if is_query:
            return np.asarray([self.embed_model.get_query_embedding(texts[0])], dtype=np.float32)
        return np.asarray(self.embed_model.get_text_embedding_batch(texts), dtype=np.float32)
