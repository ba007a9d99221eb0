"""The agent-memory routes (docs/agent-memory.md): chat messages (``/v1/messages``), statements
(``/v1/remember``), and a memory's versions: history, supersession, soft deletes."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..errors import ValidationError
from ..models import Embedding, ExtractionReport, IngestReport, MemoryDecision, Message, Namespace, RequestModel
from . import common
from .routing import Caller, Deps, NamespaceQuery, WriteReport, error_responses, written

# ---------------------------------------------------------------------------------------------- models


class MessagesRequest(RequestModel):
    """Chat messages stored as memories of one session (docs/agent-memory.md): each message is a
    memory ``{session_id}:{turn}`` whose speaker, role, session, turn and scope are metadata and whose
    ``timestamp`` is its ``occurred_at``. One bad message rejects the request; nothing is written."""

    messages: list[Message] = Field(
        ..., min_length=1, description="In order: {role, content, name?, timestamp?, id?, metadata?}."
    )
    session_id: str = Field(..., min_length=1, max_length=512, description="The conversation; turns continue it.")
    user_id: str | None = Field(None, min_length=1, max_length=512, description="Scope: the user (metadata).")
    agent_id: str | None = Field(None, min_length=1, max_length=512, description="Scope: the agent (metadata).")
    extract: bool = Field(
        False,
        strict=True,
        description="Then let the server's LLM extract facts from the new turns (kind: fact, with their source "
        "turns), each through the conflict check; the turns are stored whatever the model does.",
    )
    extract_batch: int = Field(20, ge=1, le=200, strict=True, description="With extract: turns per LLM call.")
    namespace: Namespace = None


class RememberRequest(RequestModel):
    """A statement for a user's or agent's memory; with ``reconcile`` (the server needs an LLM) the
    conflict check decides ADD / UPDATE / DELETE / NONE against the scope's most similar memories
    (docs/agent-memory.md). The scopes go into the memory's metadata."""

    text: str = Field(..., min_length=1, description="The statement.")
    user_id: str | None = Field(None, min_length=1, max_length=512, description="Scope: the user (metadata).")
    agent_id: str | None = Field(None, min_length=1, max_length=512, description="Scope: the agent (metadata).")
    session_id: str | None = Field(None, min_length=1, max_length=512, description="Scope: the session (metadata).")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Filterable metadata (JSON object).")
    source: str | None = Field(None, max_length=4096)
    occurred_at: str | float | None = Field(None, description="When it happened (ISO 8601 or epoch s; default now).")
    id: str | None = Field(None, min_length=1, max_length=512, description="Stable id (for an ADD).")
    reconcile: bool = Field(False, strict=True, description="Run the LLM conflict check first.")
    candidates: int = Field(5, ge=1, le=20, strict=True, description="Similar memories the check compares with.")
    embedding: Embedding = None
    dedupe: bool | None = Field(
        None, strict=True, description="Skip it (NONE) if a current memory of the scope says the same; default: server."
    )
    namespace: Namespace = None


class ExtractPendingRequest(RequestModel):
    """Run again the fact-extraction batches of the namespace that a failing model left pending."""

    limit: int | None = Field(None, ge=1, le=1000, strict=True, description="At most this many batches, oldest first.")
    namespace: Namespace = None


class ExtractPendingReport(ExtractionReport):
    namespace: str


class RememberReport(MemoryDecision):
    namespace: str


class MessagesReport(IngestReport):
    namespace: str
    session_id: str


class SupersedeRequest(RequestModel):
    """A new version of a memory: its new ``text``, or a new ``message`` (which keeps the memory's
    session and turn). The old version stays in the history with ``valid_to``."""

    text: str | None = Field(None, min_length=1, description="The new text (or give message).")
    message: Message | None = Field(None, description="The new message {role, content, name?, timestamp?}.")
    reason: str | None = Field(None, min_length=1, max_length=512, description="Why (kept in the history).")

    @model_validator(mode="after")
    def _one(self) -> SupersedeRequest:
        if (self.text is None) == (self.message is None):
            raise self._field_error(("text",), "give the new text or a message (exactly one)", self.text)
        return self


class ForgetRequest(RequestModel):
    reason: str | None = Field(None, min_length=1, max_length=512, description="Why (kept in the history).")


class ForgetReport(BaseModel):
    """The version that stopped being current (it stays in the history)."""

    id: str
    version: int
    valid_to: str | None
    namespace: str


class MemoryVersion(BaseModel):
    """One version of a memory, as ``Memory.history`` gives it."""

    model_config = ConfigDict(extra="allow")

    id: str
    memory_id: str
    version: int
    current: bool
    occurred_at: str | None = None
    recorded_at: str | None = None
    valid_to: str | None = None
    reason: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    text: str = ""


class MemoryHistory(BaseModel):
    id: str
    #: oldest first; the current one (if any) last
    versions: list[MemoryVersion]
    namespace: str


# ---------------------------------------------------------------------------------------------- routes


def register(app: FastAPI, d: Deps) -> None:
    """Agent memory (docs/agent-memory.md): chat messages, versions, supersession, soft deletes."""
    _statement_routes(app, d)
    _version_routes(app, d)


