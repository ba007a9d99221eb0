"""The memory routes: add a batch, get, replace and delete one memory (``/v1/memories``)."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import FastAPI, Query
from pydantic import BaseModel, Field

from .. import config
from ..errors import NotFoundError, ValidationError
from ..models import Document, Embedding, ListOrder, MemoryPage, Namespace, RequestModel
from . import common
from .routing import Caller, Deps, NamespaceQuery, WriteReport, error_responses, written

# ---------------------------------------------------------------------------------------------- models


class MemoryIn(RequestModel):
    """One memory to store. Same id + same content is a no-op; same id + new content an update."""

    text: str = Field(..., min_length=1, description="The memory's text (chunked and indexed).")
    id: str | None = Field(
        None,
        min_length=1,
        max_length=512,
        description="Stable id; omitted = derived from the text (content-addressed).",
    )
    metadata: dict[str, Any] = Field(default_factory=dict, description="Filterable metadata (JSON object).")
    source: str | None = Field(None, max_length=4096)
    embedding: Embedding = None


class MemoriesRequest(RequestModel):
    memories: list[MemoryIn] = Field(..., min_length=1, description="The batch (one transaction per 64).")
    namespace: Namespace = None


class MemoryUpdate(RequestModel):
    text: str = Field(..., min_length=1)
    metadata: dict[str, Any] | None = Field(None, description="Replaces the metadata; omitted = kept.")
    source: str | None = Field(None, max_length=4096, description="Omitted = kept.")
    embedding: Embedding = None


class DeleteReport(BaseModel):
    deleted: list[str]
    namespace: str


class StoredChunk(BaseModel):
    chunk_id: str
    text: str


class StoredDocument(BaseModel):
    doc_id: str
    source: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    content_hash: str
    n_chunks: int
    created_at: str
    updated_at: str
    #: when it happened, when this version was recorded, when it stopped being current (ISO 8601 UTC)
    occurred_at: str | None = None
    recorded_at: str | None = None
    valid_to: str | None = None
    version: int | None = None
    chunks: list[StoredChunk]
    namespace: str


# ---------------------------------------------------------------------------------------------- routes


def register(app: FastAPI, d: Deps) -> None:
    @app.post(
        "/v1/memories",
        response_model=WriteReport,
        tags=["memories"],
        responses=error_responses(401, 403, 413, 422, 504, 507),
    )
    async def add_memories(body: MemoriesRequest, p: Caller) -> WriteReport:
        """Store a batch of memories, idempotent by id (same id + same content = unchanged)."""
        ns = p.namespace(body.namespace)
        d.check_batch(len(body.memories), "memories")
        docs = [
            Document(text=m.text, id=m.id, metadata=m.metadata, source=m.source, vector=m.embedding)
            for m in body.memories
        ]
        try:
            return written(await d.runner.write(d.memory().add_documents, docs, namespace=ns), ns)
        except ValidationError as e:
            raise common.embedding_field(e, "memories") from None

    _register_list(app, d)  # before /v1/memories/{doc_id}: the same prefix

    @app.get(
        "/v1/memories/{doc_id:path}",
        response_model=StoredDocument,
        tags=["memories"],
        responses=error_responses(401, 403, 404, 422, 504),
    )
    async def get_memory(doc_id: str, p: Caller, namespace: NamespaceQuery = None) -> StoredDocument:
        """One stored document or memory, with its chunks."""
        ns = p.namespace(namespace)
        doc = await d.runner(d.memory().get, doc_id, namespace=ns)
        return StoredDocument(**doc, namespace=ns)

    @app.put(
        "/v1/memories/{doc_id:path}",
        response_model=WriteReport,
        tags=["memories"],
        responses=error_responses(401, 403, 404, 413, 422, 504, 507),
    )
    async def put_memory(doc_id: str, body: MemoryUpdate, p: Caller, namespace: NamespaceQuery = None) -> WriteReport:
        """Replace an existing memory's text (and metadata/source when given); 404 if it does not
        exist (create with POST /v1/memories)."""
        ns = p.namespace(namespace)
        args = {"metadata": body.metadata, "source": body.source, "vector": body.embedding, "namespace": ns}
        try:
            return written(await d.runner.write(d.memory().update, doc_id, body.text, **args), ns)
        except ValidationError as e:
            raise common.embedding_field(e) from None

    @app.delete(
        "/v1/memories/{doc_id:path}",
        response_model=DeleteReport,
        tags=["memories"],
        responses=error_responses(401, 403, 404, 422, 504),
    )
    async def delete_memory(doc_id: str, p: Caller, namespace: NamespaceQuery = None) -> DeleteReport:
        """Delete a document (by id) or a single chunk (by chunk id) from every index."""
        ns = p.namespace(namespace)
        found: list[str] = await d.runner.write(d.memory().delete, [doc_id], namespace=ns)
        if not found:
            raise NotFoundError(f"no document or chunk {doc_id!r} in namespace {ns!r}")
        return DeleteReport(deleted=found, namespace=ns)


def _register_list(app: FastAPI, d: Deps) -> None:
    """``GET /v1/memories``: a page of the memories in order, and the cursor of the next."""

    @app.get(
        "/v1/memories",
        response_model=MemoryPage,
        tags=["memories"],
        responses=error_responses(401, 403, 422, 504),
    )
    async def list_memories(
        p: Caller,
        namespace: NamespaceQuery = None,
        cursor: Annotated[str | None, Query(max_length=2048, description="next_cursor of the previous page")] = None,
        limit: Annotated[int, Query(ge=1, le=config.MAX_LIST_LIMIT)] = 100,
        order: Annotated[ListOrder, Query()] = "recorded_at",
        descending: bool = False,
        user_id: Annotated[str | None, Query(max_length=512)] = None,
        agent_id: Annotated[str | None, Query(max_length=512)] = None,
        session_id: Annotated[str | None, Query(max_length=512)] = None,
        as_of: Annotated[str | None, Query(max_length=64, description="ISO 8601 or epoch seconds")] = None,
        include_superseded: bool = False,
        filter: Annotated[
            str | None, Query(max_length=config.MAX_QUERY_CHARS, description="metadata filter, JSON")
        ] = None,
    ) -> MemoryPage:
        """A page of the namespace's memories in order, no ranking, and the cursor of the next page
        (``next_cursor``; null on the last). Exact under concurrent writes; a cursor of another
        namespace, filter or order, or altered, is a 422 naming ``cursor``."""
        ns = p.namespace(namespace)
        fields: dict[str, Any] = {"order": order, "descending": descending, "include_superseded": include_superseded}
        fields.update(
            {k: v for k, v in (("user_id", user_id), ("agent_id", agent_id), ("session_id", session_id)) if v}
        )
        if as_of is not None:
            fields["as_of"] = float(as_of) if _is_number(as_of) else as_of
        if filter is not None:
            try:
                fields["metadata_filter"] = json.loads(filter)
            except json.JSONDecodeError as e:
                raise ValidationError(f"not JSON: {e.msg} at column {e.colno}", field="filter") from None
        page: MemoryPage = await d.runner(d.memory().list, cursor, limit, namespace=ns, **fields)
        return page


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
