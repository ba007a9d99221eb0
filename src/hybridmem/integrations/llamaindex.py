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
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.callbacks import CallbackManager
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import (
    BaseNode,
    Document,
    ImageNode,
    IndexNode,
    MetadataMode,
    Node,
    NodeRelationship,
    NodeWithScore,
    QueryBundle,
    RelatedNodeInfo,
    TextNode,
)
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
    VectorStoreQueryResult,
)

from hybridmem.embed.base import BaseEmbedder, Embedder
from hybridmem.errors import EmbedderError, FilterError, NotFoundError, ValidationError
from hybridmem.memory import Memory
from hybridmem.models import QueryResult

__all__ = [
    "HybridMemEmbedding",
    "HybridMemRetriever",
    "HybridMemVectorStore",
    "LlamaIndexEmbedder",
    "REF_DOC_ID",
    "result_to_node",
    "to_metadata_filter",
]

#: the most results one query of the contract returns (config.MAX_TOP_K)
_MAX_TOP_K = 1000
#: the metadata key holding a node's ``ref_doc_id`` (the LlamaIndex convention: filterable)
REF_DOC_ID = "ref_doc_id"
_NODE_ID, _NODE_TYPE, _NODE_CONTENT = "_node_id", "_node_type", "_node_content"
#: set in ``_node_content`` when the node's own metadata held ``ref_doc_id`` (kept on the way back)
_OWN_REF = "ref_doc_id_in_metadata"
_NODE_CLASSES: dict[str, type[BaseNode]] = {c.class_name(): c for c in (TextNode, Node, Document, IndexNode, ImageNode)}

# ---------------------------------------------------------------- filters
_OPERATORS = {
    FilterOperator.EQ: "$eq",
    FilterOperator.NE: "$ne",
    FilterOperator.GT: "$gt",
    FilterOperator.GTE: "$gte",
    FilterOperator.LT: "$lt",
    FilterOperator.LTE: "$lte",
    FilterOperator.IN: "$in",
    FilterOperator.NIN: "$nin",
}
_SUPPORTED = ", ".join(op.value for op in _OPERATORS)


def _condition(f: MetadataFilter) -> dict[str, Any]:
    op = _OPERATORS.get(f.operator)
    if op is None:
        raise FilterError(
            f"LlamaIndex filter operator {f.operator.value!r} (key {f.key!r}) is not supported by hybridmem; "
            f"supported: {_SUPPORTED}, combined with the conditions and / or"
        )
    if op in ("$in", "$nin") and not isinstance(f.value, list):
        raise FilterError(f"LlamaIndex filter operator {f.operator.value!r} (key {f.key!r}) needs a list of values")
    return {f.key: {op: f.value}}


def to_metadata_filter(filters: MetadataFilters | None) -> dict[str, Any]:
    """LlamaIndex ``MetadataFilters`` as hybridmem's ``metadata_filter`` (``{}``: no filter).

    Operators ``==``, ``!=``, ``>``, ``>=``, ``<``, ``<=``, ``in``, ``nin`` map to ``$eq`` ... ``$nin``;
    the conditions ``and`` / ``or`` to ``$and`` / ``$or``, nested groups included. Others (``any``,
    ``all``, ``contains``, ``text_match``, ``is_empty``, the condition ``not``) raise a FilterError.
    hybridmem's semantics apply: comparisons hold between values of one kind (number with number,
    string with string), and a node without the key matches ``!=`` and ``nin`` only."""
    if filters is None:
        return {}
    condition = filters.condition or FilterCondition.AND
    if condition not in (FilterCondition.AND, FilterCondition.OR):
        raise FilterError(
            f"LlamaIndex filter condition {condition.value!r} is not supported by hybridmem "
            "(its filter language has no negation): use and / or, and the operators != and nin"
        )
    parts = [to_metadata_filter(f) if isinstance(f, MetadataFilters) else _condition(f) for f in filters.filters]
    if condition == FilterCondition.OR and any(not p for p in parts):
        return {}  # an empty group matches everything, and so does any "or" holding one
    parts = [p for p in parts if p]
    if len(parts) <= 1:
        return parts[0] if parts else {}
    return {"$and" if condition == FilterCondition.AND else "$or": parts}


def _all_of(*filters: dict[str, Any] | None) -> dict[str, Any]:
    parts = [f for f in filters if f]
    if len(parts) <= 1:
        return parts[0] if parts else {}
    return {"$and": parts}


