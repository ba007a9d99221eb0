"""The JSON contract (pydantic v2): query request and response, documents, chunks, stats."""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidatorFunctionWrapHandler,
    field_serializer,
    field_validator,
    model_validator,
)
from pydantic import ValidationError as PydanticValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from . import config

__all__ = [
    "MODES",
    "Answer",
    "AnswerRequest",
    "Citation",
    "Document",
    "HybridParams",
    "IngestReport",
    "LLMCall",
    "LegReport",
    "Mode",
    "Namespace",
    "QueryRequest",
    "QueryResponse",
    "QueryResult",
    "Question",
    "RequestModel",
    "RerankerChoice",
    "Stats",
    "Usage",
]

#: ``rerank`` = hybrid retrieval, then the fused candidates reordered by a reranker; ``graph`` = the
#: local graph leg alone (entities named in the query → neighbourhood → chunks; needs `graph build`)
Mode = Literal["bm25", "vector", "hybrid", "rerank", "graph"]
#: the query modes, in their canonical order (the eval runs and charts them in this order)
MODES: tuple[Mode, ...] = get_args(Mode)
#: which reranker a request asks for: ``auto`` (the LLM when one is configured, else the offline
#: identifier reranker), ``llm`` (falls back to ``identifier`` with a note when no LLM is
#: configured) or ``identifier``
RerankerChoice = Literal["auto", "llm", "identifier"]

# request fields used by more than one request model, each declared once (the default is given
# where the field is used, so that each model keeps its own field order: pydantic validates, and so
# names the first problem, in that order)
#: a namespace name; None = the default one
Namespace = Annotated[str | None, Field(min_length=1, max_length=128)]
#: a question in natural language
Question = Annotated[str, Field(min_length=1, max_length=config.MAX_QUERY_CHARS)]
#: how many results (or context chunks) to return
TopK = Annotated[int, Field(ge=1, le=config.MAX_TOP_K)]
#: a metadata filter (``{"environment": "production", "severity": {"$gte": 3}}``); {} = none
MetadataFilter = Annotated[dict[str, Any], Field(default_factory=dict)]
QueryId = Annotated[str, Field(max_length=256)]


class RequestModel(BaseModel):
    """Base of the request models: unknown fields are rejected, so a typo never silently does nothing.
    Numbers and booleans are strict where declared (``strict=True``): ``top_k: true`` or
    ``rerank: "yes"`` is a 422 naming the field, not 1 and True; an integer is still a float."""

    model_config = ConfigDict(extra="forbid")

    @staticmethod
    def _field_error(loc: tuple[str, ...], message: str, value: Any) -> PydanticValidationError:
        """A validation error located at ``loc`` (a model validator's own has no field)."""
        err = PydanticCustomError("value_error", message)
        return PydanticValidationError.from_exception_data(
            "request", [InitErrorDetails(type=err, loc=loc, input=value)]
        )


class HybridParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    dense_weight: float = Field(1.0, ge=0, le=1000, allow_inf_nan=False)
    sparse_weight: float = Field(1.0, ge=0, le=1000, allow_inf_nan=False)
    rrf_k_constant: float = Field(config.DEFAULT_RRF_K, ge=0, le=100_000, allow_inf_nan=False)
    #: weight of the exact-identifier leg (hybrid mode, only when the query cites an identifier such
    #: as HEL-4040 or max_connections); 0 gives two-leg RRF
    exact_weight: float = Field(1.0, ge=0, le=1000, allow_inf_nan=False)
    #: weight of the graph leg in hybrid mode (entities the query names → their neighbourhood →
    #: chunks; only where `hybridmem graph build` ran); 0 leaves it out
    graph_weight: float = Field(0.0, ge=0, le=1000, allow_inf_nan=False)


