"""The response side of the JSON contract: results with per-leg provenance, leg and language reports,
LLM usage, the query response, citations and answers."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    Field,
    field_serializer,
    model_validator,
)

from .. import config
from .requests import Mode


class QueryResult(BaseModel):
    chunk_id: str
    rrf_score: float
    text: str
    source: str | None = None
    doc_id: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    #: rank of this chunk in each leg that returned it (from 1); absent legs are omitted
    ranks: dict[str, int] = Field(default_factory=dict)
    #: raw leg scores: bm25 (higher is better) and dense cosine similarity
    scores: dict[str, float] = Field(default_factory=dict)
    # agent memory: the memory's conversation fields (from its metadata) and times (ISO 8601 UTC)
    session_id: str | None = None
    turn: int | None = None
    #: what the memory is, from its metadata ``kind``: ``turn`` (a chat message), ``fact`` (extracted
    #: from turns), or whatever a caller stored; None when it says nothing
    kind: str | None = None
    speaker: str | None = None
    role: str | None = None
    occurred_at: str | None = None
    recorded_at: str | None = None
    #: set on a superseded or soft-deleted version (``include_superseded``, ``as_of``)
    valid_to: str | None = None
    version: int | None = None
    #: the neighbouring turns of the hit's session (``context_window``), in turn order, the hit included
    context: list[dict[str, Any]] | None = None

    @field_serializer("rrf_score")
    def _round(self, v: float) -> float:
        return round(v, 4)

    @field_serializer("scores")
    def _round_scores(self, v: dict[str, float]) -> dict[str, float]:
        return {k: round(x, 4) for k, x in v.items()}


class LegReport(BaseModel):
    status: Literal["ok", "error", "timeout", "skipped"]
    took_ms: float = 0.0
    returned: int = 0
    error: str | None = None
    #: how the leg ran when the backend chose a plan for it (PostgreSQL's dense leg under a filter:
    #: ``exact`` or ``hnsw``, the estimated share of rows allowed and the modelled costs)
    plan: str | None = None


class LanguageReport(BaseModel):
    """What language-aware fusion read: the question's language, and the share of the dense leg's
    first chunks (``read`` of them with a detected language) written in another one; BM25's
    weight was multiplied by 1 - ``cross_share``."""

    question: str
    cross_share: float
    read: int


class LLMCall(BaseModel):
    """One logical chat-model call (its retries included)."""

    model: str
    #: what the call was for: ``rerank``, ``answer``, or ``…:repair`` for the one repair attempt
    purpose: str | None = None
    #: as reported by the provider; None when it reported nothing
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    #: wall time of the call, retries and back-off sleeps included
    latency_ms: float = 0.0
    #: HTTP requests made (1 + retries)
    attempts: int = 1
    ok: bool = True
    error: str | None = None


class Usage(BaseModel):
    """What the LLM calls behind one response cost, summed, with each call listed."""

    calls: int = 0
    http_requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    latency_ms: float = 0.0
    per_call: list[LLMCall] = Field(default_factory=list)

    def record(self, call: LLMCall) -> None:
        self.calls += 1
        self.http_requests += call.attempts
        self.prompt_tokens += call.prompt_tokens or 0
        self.completion_tokens += call.completion_tokens or 0
        self.total_tokens = self.prompt_tokens + self.completion_tokens
        self.latency_ms = round(self.latency_ms + call.latency_ms, 3)
        self.per_call.append(call)

    def merge(self, other: Usage | None) -> Usage:
        for call in other.per_call if other is not None else ():
            self.record(call)
        return self


class QueryResponse(BaseModel):
    query_id: str
    total_retrieved: int = 0
    results: list[QueryResult] = Field(default_factory=list)
    mode: Mode = "hybrid"
    namespace: str = config.DEFAULT_NAMESPACE
    legs: dict[str, LegReport] = Field(default_factory=dict)
    #: chunks of this namespace still waiting for their vector (invisible to the dense leg)
    pending_vectors: int = 0
    took_ms: float = 0.0
    #: True when a reranker reordered the fused candidates (``rrf_score`` stays the fused score)
    reranked: bool = False
    #: the reranker used or attempted: ``identifier`` or ``llm:<provider>:<model>``
    reranker: str | None = None
    #: why the order is what it is when it is not plainly the reranker's (fallback, no LLM, ...)
    rerank_note: str | None = None
    #: LLM cost of this response; None when no LLM was called
    usage: Usage | None = None
    #: the fusion used and the weight each leg that ran was fused with (``adaptive``: this query's)
    fusion: str = "rrf"
    leg_weights: dict[str, float] = Field(default_factory=dict)
    #: what language-aware fusion read (hybrid mode, when the question's language and the dense
    #: leg's chunks' are known): BM25's weight above is already multiplied by 1 - cross_share
    language: LanguageReport | None = None
    #: what the caller may want to know about this answer: a filter key no document has, a
    #: namespace that does not exist, a dense leg left out while too few vectors exist
    warnings: list[str] = Field(default_factory=list)
    #: with a read replica (``read_url``): where this query read, ``replica`` or ``primary`` (the
    #: warnings say why); None without one
    read_from: Literal["replica", "primary"] | None = None

    @model_validator(mode="after")
    def _count(self) -> QueryResponse:
        self.total_retrieved = len(self.results)
        return self


class Citation(BaseModel):
    chunk_id: str
    doc_id: str
    source: str | None = None


class Answer(BaseModel):
    """A grounded answer: only from the retrieved chunks, each used chunk cited as ``[chunk_id]``."""

    query_id: str | None = None
    question: str
    answer: str
    #: False when the answer is not in the retrieved chunks (the answer text then says so)
    found: bool
    #: the context chunks the answer cites, in order of first citation
    citations: list[Citation] = Field(default_factory=list)
    #: ids the model cited that are not in the context: removed from the answer text
    invented_citations: list[str] = Field(default_factory=list)
    #: ``llm:<provider>:<model>`` or ``extractive`` (the offline answerer)
    answerer: str
    reranked: bool = False
    reranker: str | None = None
    #: what a reader should know: no LLM configured, LLM failure and fallback, rerank notes, ...
    notes: list[str] = Field(default_factory=list)
    usage: Usage | None = None
    #: the context the answer was drawn from (the retrieved, reranked chunks)
    results: list[QueryResult] = Field(default_factory=list)
    namespace: str = config.DEFAULT_NAMESPACE
    took_ms: float = 0.0


class MemoryPage(BaseModel):
    """A page of ``Memory.list``: the memories in order (each as ``Memory.get`` gives it), and the
    cursor of the next page (None: this was the last)."""

    namespace: str
    memories: list[dict[str, Any]] = Field(default_factory=list)
    count: int = 0
    next_cursor: str | None = None

    @model_validator(mode="after")
    def _count(self) -> MemoryPage:
        self.count = len(self.memories)
        return self