# ---------------------------------------------------------------- nodes <-> documents
def _check_embedding(vector: Sequence[float] | None, dim: int, what: str) -> None:
    """A vector LlamaIndex computed is not used (hybridmem embeds with its own embedder), but one of
    another dimension means another model: an error rather than a silent mix."""
    if vector is not None and len(vector) and len(vector) != dim:
        raise EmbedderError(
            f"{what} has an embedding of dimension {len(vector)}, but this hybridmem store embeds with a "
            f"{dim}-dimensional embedder: give the index an embed_model of that dimension "
            "(HybridMemEmbedding(store) computes the store's own vectors)"
        )


def node_to_document(node: BaseNode) -> dict[str, Any]:
    """A node as a hybridmem document (``Memory.add_documents``)."""
    meta = dict(node.metadata)
    clash = [k for k in (_NODE_ID, _NODE_TYPE, _NODE_CONTENT) if k in meta]
    if REF_DOC_ID in meta and meta[REF_DOC_ID] != node.ref_doc_id:
        clash.append(REF_DOC_ID)
    if clash:
        raise ValidationError(
            f"node {node.node_id!r}: the metadata keys {', '.join(map(repr, clash))} are the store's own "
            f"({REF_DOC_ID} must be the node's ref_doc_id)",
            field="metadata",
        )
    content = node.model_dump(
        mode="json", exclude={"id_", "embedding", "metadata", "text", "text_resource"}, exclude_defaults=True
    )
    if REF_DOC_ID in meta:
        content[_OWN_REF] = True
    meta.update({_NODE_ID: node.node_id, _NODE_TYPE: node.class_name(), _NODE_CONTENT: content})
    if node.ref_doc_id is not None:
        meta[REF_DOC_ID] = node.ref_doc_id
    source = node.metadata.get("file_path") or node.metadata.get("file_name")
    return {
        "id": node.node_id,
        "text": node.get_content(metadata_mode=MetadataMode.NONE),
        "metadata": meta,
        "source": source if isinstance(source, str) and len(source) <= 4096 else None,
    }


def _node(metadata: dict[str, Any], text: str, doc_id: str, chunk_id: str) -> BaseNode:
    meta = dict(metadata)
    content, node_id, node_type = meta.pop(_NODE_CONTENT, None), meta.pop(_NODE_ID, None), meta.pop(_NODE_TYPE, None)
    if not isinstance(content, dict) or not isinstance(node_id, str):
        # a memory hybridmem wrote itself (Memory.add, the MCP remember tool): a text node per chunk
        source = RelatedNodeInfo(node_id=doc_id)
        return TextNode(id_=chunk_id, text=text, metadata=meta, relationships={NodeRelationship.SOURCE: source})
    content = dict(content)
    if not content.pop(_OWN_REF, False):
        meta.pop(REF_DOC_ID, None)
    cls = _NODE_CLASSES.get(str(node_type), TextNode)
    content.pop("class_name", None)
    fields: dict[str, Any] = {**content, "id_": node_id, "metadata": meta}
    if issubclass(cls, TextNode):  # the text given at once: one validation, not two
        return cls(**fields, text=text)
    node = cls(**fields)
    node.set_content(text)
    return node


def result_to_node(result: QueryResult) -> BaseNode:
    """The node a query result stands for (a node this store wrote, or a memory hybridmem wrote itself:
    then a ``TextNode`` whose id is the chunk id and whose ``ref_doc_id`` is the memory's id)."""
    return _node(result.metadata, result.text, result.doc_id, result.chunk_id)


def _score(result: QueryResult, mode: str) -> float:
    """The similarity LlamaIndex shows: a single leg's own score (dense cosine, BM25), else RRF."""
    leg = {"vector": "dense", "bm25": "bm25"}.get(mode)
    return float(result.scores.get(leg, result.rrf_score)) if leg else float(result.rrf_score)


def _scored_nodes(results: Sequence[QueryResult], mode: str) -> list[tuple[BaseNode, float]]:
    """One node per document (a document a Memory with chunking split is a node once: its best chunk)."""
    seen: set[str] = set()
    out = []
    for r in results:
        if r.doc_id not in seen:
            seen.add(r.doc_id)
            out.append((result_to_node(r), _score(r, mode)))
    return out


# ---------------------------------------------------------------- the vector store
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


# ---------------------------------------------------------------- embeddings, both ways
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
