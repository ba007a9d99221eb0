"""hybridmem: long-term memory for AI agents — BM25 ‖ dense retrieval fused by RRF, behind filters."""

from .errors import (
    EmbedderError,
    EmbedderMismatchError,
    FilterError,
    HybridMemError,
    IngestError,
    NotFoundError,
    StoreError,
    ValidationError,
)
from .memory import Memory
from .models import Document, HybridParams, IngestReport, QueryRequest, QueryResponse, QueryResult, Stats
from .retrieve.fusion import rrf

__version__ = "0.1.0"

__all__ = [
    "Memory",
    "QueryRequest",
    "QueryResponse",
    "QueryResult",
    "HybridParams",
    "Document",
    "IngestReport",
    "Stats",
    "rrf",
    "HybridMemError",
    "ValidationError",
    "FilterError",
    "NotFoundError",
    "StoreError",
    "EmbedderMismatchError",
    "EmbedderError",
    "IngestError",
]
