"""The request side of the JSON contract: query modes and choices, the bounded field types, hybrid
parameters, scopes and time ranges, the query and answer requests."""

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
    field_validator,
    model_validator,
)
from pydantic import ValidationError as PydanticValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from .. import config
from ..errors import ValidationError
from ..timeexpr import parse_timestamp

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
#: a precomputed vector of a memory's text (numbers, finite; its dimension checked against the
#: store's embedder when the memory is written); None = embedded by the server's model
Embedding = Annotated[
    list[Annotated[float, Field(strict=True, allow_inf_nan=False)]] | None,
    Field(
        min_length=1,
        max_length=config.MAX_VECTOR_DIM,
        description="Precomputed vector of the text (the store's embedder, its dimension; the text one chunk).",
    ),
]


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


def request_time(v: Any, field: str, named: bool = False) -> float | None:
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
        return request_time(self.from_, "time_range.from"), request_time(self.to, "time_range.to")

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

    @field_validator("as_of", "now")
    @classmethod
    def _a_time(cls, v: Any, info: Any) -> Any:
        t = request_time(v, info.field_name, named=True)
        if info.field_name == "as_of" and t is not None and t > time.time() + 1:
            raise ValueError(f"as_of ({v}) is in the future: the memory cannot be known as of then")
        return v

    def time_bounds(self) -> tuple[float | None, float | None, float | None, float | None]:
        """(time_range from, to, as_of, now) as epoch seconds (validated already)."""
        a, b = self.time_range.bounds() if self.time_range is not None else (None, None)
        return a, b, request_time(self.as_of, "as_of"), request_time(self.now, "now")


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
    #: with a read replica: wait (bounded) until it has replayed this process's last write, else
    #: read the primary; None = the memory's own choice (``Memory(read_your_writes=)``)
    read_your_writes: bool | None = Field(None, strict=True)

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


ListOrder = Literal["recorded_at", "occurred_at", "id"]


class ListRequest(ScopeFields):
    """A page of the memories themselves (no ranking): the scopes, times and metadata filter of a
    query, an order, and the opaque cursor the previous page gave (``next_cursor``)."""

    namespace: Namespace = None
    metadata_filter: MetadataFilter
    cursor: str | None = Field(None, min_length=1, max_length=2048)
    limit: int = Field(100, ge=1, le=config.MAX_LIST_LIMIT, strict=True)
    #: ``recorded_at`` (when the memory was first written: an update does not move it), ``occurred_at``
    #: (when it happened; none sorts first; an update that changes it moves the memory) or ``id``
    order: ListOrder = "recorded_at"
    descending: bool = Field(False, strict=True)


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
