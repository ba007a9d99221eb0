"""The memory's write calls as the helpers that drive them see them (``Memory`` has them): the
conflict check (:mod:`hybridmem.conflicts`) and the writes of messages
(:mod:`hybridmem.conversation`) read, update and write through it."""

from __future__ import annotations

from typing import Any, Protocol

from .models import IngestReport
from .store.base import PreparedDocument

__all__ = ["MemoryWrites"]


class MemoryWrites(Protocol):
    """Read a memory, write prepared documents, update a memory (a new version)."""

    def get(self, doc_id: str, *, namespace: str | None = None) -> dict[str, Any]: ...
    def _write(self, ns: str, batch: list[PreparedDocument], count_pending: bool = False) -> IngestReport: ...
    def update(
        self,
        id: str,
        text: str,
        *,
        metadata: dict[str, Any] | None = None,
        namespace: str | None = None,
        occurred_at: str | float | None = None,
        reason: str | None = None,
        vector: Any = None,
    ) -> IngestReport: ...
