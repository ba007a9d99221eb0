"""LangChain adapters (the ``langchain`` extra): a ``VectorStore``, a ``BaseRetriever`` and an
``Embeddings`` bridge over :class:`hybridmem.Memory` (docs/integrations.md, "LangChain").

- :class:`HybridMemVectorStore` is a ``langchain_core.vectorstores.VectorStore``: a LangChain
  ``Document`` is one hybridmem document (``Document.id`` = doc id, ``metadata`` = metadata,
  ``page_content`` = text). ``similarity_search`` runs the query contract (hybrid by default: BM25 ‖
  dense, fused by RRF) with ``filter`` as hybridmem's Mongo-like ``metadata_filter``, a pre-filter of
  every leg; its scores are RRF scores (higher is better), not distances.
- :class:`HybridMemRetriever` is a ``BaseRetriever`` carrying the contract's parameters (``mode``,
  ``top_k``, ``hybrid_params``, ``metadata_filter``, ``namespace`` and any other ``QueryRequest``
  field through ``search_kwargs``).
- :class:`LangChainEmbedder` puts a LangChain ``Embeddings`` behind hybridmem's
  :class:`~hybridmem.embed.base.Embedder` protocol (name ``langchain:<class>[:<model>]``, the
  dimension found by embedding a probe, rows L2-normalised).

Errors keep hybridmem's messages and types, which are LangChain's expected ones: a bad filter is a
:class:`~hybridmem.errors.FilterError`, a bad id or text a :class:`~hybridmem.errors.ValidationError`
(both ``ValueError``). Importing :mod:`hybridmem` never needs LangChain: only this module does.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import VectorStore
from langchain_core.vectorstores.utils import maximal_marginal_relevance
from pydantic import AliasChoices, ConfigDict, Field

from hybridmem.embed.base import BaseEmbedder, Embedder
from hybridmem.errors import EmbedderError, NotFoundError, ValidationError
from hybridmem.memory import Memory
from hybridmem.models import QueryResponse, QueryResult

__all__ = ["HybridMemEmbeddings", "HybridMemRetriever", "HybridMemVectorStore", "LangChainEmbedder", "as_embedder"]

#: the most results one query of the contract returns (config.MAX_TOP_K)
_MAX_TOP_K = 1000


# ---------------------------------------------------------------- embeddings, both ways
def _embeddings_name(embeddings: Embeddings) -> str:
    """``langchain:<class>`` plus the model's name when the object says it (two models of one class
    must not share a name: the store records it and refuses vectors of another embedder)."""
    name = f"langchain:{type(embeddings).__name__}"
    for attr in ("model", "model_name", "model_id", "deployment"):
        value = getattr(embeddings, attr, None)
        if isinstance(value, str) and value:
            return f"{name}:{value}"
    return name


class LangChainEmbedder(BaseEmbedder):
    """A LangChain ``Embeddings`` as a hybridmem :class:`~hybridmem.embed.base.Embedder`.

    ``name`` defaults to ``langchain:<class>[:<model>]``; ``dim`` is detected by embedding a probe
    text once (pass it to skip the call). Vectors are checked (shape, finite) and L2-normalised."""

    batch_size = 256  # the LangChain object batches its own calls

    def __init__(self, embeddings: Embeddings, *, name: str | None = None, dim: int | None = None) -> None:
        self.embeddings = embeddings
        self.name = name or _embeddings_name(embeddings)
        self.dim = int(dim) if dim else len(embeddings.embed_query("dimension probe"))
        if self.dim <= 0:
            raise EmbedderError(f"embedder {self.name!r} returned an empty vector for the probe text")

    def _embed(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        if is_query:
            return np.asarray([self.embeddings.embed_query(texts[0])], dtype=np.float32)
        return np.asarray(self.embeddings.embed_documents(texts), dtype=np.float32)


class HybridMemEmbeddings(Embeddings):
    """A hybridmem embedder as a LangChain ``Embeddings`` (what ``HybridMemVectorStore.embeddings``
    returns when the store was not given a LangChain one)."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[float(x) for x in row] for row in self.embedder.embed_documents(texts)]

    def embed_query(self, text: str) -> list[float]:
        return [float(x) for x in self.embedder.embed_query(text)]


