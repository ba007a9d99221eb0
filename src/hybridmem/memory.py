"""The Memory facade: add / update / delete / get / search / ask / stats over one store.

It only builds the parts and delegates to them:

- :class:`~hybridmem.ingest.Preparer` checks, chunks and tokenizes documents;
- the store (:func:`~hybridmem.store.open_store`) commits them;
- the legs (:func:`~hybridmem.retrieve.legs.make_legs`: in-process indexes, or the database's own
  SQL legs) rank them, and :class:`~hybridmem.retrieve.search.Searcher` fuses the legs;
- :class:`~hybridmem.embed.worker.EmbeddingWorker` embeds queued chunks in the background;
- :class:`~hybridmem.ask.AskPipeline` reranks and answers; :class:`~hybridmem.graph.GraphRAG`
  is the graph layer.

The agent-memory calls (``remember``, ``add_messages``, ``supersede``, ``forget``, ``history``) are
mixed in from :mod:`hybridmem.memory_agent`, the async twins from :mod:`hybridmem.memory_async`.

Writes are committed and BM25-searchable at once; queries fuse whatever is embedded so far.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import config, ingest
from .ask import AskPipeline, LLMChoice, ask_request, check_reranker
from .embed.base import Embedder
from .embed.worker import Embedders, EmbeddingWorker
from .errors import NotFoundError
from .ingest import Preparer, check_id, check_namespace
from .llm.base import ChatModel
from .memory_agent import AgentMethods
from .memory_async import AsyncMethods
from .models import (
    Answer,
    Document,
    IngestReport,
    QueryRequest,
    QueryResponse,
    Stats,
    WorkerStatus,
    check_fusion,
    check_hnsw_dtype,
)
from .read_routes import ReadRoutes, replica_options
from .rerank import Reranker
from .retrieve.legs import make_legs
from .retrieve.search import Searcher, build_request
from .runtime import stored_embedder
from .store import open_store
from .store.base import PreparedDocument, Store, check_embedder

if TYPE_CHECKING:
    from .graph.rag import GraphRAG

__all__ = ["Memory", "stored_embedder"]

log = logging.getLogger(__name__)


class Memory(AgentMethods, AsyncMethods):
    """Long-term memory over one store file (or URL, for server backends).

    >>> mem = Memory(".hybridmem/memory.db")           # default embedder: bundled e5
    >>> mem.add("Increase max_connections to 200.", metadata={"service": "billing"})
    >>> mem.search("postgres pool exhausted").results[0].chunk_id
    >>> mem.ask("What is the billing pool size?").answer   # extractive unless an LLM is configured

    ``llm``: a spec (``openai:gpt-4o-mini``, ``gemini:…``, ``anthropic:…``), a ChatModel, ``"none"``,
    or None for ``HYBRIDMEM_LLM`` (unset: no LLM, never a default paid API). ``reranker`` (for
    ``mode: "rerank"``): ``auto`` (the LLM when configured, else ``identifier``), ``llm``,
    ``identifier``, or a Reranker; None reads ``HYBRIDMEM_RERANKER`` (default ``auto``). ``fusion``:
    the fusion of hybrid queries whose ``hybrid_params`` name none (``rrf``, ``adaptive``, ``dbsf``,
    ``combsum``, ``combmnz``); None reads ``HYBRIDMEM_FUSION`` (default ``rrf``). ``hnsw_dtype``: the
    dtype the embedded backend's HNSW graph keeps its vectors in (``f32``; ``f16`` or ``i8`` for half
    or a quarter of the memory, candidates rescored exactly); None reads ``HYBRIDMEM_HNSW_DTYPE``.
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        embedder: str | Embedder | None = None,
        namespace: str = config.DEFAULT_NAMESPACE,
        chunk_size: int | None = config.DEFAULT_CHUNK_SIZE,
        chunk_overlap: int = config.DEFAULT_CHUNK_OVERLAP,
        auto_embed: bool = True,
        exact_threshold: int = config.EXACT_THRESHOLD,
        leg_timeout: float = config.LEG_TIMEOUT,
        create: bool = True,
        check_embedder: bool = True,
        store_options: dict[str, Any] | None = None,
        llm: str | ChatModel | None = None,
        reranker: str | Reranker | None = None,
        fusion: str | None = None,
        hnsw_dtype: str | None = None,
        read_url: str | None = None,
        read_your_writes: bool = False,
    ) -> None:
        self.llms = LLMChoice(llm)
        default_fusion = check_fusion(fusion)
        graph_dtype = check_hnsw_dtype(hnsw_dtype)
        reranker_choice = check_reranker(reranker)
        self.path = str(path if path is not None else config.DEFAULT_DB)
        self.namespace = check_namespace(namespace)
        self.preparer = Preparer(chunk_size, chunk_overlap, vector_dim=self._vector_dim)
        self.auto_embed = auto_embed
        self.exact_threshold = exact_threshold
        spec = embedder if embedder is not None else config.DEFAULT_EMBEDDER
        # store_options tune a server backend (PostgreSQL: pool_size, statement_timeout_ms, schema,
        # hnsw_ef_search, connect_timeout); the embedded SQLite store takes none
        self.store: Store = open_store(
            path if path is not None else self.path,
            create=create,
            **{"exact_threshold": exact_threshold, **replica_options(self.path, read_url, read_your_writes)},
            **(store_options or {}),
        )
        try:
            self.embedders = Embedders(spec, self._check_embedder)
            self.embedders.adopt(self.store, check_embedder)
        except BaseException:
            self.store.close()  # a refused store keeps no connection open
            raise
        self._executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="hybridmem-leg")
        self.legs = make_legs(self.store, self._executor, exact_threshold=exact_threshold, hnsw_dtype=graph_dtype)
        self.worker = EmbeddingWorker(
            self.embedders,
            self.store.pending,
            self.store.pending_count,
            self._store_vectors,
            batch_size=config.EMBED_BATCH,
        )
        self.searcher = Searcher(
            self.store,
            self.legs,
            self.embedders,
            self._executor,
            leg_timeout=leg_timeout,
            graph_leg=lambda ns, text, rows, k: self.graph.search_leg(ns, text, rows, k),
            default_fusion=default_fusion,
            carry=getattr(self.store, "bind_route", None),
        )
        self.answers = AskPipeline(self.searcher.search, self.llms, reranker_choice)
        #: reads on the read replica when there is one (read_url), else as they are
        self.reads = ReadRoutes(self.store)
        self._graph: GraphRAG | None = None
        if auto_embed and not self.store.capabilities.read_only and self.store.pending_count() > 0:
            self.worker.start()

    def _check_embedder(self, emb: Embedder) -> None:
        check_embedder(self.store, emb.name, emb.dim)

    def _vector_dim(self) -> tuple[str | None, int]:
        """The store's embedder and the dimension of its vectors, which a precomputed vector must
        have. A store that has not recorded the dimension yet learns it from the embedder, loaded
        once (its ``embed`` is not called; an OpenAI-compatible one without ``dim`` sends one probe)."""
        name, dim = self.store.embedder_info()
        if dim is None:
            dim = self.embedders.query_model.dim  # checked against the store, which records it
        return name or self.embedders.name, int(dim)

    def _ns(self, namespace: str | None) -> str:
        return self.namespace if namespace is None else check_namespace(namespace)

    # ------------------------------------------------------------------ parts, as properties
    @property
    def llm(self) -> ChatModel | None:
        """The configured chat model; None when there is none (offline paths)."""
        return self.llms.model

    @property
    def embedder(self) -> Embedder:
        """The query-side embedder, loaded on first use."""
        return self.embedders.query_model

    @property
    def embedder_name(self) -> str:
        return self.embedders.name

    @property
    def worker_error(self) -> str | None:
        """The background embedding worker's last error (None while it works)."""
        return self.worker.error

    @property
    def chunk_size(self) -> int | None:
        return self.preparer.chunk_size

    @property
    def chunk_overlap(self) -> int:
        return self.preparer.chunk_overlap

    @property
    def graph(self) -> GraphRAG:
        """The GraphRAG layer of this memory (:class:`hybridmem.graph.GraphRAG`), built on first use."""
        if self._graph is None:
            from .graph.rag import GraphRAG  # noqa: PLC0415 - networkx and Leiden load on first use

            self._graph = GraphRAG(self.store, namespace=self._ns, llm=lambda: self.llms.model)
        return self._graph

    # ------------------------------------------------------------------ writes
    def add(
        self,
        text: str,
        *,
        id: str | None = None,
        metadata: dict[str, Any] | None = None,
        source: str | None = None,
        namespace: str | None = None,
        occurred_at: str | float | None = None,
        key: str | None = None,
        vector: Any = None,
    ) -> IngestReport:
        """Store one memory or document. Same id + same content = no-op; same id + new content = update.
        ``occurred_at``: when it happened (ISO 8601 or epoch seconds; naive = UTC; default now).
        ``key`` (e.g. ``user.city``): the memory holding that key in this scope (metadata ``user_id``,
        ``agent_id``) is superseded by this one and kept in the history (``history``). ``vector``: the
        text's vector, precomputed with the store's embedder (list of floats or 1-D array; the text
        must be one chunk): stored at once, the model is not called (docs/recipes.md)."""
        doc = {"text": text, "id": id, "metadata": metadata or {}, "source": source, "occurred_at": occurred_at}
        if vector is not None:
            doc["vector"] = vector
        ns = self._ns(namespace)
        if key is None:
            prepared = self.preparer.prepare(doc)  # validated by the preparer: our errors
        else:
            prepared = self.preparer.keyed(doc, key, lambda mem_key: self.store.key_holder(ns, mem_key))
        return self._write(ns, [prepared], count_pending=True)

    def add_documents(
        self,
        docs: Iterable[Document | dict[str, Any]],
        *,
        namespace: str | None = None,
        batch_size: int = 256,
        progress: Callable[[int], None] | None = None,
        skip_invalid: bool = False,
    ) -> IngestReport:
        """Store many documents; each batch (``batch_size`` documents, fewer when they hold more
        than 8 MB of text) is one transaction. Every document is validated before
        its batch is written, so a bad one fails its batch cleanly and loses nothing already stored.
        With ``skip_invalid`` an invalid document is left out and listed in ``report.skipped``
        (with its source and the reason) instead of failing the call. A document's ``vector``
        (precomputed, as in :meth:`add`) is checked too; a bad one is named ``documents[N].vector``."""
        ns = self._ns(namespace)
        report = IngestReport()
        for batch in self.preparer.batches(docs, batch_size, report.skipped if skip_invalid else None):
            report.merge(self._write(ns, batch))
            if progress:
                progress(len(batch))
        report.pending_vectors = self.store.pending_count(ns)
        return report

    def _write(self, ns: str, batch: list[PreparedDocument], count_pending: bool = False) -> IngestReport:
        res = self.legs.commit(lambda: self.store.write_documents(ns, batch))
        written = set(res.added) | set(res.updated)
        if written and self.store.has_graph(ns):  # graph staleness: existing entities the new chunks name
            last = {p.doc_id: p for p in batch}
            try:
                self.graph.on_write(ns, [c for p in last.values() if p.doc_id in written for c in p.chunks])
            except Exception as e:  # the write is committed; staleness marking must not fail it
                log.warning("graph staleness marking failed: %s", e)
        if res.chunks_written and self.auto_embed:
            self.worker.wake()
        return IngestReport(
            added=res.added,
            updated=res.updated,
            unchanged=res.unchanged,
            chunks_written=res.chunks_written,
            vectors_reused=res.vectors_reused,
            pending_vectors=self.store.pending_count(ns) if count_pending else 0,
        )

    def update(
        self,
        id: str,
        text: str,
        *,
        metadata: dict[str, Any] | None = None,
        source: str | None = None,
        namespace: str | None = None,
        occurred_at: str | float | None = None,
        keep_history: bool = True,
        reason: str | None = None,
        vector: Any = None,
    ) -> IngestReport:
        """Replace an existing memory's text (and metadata/source when given) and re-index it. The
        version it replaces is kept in its history (``keep_history=False`` drops it): searches see the
        new one, ``as_of`` an earlier time sees the old one, ``history(id)`` lists both. ``vector``:
        the new text's precomputed vector (as in :meth:`add`); without one, a changed chunk is
        embedded again by the worker."""
        ns = self._ns(namespace)
        old = self.store.get_document(ns, check_id(id))
        if old is None or old.get("valid_to") is not None:
            raise NotFoundError(f"no document {id!r} in namespace {ns!r}")
        meta = old["metadata"] if metadata is None else metadata
        src = old["source"] if source is None else source
        doc = {"text": text, "id": id, "metadata": meta, "source": src, "occurred_at": occurred_at, "vector": vector}
        prepared = self.preparer.prepare(doc)
        prepared.keep_history, prepared.reason = keep_history, reason or "updated"
        return self._write(ns, [prepared], count_pending=True)

    def delete(self, ids: str | Sequence[str], *, namespace: str | None = None) -> list[str]:
        """Delete documents or single chunks by id from every index, in one transaction.
        Returns the ids found (unknown ids are ignored; the CLI reports them)."""
        ns = self._ns(namespace)
        checked = [check_id(i) for i in ([ids] if isinstance(ids, str) else list(ids))]
        found: list[str] = []

        def write() -> Any:
            nonlocal found
            found, res = self.store.delete(ns, checked)
            return res

        self.legs.commit(write)
        return found

    def get(self, doc_id: str, *, namespace: str | None = None) -> dict[str, Any]:
        ns = self._ns(namespace)
        doc = self.reads.run(lambda: self.store.get_document(ns, doc_id))[0]
        if doc is None:
            raise NotFoundError(f"no document {doc_id!r} in namespace {ns!r}")
        return doc

    def ingest_path(
        self,
        path: str | Path,
        *,
        namespace: str | None = None,
        metadata: dict[str, Any] | None = None,
        doc_id: str | None = None,
        root: str | Path | None = None,
        id_prefix: str = "",
        encoding: str | None = None,
        replace_metadata: bool = False,
        progress: Callable[[int], None] | None = None,
        include_all: bool = False,
    ) -> IngestReport:
        """Ingest a file or a directory: ids from paths, stored metadata merged, a bad file skipped
        with its reason, which files a directory gives (see :func:`hybridmem.ingest.ingest_path`)."""
        ns, opts = self._ns(namespace), (metadata, doc_id, root, id_prefix, encoding, replace_metadata, progress)
        return ingest.ingest_path(self, ns, path, *opts, include_all=include_all)

    # ------------------------------------------------------------------ vectors
    def _store_vectors(self, items: Sequence[Any]) -> None:
        self.legs.commit(lambda: self.store.store_vectors(items))

    def embed_pending(
        self,
        *,
        limit: int | None = None,
        batch_size: int = config.EMBED_BATCH,
        progress: Callable[[int], None] | None = None,
        stop: Any = None,
    ) -> int:
        """Embed queued chunks (all, or ``limit``) in batches; returns how many vectors were stored."""
        return self.worker.embed_pending(limit=limit, batch_size=batch_size, progress=progress, stop=stop)

    def wait_for_vectors(self, timeout: float | None = None, progress: Callable[[int], None] | None = None) -> bool:
        """Block until every queued chunk has its vector (embedding in this thread). True if done."""
        return self.worker.wait(timeout, progress)

    def wait_for_indexes(self, *, namespace: str | None = None, timeout: float | None = None) -> bool:
        """Load a namespace's in-process BM25 and dense indexes and wait until a background HNSW
        build (above ``exact_threshold``) has finished — e.g. before measuring, or before taking
        traffic. Queries never need this: they are answered exactly while the graph builds. On
        PostgreSQL it loads the BM25 postings (``bm25_leg="process"``); the dense index is the
        server's. True when ready."""
        return self.legs.wait_ready(self._ns(namespace), timeout)

    def reembed(self, embedder: str | Embedder, progress: Callable[[int], None] | None = None) -> int:
        """Switch the store to another embedder: drop all vectors, queue every chunk, embed them."""
        self.worker.stop(timeout=30)
        new = self.embedders.switch(embedder)
        self.store.set_embedder(new.name, new.dim, reset_vectors=True)
        self.legs.reset_dense()
        self.worker.resume()
        return self.embed_pending(progress=progress)

    # ------------------------------------------------------------------ queries
    def search(self, request: QueryRequest | dict[str, Any] | str, **kwargs: Any) -> QueryResponse:
        """Run a query of the contract. ``request`` may be a QueryRequest, its dict, or the search
        text (then keyword arguments fill the other fields: top_k, mode, metadata_filter, ...)."""
        req = self._request(request, **kwargs)
        ns = self._ns(req.namespace)
        if req.mode == "graph" and self.graph.gstore.state(ns) is None:
            raise NotFoundError(f"namespace {ns!r} has no graph yet: run `hybridmem graph build` (mode graph needs it)")
        resp, route = self.reads.run(lambda: self.answers.search(req, ns), req.read_your_writes)
        if route is not None:  # a read replica: where this read went, and why when not there
            resp.read_from = route.read_from
            resp.warnings.extend(route.notes)
        return resp

    def ask(
        self,
        question: str,
        *,
        top_k: int = 5,
        metadata_filter: dict[str, Any] | None = None,
        llm: str | ChatModel | None = None,
        rerank: bool = True,
        namespace: str | None = None,
        query_id: str | None = None,
        reranker: str | None = None,
        **fields: Any,
    ) -> Answer:
        """Answer ``question`` from the memory: retrieve (hybrid, reranked unless ``rerank=False``,
        ``top_k`` chunks), then answer only from those chunks, citing ``[chunk_id]``s.

        ``fields``: any other field of the query request, validated like a search's: scopes
        (``session_id``, ``user_id``, ``agent_id``), ``time_range``, ``as_of``, ``now``,
        ``hybrid_params``, ``context_window`` (the model then reads each hit's neighbouring turns
        too). The model sees each memory's ``occurred_at`` beside its id ("when did …" questions).

        With an LLM (``llm=``, else the memory's): at most 3 sentences in the question's language;
        cited ids are checked against the context and invented ones removed and flagged. Without
        one, or if it fails: the extractive answerer (the best sentences of the usable chunks), or
        an honest "not found". ``notes`` says which path ran and why.
        """
        data = ask_request(question, top_k, metadata_filter, rerank, namespace, query_id, reranker)
        req = self._request({**fields, **data})
        ans, route = self.reads.run(lambda: self.answers.ask(req, self._ns(req.namespace), llm), req.read_your_writes)
        if route is not None:
            ans.notes.extend(route.notes)
        return ans

    @staticmethod
    def _request(request: QueryRequest | dict[str, Any] | str, **kwargs: Any) -> QueryRequest:
        return build_request(request, **kwargs)

    def ask_global(self, question: str, **kwargs: Any) -> Any:
        """A corpus-wide answer by map-reduce over community summaries (see ``GraphRAG.ask_global``)."""
        return self.graph.ask_global(question, **kwargs)

    # ------------------------------------------------------------------ stats / lifecycle
    def stats(self, namespace: str | None = None) -> Stats:
        return self.reads.run(lambda: self._stats(self._ns(namespace)))[0]

    def _stats(self, ns: str) -> Stats:
        c = self.store.counts(ns)
        name, dim = self.store.embedder_info()
        return Stats(
            path=self.store.path,  # a URL's password masked
            namespace=ns,
            documents=c["documents"],
            chunks=c["chunks"],
            vectors=c["vectors"],
            pending_vectors=c["pending_vectors"],
            embedder=name,
            dim=dim,
            dense_index=self.legs.dense_kind(ns, c["vectors"]),
            namespaces=self.store.namespaces(),
            metadata_keys=sorted(self.store.metadata_keys(ns)),
            schema_version=self.store.schema_version,
            size_bytes=self.store.size_bytes(),
            worker=self.worker_status() if self.worker.stored_total or self.worker.running else None,
        )

    def worker_status(self) -> WorkerStatus:
        """The background embedding worker's progress: vectors/s over the last minute, the store's
        queue, the batch running, the last error."""
        return WorkerStatus.model_validate(self.worker.status())

    def close(self) -> None:
        self.worker.stop(timeout=5)
        self._executor.shutdown(wait=False, cancel_futures=True)
        self.legs.close()  # a running HNSW build is cancelled and waited for (not killed inside usearch)
        self.store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
