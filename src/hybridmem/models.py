"""The JSON contract (pydantic v2): query request and response, documents, chunks, stats."""

from __future__ import annotations

import os
import time
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
from .errors import ValidationError
from .timeexpr import parse_timestamp

__all__ = [
    "MODES",
    "Answer",
    "AnswerRequest",
    "SCOPE_FIELDS",
    "ScopeFields",
    "Citation",
    "Document",
    "HybridParams",
    "IngestReport",
    "MemoryDecision",
    "LLMCall",
    "LegReport",
    "Message",
    "TimeRange",
    "ContextWindow",
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
Fusion = Literal["rrf", "adaptive", "dbsf", "combsum", "combmnz"]
FUSIONS: tuple[str, ...] = get_args(Fusion)


def _memory_choice(choice: str | None, arg: str, env: str, default: str, allowed: tuple[str, ...], what: str) -> str:
    """A memory-wide setting, validated: ``choice`` (the argument ``arg``), else the variable ``env``,
    else ``default``; case and spaces ignored. An unknown value is an error naming where it came from
    (ValidationError puts the field first)."""
    value = choice if choice is not None else (os.environ.get(env) or default)
    c = value.strip().lower() if isinstance(value, str) else value
    if c not in allowed:
        raise ValidationError(
            f"unknown {what} {value!r}; use {', '.join(allowed)}", field=arg if choice is not None else env
        )
    return str(c)


def check_fusion(choice: str | None) -> str:
    """A memory's default fusion, validated; None reads ``HYBRIDMEM_FUSION`` (default ``rrf``)."""
    return _memory_choice(choice, "fusion", config.FUSION_ENV, "rrf", FUSIONS, "fusion")


def check_hnsw_dtype(choice: str | None) -> str:
    """The dtype of a memory's HNSW graph, validated; None reads ``HYBRIDMEM_HNSW_DTYPE`` (default f32)."""
    return _memory_choice(choice, "hnsw_dtype", config.HNSW_DTYPE_ENV, "f32", config.HNSW_DTYPES, "HNSW dtype")


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
    #: weight of the time leg (hybrid mode, only when the query names a time: "last week", "in May
    #: 2023"): BM25 among the memories that occurred then, fused like any leg (soft: never a filter)
    time_weight: float = Field(1.0, ge=0, le=1000, allow_inf_nan=False)
    #: weight of the recency leg (hybrid mode: the allowed memories by occurred_at, newest first); 0 = off
    recency_weight: float = Field(0.0, ge=0, le=1000, allow_inf_nan=False)
    #: weight of the feedback leg (hybrid mode, when the first fused results are conversation turns):
    #: BM25 again, over the query's terms plus the rarest terms of those results that the query
    #: lacks (pseudo-relevance feedback); 0 = off
    feedback_weight: float = Field(1.0, ge=0, le=1000, allow_inf_nan=False)
    #: the share of its scope's mean vector taken off the query vector when the dense leg ranks
    #: conversation turns (hybrid mode, when the first fused results are turns): short generic
    #: turns ("Cool, talk soon!") sit close to every question, and the mean is what they share
    #: (hubness; centering as in CSLS and "all-but-the-top"); 0 = off
    dense_centering: float = Field(0.75, ge=0, le=2, allow_inf_nan=False)
    #: weight of the substance leg (hybrid mode, when the first fused results are conversation
    #: turns): the fused candidates again, the turns that say more (more distinct terms) first, a
    #: query-independent prior against chit-chat ("See ya!") that matches every question; 0 = off
    substance_weight: float = Field(1.0, ge=0, le=1000, allow_inf_nan=False)
    #: how the legs are fused: ``rrf`` (weighted RRF, the default); ``adaptive`` (the BM25 and dense
    #: weights set for each query from what its legs returned, by the shipped model, feeding the
    #: fusion that model names: docs/evaluation.md); or a fusion of normalized scores, ``dbsf``,
    #: ``combsum``, ``combmnz`` (``rrf_score`` then holds that fused score). A request that names
    #: none gets the memory's default (``Memory(fusion=)``, HYBRIDMEM_FUSION)
    fusion: Fusion = "rrf"
    #: language-aware fusion (hybrid mode): BM25's weight times 1 - the share of the dense leg's
    #: first chunks written in another language than the question (detected at ingest and per
    #: query; docs/evaluation.md); false keeps the weights as given
    language_aware: bool = Field(True, strict=True)


def _time(v: Any, field: str, named: bool = False) -> float | None:
    """A request's time (ISO 8601, epoch seconds; naive = UTC) as epoch seconds; None stays None.
    ``named``: the error's location already names the field (the message does not repeat it)."""
    if v is None:
        return None
    try:
        return parse_timestamp(v, field=field).timestamp()
    except ValueError as e:
        raise ValueError(str(e).removeprefix(f"{field}: ") if named else str(e)) from None


class TimeRange(BaseModel):
    """A range of ``occurred_at`` (``from`` inclusive, ``to`` exclusive), either end open."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    from_: str | float | None = Field(None, alias="from")
    to: str | float | None = None

    def bounds(self) -> tuple[float | None, float | None]:
        return _time(self.from_, "time_range.from"), _time(self.to, "time_range.to")

    @model_validator(mode="after")
    def _order(self) -> TimeRange:
        a, b = self.bounds()
        if a is None and b is None:
            raise ValueError("time_range needs 'from', 'to' or both")
        if a is not None and b is not None and a >= b:
            raise ValueError(f"time_range: 'from' ({self.from_}) must be before 'to' ({self.to})")
        return self


class ContextWindow(BaseModel):
    """The neighbouring turns of each hit's session returned with it (as context, not ranked)."""

    model_config = ConfigDict(extra="forbid")

    before: int = Field(1, ge=0, le=config.MAX_CONTEXT_TURNS, strict=True)
    after: int = Field(1, ge=0, le=config.MAX_CONTEXT_TURNS, strict=True)


class ScopeFields(RequestModel):
    """The agent-memory fields of a request (docs/agent-memory.md), shared by a query and a question:
    scopes are pre-filters of every leg, like metadata."""

    #: only these conversation sessions (one id or a list)
    session_id: str | list[str] | None = None
    user_id: str | None = Field(default=None, min_length=1, max_length=512)
    agent_id: str | None = Field(default=None, min_length=1, max_length=512)
    #: only memories that occurred in this range (a pre-filter on occurred_at)
    time_range: TimeRange | None = None
    #: the memory as it stood at this recorded time: later writes unseen, later supersessions undone
    as_of: str | float | None = None
    #: also return versions that were superseded or soft-deleted (marked with valid_to)
    include_superseded: bool = Field(False, strict=True)
    #: the reference time of relative expressions in the question ("last week"); default: the
    #: latest memory of the scope
    now: str | float | None = None
    #: neighbouring turns of each hit's session, returned with it
    context_window: ContextWindow | None = None

    @field_validator("session_id")
    @classmethod
    def _sessions(cls, v: str | list[str] | None) -> str | list[str] | None:
        ids = [v] if isinstance(v, str) else v or []
        if isinstance(v, list) and not 1 <= len(v) <= config.MAX_SCOPE_VALUES:
            raise ValueError(f"a list of 1-{config.MAX_SCOPE_VALUES} ids")
        for s in ids:
            if not s or len(s) > 512 or "\x00" in s:
                raise ValueError("ids are 1-512 characters, without NUL")
        return v

    @field_validator("user_id", "agent_id")
    @classmethod
    def _scope_id(cls, v: str | None) -> str | None:
        if v is not None and "\x00" in v:
            raise ValueError("ids are 1-512 characters, without NUL")
        return v


#: the names of :class:`ScopeFields` (a question passes them on to its retrieval)
SCOPE_FIELDS = frozenset(ScopeFields.model_fields)


class QueryRequest(ScopeFields):
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

    @field_validator("as_of", "now")
    @classmethod
    def _a_time(cls, v: Any, info: Any) -> Any:
        t = _time(v, info.field_name, named=True)
        if info.field_name == "as_of" and t is not None and t > time.time() + 1:
            raise ValueError(f"as_of ({v}) is in the future: the memory cannot be known as of then")
        return v

    def time_bounds(self) -> tuple[float | None, float | None, float | None, float | None]:
        """(time_range from, to, as_of, now) as epoch seconds (validated already)."""
        a, b = self.time_range.bounds() if self.time_range is not None else (None, None)
        return a, b, _time(self.as_of, "as_of"), _time(self.now, "now")

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


class AnswerRequest(ScopeFields):
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
    # agent memory: the memory's conversation fields (from its metadata) and times (ISO 8601 UTC)
    session_id: str | None = None
    turn: int | None = None
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
    #: when it happened or was said (ISO 8601 or epoch seconds; naive = UTC); default: when written
    occurred_at: str | float | None = None
    #: a key in the memory's scope (metadata ``user_id``, ``agent_id``), e.g. ``user.city``: writing
    #: it supersedes the memory that held the key, keeping that one in the history
    key: str | None = Field(default=None, min_length=1, max_length=256)
    #: words that find this memory without being part of it (indexed by BM25 and embedded with it,
    #: never returned): a message's previous message, so that "Yes, in May!" meets its question
    context: str | None = Field(default=None, max_length=config.MAX_CONTEXT_CHARS)

    @field_validator("occurred_at")
    @classmethod
    def _occurred(cls, v: Any) -> Any:
        _time(v, "occurred_at", named=True)
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
        _time(v, "timestamp", named=True)
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

    def merge(self, other: IngestReport) -> None:
        self.added += other.added
        self.updated += other.updated
        self.unchanged += other.unchanged
        self.skipped += other.skipped
        self.notes += other.notes
        self.chunks_written += other.chunks_written
        self.vectors_reused += other.vectors_reused
        self.pending_vectors = other.pending_vectors


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
