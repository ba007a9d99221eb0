"""What is stored and reported: documents and messages as ingested, ingest reports, memory
decisions, the embedding worker's status and a namespace's stats."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
)

from .. import config
from .extraction import ExtractionReport
from .requests import request_time
from .responses import Usage


class Document(BaseModel):
    """A unit of ingest: a file, a JSON record, or one memory."""

    model_config = ConfigDict(extra="forbid")

    text: str
    id: str | None = Field(None, min_length=1, max_length=512)
    source: str | None = Field(None, max_length=4096)
    metadata: dict[str, Any] = Field(default_factory=dict)
    #: when it happened or was said (ISO 8601 or epoch seconds; naive = UTC); default: when written
    occurred_at: str | float | None = None
    #: a key in the memory's scope (metadata ``user_id``, ``agent_id``), e.g. ``user.city``: writing
    #: it supersedes the memory that held the key, keeping that one in the history
    key: str | None = Field(default=None, min_length=1, max_length=256)
    #: words that find this memory without being part of it (indexed by BM25 and embedded with it,
    #: never returned): a message's previous message, so that "Yes, in May!" meets its question
    context: str | None = Field(default=None, max_length=config.MAX_CONTEXT_CHARS)
    #: a precomputed vector of the text as stored (a list of floats or a 1-D numpy array), of the
    #: store's embedder's dimension: stored as it is (L2-normalised), the model never called for it.
    #: Only for a text that is one chunk; checked when the document is written
    vector: Any = None

    @field_validator("occurred_at")
    @classmethod
    def _occurred(cls, v: Any) -> Any:
        request_time(v, "occurred_at", named=True)
        return v


class Message(BaseModel):
    """One chat message as agents hold them (OpenAI style): ``role``, ``content``, optional ``name``
    (the speaker) and ``timestamp``; ``id`` and ``metadata`` optional."""

    model_config = ConfigDict(extra="forbid")

    role: str = Field(..., min_length=1, max_length=64, strict=True)
    content: str = Field(..., strict=True)
    name: str | None = Field(default=None, min_length=1, max_length=256)
    timestamp: str | float | None = None
    id: str | None = Field(None, min_length=1, max_length=512)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("content")
    @classmethod
    def _content(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("content must not be empty")
        return v

    @field_validator("timestamp")
    @classmethod
    def _timestamp(cls, v: Any) -> Any:
        request_time(v, "timestamp", named=True)
        return v


class IngestReport(BaseModel):
    added: list[str] = Field(default_factory=list)
    updated: list[str] = Field(default_factory=list)
    unchanged: list[str] = Field(default_factory=list)
    skipped: list[dict[str, str]] = Field(default_factory=list)
    #: what was read with a caveat (e.g. a file that was not UTF-8 and the encoding detected)
    notes: list[dict[str, str]] = Field(default_factory=list)
    chunks_written: int = 0
    vectors_reused: int = 0
    pending_vectors: int = 0
    #: with ``add_messages(..., extract=True)``: the facts extracted from the turns (None otherwise)
    extraction: ExtractionReport | None = None

    def merge(self, other: IngestReport) -> None:
        self.added += other.added
        self.updated += other.updated
        self.unchanged += other.unchanged
        self.skipped += other.skipped
        self.notes += other.notes
        self.chunks_written += other.chunks_written
        self.vectors_reused += other.vectors_reused
        self.pending_vectors = other.pending_vectors
        if other.extraction is not None:
            if self.extraction is None:
                self.extraction = ExtractionReport()
            self.extraction.merge(other.extraction)


class MemoryDecision(BaseModel):
    """What ``Memory.remember`` did with a statement: ``event`` ADD / UPDATE / DELETE / NONE, the
    memory it wrote or touched (``id``), why (``reason``, also in that memory's history), who
    decided (the model's name, or ``rule``), the memories compared with (``candidates``)."""

    event: Literal["ADD", "UPDATE", "DELETE", "NONE"]
    id: str | None = None
    reason: str
    decided_by: str
    candidates: list[str] = Field(default_factory=list)
    report: IngestReport | None = None
    usage: Usage | None = None


class WorkerStatus(BaseModel):
    """The background embedding worker's progress (``EmbeddingWorker.status``)."""

    running: bool
    pending: int
    vectors_last_minute: int
    vectors_per_s: float
    stored_total: int
    last_batch_s_ago: float | None = None
    last_batch_took_s: float | None = None
    batch_running_s: float | None = None
    error: str | None = None
    last_error: str | None = None
    last_error_s_ago: float | None = None


class Stats(BaseModel):
    path: str
    namespace: str
    documents: int
    chunks: int
    vectors: int
    pending_vectors: int
    embedder: str | None
    dim: int | None
    dense_index: str
    namespaces: list[str]
    metadata_keys: list[str]
    schema_version: int
    size_bytes: int
    #: the embedding worker of this process (None when it never ran here)
    worker: WorkerStatus | None = None