class QueryRequest(RequestModel):
    """What an agent sends. Unknown fields are rejected so a typo never silently does nothing."""

    query_id: QueryId = Field(default_factory=lambda: f"q_{uuid.uuid4().hex[:12]}")
    search_text: str = Field(..., max_length=config.MAX_QUERY_CHARS)
    top_k: TopK = Field(config.DEFAULT_TOP_K, strict=True)
    # without the pydantic mypy plugin, mypy misses the positional Field defaults of HybridParams
    hybrid_params: HybridParams = Field(default_factory=HybridParams)  # type: ignore[arg-type]
    metadata_filter: MetadataFilter
    mode: Mode = "hybrid"
    fetch_k: int | None = Field(None, ge=1, le=config.MAX_FETCH_K, strict=True)
    namespace: Namespace = None
    #: rerank the fused candidates of ``mode`` (``mode: "rerank"`` is hybrid + ``rerank: true``)
    rerank: bool = Field(False, strict=True)
    #: the reranker to use; None = the memory's own choice (``Memory(reranker=)``, HYBRIDMEM_RERANKER)
    reranker: RerankerChoice | None = None

    @field_validator("search_text")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("search_text must not be empty")
        if "\x00" in v:
            raise ValueError("search_text must not contain NUL characters")
        return v

    @field_validator("hybrid_params", mode="wrap")
    @classmethod
    def _strict_weights(cls, v: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        # the weights are numbers: true or "1" is an error naming the weight (an int is a float)
        return HybridParams.model_validate(v, strict=True) if isinstance(v, dict) else handler(v)

    @model_validator(mode="after")
    def _weights(self) -> QueryRequest:
        hp = self.hybrid_params
        if self.mode in ("hybrid", "rerank") and hp.dense_weight == 0 and hp.sparse_weight == 0:
            raise ValueError("hybrid_params: dense_weight and sparse_weight cannot both be 0")
        only = {"bm25": ("sparse_weight", "BM25"), "vector": ("dense_weight", "dense")}.get(self.mode)
        if only is not None and getattr(hp, only[0]) == 0:
            raise self._field_error(
                ("hybrid_params", only[0]),
                f"mode {self.mode} runs only the {only[1]} leg, and {only[0]} 0 gives it no weight: "
                f"it would return nothing (leave {only[0]} out, or use another mode)",
                0,
            )
        if self.fetch_k is not None and self.fetch_k < self.top_k:
            raise ValueError(f"fetch_k ({self.fetch_k}) must be >= top_k ({self.top_k})")
        return self

    def effective_fetch_k(self, rerank: bool = False) -> int:
        k = self.fetch_k or 2 * self.top_k
        if rerank:
            k = max(k, config.MIN_FETCH_K_RERANK)
        return min(max(k, self.top_k), config.MAX_FETCH_K)

    @property
    def wants_rerank(self) -> bool:
        return self.rerank or self.mode == "rerank"


class AnswerRequest(RequestModel):
    """A question to answer from the memory, with citations (``[chunk_id]``)."""

    question: Question
    top_k: TopK = Field(5, strict=True, description="Chunks retrieved as the context.")
    metadata_filter: MetadataFilter
    rerank: bool = Field(True, strict=True, description="Rerank the fused candidates before answering.")
    reranker: RerankerChoice | None = None
    namespace: Namespace = None
    query_id: QueryId | None = None

    @field_validator("question")
    @classmethod
    def _question(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("question must not be empty")
        if "\x00" in v:
            raise ValueError("question must not contain NUL characters")
        return v


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
    #: what the caller may want to know about this answer: a filter key no document has, a
    #: namespace that does not exist, a dense leg left out while too few vectors exist
    warnings: list[str] = Field(default_factory=list)

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


class Document(BaseModel):
    """A unit of ingest: a file, a JSON record, or one memory."""

    model_config = ConfigDict(extra="forbid")

    text: str
    id: str | None = Field(None, min_length=1, max_length=512)
    source: str | None = Field(None, max_length=4096)
    metadata: dict[str, Any] = Field(default_factory=dict)


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

    def merge(self, other: IngestReport) -> None:
        self.added += other.added
        self.updated += other.updated
        self.unchanged += other.unchanged
        self.skipped += other.skipped
        self.notes += other.notes
        self.chunks_written += other.chunks_written
        self.vectors_reused += other.vectors_reused
        self.pending_vectors = other.pending_vectors


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