def _statement_routes(app: FastAPI, d: Deps) -> None:
    """Chat messages and statements, stored as memories."""

    @app.post(
        "/v1/messages",
        response_model=MessagesReport,
        tags=["agent memory"],
        responses=error_responses(401, 403, 413, 422, 504, 507),
    )
    async def add_messages(body: MessagesRequest, p: Caller) -> MessagesReport:
        """Store chat messages as memories of a session, turns numbered after its last one; with
        `extract`, the server's LLM then extracts facts from them (`extraction` in the report: each
        batch's facts, what the conflict check did, token usage; a failed batch stays pending)."""
        ns = p.namespace(body.namespace)
        d.check_batch(len(body.messages), "messages")
        msgs = [m.model_dump(exclude_none=True) for m in body.messages]  # the core checks them again
        scope = {"session_id": body.session_id, "user_id": body.user_id, "agent_id": body.agent_id}
        extract = {"extract": body.extract, "extract_batch": body.extract_batch}
        runner = d.expensive(p) if body.extract else d.runner  # the LLM's calls: within the caller's share
        try:
            report: IngestReport = await runner.write(d.memory().add_messages, msgs, **scope, **extract, namespace=ns)
        except ValidationError as e:
            raise common.dotted(e) from None
        if report.extraction is not None:
            d.metrics.observe_llm(report.extraction.usage)
        return MessagesReport(**report.model_dump(), namespace=ns, session_id=body.session_id)

    @app.post(
        "/v1/extract/pending",
        response_model=ExtractPendingReport,
        tags=["agent memory"],
        responses=error_responses(401, 403, 413, 422, 429, 504, 507),
    )
    async def extract_pending(p: Caller, body: ExtractPendingRequest | None = None) -> ExtractPendingReport:
        """Run again the namespace's fact-extraction batches left pending by a model that failed
        (`POST /v1/messages` with `extract`); 422 naming `extract` without an LLM."""
        body = body or ExtractPendingRequest.model_validate({})
        ns = p.namespace(body.namespace)
        report: ExtractionReport = await d.expensive(p).write(
            d.memory().extract_pending, namespace=ns, limit=body.limit
        )
        d.metrics.observe_llm(report.usage)
        return ExtractPendingReport(**report.model_dump(), namespace=ns)

    @app.post(
        "/v1/remember",
        response_model=RememberReport,
        tags=["agent memory"],
        responses=error_responses(401, 403, 413, 422, 429, 504, 507),
    )
    async def remember(body: RememberRequest, p: Caller) -> RememberReport:
        """Store a statement; with `reconcile`, the LLM decides whether it is new (ADD), changes a
        memory (UPDATE, history kept), retracts one (DELETE, soft) or is held already (NONE)."""
        ns = p.namespace(body.namespace)
        args = body.model_dump(exclude={"namespace", "text", "embedding"})
        args["dedupe"] = d.cfg.remember_dedupe if body.dedupe is None else body.dedupe
        try:
            decision: MemoryDecision = await d.expensive(p).write(
                d.memory().remember, body.text, **args, vector=body.embedding, namespace=ns
            )
        except ValidationError as e:
            raise common.embedding_field(e) from None
        return RememberReport(**decision.model_dump(), namespace=ns)


def _version_routes(app: FastAPI, d: Deps) -> None:
    """A memory's versions: its history, a new version, a soft delete."""

    @app.get(
        "/v1/memories/{doc_id:path}/history",
        response_model=MemoryHistory,
        tags=["agent memory"],
        responses=error_responses(401, 403, 404, 422, 504),
    )
    async def memory_history(doc_id: str, p: Caller, namespace: NamespaceQuery = None) -> MemoryHistory:
        """Every version of a memory, oldest first: times, why each was written, which is current."""
        ns = p.namespace(namespace)
        versions = await d.runner(d.memory().history, doc_id, namespace=ns)
        return MemoryHistory(id=doc_id, versions=[MemoryVersion(**v) for v in versions], namespace=ns)

    @app.post(
        "/v1/memories/{doc_id:path}/supersede",
        response_model=WriteReport,
        tags=["agent memory"],
        responses=error_responses(401, 403, 404, 413, 422, 504, 507),
    )
    async def supersede(
        doc_id: str, body: SupersedeRequest, p: Caller, namespace: NamespaceQuery = None
    ) -> WriteReport:
        """A new version of a memory (text, or a message keeping its session and turn); the old one
        stays in its history with `valid_to`. 404 when the memory is not current."""
        ns = p.namespace(namespace)
        new = body.text if body.message is None else body.message.model_dump(exclude_none=True)
        report = await d.runner.write(common.supersede, d.memory(), doc_id, new, namespace=ns, reason=body.reason)
        return written(report, ns)

    @app.post(
        "/v1/memories/{doc_id:path}/forget",
        response_model=ForgetReport,
        tags=["agent memory"],
        responses=error_responses(401, 403, 404, 413, 422, 504, 507),
    )
    async def forget(
        doc_id: str, p: Caller, body: ForgetRequest | None = None, namespace: NamespaceQuery = None
    ) -> ForgetReport:
        """A soft delete: the memory stops being current now and stays in its history (`as_of` an
        earlier time still finds it; DELETE removes every version). The body may be left out."""
        ns = p.namespace(namespace)
        last = await d.runner.write(common.forget, d.memory(), doc_id, namespace=ns, reason=body and body.reason)
        return ForgetReport(id=doc_id, version=last["version"], valid_to=last["valid_to"], namespace=ns)