def as_embedder(embedder: Embeddings | Embedder | str | None) -> Embedder | str | None:
    """What :class:`hybridmem.Memory` takes as ``embedder``: a LangChain ``Embeddings`` is wrapped in
    :class:`LangChainEmbedder`; a spec string, an Embedder or None passes as is."""
    if isinstance(embedder, Embeddings):
        return LangChainEmbedder(embedder)
    return embedder


# ---------------------------------------------------------------- results
def _documents(response: QueryResponse, k: int) -> list[tuple[Document, float]]:
    """One LangChain Document per hybridmem document (its best chunk first), at most ``k``."""
    out: list[tuple[Document, float]] = []
    seen: set[str] = set()
    for r in response.results:
        if r.doc_id in seen:
            continue
        seen.add(r.doc_id)
        out.append((_document(r), float(r.rrf_score)))
        if len(out) == k:
            break
    return out


def _document(r: QueryResult) -> Document:
    return Document(id=r.doc_id, page_content=r.text, metadata=dict(r.metadata))


def _request(query: str, k: int, fields: dict[str, Any]) -> dict[str, Any]:
    """A ``QueryRequest`` dict: LangChain's ``filter`` is the contract's ``metadata_filter``."""
    data = {k_: v for k_, v in fields.items() if v is not None}
    flt = data.pop("filter", None)
    if flt is not None:
        data["metadata_filter"] = flt
    return {**data, "search_text": query, "top_k": k}


