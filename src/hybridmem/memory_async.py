"""The async twins of ``Memory``'s calls (``asearch``, ``aask``, ``aadd``, ...): each runs the sync
call on a worker thread (``asyncio.to_thread``), so an event loop is never blocked by a query or a write."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, TypeVar

from .models import (
    Answer,
    Document,
    ExtractionReport,
    IngestReport,
    MemoryDecision,
    MemoryPage,
    QueryRequest,
    QueryResponse,
)

__all__ = ["AsyncMethods"]

_T = TypeVar("_T")


async def _to_thread(fn: Callable[..., _T], /, *args: Any, **kwargs: Any) -> _T:
    import asyncio  # noqa: PLC0415 - only the async twins need it (and ~80 ms of imports with ssl)

    return await asyncio.to_thread(fn, *args, **kwargs)


class _Sync(Protocol):
    """The sync calls the twins run."""

    @property
    def search(self) -> Callable[..., QueryResponse]: ...
    @property
    def ask(self) -> Callable[..., Answer]: ...
    @property
    def add(self) -> Callable[..., IngestReport]: ...
    @property
    def add_documents(self) -> Callable[..., IngestReport]: ...
    @property
    def update(self) -> Callable[..., IngestReport]: ...
    @property
    def delete(self) -> Callable[..., list[str]]: ...
    @property
    def list(self) -> Callable[..., MemoryPage]: ...
    @property
    def remember(self) -> Callable[..., MemoryDecision]: ...
    @property
    def dedupe(self) -> Callable[..., dict[str, Any]]: ...
    @property
    def add_messages(self) -> Callable[..., IngestReport]: ...
    @property
    def extract_pending(self) -> Callable[..., ExtractionReport]: ...
    @property
    def extract_session(self) -> Callable[..., ExtractionReport]: ...


class AsyncMethods:
    """The async twins, mixed into ``Memory``: same arguments, same results, on a thread."""

    async def asearch(self: _Sync, request: QueryRequest | dict[str, Any] | str, **kwargs: Any) -> QueryResponse:
        return await _to_thread(self.search, request, **kwargs)

    async def aask(self: _Sync, question: str, **kwargs: Any) -> Answer:
        return await _to_thread(self.ask, question, **kwargs)

    async def aadd(self: _Sync, text: str, **kwargs: Any) -> IngestReport:
        return await _to_thread(self.add, text, **kwargs)

    async def aadd_documents(self: _Sync, docs: Iterable[Document | dict[str, Any]], **kwargs: Any) -> IngestReport:
        docs = list(docs)
        return await _to_thread(self.add_documents, docs, **kwargs)

    async def aupdate(self: _Sync, id: str, text: str, **kwargs: Any) -> IngestReport:
        return await _to_thread(self.update, id, text, **kwargs)

    async def adelete(self: _Sync, ids: str | Sequence[str], **kwargs: Any) -> list[str]:
        return await _to_thread(self.delete, ids, **kwargs)

    async def alist(self: _Sync, cursor: str | None = None, limit: int = 100, **kwargs: Any) -> MemoryPage:
        return await _to_thread(self.list, cursor, limit, **kwargs)

    async def aremember(self: _Sync, text: str, **kwargs: Any) -> MemoryDecision:
        return await _to_thread(self.remember, text, **kwargs)

    async def adedupe(self: _Sync, **kwargs: Any) -> dict[str, Any]:
        return await _to_thread(self.dedupe, **kwargs)

    async def aadd_messages(self: _Sync, messages: Iterable[Any], **kwargs: Any) -> IngestReport:
        """``add_messages`` on a thread; with ``extract``, at most ``HYBRIDMEM_EXTRACT_CONCURRENCY``
        extraction calls run at once in the process, however many of these are awaited together."""
        messages = list(messages)
        return await _to_thread(self.add_messages, messages, **kwargs)

    async def aextract_pending(self: _Sync, **kwargs: Any) -> ExtractionReport:
        return await _to_thread(self.extract_pending, **kwargs)

    async def aextract_session(self: _Sync, session_id: str, **kwargs: Any) -> ExtractionReport:
        return await _to_thread(self.extract_session, session_id, **kwargs)
