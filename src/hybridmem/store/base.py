"""The Store protocol: what the pipeline needs from a storage backend, nothing more."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ..retrieve.filters import Filter

__all__ = ["Store", "ChunkRow", "PreparedDocument", "WriteResult", "DOCUMENT_COLUMNS", "document_record"]


@dataclass
class ChunkRow:
    rowid: int
    chunk_id: str
    doc_id: str
    text: str
    source: str | None
    metadata: dict[str, Any]


#: the documents columns ``get_document`` reads, in the order :func:`document_record` takes them
DOCUMENT_COLUMNS = "doc_id, source, metadata, content_hash, n_chunks, created_at, updated_at"


def document_record(row: Sequence[Any], metadata: dict[str, Any], chunks: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """``get_document``'s answer, the same from every backend: ``row`` holds DOCUMENT_COLUMNS (its
    metadata already decoded into ``metadata``), ``chunks`` (chunk_id, text) in order."""
    return {
        "doc_id": row[0], "source": row[1], "metadata": metadata, "content_hash": row[3],
        "n_chunks": row[4], "created_at": row[5], "updated_at": row[6],
        "chunks": [{"chunk_id": c, "text": t} for c, t in chunks],
    }


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


class Store(Protocol):
    path: str

    def namespaces(self) -> list[str]: ...
    def write_documents(self, namespace: str, docs: Sequence[PreparedDocument]) -> WriteResult: ...
    def delete(self, namespace: str, ids: Sequence[str]) -> tuple[list[str], WriteResult]: ...
    def bm25(self, namespace: str, tokens: Sequence[str], flt: Filter | None, k: int) -> list[tuple[int, float]]: ...
    def filter_rowids(self, namespace: str, flt: Filter | None, among: Sequence[int] | None = None) -> np.ndarray: ...
    def metadata_keys(self, namespace: str) -> set[str]: ...
    def fetch(self, rowids: Sequence[int]) -> dict[int, ChunkRow]: ...
    def load_vectors(self, namespace: str) -> tuple[int, np.ndarray, np.ndarray]: ...
    def vector_version(self, namespace: str) -> int: ...
    def pending(self, limit: int) -> list[tuple[int, str, str, str]]: ...
    def pending_count(self, namespace: str | None = None) -> int: ...
    def store_vectors(self, items: Sequence[tuple[int, str, np.ndarray]]) -> WriteResult: ...
    def embedder_info(self) -> tuple[str | None, int | None]: ...
    def set_embedder(self, name: str, dim: int | None, *, reset_vectors: bool = False) -> None: ...
    def close(self) -> None: ...
