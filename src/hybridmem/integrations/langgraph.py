"""LangGraph's long-term memory store over hybridmem (the ``langgraph`` extra): :class:`HybridMemStore`,
a ``langgraph.store.base.BaseStore`` (docs/integrations.md, "LangGraph (and LangMem)").

How LangGraph's model maps onto hybridmem's:

- **One hybridmem namespace per store** (``hm_namespace``, default ``"langgraph"``). A LangGraph
  namespace tuple lives in each item's metadata, one key per level: ``("memories", "u1")`` is
  ``{"lg.ns.0": "memories", "lg.ns.1": "u1", "lg.depth": 2}``. A prefix is then a conjunction of
  equalities: ``search(("memories",), ...)`` runs behind the pre-filter ``{"lg.ns.0": "memories"}``,
  so one hybrid query covers every user's namespace under it and nothing else.
- **An item is one hybridmem document**, id ``label/label/key`` (each part percent-encoded, so no
  two (namespace, key) pairs share an id). Its metadata holds the value's top-level fields as
  ``v.<field>`` (what a ``filter`` reads), the key (``lg.key``), ``lg.created_at`` /
  ``lg.updated_at`` (ISO 8601 UTC; ``occurred_at`` is the update time, so listings are newest
  first), and TTL bookkeeping. A value with a top-level key that cannot be a metadata key (a quote,
  a backslash, over 126 characters) is kept whole under ``lg.value`` and cannot be filtered on.
- **The document's text is what the index config says to embed**: the texts at ``fields``
  (default ``["$"]``: the whole value as JSON, as LangGraph's stores embed it), joined by blank
  lines, indexed by BM25 *and* embedded. ``put(..., index=False)`` (or a value with no text at the
  paths) stores an unindexed item: found by ``get``, by listing and filters, never ranked by a query
  (like ``InMemoryStore``, such items only fill a query's page after the ranked ones, score None).
- **search with a query** runs hybrid retrieval (BM25 ‖ dense, RRF) with the namespace prefix and
  ``filter`` as pre-filters of every leg; ``SearchItem.score`` is the fused RRF score. Without a
  query it lists the matching items, most recently updated first.
- **list_namespaces** reads one marker document per namespace (``lg.kind: namespace``), written with
  the namespace's first item and removed with its last.
- **TTL** (``supports_ttl``): ``ttl`` minutes set ``lg.expires_at``; reads refresh it
  (``refresh_ttl``, ``TTLConfig.refresh_on_read``); ``omit_expired`` hides expired items at once;
  :meth:`HybridMemStore.sweep_ttl` (or the thread of :meth:`start_ttl_sweeper`, every
  ``sweep_interval_minutes``) deletes them.

Filters: ``{"field": value}`` and LangGraph's operators ``$eq $ne $gt $gte $lt $lte`` on top-level
value fields, plus hybridmem's ``$in $nin $exists`` and ``$and``/``$or`` lists. Comparisons hold
between values of one kind (a number with a number, a string with a string: hybridmem's semantics).
Nested (``{"a": {"b": 1}}``) and list-equality filters are refused with a ValueError naming the field.

In one ``batch``, reads (get, search, list) see the store as it was before the batch's writes,
which are then applied, the last write of a (namespace, key) winning: ``InMemoryStore``'s order.
Invalid namespaces raise LangGraph's :class:`~langgraph.store.base.InvalidNamespaceError`.

The store's reads and writes live in ``langgraph_reads`` and ``langgraph_writes`` (mixins), the
mapping of items onto documents and metadata in ``langgraph_mapping``.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    InvalidNamespaceError,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchOp,
    TTLConfig,
    ensure_embeddings,
    tokenize_path,
    validate_op_namespace,
)

from hybridmem.embed.base import Embedder
from hybridmem.memory import Memory

from .langgraph_mapping import _MAX_ID, _doc_id, _marker_id
from .langgraph_writes import StoreWrites

__all__ = ["HybridMemStore"]


class HybridMemStore(StoreWrites, BaseStore):
    """A LangGraph ``BaseStore`` over a hybridmem store: hybrid search (BM25 ‖ dense, RRF) behind
    namespace and value pre-filters, with TTL.

    ``memory``: a :class:`hybridmem.Memory` (shared; :meth:`close` leaves it open), a store path (a
    Memory is opened there with items kept whole, ``chunk_size=None``) or None (a throwaway store
    in a temporary directory). ``embedder``: ``"e5"``, ``"hash"``, an Embedder or a LangChain
    ``Embeddings``; else ``index["embed"]`` (with ``index["dims"]``) when given; else hybridmem's
    default. ``index``: LangGraph's ``IndexConfig``, of which ``fields`` (default ``["$"]``) says what
    to embed. ``ttl``: LangGraph's ``TTLConfig``. ``wait_for_vectors``: a put returns once its
    vectors are stored (off: BM25-searchable at once, embedded in the background)."""

    supports_ttl: bool = True

    def __init__(
        self,
        memory: Memory | str | Path | None = None,
        *,
        embedder: Any = None,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        hm_namespace: str = "langgraph",
        mode: str = "hybrid",
        hybrid_params: dict[str, Any] | None = None,
        wait_for_vectors: bool = True,
        vector_timeout: float | None = None,
        **memory_options: Any,
    ) -> None:
        self.index_config = index
        self.ttl_config = ttl
        fields = (index or {}).get("fields") or ["$"]
        self._fields = [(p, p if p == "$" else tokenize_path(p)) for p in fields]
        self._owns = not isinstance(memory, Memory)
        if isinstance(memory, Memory):
            self.memory = memory
        else:
            path = memory if memory is not None else Path(tempfile.mkdtemp(prefix="hybridmem-lg-")) / "memory.db"
            spec = self._embedder_spec(embedder, index)
            self.memory = Memory(path, embedder=spec, **{"chunk_size": None, **memory_options})
        self.hm_namespace = hm_namespace
        self.mode = mode
        self.hybrid_params = dict(hybrid_params or {})
        self.wait_for_vectors = wait_for_vectors
        self.vector_timeout = vector_timeout
        self._sweeper: threading.Thread | None = None
        self._sweep_stop = threading.Event()

    @staticmethod
    def _embedder_spec(embedder: Any, index: IndexConfig | None) -> str | Embedder | None:
        from .langchain import LangChainEmbedder, as_embedder  # noqa: PLC0415 - langchain-core: a langgraph dependency

        if embedder is not None:
            return as_embedder(embedder)
        if index and index.get("embed") is not None:
            return LangChainEmbedder(ensure_embeddings(index["embed"]), dim=index.get("dims"))
        return None

    def close(self) -> None:
        """Stop the TTL sweeper; close the Memory this store opened (one it was given stays open)."""
        self.stop_ttl_sweeper()
        if self._owns:
            self.memory.close()

    # ------------------------------------------------------------------ batch
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the ops: reads against the store as it is, then the writes (the last per item wins)."""
        ops = list(ops)
        for op in ops:
            self._check(op)
        results: list[Result] = [None] * len(ops)
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        refresh: dict[str, dict[str, Any]] = {}
        for i, op in enumerate(ops):
            if isinstance(op, GetOp):
                results[i] = self._get(op, refresh)
            elif isinstance(op, SearchOp):
                results[i] = self._search(op, refresh)
            elif isinstance(op, ListNamespacesOp):
                results[i] = self._list_namespaces(op)
            elif isinstance(op, PutOp):
                puts[(tuple(op.namespace), str(op.key))] = op
            else:
                raise ValueError(f"unknown operation type: {type(op).__name__}")
        for key in puts:  # written anyway: no refresh of what the batch overwrites
            refresh.pop(_doc_id(*key), None)
        self._refresh(refresh)
        if puts:
            self._apply_puts(list(puts.values()))
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))

    @staticmethod
    def _check(op: Op) -> None:
        validate_op_namespace(op)  # labels: strings, not empty, no '.', no NUL
        if isinstance(op, PutOp):
            if not op.namespace:
                raise InvalidNamespaceError("Namespace cannot be empty.")
            if op.namespace[0] == "langgraph":
                raise InvalidNamespaceError(f'Root label for namespace cannot be "langgraph". Got: {op.namespace}')
            if len(_marker_id(tuple(op.namespace))) > _MAX_ID - 8:
                raise InvalidNamespaceError(
                    f"namespace {op.namespace} is too long for hybridmem: its labels, percent-encoded and "
                    f"joined by '/', must stay under {_MAX_ID - 8} characters"
                )
            if len(_doc_id(tuple(op.namespace), str(op.key))) > _MAX_ID:
                raise ValueError(
                    f"key {str(op.key)[:40]!r}...: namespace and key, percent-encoded, exceed hybridmem's "
                    f"{_MAX_ID}-character id limit"
                )
            if op.value is not None and not isinstance(op.value, Mapping):
                raise ValueError(f"a value is a dict (or None to delete), got {type(op.value).__name__}")

    def __repr__(self) -> str:
        return f"<HybridMemStore {self.memory.path} namespace={json.dumps(self.hm_namespace)}>"
