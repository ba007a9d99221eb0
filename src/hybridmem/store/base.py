"""The Store protocol: everything the rest of hybridmem asks of a storage backend, typed, plus the
pieces every backend shares (write planning, the embedder check, ``get_document``'s record).

Callers outside ``store/`` use only what :class:`Store` lists; the filter reaches a backend as a
parsed :class:`~hybridmem.filters.Filter` and is compiled to SQL here, in ``store/sql/filters.py``."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol, TypeGuard

import numpy as np

from ..errors import EmbedderMismatchError
from ..filters import Filter

__all__ = [
    "Store",
    "NativeSearchStore",
    "has_native_search",
    "Capabilities",
    "SQLReader",
    "Allowed",
    "PlannedHits",
    "ChunkRow",
    "PreparedDocument",
    "WriteResult",
    "WritePlan",
    "DOCUMENT_COLUMNS",
    "document_record",
    "iso_time",
    "version_record",
    "plan_writes",
    "check_embedder",
    "META_JSON",
]

#: ``json.dumps(value, ensure_ascii=False, allow_nan=False)`` with its encoder made once (dumps makes
#: one per call when given options: a fifth of preparing a short document); how metadata is sized
#: when it is checked and written when it is stored
META_JSON = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode


@dataclass(frozen=True, eq=False)
class Allowed:
    """What a query's metadata filter allows, worked out once per query and handed to every leg:
    ``rowids`` (sorted chunk rowids) for in-process legs, ``sql`` (the filter compiled to the
    backend's WHERE fragment and its parameters) for legs that run in the database."""

    flt: Filter
    rowids: np.ndarray | None = None
    sql: tuple[str, list[Any]] | None = None

    @property
    def empty(self) -> bool:
        """True when the filter is known to allow nothing (no leg needs to run)."""
        return self.rowids is not None and len(self.rowids) == 0


class PlannedHits(list[tuple[int, float]]):
    """A native search's (rowid, score) hits and ``plan``: how they were found (which plan ran and
    why), shown in the leg's report (``LegReport.plan``)."""

    def __init__(self, hits: Iterable[tuple[int, float]] = (), plan: str | None = None) -> None:
        super().__init__(hits)
        self.plan = plan


@dataclass
class ChunkRow:
    rowid: int
    chunk_id: str
    doc_id: str
    text: str
    source: str | None
    metadata: dict[str, Any]
    #: the memory's times (epoch seconds) and version (see ``store.sql.history``)
    occurred_at: float | None = None
    recorded_at: float | None = None
    valid_to: float | None = None
    version: int = 1


#: the documents columns ``get_document`` reads, in the order :func:`document_record` takes them
DOCUMENT_COLUMNS = (
    "doc_id, source, metadata, content_hash, n_chunks, created_at, updated_at, occurred_at, recorded_at, valid_to, "
    "version, head_id"
)


def document_record(row: Sequence[Any], metadata: dict[str, Any], chunks: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """``get_document``'s answer, the same from every backend: ``row`` holds DOCUMENT_COLUMNS (its
    metadata already decoded into ``metadata``), ``chunks`` (chunk_id, text) in order."""
    return {
        "doc_id": row[0],
        "source": row[1],
        "metadata": metadata,
        "content_hash": row[3],
        "n_chunks": len(chunks),  # the documents row counts the chunks written; a chunk may be deleted since
        "created_at": row[5],
        "updated_at": row[6],
        "occurred_at": iso_time(row[7]),
        "recorded_at": iso_time(row[8]),
        "valid_to": iso_time(row[9]),
        "version": int(row[10] or 1),
        "head_id": row[11],
        "chunks": [{"chunk_id": c, "text": t} for c, t in chunks],
    }


def version_record(row: Sequence[Any]) -> dict[str, Any]:
    """One version of a memory as ``history`` shows it (``row``: ``history_sql.VERSION_COLUMNS``)."""
    import json  # noqa: PLC0415

    meta = row[9] if isinstance(row[9], dict) else json.loads(row[9] or "{}")
    return {
        "id": row[0],
        "memory_id": row[1] or row[0],
        "version": int(row[2] or 1),
        "current": row[5] is None,
        "occurred_at": iso_time(row[3]),
        "recorded_at": iso_time(row[4]),
        "valid_to": iso_time(row[5]),
        "reason": row[6],
        "metadata": meta,
    }


def iso_time(t: float | None) -> str | None:
    """Epoch seconds as ISO 8601 UTC (milliseconds), as the API shows every time."""
    if t is None:
        return None
    return datetime.fromtimestamp(float(t), timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class PreparedDocument:
    """A document ready to write: chunked and tokenized outside the write lock."""

    doc_id: str
    source: str | None
    metadata: dict[str, Any]
    content_hash: str
    chunks: list[str]
    tokens: list[str]  # one space-joined token string per chunk
    langs: list[str | None]
    text_hashes: list[str]
    #: explicit chunk ids (``migrate`` keeps the source's); default ``{doc_id}_p{n}``
    chunk_ids: list[str] | None = None
    #: when it happened or was said (epoch seconds, UTC); None = when it is written
    occurred_at: float | None = None
    #: an update keeps the version it replaces (retired, see ``store.sql.history``) instead of dropping it
    keep_history: bool = False
    #: the scoped key a memory was written with (``user_id``, ``agent_id``, ``key``): the write retires
    #: the current memory holding it
    mem_key: str | None = None
    #: why this version was written (an update, a supersession, a conflict check's decision)
    reason: str | None = None
    #: index-only context of each chunk (Document.context): in its tokens and its embedded text
    context: str | None = None
    #: precomputed vectors, one row per chunk (float32, L2-normalised): stored instead of queued
    vectors: np.ndarray | None = None

    def chunk_id(self, i: int) -> str:
        """The id of chunk ``i`` (from 1)."""
        return self.chunk_ids[i - 1] if self.chunk_ids else f"{self.doc_id}_p{i}"


@dataclass
class WriteResult:
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    chunks_written: int = 0
    vectors_reused: int = 0
    #: (namespace, vector-version after the write, rowids whose vectors were added / removed)
    vec_changes: list[tuple[str, int, list[int], list[int]]] = field(default_factory=list)
    #: (namespace, chunk-version after the write, chunk rowids added / removed)
    chunk_changes: list[tuple[str, int, list[int], list[int]]] = field(default_factory=list)


@dataclass
class WritePlan:
    """What one write does, decided the same way by every backend (:func:`plan_writes`)."""

    #: documents to (re)write, each with the ``created_at`` it keeps (an update keeps the original)
    writes: list[tuple[PreparedDocument, str]] = field(default_factory=list)
    #: ids of documents being replaced: their old chunks go (their vectors are reused by text hash)
    replaced: list[str] = field(default_factory=list)


def plan_writes(
    docs: Sequence[PreparedDocument], existing: Mapping[str, tuple[str, str]], now: str, res: WriteResult
) -> WritePlan:
    """Sort one write's documents into unchanged / updated / added (recorded in ``res``).
    ``existing``: doc id -> (content hash, created_at) of the stored documents among ``docs``.
    The same id twice in one write: the last one wins, as two writes in a row would leave it."""
    last = {d.doc_id: d for d in docs}
    plan = WritePlan()
    for d in last.values():
        old = existing.get(d.doc_id)
        if old is not None and old[0] == d.content_hash:
            res.unchanged.append(d.doc_id)
            continue
        (res.updated if old is not None else res.added).append(d.doc_id)
        if old is not None:
            plan.replaced.append(d.doc_id)
        plan.writes.append((d, old[1] if old is not None else now))
    return plan


class SQLReader(Protocol):
    """A connection in the ``?`` placeholder dialect (sqlite3's), which both backends offer."""

    def execute(self, sql: str, params: Sequence[Any] = ..., /) -> Any: ...


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do, declared once by the backend instead of probed by its callers.

    ``backend``: ``"sqlite"`` or ``"postgres"``. ``read_only``: writes are refused (an SQLite file
    opened for reads). ``native_search``: the store runs the dense leg (and, with
    ``bm25_in_process`` False, the BM25 leg) in its own server, so ``retrieve.legs.make_legs`` builds
    the database legs; else every leg runs over in-process indexes. ``bm25_in_process``: the BM25 leg
    runs over in-process postings even though the store searches natively (PostgreSQL's
    ``bm25_leg="process"``). ``file``: the store's file (index snapshots may be saved beside it), or
    None. ``snapshot_dir`` and ``snapshot_key``: where a native store's in-process BM25 postings are
    saved and the key that ties a saved file to this store. ``file_checks``: ``check()`` (a full
    structural check of the file and its saved indexes) and ``backup(dest)`` exist.
    ``sessions``: ``max_turn`` answers (the store keeps chat sessions' turn numbers)."""

    backend: str
    read_only: bool = False
    native_search: bool = False
    bm25_in_process: bool = True
    file: str | None = None
    snapshot_dir: str | None = None
    snapshot_key: str | None = None
    file_checks: bool = False
    sessions: bool = True


class Store(Protocol):
    """A storage backend: documents, chunks, BM25 token streams, vectors, the embedding queue and
    the graph tables, per namespace, with version counters that tell in-process indexes what changed.
    What differs between backends is declared in :attr:`capabilities`, never probed with ``getattr``."""

    path: str
    schema_version: int
    #: why writes are refused for space since the last one that was (None: they are not)
    full: str | None

    @property
    def capabilities(self) -> Capabilities: ...

    # namespaces and metadata
    def namespaces(self) -> list[str]: ...
    def namespace_id(self, name: str, db: Any = None, create: bool = False) -> int | None: ...
    def metadata_keys(self, namespace: str) -> set[str]: ...
    def counts(self, namespace: str) -> dict[str, int]: ...
    def chunk_count(self, namespace: str) -> int: ...
    def any_match(self, namespace: str, flt: Filter) -> bool: ...
    def latest_occurred(self, namespace: str, flt: Filter | None) -> float | None: ...
    def recent(self, namespace: str, flt: Filter | None, k: int) -> list[tuple[int, float]]: ...
    def max_turn(self, namespace: str, session_id: str) -> int | None: ...
    def session_turns(self, namespace: str, session_id: str, lo: int, hi: int, as_of: float | None) -> list[int]: ...

    # versions (store/sql/history.py)
    def history(self, namespace: str, doc_id: str) -> list[tuple[Any, ...]]: ...
    def has_history(self, namespace: str) -> bool: ...
    def key_holder(self, namespace: str, mem_key: str) -> str | None: ...
    def retire(self, namespace: str, doc_id: str, reason: str | None) -> "WriteResult": ...
    def has_graph(self, namespace: str) -> bool: ...

    # writes (each one transaction)
    def write_documents(self, namespace: str, docs: Sequence[PreparedDocument]) -> WriteResult: ...
    def delete(self, namespace: str, ids: Sequence[str]) -> tuple[list[str], WriteResult]: ...
    def store_vectors(self, items: Sequence[tuple[int, str, np.ndarray]]) -> WriteResult: ...
    def reindex_sparse(self) -> int: ...

    # reads
    def fetch(self, rowids: Sequence[int], namespace: str | None = None) -> dict[int, ChunkRow]:
        """The chunks ``rowids`` that exist (of ``namespace`` only, when given: the query path
        always gives it, so a rowid of another namespace never comes back, and a distributed
        PostgreSQL routes the read to the namespace's shard)."""

    def get_document(self, namespace: str, doc_id: str) -> dict[str, Any] | None: ...
    def document_hash(self, namespace: str, doc_id: str) -> str | None: ...
    def document_hashes(self, namespace: str, doc_ids: Sequence[str]) -> dict[str, str]: ...
    def document_heads(
        self, namespace: str, doc_ids: Sequence[str]
    ) -> dict[str, tuple[str | None, dict[str, Any]]]: ...
    def export_documents(self, namespace: str, page: int = ...) -> Iterator[dict[str, Any]]: ...
    def restore_times(self, namespace: str, rows: dict[str, tuple[Any, ...]]) -> "WriteResult": ...
    def rowids_for(self, namespace: str, chunk_ids: Sequence[str]) -> dict[str, int]: ...
    def chunk_langs(self, namespace: str, rowids: Sequence[int]) -> dict[int, str | None]: ...
    def list_documents(
        self,
        namespace: str,
        flt: Filter | None,
        order: str,
        descending: bool,
        after: tuple[Any, str] | None,
        limit: int,
    ) -> list[tuple[Any, dict[str, Any]]]: ...
    def filter_rowids(self, namespace: str, flt: Filter | None, among: Iterable[int] | None = None) -> np.ndarray: ...
    def bm25(self, namespace: str, tokens: Sequence[str], flt: Filter | None, k: int) -> list[tuple[int, float]]: ...

    # what in-process indexes load, and the versions that say when to catch up
    def chunk_version(self, namespace: str) -> int: ...
    def vector_version(self, namespace: str) -> int: ...
    def chunk_changes_since(self, namespace: str, version: int) -> list[tuple[int, np.ndarray, np.ndarray]] | None:
        """(version, rowids added, rowids removed) of each committed chunk change after ``version``, in
        order, up to the current version; None when the store's change log does not hold them all."""

    def vector_changes_since(self, namespace: str, version: int) -> list[tuple[int, np.ndarray, np.ndarray]] | None:
        """As :meth:`chunk_changes_since`, for the namespace's vectors (its vector version)."""

    def chunk_mark(self, namespace: str, version: int) -> str | None:
        """The random mark the change log gave ``version`` (None when not logged or pruned): a saved
        index of that version is of this store's history only if it recorded the same mark."""

    def vector_mark(self, namespace: str, version: int) -> str | None:
        """As :meth:`chunk_mark`, for the namespace's vector version (a saved HNSW graph's)."""

    def load_tokens(self, namespace: str) -> tuple[int, list[tuple[int, str]]]: ...
    def tokens_for(self, namespace: str, rowids: Sequence[int]) -> list[tuple[int, str]]: ...
    def load_vectors(
        self, namespace: str, alloc: Callable[[int, int], np.ndarray] | None = None
    ) -> tuple[int, np.ndarray, np.ndarray]:
        """(version, rowids, matrix) of every embedded chunk of a namespace, read in one snapshot;
        ``alloc(rows, dim)`` gives the (rows, dim) float32 array the vectors are read into (a
        memory-mapped file for a large namespace; default: memory)."""

    def vectors_for(self, rowids: Sequence[int], namespace: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(rowids, matrix) of the stored vectors of ``rowids`` (of ``namespace`` only, when given)."""

    # the embedding queue and the embedder the vectors belong to
    def pending(self, limit: int) -> list[tuple[int, str, str, str]]: ...
    def pending_count(self, namespace: str | None = None) -> int: ...
    def pending_among(self, rowids: Sequence[int], namespace: str | None = None) -> set[int]:
        """The chunks among ``rowids`` (of ``namespace`` only, when given) waiting for a vector."""

    def embedder_info(self) -> tuple[str | None, int | None]: ...
    def set_embedder(self, name: str, dim: int | None, *, reset_vectors: bool = False) -> None: ...

    # the graph layer's access (portable SQL in the ``?`` dialect) and whole-store reads
    @property
    def reader(self) -> SQLReader: ...
    def write_transaction(self) -> AbstractContextManager[Any]: ...
    def snapshot(self) -> AbstractContextManager[Any]: ...
    def integrity_check(self) -> str: ...
    def check(self) -> dict[str, Any]:
        """A full check of the store and its saved indexes (``capabilities.file_checks``)."""

    def backup(self, dest: str | Path) -> dict[str, Any]:
        """A consistent copy at ``dest`` (``capabilities.file_checks``)."""

    def size_bytes(self) -> int: ...
    def close(self) -> None: ...


class NativeSearchStore(Store, Protocol):
    """A store that runs the legs in its own server (``capabilities.native_search``: PostgreSQL):
    what ``hybridmem.retrieve.pg_legs.PostgresLegs`` asks of it. A filter is compiled once per
    query (:meth:`compile_filter`) and the :class:`Allowed` it returns bounds every leg."""

    #: below this many vectors a namespace is searched exactly
    exact_threshold: int

    def compile_filter(self, flt: Filter) -> Allowed: ...
    def filter_rowids(
        self, namespace: str, flt: Allowed | Filter | None, among: Iterable[int] | None = None
    ) -> np.ndarray: ...
    def search_sparse(
        self, namespace: str, tokens: Sequence[str], flt: Allowed | Filter | None, k: int
    ) -> PlannedHits: ...
    def search_dense(
        self, namespace: str, q: np.ndarray, flt: Allowed | Filter | None, k: int, *, exact: bool = False
    ) -> PlannedHits: ...
    def holding(self, namespace: str, terms: Sequence[str], rowids: Sequence[int]) -> set[int]: ...
    def doc_freqs(self, namespace: str, terms: Sequence[str]) -> tuple[int, dict[str, int]]: ...
    def embedder_info_cached(self) -> tuple[str | None, int | None]: ...


def has_native_search(store: Store) -> TypeGuard[NativeSearchStore]:
    """True when ``store`` runs the legs in its own server (``capabilities.native_search``)."""
    return store.capabilities.native_search


def check_embedder(store: Store, name: str, dim: int) -> None:
    """Refuse an embedder whose name or dimension differs from the store's; record the dimension
    the first time it is known."""
    stored, stored_dim = store.embedder_info()
    if name != stored:
        raise EmbedderMismatchError(stored or "?", stored_dim or 0, name, dim)
    if stored_dim is None:
        store.set_embedder(name, dim)
    elif stored_dim != dim:
        raise EmbedderMismatchError(stored or "?", stored_dim, name, dim)
