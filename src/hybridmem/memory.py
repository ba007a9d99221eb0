"""The Memory facade: add / update / delete / search over one store, one embedder, namespaces.

Writes are committed and BM25-searchable at once; vectors are computed in batches by a background
worker from a durable queue in the store, and queries fuse whatever is embedded so far. ``ask``
answers from the retrieved chunks (an LLM when one is configured, else extractively).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from . import config
from .answer import extractive_answer, llm_answer
from .embed.base import Embedder, create_embedder
from .errors import (
    EmbedderError,
    EmbedderMismatchError,
    HybridMemError,
    LLMError,
    NotFoundError,
    StoreError,
    ValidationError,
)
from .llm.base import LLM_ENV, ChatModel, resolve_llm
from .models import Answer, Citation, Document, IngestReport, QueryRequest, QueryResponse, Stats, Usage
from .rerank import IdentifierReranker, LLMReranker, Reranker, RerankOutcome
from .retrieve.cache import LRU
from .retrieve.dense import DenseIndex
from .retrieve.filters import MAX_KEY_LEN, Filter
from .retrieve.sparse import SparseIndex
from .retrieve.search import Searcher
from .store.base import PreparedDocument, WriteResult
from .store import open_store
from .text.chunk import chunk_text
from .text.loaders import load_path
from .text.tokenize import TOKENIZER_VERSION, detect_language, tokenize

#: committed chunk changes remembered per namespace for catching up cached filter results
CHUNK_LOG_LEN = 256
ALLOWED_LOCK_STRIPES = 16

__all__ = ["Memory", "embedder_name", "RERANKER_ENV"]

log = logging.getLogger(__name__)
log.addHandler(logging.NullHandler())

_LANGS = {"en", "fr", "de", "es", "zh"}
#: the reranker of ``mode: "rerank"`` when neither the request nor ``Memory(reranker=)`` names one
RERANKER_ENV = "HYBRIDMEM_RERANKER"
_RERANKERS = ("auto", "llm", "identifier")
_NO_LLM = f"no LLM configured (set {LLM_ENV}, or pass llm= / --llm)"


def embedder_name(spec: str | Embedder | None) -> str:
    """The name an embedder spec will record in a store, without loading the model."""
    if spec is None:
        spec = config.DEFAULT_EMBEDDER
    if not isinstance(spec, str):
        return spec.name
    kind, _, arg = spec.strip().partition(":")
    kind = kind.lower()
    if kind == "e5":
        return "e5:multilingual-e5-small-q4" + ("" if arg in ("", "original") else f"-{arg}")
    if kind == "use":
        return "use:multilingual-v3"
    if kind == "hash":
        return f"hash:{int(arg) if arg else 256}"
    if kind in ("st", "openai") and arg:
        return f"{kind}:{arg}"
    return create_embedder(spec).name  # raises a clear error for unknown specs


def _check_metadata(meta: Any, where: str, depth: int = 0) -> None:
    if depth == 0 and not isinstance(meta, dict):
        raise ValidationError(f"metadata must be a JSON object, got {type(meta).__name__}", field=where)
    if depth > 16:
        raise ValidationError("metadata nested deeper than 16 levels", field=where)
    if isinstance(meta, dict):
        for k, v in meta.items():
            if not isinstance(k, str):
                raise ValidationError(f"metadata keys must be strings, got {k!r}", field=where)
            if depth == 0 and (not k or len(k) > MAX_KEY_LEN or k.startswith("$") or any(c in k for c in '"\\')
                               or any(ord(c) < 32 for c in k)):
                raise ValidationError(
                    f"invalid metadata key {k!r}: 1-{MAX_KEY_LEN} characters, no quotes, backslashes, control "
                    "characters or leading '$'",
                    field=where,
                )
            _check_metadata(v, where, depth + 1)
            _check_text(k, where)
    elif isinstance(meta, list):
        for v in meta:
            _check_metadata(v, where, depth + 1)
    elif isinstance(meta, str):
        _check_text(meta, where)
    elif isinstance(meta, float) and not np.isfinite(meta):
        raise ValidationError("metadata numbers must be finite (no NaN or Infinity)", field=where)
    elif not (meta is None or isinstance(meta, (str, int, float, bool))):
        raise ValidationError(f"metadata value of type {type(meta).__name__} is not JSON", field=where)


def _check_text(text: str, where: str) -> None:
    """Strings must be encodable UTF-8: an unpaired surrogate ("\udc00") cannot be stored."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError(f"{where}: text with an unpaired surrogate is not valid Unicode", field=where) from None


def _check_id(ident: str, field: str = "id") -> str:
    if not isinstance(ident, str) or not ident.strip() or len(ident) > 512 or any(ord(c) < 32 for c in ident):
        raise ValidationError(f"invalid id {ident!r}: 1-512 printable characters", field=field)
    return ident.strip()


