"""hybridmem: long-term memory for AI agents — BM25 ‖ dense retrieval fused by RRF, behind filters.

The public names load on first use (:func:`__getattr__`): ``import hybridmem`` alone, or a
submodule such as ``hybridmem.config``, does not pull numpy, pydantic and the retrieval stack in,
which keeps the ``hybridmem`` command's start-up short. ``from hybridmem import Memory`` is
unchanged."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
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

#: a lazily loaded public name -> the submodule that defines it
_LAZY = {
    "Memory": ".memory",
    "Document": ".models",
    "HybridParams": ".models",
    "IngestReport": ".models",
    "QueryRequest": ".models",
    "QueryResponse": ".models",
    "QueryResult": ".models",
    "Stats": ".models",
    "rrf": ".retrieve.fusion",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
