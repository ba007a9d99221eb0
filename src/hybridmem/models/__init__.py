"""The JSON contract (pydantic v2): query request and response, documents, chunks, stats.

One import path for every part: :mod:`.requests` (what callers send), :mod:`.responses` (what
searches and answers return), :mod:`.records` (what is stored and reported)."""

from __future__ import annotations

from .records import Document, IngestReport, MemoryDecision, Message, Stats, WorkerStatus
from .requests import (
    FUSIONS,
    MODES,
    SCOPE_FIELDS,
    AnswerRequest,
    ContextWindow,
    Fusion,
    HybridParams,
    MetadataFilter,
    Mode,
    Namespace,
    QueryId,
    QueryRequest,
    Question,
    RequestModel,
    RerankerChoice,
    ScopeFields,
    TimeRange,
    TopK,
    check_fusion,
    check_hnsw_dtype,
)
from .responses import Answer, Citation, LanguageReport, LegReport, LLMCall, QueryResponse, QueryResult, Usage

__all__ = [
    "check_fusion",
    "check_hnsw_dtype",
    "Answer",
    "AnswerRequest",
    "Citation",
    "ContextWindow",
    "Document",
    "FUSIONS",
    "Fusion",
    "HybridParams",
    "IngestReport",
    "LLMCall",
    "LanguageReport",
    "LegReport",
    "MODES",
    "MemoryDecision",
    "Message",
    "MetadataFilter",
    "Mode",
    "Namespace",
    "QueryId",
    "QueryRequest",
    "QueryResponse",
    "QueryResult",
    "Question",
    "RequestModel",
    "RerankerChoice",
    "SCOPE_FIELDS",
    "ScopeFields",
    "Stats",
    "TimeRange",
    "TopK",
    "Usage",
    "WorkerStatus",
]
