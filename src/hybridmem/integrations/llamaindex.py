"""LlamaIndex adapters (the ``llamaindex`` extra): a vector store, a retriever and embedding bridges
over :class:`hybridmem.Memory` (docs/integrations.md, "LlamaIndex").

- :class:`HybridMemVectorStore` is a ``BasePydanticVectorStore`` that stores text
  (``stores_text=True``): one LlamaIndex node is one hybridmem document (doc id = ``node.node_id``,
  text = the node's text, metadata = the node's metadata plus ``ref_doc_id`` and the node's other
  fields under ``_node_id``, ``_node_type``, ``_node_content``). Query modes: ``DEFAULT`` runs
  hybridmem's dense leg (``mode: vector``), ``TEXT_SEARCH`` (and ``SPARSE``) its BM25 leg, ``HYBRID``
  both fused by RRF; ``alpha`` (0 = BM25 only, 1 = dense only) becomes ``dense_weight = alpha``,
  ``sparse_weight = 1 - alpha``. ``MetadataFilters`` become hybridmem's ``metadata_filter``
  (:func:`to_metadata_filter`), a pre-filter of every leg.
- :class:`HybridMemRetriever` is a ``BaseRetriever`` carrying the query contract's parameters.
- :class:`HybridMemEmbedding` puts hybridmem's embedder behind LlamaIndex's ``BaseEmbedding`` (the
  ``embed_model`` of a ``VectorStoreIndex`` on this store); :class:`LlamaIndexEmbedder` puts a
  LlamaIndex embed model behind hybridmem's :class:`~hybridmem.embed.base.Embedder` protocol.

Embeddings: hybridmem embeds every node and every query with its own embedder, the one recorded in
the store, so that its dense leg only ever compares vectors of one model. ``node.embedding`` (which
``VectorStoreIndex`` computes with its ``embed_model``) and ``query_embedding`` are checked for their
dimension (a wrong one is an :class:`~hybridmem.errors.EmbedderError`) and otherwise not used; the
store sets ``is_embedding_query = False``, so LlamaIndex's retrievers do not embed queries for it.

Errors keep hybridmem's types (``ValueError`` subclasses for bad input): an unsupported filter
operator or condition is a :class:`~hybridmem.errors.FilterError`, an unsupported query mode a
:class:`~hybridmem.errors.ValidationError`. Importing :mod:`hybridmem` never needs LlamaIndex.

This module holds the retriever; the filters, node conversion, store and embeddings live in
``llamaindex_filters``, ``llamaindex_nodes``, ``llamaindex_store`` and ``llamaindex_embed`` and are
re-exported here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.callbacks import CallbackManager
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index.core.vector_stores.types import MetadataFilters

from hybridmem.memory import Memory
from hybridmem.models import QueryResult

from .llamaindex_embed import HybridMemEmbedding, LlamaIndexEmbedder
from .llamaindex_filters import _all_of, to_metadata_filter
from .llamaindex_nodes import REF_DOC_ID, _scored_nodes, node_to_document, result_to_node  # noqa: F401 (re-exported)
from .llamaindex_store import HybridMemVectorStore

__all__ = [
    "HybridMemEmbedding",
    "HybridMemRetriever",
    "HybridMemVectorStore",
    "LlamaIndexEmbedder",
    "REF_DOC_ID",
    "result_to_node",
    "to_metadata_filter",
]


# ---------------------------------------------------------------- the retriever
class HybridMemRetriever(BaseRetriever):
    """A LlamaIndex retriever speaking hybridmem's query contract, returning ``NodeWithScore``.

    ``source``: a :class:`~hybridmem.Memory`, or a :class:`HybridMemVectorStore` (its memory,
    namespace and default filter). ``mode``: ``hybrid`` (default), ``bm25``, ``vector``, ``rerank``
    or ``graph``. ``metadata_filter``: hybridmem's Mongo-like filter or LlamaIndex ``MetadataFilters``.
    ``search_kwargs``: any other field of the contract (``fetch_k``, ``user_id``, ``time_range``,
    ``as_of``, ``reranker``...). Scores are those of :meth:`HybridMemVectorStore.query`. Nodes are the
    ones a :class:`HybridMemVectorStore` wrote, or one ``TextNode`` per chunk of hybridmem's own memories.
    """

    def __init__(
        self,
        source: Memory | HybridMemVectorStore,
        *,
        mode: str = "hybrid",
        top_k: int = 5,
        hybrid_params: dict[str, Any] | None = None,
        metadata_filter: dict[str, Any] | MetadataFilters | None = None,
        namespace: str | None = None,
        search_kwargs: dict[str, Any] | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        base_filter: dict[str, Any] = {}
        if isinstance(source, HybridMemVectorStore):
            base_filter = source.metadata_filter
            namespace = namespace if namespace is not None else source.namespace
            hybrid_params = {**source.hybrid_params, **(hybrid_params or {})}
            source = source.client
        self.memory = source
        flt = to_metadata_filter(metadata_filter) if isinstance(metadata_filter, MetadataFilters) else metadata_filter
        self.request: dict[str, Any] = {
            **(search_kwargs or {}),
            "mode": mode,
            "top_k": top_k,
            "metadata_filter": _all_of(base_filter, flt),
            "namespace": namespace,
        }
        if hybrid_params:
            self.request["hybrid_params"] = dict(hybrid_params)
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    def _nodes(self, results: Sequence[QueryResult]) -> list[NodeWithScore]:
        return [NodeWithScore(node=n, score=s) for n, s in _scored_nodes(results, self.request["mode"])]

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._nodes(self.memory.search({**self.request, "search_text": query_bundle.query_str}).results)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        response = await self.memory.asearch({**self.request, "search_text": query_bundle.query_str})
        return self._nodes(response.results)