# ---------------------------------------------------------------- the vector store
class HybridMemVectorStore(VectorStore):
    """A LangChain ``VectorStore`` over one namespace of a hybridmem store.

    ``memory``: a :class:`hybridmem.Memory` (shared, left open by :meth:`close`), or a store path
    (a Memory is opened there, documents kept whole: ``chunk_size=None``), or None (a throwaway store
    in a temporary directory). ``embedding``: a LangChain ``Embeddings`` used as the embedder;
    otherwise ``embedder`` (``"e5"``, ``"hash"``, an Embedder; default hybridmem's). ``mode`` and
    ``hybrid_params``: the defaults of every search (per call overridable). ``wait_for_vectors``:
    writes return once their vectors are stored (as other vector stores do); off, they are
    BM25-searchable at once and embedded in the background."""

    def __init__(
        self,
        memory: Memory | str | Path | None = None,
        *,
        embedding: Embeddings | None = None,
        embedder: str | Embedder | None = None,
        namespace: str | None = None,
        mode: str = "hybrid",
        hybrid_params: dict[str, Any] | None = None,
        wait_for_vectors: bool = True,
        vector_timeout: float | None = None,
        **memory_options: Any,
    ) -> None:
        self._embedding = embedding
        self._owns = not isinstance(memory, Memory)
        if isinstance(memory, Memory):
            if embedding is not None or embedder is not None or memory_options:
                raise ValueError("pass embedding/embedder/Memory options to the Memory, not with an open one")
            self.memory = memory
        else:
            path = memory if memory is not None else Path(tempfile.mkdtemp(prefix="hybridmem-lc-")) / "memory.db"
            spec = as_embedder(embedding) if embedding is not None else embedder
            self.memory = Memory(path, embedder=spec, **{"chunk_size": None, **memory_options})
        self.namespace = namespace
        self.mode = mode
        self.hybrid_params = dict(hybrid_params or {})
        self.wait_for_vectors = wait_for_vectors
        self.vector_timeout = vector_timeout

    @property
    def embeddings(self) -> Embeddings:
        return self._embedding if self._embedding is not None else HybridMemEmbeddings(self.memory.embedder)

    def close(self) -> None:
        """Close the Memory this store opened (one it was given stays open)."""
        if self._owns:
            self.memory.close()

    # ------------------------------------------------------------------ writes
    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """Store texts (ids generated where missing: uuid4 hex); an id already stored is replaced."""
        texts = list(texts)
        if metadatas is not None and len(metadatas) != len(texts):
            raise ValueError(f"got {len(metadatas)} metadatas for {len(texts)} texts: give one per text")
        if ids is not None and len(ids) != len(texts):
            raise ValueError(f"got {len(ids)} ids for {len(texts)} texts: give one per text")
        given = ids if ids is not None else [None] * len(texts)
        out = [str(i) if i is not None else uuid.uuid4().hex for i in given]
        docs = [
            {"text": t, "id": i, "metadata": dict(metadatas[n]) if metadatas else {}}
            for n, (t, i) in enumerate(zip(texts, out, strict=True))
        ]
        # one transaction: all the texts are stored, or (one refused) none
        self.memory.add_documents(docs, namespace=kwargs.get("namespace", self.namespace), batch_size=max(1, len(docs)))
        if self.wait_for_vectors:
            self.memory.wait_for_vectors(self.vector_timeout)
        return out

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        """Delete documents by id (unknown ids are ignored). ``ids=None`` (LangChain's "delete all")
        is refused: name the ids."""
        if ids is None:
            raise ValueError("HybridMemVectorStore.delete needs the ids to delete (deleting all is not supported)")
        if ids:
            self.memory.delete(list(ids), namespace=kwargs.get("namespace", self.namespace))
        return True

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The documents of these ids that exist (missing or malformed ids are left out), whole."""
        out: list[Document] = []
        for doc_id in dict.fromkeys(ids):
            try:
                doc = self.memory.get(doc_id, namespace=self.namespace)
            except (NotFoundError, ValidationError):
                continue
            text = "\n\n".join(c["text"] for c in doc["chunks"])
            out.append(Document(id=doc["doc_id"], page_content=text, metadata=dict(doc["metadata"])))
        return out

    # ------------------------------------------------------------------ queries
    def _search(self, query: str, k: int, **kwargs: Any) -> list[tuple[Document, float]]:
        fields = {"mode": self.mode, "namespace": self.namespace, **kwargs}
        if self.hybrid_params and "hybrid_params" not in kwargs:
            fields["hybrid_params"] = self.hybrid_params
        # a chunked memory returns chunks: ask for more, keep one per document
        depth = k if self.memory.chunk_size is None else min(_MAX_TOP_K, 3 * k)
        return _documents(self.memory.search(_request(query, depth, fields)), k)

    def similarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
        """The ``k`` best documents for ``query``. ``filter``: a hybridmem metadata filter
        (``{"service": "billing", "severity": {"$gte": 2}}``, ``$in``, ``$or``...); other keyword
        arguments are ``QueryRequest`` fields (``mode``, ``hybrid_params``, ``user_id``...)."""
        return [doc for doc, _ in self._search(query, k, **kwargs)]

    def similarity_search_with_score(self, query: str, k: int = 4, **kwargs: Any) -> list[tuple[Document, float]]:
        """As :meth:`similarity_search`, with each document's fused RRF score (higher is better)."""
        return self._search(query, k, **kwargs)

    def _similarity_search_with_relevance_scores(
        self, query: str, k: int = 4, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """Relevance in [0, 1]: the RRF score over the best a document ranked first by the BM25 and
        dense legs can score (a relative measure, for ``score_threshold``; not a calibrated one)."""
        results = self._search(query, k, **kwargs)
        hp = {**self.hybrid_params, **(kwargs.get("hybrid_params") or {})}
        top = (float(hp.get("dense_weight", 1.0)) + float(hp.get("sparse_weight", 1.0))) / (
            float(hp.get("rrf_k_constant", 60.0)) + 1.0
        )
        return [(doc, min(1.0, score / top) if top > 0 else 0.0) for doc, score in results]

    def max_marginal_relevance_search(
        self, query: str, k: int = 4, fetch_k: int = 20, lambda_mult: float = 0.5, **kwargs: Any
    ) -> list[Document]:
        """MMR over the ``fetch_k`` best hybrid candidates. The store exposes no stored vectors, so the
        candidates are embedded again with the store's embedder (``fetch_k`` embeddings per query)."""
        candidates = [doc for doc, _ in self._search(query, max(k, fetch_k), **kwargs)]
        if len(candidates) <= 1:
            return candidates[:k]
        embedder = self.memory.embedder
        vectors = embedder.embed_documents([d.page_content for d in candidates])
        picked = maximal_marginal_relevance(embedder.embed_query(query), vectors.tolist(), lambda_mult=lambda_mult, k=k)
        return [candidates[i] for i in picked]

    def as_hybrid_retriever(self, **kwargs: Any) -> HybridMemRetriever:
        """A :class:`HybridMemRetriever` over this store's memory and namespace (``as_retriever``
        gives LangChain's generic ``VectorStoreRetriever``, search types included)."""
        fields: dict[str, Any] = {"memory": self.memory, "namespace": self.namespace, "mode": self.mode}
        if self.hybrid_params:
            fields["hybrid_params"] = self.hybrid_params
        return HybridMemRetriever(**{**fields, **kwargs})

    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings | None = None,
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> HybridMemVectorStore:
        """A store (``memory``/path and the other constructor arguments in ``kwargs``) with these texts."""
        memory = kwargs.pop("memory", None)
        store = cls(memory, embedding=embedding, **kwargs)
        store.add_texts(texts, metadatas, ids=ids)
        return store


# ---------------------------------------------------------------- the retriever
class HybridMemRetriever(BaseRetriever):
    """A LangChain retriever running hybridmem's query contract over a :class:`hybridmem.Memory`.

    ``top_k`` (alias ``k``), ``mode`` (``bm25``, ``vector``, ``hybrid``, ``rerank``, ``graph``),
    ``hybrid_params`` (``dense_weight``, ``sparse_weight``, ``rrf_k_constant``...),
    ``metadata_filter`` and ``namespace`` are the contract's fields; ``search_kwargs`` holds any other
    ``QueryRequest`` field (``user_id``, ``time_range``, ``fetch_k``...). Each can be overridden per
    call: ``retriever.invoke("query", k=3, metadata_filter={...})``. A result's metadata is the
    document's; ``Document.id`` is the document id."""

    model_config = ConfigDict(arbitrary_types_allowed=True, populate_by_name=True)

    memory: Memory
    top_k: int = Field(default=4, validation_alias=AliasChoices("top_k", "k"))
    mode: str = "hybrid"
    hybrid_params: dict[str, Any] | None = None
    metadata_filter: dict[str, Any] | None = None
    namespace: str | None = None
    search_kwargs: dict[str, Any] = Field(default_factory=dict)

    def _query(self, query: str, kwargs: dict[str, Any]) -> tuple[dict[str, Any], int]:
        k = int(kwargs.pop("k", kwargs.pop("top_k", self.top_k)))
        fields: dict[str, Any] = {
            "mode": self.mode,
            "hybrid_params": self.hybrid_params,
            "metadata_filter": self.metadata_filter,
            "namespace": self.namespace,
            **self.search_kwargs,
            **kwargs,
        }
        depth = k if self.memory.chunk_size is None else min(_MAX_TOP_K, 3 * k)
        return _request(query, depth, fields), k

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        request, k = self._query(query, kwargs)
        return [doc for doc, _ in _documents(self.memory.search(request), k)]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        request, k = self._query(query, kwargs)
        return [doc for doc, _ in _documents(await self.memory.asearch(request), k)]