class Memory:
    """Long-term memory over one store file (or URL, for server backends).

    >>> mem = Memory(".hybridmem/memory.db")           # default embedder: bundled e5
    >>> mem.add("Increase max_connections to 200.", metadata={"service": "billing"})
    >>> mem.search("postgres pool exhausted").results[0].chunk_id
    >>> mem.ask("What is the billing pool size?").answer   # extractive unless an LLM is configured

    ``llm``: a spec (``openai:gpt-4o-mini``, ``gemini:…``, ``anthropic:…``), a ChatModel, ``"none"``,
    or None for ``HYBRIDMEM_LLM`` (unset: no LLM, never a default paid API). ``reranker`` (for
    ``mode: "rerank"``): ``auto`` (the LLM when configured, else ``identifier``), ``llm``,
    ``identifier``, or a Reranker; None reads ``HYBRIDMEM_RERANKER`` (default ``auto``).
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
    ) -> None:
        # an explicit LLM is built now, so a missing key fails here; the environment's is built on
        # first use, and an unusable one only turns into a note (it must not break ingest or search)
        self._llm: ChatModel | None = resolve_llm(llm) if llm is not None else None
        self._llm_ready = llm is not None
        self._llm_note: str | None = 'no LLM (switched off with llm="none")' if self._llm_ready and self._llm is None else None
        self._reranker = self._check_reranker(reranker if reranker is not None else os.environ.get(RERANKER_ENV) or "auto")
        self.path = str(path if path is not None else config.DEFAULT_DB)
        self.namespace = self._check_namespace(namespace)
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        self.auto_embed = auto_embed
        self.exact_threshold = exact_threshold
        self._spec = embedder if embedder is not None else config.DEFAULT_EMBEDDER
        self._embedder: Embedder | None = embedder if (embedder is not None and not isinstance(embedder, str)) else None
        self._worker_embedder: Embedder | None = None
        # store_options tune a server backend (PostgreSQL: pool_size, statement_timeout_ms, schema,
        # hnsw_ef_search, connect_timeout); the embedded SQLite store takes none
        self.store = open_store(path if path is not None else self.path, create=create,
                                **{"exact_threshold": exact_threshold, **(store_options or {})})
        #: the backend runs the BM25 and dense legs itself (PostgreSQL): no in-process indexes
        self._native = bool(getattr(self.store, "native_search", False))
        try:
            self.embedder_name = embedder_name(self._spec)
            stored, stored_dim = self.store.embedder_info()
            if stored is None:
                self.store.set_embedder(self.embedder_name, None)
            elif stored != self.embedder_name and check_embedder:
                raise EmbedderMismatchError(stored, stored_dim or 0, self.embedder_name, 0)
            if self._embedder is not None and getattr(self._embedder, "dim", None) and check_embedder:
                self._check_dim(self._embedder)  # an embedder instance: record (or check) its dimension now
        except BaseException:
            self.store.close()  # a refused store keeps no connection open
            raise
        self._executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="hybridmem-leg")
        self._indexes: dict[str, DenseIndex] = {}
        self._sparse: dict[str, SparseIndex] = {}
        self._allowed_cache = LRU(64)  # (namespace, filter) -> (chunk version, sorted allowed rowids)
        # one evaluation of a filter at a time (striped by key): concurrent queries with the same
        # filter wait for it and reuse its result instead of all scanning every chunk at once
        self._allowed_locks = [threading.Lock() for _ in range(ALLOWED_LOCK_STRIPES)]
        # namespace -> recent committed chunk changes (version, rowids added, rowids removed), in order:
        # a cached allowed set catches up from them instead of re-running its filter over every chunk
        self._chunk_log: dict[str, deque[tuple[int, np.ndarray, np.ndarray]]] = {}
        # one load at a time per kind of index (a BM25 and a dense load may run at once)
        self._index_locks = {id(self._sparse): threading.Lock(), id(self._indexes): threading.Lock()}
        self._write_lock = threading.RLock()
        self._embed_lock = threading.Lock()
        self._qcache = LRU(512)  # query text -> query vector
        self._worker: threading.Thread | None = None
        self._wake = threading.Event()
        self._stop = threading.Event()
        self.worker_error: str | None = None
        self.searcher = Searcher(
            store=self.store,
            executor=self._executor,
            dense_search=self._dense_search,
            sparse_search=self._sparse_search,
            allowed_for=self._allowed,
            pending_count=self.store.pending_count,
            leg_timeout=leg_timeout,
            graph_search=self._graph_search,
            native=self._native,
            prepare=self._load_cold_indexes,
        )
        self._graph: Any = None
        if auto_embed and self.store.pending_count() > 0:
            self._start_worker()

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _check_namespace(ns: str) -> str:
        if not isinstance(ns, str) or not ns or len(ns) > 128 or any(ord(c) < 32 for c in ns):
            raise ValidationError(f"invalid namespace {ns!r}: 1-128 printable characters", field="namespace")
        return ns

    def _ns(self, namespace: str | None) -> str:
        return self.namespace if namespace is None else self._check_namespace(namespace)

    @staticmethod
    def _check_reranker(choice: str | Reranker) -> str | Reranker:
        if isinstance(choice, str):
            c = choice.strip().lower()
            if c not in _RERANKERS:
                raise ValidationError(f"unknown reranker {choice!r}; use {', '.join(_RERANKERS)}", field="reranker")
            return c
        if isinstance(choice, Reranker):
            return choice
        raise ValidationError(f"a reranker is one of {', '.join(_RERANKERS)} or a Reranker, got {choice!r}",
                              field="reranker")

    @property
    def llm(self) -> ChatModel | None:
        """The configured chat model; None when there is none (offline paths)."""
        if not self._llm_ready:
            try:
                self._llm = resolve_llm(None)
            except HybridMemError as e:
                self._llm_note = f"{LLM_ENV} is set but unusable ({e})"
                log.warning("%s", self._llm_note)
            self._llm_ready = True
        return self._llm

    def _pick_llm(self, llm: str | ChatModel | None) -> tuple[ChatModel | None, str]:
        """The model for one call and, when there is none, why."""
        if llm is None:
            model = self.llm
            return model, self._llm_note or _NO_LLM
        return resolve_llm(llm), 'no LLM (switched off with llm="none")'

    def _pick_reranker(self, choice: str | None, llm: ChatModel | None, why_no_llm: str) -> tuple[Reranker, str | None]:
        pick = choice if choice is not None else self._reranker
        if not isinstance(pick, str):
            return pick, None
        if pick == "identifier":
            return IdentifierReranker(), None
        if llm is not None:
            return LLMReranker(llm), None
        asked = " instead of the LLM reranker asked for" if pick == "llm" else ""
        return IdentifierReranker(), f"{why_no_llm}: offline identifier reranker used{asked}"

    @property
    def embedder(self) -> Embedder:
        """The query-side embedder, loaded on first use."""
        if self._embedder is None:
            with self._embed_lock:
                if self._embedder is None:
                    emb = create_embedder(self._spec)
                    self._check_dim(emb)
                    self._embedder = emb
        return self._embedder

    def _get_worker_embedder(self) -> Embedder:
        # a second model instance for batch embedding, so queries never wait behind a batch
        if self._worker_embedder is None:
            if isinstance(self._spec, str) and self._spec.split(":")[0].lower() in ("e5", "use"):
                self._worker_embedder = create_embedder(self._spec)
            else:
                self._worker_embedder = self.embedder
        return self._worker_embedder

    def _check_dim(self, emb: Embedder) -> None:
        name, dim = self.store.embedder_info()
        if emb.name != name:
            raise EmbedderMismatchError(name or "?", dim or 0, emb.name, emb.dim)
        if dim is None:
            self.store.set_embedder(emb.name, emb.dim)
        elif dim != emb.dim:
            raise EmbedderMismatchError(name or "?", dim, emb.name, emb.dim)

    def _prepare(self, doc: Document | dict[str, Any], namespace: str) -> PreparedDocument:
        if isinstance(doc, dict):
            try:
                doc = Document(**doc)
            except Exception as e:
                raise ValidationError(f"invalid document: {e}", field="document") from None
        text = doc.text
        if not isinstance(text, str) or not text.strip():
            raise ValidationError("text must not be empty", field="text")
        if len(text) > config.MAX_TEXT_CHARS:
            raise ValidationError(f"text of {len(text)} characters exceeds {config.MAX_TEXT_CHARS}", field="text")
        if "\x00" in text:
            raise ValidationError("text contains NUL characters (binary data?)", field="text")
        _check_text(text, "text")
        _check_metadata(doc.metadata, "metadata")
        meta_json = json.dumps(doc.metadata, sort_keys=True, ensure_ascii=False, allow_nan=False)
        doc_id = _check_id(doc.id) if doc.id is not None else "mem-" + hashlib.sha1(text.encode()).hexdigest()[:12]
        content_hash = hashlib.sha256(
            json.dumps([text, meta_json, doc.source, self.chunk_size, self.chunk_overlap, TOKENIZER_VERSION]).encode()
        ).hexdigest()
        chunks = chunk_text(text, self.chunk_size, self.chunk_overlap)
        lang = doc.metadata.get("lang") if doc.metadata.get("lang") in _LANGS else detect_language(text)
        return PreparedDocument(
            doc_id=doc_id,
            source=doc.source,
            metadata=doc.metadata,
            content_hash=content_hash,
            chunks=chunks,
            tokens=[" ".join(tokenize(c, lang)) for c in chunks],
            langs=[lang] * len(chunks),
            text_hashes=[hashlib.sha256(c.encode()).hexdigest() for c in chunks],
        )

    # ------------------------------------------------------------------ writes
    def add(
        self,
        text: str,
        *,
        id: str | None = None,
        metadata: dict[str, Any] | None = None,
        source: str | None = None,
        namespace: str | None = None,
    ) -> IngestReport:
        """Store one memory or document. Same id + same content = no-op; same id + new content = update."""
        return self.add_documents([Document(text=text, id=id, metadata=metadata or {}, source=source)], namespace=namespace)

    def add_documents(
        self,
        docs: Iterable[Document | dict[str, Any]],
        *,
        namespace: str | None = None,
        batch_size: int = 64,
        progress: Callable[[int], None] | None = None,
        skip_invalid: bool = False,
    ) -> IngestReport:
        """Store many documents; each batch is one transaction. Every document is validated before
        its batch is written, so a bad one fails its batch cleanly and loses nothing already stored.
        With ``skip_invalid`` an invalid document is left out and listed in ``report.skipped``
        (with its source and the reason) instead of failing the call."""
        ns = self._ns(namespace)
        report = IngestReport()
        batch: list[PreparedDocument] = []

        def flush() -> None:
            if batch:
                report_part = self._write(ns, batch)
                report.merge(report_part)
                if progress:
                    progress(len(batch))
                batch.clear()

        for d in docs:
            try:
                batch.append(self._prepare(d, ns))
            except ValidationError as e:
                if not skip_invalid:
                    raise
                src = d.get("source") or d.get("id") if isinstance(d, dict) else (d.source or d.id)
                report.skipped.append({"path": str(src or "?"), "reason": str(e)})
                continue
            if len(batch) >= batch_size:
                flush()
        flush()
        report.pending_vectors = self.store.pending_count(ns)
        return report

    def _write(self, ns: str, batch: list[PreparedDocument]) -> IngestReport:
        seen: dict[str, PreparedDocument] = {}
        for p in batch:  # the same id twice in one batch: the last one wins, as sequential writes would
            seen[p.doc_id] = p
        with self._write_lock:
            res = self.store.write_documents(ns, list(seen.values()))
            self._apply(res)
        written = set(res.added) | set(res.updated)
        if written and self.store.has_graph(ns):  # graph staleness: existing entities the new chunks name
            try:
                self.graph.on_write(ns, [c for p in seen.values() if p.doc_id in written for c in p.chunks])
            except Exception as e:  # the write is committed; staleness marking must not fail it
                log.warning("graph staleness marking failed: %s", e)
        if res.chunks_written and self.auto_embed:
            self._start_worker()
            self._wake.set()
        return IngestReport(
            added=res.added, updated=res.updated, unchanged=res.unchanged,
            chunks_written=res.chunks_written, vectors_reused=res.vectors_reused,
        )

    def update(
        self,
        id: str,
        text: str,
        *,
        metadata: dict[str, Any] | None = None,
        source: str | None = None,
        namespace: str | None = None,
    ) -> IngestReport:
        """Replace an existing document's text (and metadata/source when given) and re-index it."""
        ns = self._ns(namespace)
        old = self.store.get_document(ns, _check_id(id))
        if old is None:
            raise NotFoundError(f"no document {id!r} in namespace {ns!r}")
        meta = old["metadata"] if metadata is None else metadata
        src = old["source"] if source is None else source
        return self.add_documents([Document(text=text, id=id, metadata=meta, source=src)], namespace=ns)

    def delete(self, ids: str | Sequence[str], *, namespace: str | None = None) -> list[str]:
        """Delete documents or single chunks by id from every index, in one transaction.
        Returns the ids found (unknown ids are ignored; the CLI reports them)."""
        ns = self._ns(namespace)
        ids = [ids] if isinstance(ids, str) else list(ids)
        with self._write_lock:
            found, res = self.store.delete(ns, [_check_id(i) for i in ids])
            self._apply(res)
        return found

    def get(self, doc_id: str, *, namespace: str | None = None) -> dict[str, Any]:
        ns = self._ns(namespace)
        doc = self.store.get_document(ns, doc_id)
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
        progress: Callable[[int], None] | None = None,
    ) -> IngestReport:
        docs, skipped = load_path(Path(path), doc_id=doc_id)
        if metadata:
            for d in docs:
                d.metadata = {**d.metadata, **metadata}
        # one bad file (NUL characters deep inside, metadata nested too deep...) is skipped with its
        # reason, as unreadable files are: it must not abort the rest of a directory
        report = self.add_documents(docs, namespace=namespace, progress=progress, skip_invalid=True)
        report.skipped += [{"path": s.path, "reason": s.reason} for s in skipped]
        return report

    # ------------------------------------------------------------------ dense side
    def _apply(self, res: WriteResult) -> None:
        """Bring in-memory indexes up to date with a committed write (or mark them stale). The write
        is committed: a failure here must not reach its caller, only force a reload."""
        if self._native:
            return
        for ns, version, added, removed in res.chunk_changes:
            log_ = self._chunk_log.setdefault(ns, deque(maxlen=CHUNK_LOG_LEN))
            log_.append((version, np.asarray(added, np.int64), np.asarray(removed, np.int64)))
        try:
            self._apply_changes(res)
        except Exception as e:
            log.warning("in-memory index update failed (%s: %s); reloading from the store", type(e).__name__, e)
            for ns, *_ in res.chunk_changes:
                if (sp := self._sparse.get(ns)) is not None:
                    sp.version = -1
            for ns, *_ in res.vec_changes:
                if (idx := self._indexes.get(ns)) is not None:
                    idx.version = -1

    def _apply_changes(self, res: WriteResult) -> None:
        for ns, version, added, removed in res.chunk_changes:
            sp = self._sparse.get(ns)
            if sp is None:
                continue
            if sp.version != version - 1:
                sp.version = -1
                continue
            sp.apply(version, self.store.tokens_for(ns, added) if added else [], removed)
        for ns, version, added, removed in res.vec_changes:
            idx = self._indexes.get(ns)
            if idx is None:
                continue
            if idx.version != version - 1:
                idx.version = -1  # another writer got in between: reload on next query
                continue
            ids, vecs = self.store.vectors_for(added) if added else (np.zeros(0, np.int64), None)
            if vecs is not None and len(ids) and vecs.shape[1] != idx.dim:
                idx.version = -1  # loaded empty before the dimension was known: reload on next query
                continue
            idx.apply(version, ids, vecs if vecs is not None else np.zeros((0, idx.dim), np.float32), removed)

    def _synced(self, cache: dict[str, Any], ns: str, version: Callable[[], int], load: Callable[[Any], Any]) -> Any:
        """The cached index of ``ns`` if it reflects the store's ``version()``, else (re)loaded from
        the store by ``load(old_index_or_None)``; double-checked so concurrent queries load it once.

        An index one step behind is nearly always this process's own write, committed and about
        to be applied (the writer holds the write lock from commit to apply): the query waits for
        that apply — milliseconds — instead of reloading the namespace, which at 50k chunks costs
        seconds and restarts a background HNSW build. Only a change the writer could not apply
        (another process wrote the file, the index was marked stale) leads to a reload."""
        idx = cache.get(ns)
        if idx is not None and idx.version == version():
            return idx
        if idx is not None and idx.version >= 0:
            with self._write_lock:
                pass  # an in-flight write of ours has applied its change once this is free
            if idx.version == version():
                return idx
        with self._index_locks[id(cache)]:
            idx = cache.get(ns)
            v = version()
            if idx is None or idx.version != v:
                idx = cache[ns] = load(idx)
        return idx

    def _index(self, ns: str) -> DenseIndex:
        def load(idx: DenseIndex | None) -> DenseIndex:
            v, rowids, matrix = self.store.load_vectors(ns)
            dim = matrix.shape[1] if matrix.size else (self.store.embedder_info()[1] or 0)
            if idx is None or idx.dim != dim:
                idx = DenseIndex(dim, exact_threshold=self.exact_threshold)
            idx.load(v, rowids, matrix)
            return idx

        return self._synced(self._indexes, ns, lambda: self.store.vector_version(ns), load)

    def _load_cold_indexes(self, ns: str, mode: str) -> None:
        """Load the in-process indexes a query of ``mode`` needs that this process has never loaded,
        before its legs start and outside their timeout, the two at once. At 1M chunks the BM25
        postings take ~30 s to load: a first query whose BM25 leg ran into the 30 s leg timeout
        meanwhile answered without BM25 (bench/latency.py's probe). Later queries find them loaded."""
        if self._native:
            return
        jobs = []
        if mode in ("bm25", "hybrid") and ns not in self._sparse:
            jobs.append(lambda: self._sparse_index(ns))
        if mode in ("vector", "hybrid") and ns not in self._indexes:
            jobs.append(lambda: self._index(ns))
        if not jobs:
            return
        try:
            others = [self._executor.submit(job) for job in jobs[1:]]
            jobs[0]()
            for f in others:
                f.result()
        except Exception as e:  # the legs load again and report it as their error
            log.warning("loading the indexes of %r before the query failed: %s: %s", ns, type(e).__name__, e)

    def _sparse_index(self, ns: str) -> SparseIndex:
        def load(sp: SparseIndex | None) -> SparseIndex:
            sp = sp or SparseIndex()
            sp.load(*self.store.load_tokens(ns))
            return sp

        return self._synced(self._sparse, ns, lambda: self.store.chunk_version(ns), load)

    def _sparse_search(self, ns: str, terms: list[str], allowed: np.ndarray | None, k: int) -> list[tuple[int, float]]:
        if not terms:
            return []
        if self._native:  # ``allowed`` is the parsed filter: the backend applies it in SQL
            return self.store.search_sparse(ns, terms, allowed, k)
        return self._sparse_index(ns).search(terms, k, allowed)

    def _allowed(self, ns: str, flt: Filter) -> np.ndarray:
        """Sorted rowids a filter allows at the store's current chunk version, cached per (namespace,
        filter): agents repeat filters. A cached set a few writes behind catches up from those
        writes' changes (their added chunks alone are tested against the filter) instead of
        re-running the filter over every chunk: at 50k chunks with writes arriving several times a
        second, a full re-run per write made every filtered query cost a ~100 ms scan."""
        key = (ns, flt)
        version = self.store.chunk_version(ns)
        hit = self._allowed_cache.get(key)
        if hit is not None and hit[0] == version:
            return hit[1]
        # the first queries of a filter, and those after each write, arrive together under load: one
        # evaluates or catches up, the others find its result (16 clients on a warm 50k-chunk server:
        # the start-up burst of first evaluations went from 0.92 to 0.50 s, docs/server.md)
        with self._allowed_locks[hash(key) % ALLOWED_LOCK_STRIPES]:
            version = self.store.chunk_version(ns)
            hit = self._allowed_cache.get(key)
            if hit is not None and hit[0] >= version:
                return hit[1]
            rows = self._allowed_catch_up(ns, flt, hit, version) if hit is not None else None
            if rows is None:
                rows = self.store.filter_rowids(ns, flt)
                rows.sort()
            self._allowed_cache.put(key, (version, rows))
        return rows

    def _allowed_catch_up(self, ns: str, flt: Filter, hit: tuple[int, np.ndarray], version: int) -> np.ndarray | None:
        """``hit``'s allowed set brought from its version to ``version`` through the change log, or
        None when the log does not hold every change in between (another process wrote, a reindex)."""
        since = hit[0]
        for attempt in (0, 1):
            changes = [c for c in list(self._chunk_log.get(ns, ())) if since < c[0] <= version]
            if [c[0] for c in changes] == list(range(since + 1, version + 1)):
                break
            if attempt == 0:  # a write of ours committed, not yet logged: it logs before releasing the lock
                with self._write_lock:
                    pass
        else:
            return None
        added = np.concatenate([c[1] for c in changes])
        removed = np.concatenate([c[2] for c in changes] + [added])  # re-test added rows, keep none twice
        rows = hit[1][~np.isin(hit[1], removed)] if len(removed) else hit[1]
        if len(added):
            rows = np.union1d(rows, self.store.filter_rowids(ns, flt, among=np.unique(added)))
        return rows

    def _query_vector(self, text: str) -> np.ndarray:
        v = self._qcache.get(text)
        if v is not None:
            return v
        v = self.embedder.embed_query(text)
        if v.shape != (self.embedder.dim,):
            raise EmbedderError(f"query vector has shape {v.shape}, expected ({self.embedder.dim},)")
        self._qcache.put(text, v)
        return v

    def _dense_search(self, ns: str, text: str, allowed: np.ndarray | None, k: int) -> list[tuple[int, float]]:
        if self._native:  # ``allowed`` is the parsed filter: the backend applies it in SQL
            if self.store.vector_version(ns) == 0:
                return []  # nothing ever embedded in this namespace: do not even load the model
            q = self._query_vector(text)
            _, dim = self.store.embedder_info_cached()  # no round trip per query
            if dim and q.shape[0] != dim:
                raise EmbedderMismatchError(self.store.embedder_info()[0] or "?", dim, self.embedder.name, q.shape[0])
            return self.store.search_dense(ns, q, allowed, k)
        idx = self._index(ns)
        if len(idx) == 0:
            return []  # nothing embedded yet: do not even load the model
        q = self._query_vector(text)
        if q.shape[0] != idx.dim:
            raise EmbedderMismatchError(self.store.embedder_info()[0] or "?", idx.dim, self.embedder.name, q.shape[0])
        return idx.search(q, k, allowed)

    def embed_pending(
        self,
        *,
        limit: int | None = None,
        batch_size: int = config.EMBED_BATCH,
        progress: Callable[[int], None] | None = None,
        stop: threading.Event | None = None,
    ) -> int:
        """Embed queued chunks (all, or ``limit``) in batches; returns how many vectors were stored."""
        emb = self._get_worker_embedder()
        if emb is not self._embedder:
            self._check_dim(emb)
        done = 0
        while limit is None or done < limit:
            if stop is not None and stop.is_set():
                break
            rows = self.store.pending(batch_size if limit is None else min(batch_size, limit - done))
            if not rows:
                break
            vecs = emb.embed_documents([r[2] for r in rows])
            if vecs.shape != (len(rows), emb.dim):
                raise EmbedderError(f"embedder returned {vecs.shape}, expected ({len(rows)}, {emb.dim})")
            with self._write_lock:
                res = self.store.store_vectors([(r[0], r[3], v) for r, v in zip(rows, vecs)])
                self._apply(res)
            done += len(rows)
            if progress:
                progress(len(rows))
        return done

    def _start_worker(self) -> None:
        if self._worker is not None and self._worker.is_alive():
            return
        self._stop.clear()
        self._worker = threading.Thread(target=self._worker_loop, name="hybridmem-embed", daemon=True)
        self._worker.start()

    def _worker_loop(self) -> None:
        backoff = 1.0
        while not self._stop.is_set():
            try:
                n = self.embed_pending(limit=config.EMBED_BATCH * 4, stop=self._stop)
                self.worker_error = None
                backoff = 1.0
            except Exception as e:  # keep the queue; retry later
                self.worker_error = f"{type(e).__name__}: {e}"
                log.warning("embedding worker: %s (retry in %.0fs)", self.worker_error, backoff)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 60.0)
                continue
            if n == 0:
                self._wake.wait(timeout=2.0)
                self._wake.clear()

    def wait_for_vectors(self, timeout: float | None = None, progress: Callable[[int], None] | None = None) -> bool:
        """Block until every queued chunk has its vector (embedding in this thread). True if done."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.store.pending_count() > 0:
            if deadline is not None and time.monotonic() > deadline:
                return False
            self.embed_pending(limit=config.EMBED_BATCH, progress=progress)
        return True

    def wait_for_indexes(self, *, namespace: str | None = None, timeout: float | None = None) -> bool:
        """Load a namespace's in-process BM25 and dense indexes and wait until a background HNSW
        build (above ``exact_threshold``) has finished — e.g. before measuring, or before taking
        traffic. Queries never need this: they are answered exactly while the graph builds. A
        server backend (PostgreSQL) keeps no in-process index: returns at once. True when ready."""
        ns = self._ns(namespace)
        if self._native:
            return True
        self._load_cold_indexes(ns, "hybrid")  # both at once when neither is loaded yet
        self._sparse_index(ns)
        return self._index(ns).wait_ready(timeout)

    def reembed(self, embedder: str | Embedder, progress: Callable[[int], None] | None = None) -> int:
        """Switch the store to another embedder: drop all vectors, queue every chunk, embed them."""
        self._stop.set()
        if self._worker is not None:
            self._worker.join(timeout=30)
        new = create_embedder(embedder) if isinstance(embedder, str) else embedder
        with self._write_lock:
            self.store.set_embedder(new.name, new.dim, reset_vectors=True)
            self._indexes.clear()
        self._spec, self._embedder, self._worker_embedder = embedder, new, None
        self.embedder_name = new.name
        self._qcache.clear()
        self._stop.clear()
        return self.embed_pending(progress=progress)

    # ------------------------------------------------------------------ queries
    def search(self, request: QueryRequest | dict[str, Any] | str, **kwargs: Any) -> QueryResponse:
        """Run a query of the contract. ``request`` may be a QueryRequest, its dict, or the search
        text (then keyword arguments fill the other fields: top_k, mode, metadata_filter, ...)."""
        req = self._request(request, **kwargs)
        ns = self._ns(req.namespace)
        if req.mode == "graph" and self.graph.gstore.state(ns) is None:
            raise NotFoundError(f"namespace {ns!r} has no graph yet: run `hybridmem graph build` (mode graph needs it)")
        if not req.wants_rerank:
            return self.searcher.search(req, ns)
        llm, why = self._pick_llm(None)
        return self._reranked_search(req, ns, llm, why)

    def _reranked_search(self, req: QueryRequest, ns: str, llm: ChatModel | None, why_no_llm: str,
                         *, note_no_llm: bool = True) -> QueryResponse:
        """Fused candidates (``effective_fetch_k(rerank=True)`` of them), reordered, cut to top_k.
        ``rrf_score`` stays the fused score; any reranker failure keeps the fused order."""
        t0 = time.perf_counter()
        depth = req.effective_fetch_k(rerank=True)
        resp = self.searcher.search(req, ns, fetch_k=depth, keep=depth)
        reranker, note = self._pick_reranker(req.reranker, llm, why_no_llm)
        n = len(resp.results)
        try:
            outcome = reranker.rerank(req.search_text, resp.results)
            if sorted(outcome.order) != list(range(n)):
                raise ValueError(f"the reranker returned {outcome.order!r}, not a permutation of {n} candidates")
        except Exception as e:  # a custom reranker must not sink the query either
            log.warning("reranker %s failed: %s", getattr(reranker, "name", reranker), e)
            outcome = RerankOutcome(list(range(n)), False, getattr(reranker, "name", type(reranker).__name__),
                                    f"rerank failed, fused order kept: {type(e).__name__}: {e}")
        resp.results = [resp.results[i] for i in outcome.order][: req.top_k]
        resp.total_retrieved = len(resp.results)
        resp.reranked, resp.reranker = outcome.reranked, outcome.reranker
        notes = [x for x in (note if note_no_llm else None, outcome.note) if x]
        resp.rerank_note = "; ".join(notes) or None
        resp.usage = outcome.usage if outcome.usage is not None and outcome.usage.calls else None
        resp.took_ms = round((time.perf_counter() - t0) * 1000, 3)
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
    ) -> Answer:
        """Answer ``question`` from the memory: retrieve (hybrid, reranked unless ``rerank=False``,
        ``top_k`` chunks), then answer only from those chunks, citing ``[chunk_id]``s.

        With an LLM (``llm=``, else the memory's): at most 3 sentences in the question's language;
        cited ids are checked against the context and invented ones removed and flagged. Without
        one, or if it fails: the extractive answerer (the best sentences of the usable chunks), or
        an honest "not found". ``notes`` says which path ran and why.
        """
        t0 = time.perf_counter()
        model, why_no_llm = self._pick_llm(llm)
        data: dict[str, Any] = {"search_text": question, "top_k": top_k, "metadata_filter": metadata_filter or {},
                                "mode": "rerank" if rerank else "hybrid", "namespace": namespace}
        if query_id is not None:
            data["query_id"] = query_id
        if reranker is not None:
            data["reranker"] = reranker
        req = self._request(data)
        ns = self._ns(req.namespace)
        notes: list[str] = []
        if rerank:
            resp = self._reranked_search(req, ns, model, why_no_llm, note_no_llm=False)
        else:
            resp = self.searcher.search(req, ns)
        if model is None:
            offline = "identifier reranker, extractive answer" if resp.reranker == "identifier" else "extractive answer"
            notes.append(f"{why_no_llm}: offline paths ({offline})")
        if resp.rerank_note:
            notes.append(f"rerank: {resp.rerank_note}")
        usage = Usage().merge(resp.usage)
        if model is None:
            draft = extractive_answer(question, resp.results)
        else:
            try:
                draft = llm_answer(question, resp.results, model)
            except LLMError as e:
                usage.merge(e.usage if isinstance(e.usage, Usage) else None)
                draft = extractive_answer(question, resp.results)
                notes.append(f"the LLM answer failed ({e}); extractive answer instead")
        usage.merge(draft.usage)
        notes += draft.notes
        by_id = {r.chunk_id: r for r in resp.results}
        return Answer(
            query_id=req.query_id,
            question=question,
            answer=draft.answer,
            found=draft.found,
            citations=[Citation(chunk_id=c, doc_id=by_id[c].doc_id, source=by_id[c].source) for c in draft.cited],
            invented_citations=draft.invented,
            answerer=draft.answerer,
            reranked=resp.reranked,
            reranker=resp.reranker,
            notes=notes,
            usage=usage if usage.calls else None,
            results=resp.results,
            namespace=ns,
            took_ms=round((time.perf_counter() - t0) * 1000, 3),
        )

    @staticmethod
    def _request(request: QueryRequest | dict[str, Any] | str, **kwargs: Any) -> QueryRequest:
        from pydantic import ValidationError as PydanticError

        if isinstance(request, QueryRequest) and not kwargs:
            return request
        if isinstance(request, QueryRequest):
            data = request.model_dump(exclude_unset=True)
        elif isinstance(request, str):
            data = {"search_text": request}
        elif isinstance(request, dict):
            data = dict(request)
        else:
            raise ValidationError(f"a query is a string, a dict or a QueryRequest, got {type(request).__name__}")
        hp = {k: kwargs.pop(k) for k in ("dense_weight", "sparse_weight", "rrf_k_constant", "exact_weight", "graph_weight")
              if k in kwargs}
        if hp:
            data["hybrid_params"] = {**data.get("hybrid_params", {}), **hp}
        data.update(kwargs)
        try:
            return QueryRequest(**data)
        except PydanticError as e:
            err = e.errors()[0]
            field = ".".join(str(p) for p in err["loc"]) or "request"
            raise ValidationError(err["msg"].removeprefix("Value error, "), field=field) from None

    # ------------------------------------------------------------------ graph (hybridmem.graph)
    @property
    def graph(self) -> Any:
        """The GraphRAG layer of this memory (:class:`hybridmem.graph.GraphRAG`), built on first use."""
        if self._graph is None:
            from .graph.rag import GraphRAG

            self._graph = GraphRAG(self)
        return self._graph

    def _graph_search(self, ns: str, text: str, allowed: np.ndarray | None, k: int) -> list[tuple[int, float]]:
        return self.graph.search_leg(ns, text, allowed, k)

    def ask_global(self, question: str, **kwargs: Any) -> Any:
        """A corpus-wide answer by map-reduce over community summaries (see ``GraphRAG.ask_global``)."""
        return self.graph.ask_global(question, **kwargs)

    # ------------------------------------------------------------------ stats / lifecycle
    def stats(self, namespace: str | None = None) -> Stats:
        ns = self._ns(namespace)
        c = self.store.counts(ns)
        name, dim = self.store.embedder_info()
        idx = self._indexes.get(ns)
        kind = (("pgvector-hnsw" if c["vectors"] >= self.exact_threshold else "exact") if self._native else
                idx.kind if idx is not None else ("hnsw" if c["vectors"] >= self.exact_threshold else "exact"))
        return Stats(
            path=self.store.path,  # a URL's password masked
            namespace=ns,
            documents=c["documents"],
            chunks=c["chunks"],
            vectors=c["vectors"],
            pending_vectors=c["pending_vectors"],
            embedder=name,
            dim=dim,
            dense_index=kind,
            namespaces=self.store.namespaces(),
            metadata_keys=sorted(self.store.metadata_keys(ns)),
            schema_version=self.store.schema_version,
            size_bytes=self.store.size_bytes(),
        )

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._worker is not None:
            self._worker.join(timeout=5)
        self._executor.shutdown(wait=False, cancel_futures=True)
        self.store.close()

    def __enter__(self) -> "Memory":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ async twins
    async def asearch(self, request: QueryRequest | dict[str, Any] | str, **kwargs: Any) -> QueryResponse:
        return await asyncio.to_thread(self.search, request, **kwargs)

    async def aask(self, question: str, **kwargs: Any) -> Answer:
        return await asyncio.to_thread(self.ask, question, **kwargs)

    async def aadd(self, text: str, **kwargs: Any) -> IngestReport:
        return await asyncio.to_thread(self.add, text, **kwargs)

    async def aadd_documents(self, docs: Iterable[Document | dict[str, Any]], **kwargs: Any) -> IngestReport:
        docs = list(docs)
        return await asyncio.to_thread(self.add_documents, docs, **kwargs)

    async def aupdate(self, id: str, text: str, **kwargs: Any) -> IngestReport:
        return await asyncio.to_thread(self.update, id, text, **kwargs)

    async def adelete(self, ids: str | Sequence[str], **kwargs: Any) -> list[str]:
        return await asyncio.to_thread(self.delete, ids, **kwargs)
