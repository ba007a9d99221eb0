"""``HybridMemVectorStore``: a LlamaIndex ``BasePydanticVectorStore`` over a hybridmem
:class:`~hybridmem.Memory` (writes, reads by id or filter, queries, async twins)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.schema import BaseNode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
    VectorStoreQueryResult,
)

from hybridmem.embed.base import Embedder
from hybridmem.errors import NotFoundError, ValidationError
from hybridmem.memory import Memory
from hybridmem.models import QueryResult

from .llamaindex_filters import _all_of, to_metadata_filter
from .llamaindex_nodes import _NODE_ID, REF_DOC_ID, _check_embedding, _node, _scored_nodes, node_to_document

#: the most results one query of the contract returns (config.MAX_TOP_K)
_MAX_TOP_K = 1000

_MODES = {
    VectorStoreQueryMode.DEFAULT: "vector",
    VectorStoreQueryMode.TEXT_SEARCH: "bm25",
    VectorStoreQueryMode.SPARSE: "bm25",
    VectorStoreQueryMode.HYBRID: "hybrid",
}


def _alpha_weights(alpha: float | None) -> dict[str, float]:
    if alpha is None:
        return {}
    if not 0.0 <= alpha <= 1.0:
        raise ValidationError(f"alpha must be between 0 (BM25 only) and 1 (dense only), got {alpha}", field="alpha")
    return {"dense_weight": float(alpha), "sparse_weight": 1.0 - float(alpha)}


class HybridMemVectorStore(BasePydanticVectorStore):
    """A LlamaIndex vector store over a hybridmem :class:`~hybridmem.Memory`.

    >>> store = HybridMemVectorStore(path="memory.db", embedder="e5")
    >>> index = VectorStoreIndex(nodes, storage_context=StorageContext.from_defaults(vector_store=store),
    ...                          embed_model=HybridMemEmbedding(store))
    >>> index.as_retriever(vector_store_query_mode="hybrid", similarity_top_k=5).retrieve("pool exhausted")

    ``memory``: an open Memory (not closed by :meth:`close`); else ``path`` and ``embedder`` (and any
    other ``Memory`` keyword in ``memory_options``) open one that keeps each node whole (``chunk_size``
    None: LlamaIndex has split the documents already). ``namespace``: where the nodes live (default:
    the memory's). ``hybrid_params`` and ``metadata_filter``: defaults of every query (the filter is
    and-ed with the query's own). ``wait_for_vectors``: ``add`` returns once the nodes are embedded,
    so a dense query right after sees them (False: they are embedded in the background, BM25 finds
    them at once). Keyword arguments a retriever passes (``vector_store_kwargs``) are fields of the
    query contract (``user_id``, ``time_range``, ``fetch_k``, ...).
    """

    stores_text: bool = True
    is_embedding_query: bool = False
    namespace: str | None = None
    hybrid_params: dict[str, Any] = Field(default_factory=dict)
    metadata_filter: dict[str, Any] = Field(default_factory=dict)
    wait_for_vectors: bool = True

    _memory: Memory = PrivateAttr()
    _owns_memory: bool = PrivateAttr(default=False)

    def __init__(
        self,
        memory: Memory | None = None,
        *,
        path: str | Path | None = None,
        embedder: str | Embedder | None = None,
        namespace: str | None = None,
        hybrid_params: dict[str, Any] | None = None,
        metadata_filter: dict[str, Any] | None = None,
        wait_for_vectors: bool = True,
        memory_options: dict[str, Any] | None = None,
    ) -> None:
        if memory is None and path is None:
            raise ValidationError("HybridMemVectorStore needs a Memory or the path of a store", field="path")
        if memory is not None and (path is not None or embedder is not None or memory_options):
            raise ValidationError("give either a Memory or path/embedder/memory_options, not both", field="memory")
        fields: dict[str, Any] = {
            "namespace": namespace,
            "hybrid_params": dict(hybrid_params or {}),
            "metadata_filter": dict(metadata_filter or {}),
            "wait_for_vectors": wait_for_vectors,
        }
        super().__init__(**fields)  # (the fields passed as a dict: mypy sees only the base class's)
        if memory is None:
            memory = Memory(path, embedder=embedder, **{"chunk_size": None, **(memory_options or {})})
            self._owns_memory = True
        self._memory = memory

    @classmethod
    def class_name(cls) -> str:
        return "HybridMemVectorStore"

    @property
    def client(self) -> Memory:
        """The :class:`~hybridmem.Memory` behind the store."""
        return self._memory

    @property
    def dim(self) -> int:
        """The dimension of the store's embedder (loads it on first use)."""
        return int(self._memory.embedder.dim)

    def close(self) -> None:
        """Close the Memory if this store opened it."""
        if self._owns_memory:
            self._memory.close()

    # ------------------------------------------------------------ writes
    def add(self, nodes: Sequence[BaseNode], **add_kwargs: Any) -> list[str]:
        """Store the nodes (same id + same content: a no-op; same id + new content: an update)."""
        if not nodes:
            return []
        dim = self.dim
        for node in nodes:
            _check_embedding(node.embedding, dim, f"node {node.node_id!r}")
        self._memory.add_documents([node_to_document(n) for n in nodes], namespace=self.namespace)
        if self.wait_for_vectors:
            self._memory.wait_for_vectors()
        return [n.node_id for n in nodes]

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """Delete every node of the source document ``ref_doc_id`` (and a hybridmem memory of that id)."""
        self._delete_matching({REF_DOC_ID: ref_doc_id})
        self._memory.delete([ref_doc_id], namespace=self.namespace)

    def delete_nodes(
        self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None, **delete_kwargs: Any
    ) -> None:
        """Delete nodes by id (chunk ids of hybridmem's own memories too), by filter, or both (and-ed);
        neither deletes every node, as LlamaIndex's SimpleVectorStore does."""
        flt = to_metadata_filter(filters)
        if node_ids is None:
            self._delete_matching(flt)
        elif not flt:
            if node_ids:
                self._memory.delete(node_ids, namespace=self.namespace)
        else:
            for i in range(0, len(node_ids), _MAX_TOP_K):
                self._delete_matching(_all_of(flt, {_NODE_ID: {"$in": list(node_ids[i : i + _MAX_TOP_K])}}))

    def clear(self) -> None:
        """Delete every document of the store's namespace."""
        self._delete_matching({})

    def get_nodes(self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None) -> list[BaseNode]:
        """The nodes of these ids (in that order; unknown ids left out), or matching ``filters`` (both:
        and-ed). A filter alone may match at most 1000 nodes (the contract's ``top_k`` limit)."""
        if node_ids is not None and not filters:
            return [n for n in (self._get(i) for i in node_ids) if n is not None]
        flt = to_metadata_filter(filters)
        if node_ids is not None:
            if len(node_ids) > _MAX_TOP_K:
                raise ValidationError(f"get_nodes with filters takes at most {_MAX_TOP_K} node ids", field="node_ids")
            flt = _all_of(flt, {_NODE_ID: {"$in": list(node_ids)}})
        page = self._scan_page(flt)
        if len(page) >= _MAX_TOP_K:
            raise ValidationError(
                f"more than {_MAX_TOP_K} nodes match the filters: narrow them (get_nodes returns at most {_MAX_TOP_K})",
                field="filters",
            )
        return [node for node, _ in _scored_nodes(page, "hybrid")]

    def _get(self, node_id: str) -> BaseNode | None:
        ns = self.namespace
        try:
            doc = self._memory.get(node_id, namespace=ns)
        except NotFoundError:
            doc_id, sep, _ = node_id.rpartition("_p")  # a chunk of a memory hybridmem wrote itself
            if not sep:
                return None
            try:
                doc = self._memory.get(doc_id, namespace=ns)
            except NotFoundError:
                return None
        chunks = [c for c in doc["chunks"] if c["chunk_id"] == node_id] or doc["chunks"]
        if not chunks:
            return None
        return _node(doc["metadata"], chunks[0]["text"], doc["doc_id"], chunks[0]["chunk_id"])

    def _scan_page(self, flt: dict[str, Any]) -> list[QueryResult]:
        """Up to 1000 chunks the filter allows, whatever their text: the contract's recency leg alone
        (the other legs get no weight, the BM25 leg no term)."""
        request = {
            "search_text": "*",
            "mode": "hybrid",
            "top_k": _MAX_TOP_K,
            "fetch_k": _MAX_TOP_K,
            "metadata_filter": flt,
            "namespace": self.namespace,
            "hybrid_params": {
                "dense_weight": 0.0,
                "sparse_weight": 1.0,
                "exact_weight": 0.0,
                "time_weight": 0.0,
                "graph_weight": 0.0,
                "recency_weight": 1.0,
            },
        }
        return self._memory.search(request).results

    def _delete_matching(self, flt: dict[str, Any]) -> None:
        for _ in range(1_000_000):  # each round deletes at least one document
            page = self._scan_page(flt)
            if not page:
                return
            self._memory.delete(sorted({r.doc_id for r in page}), namespace=self.namespace)
            if len(page) < _MAX_TOP_K:
                return

    # ------------------------------------------------------------ queries
    def _request(self, query: VectorStoreQuery, extra: dict[str, Any]) -> dict[str, Any]:
        mode = _MODES.get(VectorStoreQueryMode(query.mode))
        if mode is None:
            raise ValidationError(
                f"query mode {VectorStoreQueryMode(query.mode).value!r} is not supported: HybridMemVectorStore runs "
                "default (dense), text_search or sparse (BM25) and hybrid (BM25 + dense fused by RRF)",
                field="mode",
            )
        if not (query.query_str or "").strip():
            raise ValidationError(
                "HybridMemVectorStore searches by the query text (query_str): it embeds queries with its own "
                "embedder, and BM25 needs words",
                field="query_str",
            )
        if query.query_embedding is not None:
            _check_embedding(query.query_embedding, self.dim, "the query")
        top_k = query.similarity_top_k
        if mode == "bm25":
            top_k = query.sparse_top_k or top_k
        request: dict[str, Any] = {"search_text": query.query_str, "mode": mode, "namespace": self.namespace}
        if mode == "hybrid":
            top_k = query.hybrid_top_k or top_k
            depth = max(query.similarity_top_k, query.sparse_top_k or 0)
            if (query.hybrid_top_k or query.sparse_top_k) and depth > top_k:
                request["fetch_k"] = depth
        request["top_k"] = top_k
        hp = {**self.hybrid_params, **_alpha_weights(query.alpha if mode == "hybrid" else None)}
        if hp:
            request["hybrid_params"] = hp
        doc_ids = {REF_DOC_ID: {"$in": list(query.doc_ids)}} if query.doc_ids else None
        node_ids = {_NODE_ID: {"$in": list(query.node_ids)}} if query.node_ids else None
        request["metadata_filter"] = _all_of(self.metadata_filter, to_metadata_filter(query.filters), doc_ids, node_ids)
        return {**request, **extra}

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """Run the query through hybridmem's contract; ``similarities`` are the dense cosine (default
        mode), the BM25 score (text_search) or the RRF score (hybrid), higher is better."""
        request = self._request(query, kwargs)
        response = self._memory.search(request)
        scored = _scored_nodes(response.results, request["mode"])
        return VectorStoreQueryResult(
            nodes=[n for n, _ in scored], similarities=[s for _, s in scored], ids=[n.node_id for n, _ in scored]
        )

    # ------------------------------------------------------------ async twins (in a worker thread)
    async def aquery(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        return await asyncio.to_thread(self.query, query, **kwargs)

    async def async_add(self, nodes: Sequence[BaseNode], **kwargs: Any) -> list[str]:
        return await asyncio.to_thread(self.add, list(nodes), **kwargs)

    async def adelete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        await asyncio.to_thread(self.delete, ref_doc_id, **delete_kwargs)

    async def adelete_nodes(
        self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None, **delete_kwargs: Any
    ) -> None:
        await asyncio.to_thread(self.delete_nodes, node_ids, filters, **delete_kwargs)

    async def aget_nodes(
        self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None
    ) -> list[BaseNode]:
        return await asyncio.to_thread(self.get_nodes, node_ids, filters)

    async def aclear(self) -> None:
        await asyncio.to_thread(self.clear)
