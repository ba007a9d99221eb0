"""The HTTP API (FastAPI): a thin adapter over :class:`hybridmem.Memory`.

Every error is JSON ``{"error": {"type", "message", "field"}}`` with the status, type and headers
the exception's class declares (``http_status``, ``error_type``, ``http_headers`` in
:mod:`hybridmem.errors`), mapped here in one place; never a traceback (that goes to the log, under
the request id the 5xx's message gives). Tenancy: an API key maps to the namespaces it may use
(401 without a valid key, 403 for another namespace). On loopback or not, a Host the server does not
answer to is a 421 and a state-changing request from another site a 403 (:class:`LoopbackGuard`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import shutil
import sqlite3
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, File, Form, Query, Request, Security, UploadFile
from fastapi import Path as FastAPIPath
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field, model_validator
from starlette.exceptions import HTTPException as StarletteHTTPException

from .. import __version__
from ..errors import HybridMemError, NotFoundError, StoreError, ValidationError
from ..ingest import load_documents
from ..models import (
    SCOPE_FIELDS,
    AnswerRequest,
    Document,
    IngestReport,
    MemoryDecision,
    Message,
    Namespace,
    QueryRequest,
    QueryResponse,
    Question,
    RequestModel,
    Stats,
    WorkerStatus,
)
from . import common
from .auth import HostPolicy, KeyRing, Principal, bare_host, check_bind
from .common import TENANT_KEY, LoopbackGuard, NotImplementedOnServer, RequestLog, log_failure, with_request_id
from .config import ServerConfig
from .jobs import GraphJob, GraphJobs
from .limits import (
    ERROR_KEY,
    BodySizeLimit,
    Runner,
    StartTracker,
    StoreBusyError,
    TenantRunner,
    error_body,
)
from .metrics import CONTENT_TYPE, Metrics, MetricsMiddleware

try:  # the grounded-answer model lands with the LLM layer
    from ..models import Answer as _AnswerModel
except ImportError:  # pragma: no cover - depends on the LLM layer being present
    _AnswerModel = None  # type: ignore[assignment,misc]

__all__ = ["AnswerRequest", "NotImplementedOnServer", "create_app", "error_body", "run_server"]

log = logging.getLogger(__name__)
log.addHandler(logging.NullHandler())

UPLOAD_PATH = "/v1/documents"

# ---------------------------------------------------------------------------------------------- models


class ErrorDetail(BaseModel):
    type: str
    message: str
    field: str | None = None


class ErrorResponse(BaseModel):
    error: ErrorDetail


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


class MemoriesRequest(RequestModel):
    memories: list[MemoryIn] = Field(..., min_length=1, description="The batch (one transaction per 64).")
    namespace: Namespace = None


class MemoryUpdate(RequestModel):
    text: str = Field(..., min_length=1)
    metadata: dict[str, Any] | None = Field(None, description="Replaces the metadata; omitted = kept.")
    source: str | None = Field(None, max_length=4096, description="Omitted = kept.")


class WriteReport(IngestReport):
    namespace: str


class DeleteReport(BaseModel):
    deleted: list[str]
    namespace: str


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
    namespace: Namespace = None


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


class GraphBuildRequest(RequestModel):
    """Build or refresh the namespace's entity graph offline (rules + extractive summaries, or the
    server's LLM when one is configured). ``update`` redoes only what changed since the last run."""

    namespace: Namespace = None
    wait: float | None = Field(
        None,
        ge=0,
        le=3600,
        description="Seconds to wait for the job (default and most: 90 % of the server's request_timeout); "
        "not done by then: 202 with the job to poll at GET /v1/graph/jobs/{job_id}.",
    )


class GraphJobView(BaseModel):
    """A graph build or update running in the background (``state``: queued, running, done, failed)."""

    job_id: str
    namespace: str
    kind: Literal["build", "update"]
    state: Literal["queued", "running", "done", "failed"]
    created_at: float
    started_at: float | None = None
    finished_at: float | None = None
    #: the GraphReport when ``done``
    report: dict[str, Any] | None = None
    #: ``{"type", "message"}`` when ``failed``
    error: dict[str, Any] | None = None


class GraphGlobalRequest(RequestModel):
    """A corpus-wide question answered by map-reduce over community summaries."""

    question: Question
    level: int | None = Field(None, ge=0, le=16, strict=True, description="Community level (default: the top, 0).")
    namespace: Namespace = None


class Health(BaseModel):
    status: Literal["ok"]
    version: str
    auth: bool
    embedding_worker_error: str | None = None
    #: the embedding worker's progress: vectors/s over the last minute, queue, batch running, errors
    embedding_worker: WorkerStatus | None = None


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    text = {
        401: "Missing or invalid API key",
        403: "The key may not use this namespace, or a cross-site request",
        404: "Not found",
        413: "Request body too large",
        421: "The server does not answer to this Host",
        422: "Invalid request (the field is named)",
        429: "Too many concurrent requests for this key (Retry-After)",
        501: "Not available on this server",
        504: "The request timed out",
    }
    return {c: {"model": ErrorResponse, "description": text.get(c, "Error")} for c in codes}


def _json(obj: BaseModel) -> Response:
    return Response(obj.model_dump_json(), media_type="application/json")


def _written(report: IngestReport, ns: str) -> WriteReport:
    return WriteReport(**report.model_dump(), namespace=ns)


# ---------------------------------------------------------------------------------------------- errors

#: the ``type`` of an HTTP error raised by the framework itself (routing, parsing, limits)
_HTTP_TYPES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
    421: "misdirected_request",
    422: "validation_error",
    429: "too_many_requests",
}


def _error(
    request: Request,
    status: int,
    type_: str,
    message: str,
    field: str | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    request.scope[ERROR_KEY] = type_
    return JSONResponse(error_body(type_, message, field), status_code=status, headers=headers)


async def _on_hybridmem(request: Request, e: HybridMemError) -> JSONResponse:
    # status, type and headers are class attributes of the error tree: the nearest class in the
    # exception's MRO that sets one decides
    status = int(e.http_status or 500)
    message = str(e)
    if status >= 500:
        log_failure(request.scope, status, e)
        message = with_request_id(message, request.scope)
    return _error(request, status, e.error_type, message, getattr(e, "field", None), dict(e.http_headers) or None)


async def _on_invalid(request: Request, e: RequestValidationError) -> JSONResponse:
    errs = e.errors()
    if not errs:
        return _error(request, 422, ValidationError.error_type, "invalid request")
    err = errs[0]
    loc = [str(p) for p in err.get("loc", ())]
    if loc and loc[0] in ("body", "query", "path", "header", "cookie", "form"):
        loc = loc[1:]
    if err.get("type") == "json_invalid":
        detail = (err.get("ctx") or {}).get("error", "malformed JSON")
        return _error(request, 422, ValidationError.error_type, f"request body is not valid JSON: {detail}")
    field = ".".join(loc) or None
    if field is None and err.get("type") == "missing" and tuple(err.get("loc", ())) == ("body",):
        return _error(request, 422, ValidationError.error_type, "body: a JSON object is required", "body")
    msg = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
    more = f" (and {len(errs) - 1} more problem{'s' if len(errs) > 2 else ''})" if len(errs) > 1 else ""
    return _error(request, 422, ValidationError.error_type, (f"{field}: {msg}" if field else msg) + more, field)


async def _on_http(request: Request, e: StarletteHTTPException) -> JSONResponse:
    message = e.detail if isinstance(e.detail, str) else json.dumps(e.detail)
    if e.status_code == 404 and message == "Not Found":
        message = f"no such endpoint: {request.method} {request.url.path} (see /docs)"
    if e.status_code == 400 and message == "There was an error parsing the body":
        # FastAPI's answer to a body json/multipart could not parse (e.g. nested too deeply)
        return _error(
            request,
            422,
            ValidationError.error_type,
            "request body could not be parsed (malformed, or nested too deeply)",
        )
    if e.status_code == 400:
        # Starlette's answer to a multipart body it cannot parse ("Missing boundary in multipart.",
        # a part over its size limit...): a malformed body, 422 like every other (bench/fuzz.py)
        return _error(request, 422, ValidationError.error_type, f"request body could not be parsed: {message}")
    return _error(
        request,
        e.status_code,
        _HTTP_TYPES.get(e.status_code, "http_error"),
        message,
        headers=getattr(e, "headers", None),
    )


async def _on_sqlite(request: Request, e: sqlite3.Error) -> JSONResponse:
    if "locked" in str(e).lower() or "busy" in str(e).lower():
        log_failure(request.scope, StoreBusyError.http_status, e)
        return _error(
            request,
            StoreBusyError.http_status,
            StoreBusyError.error_type,
            with_request_id("the store is busy; retry shortly", request.scope),
            headers=dict(StoreBusyError.http_headers),
        )
    log_failure(request.scope, StoreError.http_status, e)
    message = with_request_id(f"store error: {e}", request.scope)
    return _error(request, StoreError.http_status, StoreError.error_type, message)


async def _on_unicode(request: Request, e: UnicodeError) -> JSONResponse:
    # JSON may escape unpaired surrogates (\ud800) into free-form values (metadata, filters)
    # that no store can encode: bad input, not a server fault
    return _error(
        request,
        422,
        ValidationError.error_type,
        "the request holds invalid Unicode (an unpaired surrogate such as \\ud800)",
    )


def _install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(HybridMemError, _on_hybridmem)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _on_invalid)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, _on_http)  # type: ignore[arg-type]
    app.add_exception_handler(sqlite3.Error, _on_sqlite)  # type: ignore[arg-type]
    app.add_exception_handler(UnicodeError, _on_unicode)  # type: ignore[arg-type]


class CatchAll:
    """Innermost middleware: an unexpected exception becomes a JSON 500 (details only in the log,
    under the request id the message gives) and the connection stays usable. (Starlette's own
    last-resort handler re-raises to the server, which then drops the keep-alive connection.)"""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        tracked = StartTracker(send)
        try:
            await self.app(scope, receive, tracked)
        except Exception as e:
            if isinstance(e, StarletteHTTPException):  # a 413 met while reading the body: BodySizeLimit answers
                raise
            log_failure(scope, 500, e)
            if tracked.started:  # too late for an error response: the server drops the connection
                raise
            scope[ERROR_KEY] = "internal_error"
            rid = common.request_id(scope)
            message = f"internal error (request id {rid}; details are in the server log)" if rid else None
            resp = JSONResponse(
                error_body("internal_error", message or "internal error (details are in the server log)"),
                status_code=500,
            )
            await resp(scope, receive, send)


# ---------------------------------------------------------------------------------------------- the app

MemoryOrFactory = Any  # a Memory, or a zero-argument callable returning one (opened at startup, closed at shutdown)

_API_KEY_HEADER = APIKeyHeader(name="X-API-Key", auto_error=False, description="An API key.")
_BEARER = HTTPBearer(auto_error=False, description="An API key as a bearer token.")


def _principal(
    request: Request,
    key: Annotated[str | None, Security(_API_KEY_HEADER)] = None,
    cred: Annotated[HTTPAuthorizationCredentials | None, Security(_BEARER)] = None,
) -> Principal:
    """Who is calling: the app's :class:`KeyRing` authenticates the key (401 without a valid one)."""
    keys: KeyRing = request.app.state.keys
    p = keys.authenticate(key or (cred.credentials if cred is not None else None))
    request.scope[TENANT_KEY] = p.key_id  # for the request log: an id of the key, never the key
    return p


#: the authenticated caller of a request
Caller = Annotated[Principal, Depends(_principal)]
#: the ``namespace`` query parameter
NamespaceQuery = Annotated[
    str | None,
    Query(min_length=1, max_length=128, description="Namespace (default: the key's first namespace, else 'default')."),
]


@dataclass
class _Deps:
    """What every route group shares: the server's settings, keys, pool and metrics, the memory."""

    cfg: ServerConfig
    keys: KeyRing
    runner: Runner
    metrics: Metrics
    #: ``{"memory": Memory | None}``: None until the lifespan opened an owned memory
    holder: dict[str, Any]
    #: graph builds and updates, in the background
    jobs: GraphJobs

    def expensive(self, p: Principal) -> TenantRunner:
        """The runner for an expensive request (query, answer, upload, graph): within the
        caller's share of the server (``max_concurrent_per_tenant``; 429 past its queue)."""
        return self.runner.for_tenant(p.key_id)

    def memory(self) -> Any:
        mem = self.holder["memory"]
        if mem is None:  # pragma: no cover - only between startup failure and shutdown
            raise StoreBusyError("the memory is not open yet")
        return mem

    def check_top_k(self, top_k: int, fetch_k: int | None = None) -> None:
        cfg = self.cfg
        if top_k > cfg.max_top_k:
            raise ValidationError(f"must be <= {cfg.max_top_k} on this server, got {top_k}", field="top_k")
        if fetch_k is not None and fetch_k > cfg.max_fetch_k:
            raise ValidationError(f"must be <= {cfg.max_fetch_k} on this server, got {fetch_k}", field="fetch_k")


def create_app(memory_or_factory: MemoryOrFactory, config: ServerConfig | None = None) -> FastAPI:
    """The FastAPI app over one Memory (all namespaces: each request works in one).

    ``memory_or_factory``: a ready Memory (the caller closes it) or a callable that opens one at
    startup (closed at shutdown)."""
    cfg = (config or ServerConfig()).validate()
    keys = KeyRing(cfg.api_keys, cfg.default_namespace)
    metrics = Metrics()
    runner = Runner(
        cfg.worker_threads,
        cfg.request_timeout,
        cfg.write_retries,
        per_tenant=cfg.max_concurrent_per_tenant,
        queued_per_tenant=cfg.max_queued_per_tenant,
    )
    owned = callable(memory_or_factory) and not hasattr(memory_or_factory, "search")
    holder: dict[str, Any] = {"memory": None if owned else memory_or_factory}
    jobs = GraphJobs(cfg.graph_job_timeout, cfg.max_graph_jobs)
    deps = _Deps(cfg, keys, runner, metrics, holder, jobs)
    app = _new_app(deps, _lifespan(deps, memory_or_factory if owned else None))
    # the agent routes first: GET /v1/memories/{id}/history before GET /v1/memories/{id:path}
    routes = (_query_routes, _agent_routes, _memory_routes, _document_routes, _graph_routes, _introspection_routes)
    for register in routes:
        register(app, deps)
    return app


def _lifespan(d: _Deps, factory: Callable[[], Any] | None) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """Opens the memory at startup when the app owns it (``factory``), closes it at shutdown."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if factory is not None:
            d.holder["memory"] = factory()
        # load the query embedder and the default namespace's indexes in the background now,
        # rather than in the first query
        asyncio.get_running_loop().run_in_executor(d.runner.executor, _warm_up, d.holder["memory"])
        try:
            yield
        finally:
            d.runner.shutdown()
            d.jobs.shutdown()
            if factory is not None and d.holder["memory"] is not None:
                d.holder["memory"].close()

    return lifespan


#: where the Swagger UI and ReDoc assets are served from (``/docs`` and ``/redoc`` load them there)
DOCS_ASSETS = "/docs/assets"


def _app_with_offline_docs(**kwargs: Any) -> FastAPI:
    """A FastAPI app whose ``/docs`` (Swagger UI) and ``/redoc`` pages load their JavaScript, CSS
    and icon from this server, under :data:`DOCS_ASSETS` (the files ship in the ``fastapi-offline``
    package), never from a CDN: the docs work on a machine with no network. Without that package
    (an older install of the server extra), FastAPI's own pages, which load the assets from a CDN."""
    try:
        from fastapi_offline import FastAPIOffline
    except ImportError:  # pragma: no cover - the server extra installs it
        log.warning("fastapi-offline is not installed: /docs and /redoc load their assets from a CDN")
        return FastAPI(**kwargs)
    return FastAPIOffline(static_url=DOCS_ASSETS, **kwargs)


def _new_app(d: _Deps, lifespan: Callable[[FastAPI], AbstractAsyncContextManager[None]]) -> FastAPI:
    app = _app_with_offline_docs(
        title="hybridmem",
        version=__version__,
        description=(
            "Long-term memory for AI agents: BM25 and dense retrieval fused by RRF behind metadata "
            "pre-filters. Send an API key as `Authorization: Bearer KEY` or `X-API-Key: KEY` when the "
            "server has keys; each key may use only its namespaces. Errors are "
            '`{"error": {"type", "message", "field"}}`.'
        ),
        lifespan=lifespan,
    )
    app.state.config, app.state.metrics, app.state.keys = d.cfg, d.metrics, d.keys
    _install_error_handlers(app)
    # the last added is the outermost: the request log and the metrics see every response, 421s,
    # 413s and 500s included; Host and Origin are checked before a body is read
    app.add_middleware(CatchAll)
    app.add_middleware(
        BodySizeLimit, limit=d.cfg.max_body_bytes, upload_limit=d.cfg.max_upload_bytes, upload_paths=(UPLOAD_PATH,)
    )
    app.add_middleware(LoopbackGuard, policy=HostPolicy.for_bind(d.cfg.host, d.cfg.allowed_hosts))
    app.add_middleware(MetricsMiddleware, metrics=d.metrics, routes=lambda: app.routes)
    app.add_middleware(RequestLog)
    return app


# ---------------------------------------------------------------------------------------------- routes


def _query_routes(app: FastAPI, d: _Deps) -> None:
    @app.post(
        "/v1/query", response_model=QueryResponse, tags=["query"], responses=_errors(401, 403, 413, 422, 429, 504)
    )
    async def query(req: QueryRequest, p: Caller) -> Response:
        """Hybrid (BM25 ‖ dense, fused by RRF), `bm25`, `vector` or `rerank` search: exactly the
        JSON query contract, plus `mode`, `rerank`, `reranker`, `fetch_k` and `namespace`."""
        ns = p.namespace(req.namespace)
        d.check_top_k(req.top_k, req.fetch_k)
        req = req.model_copy(update={"namespace": ns})
        resp: QueryResponse = await d.expensive(p)(d.memory().search, req)
        d.metrics.observe_legs(resp.legs)
        return _json(resp)

    @app.post(
        "/v1/answer",
        response_model=_AnswerModel,
        tags=["query"],
        responses=_errors(401, 403, 413, 422, 429, 501, 504),
    )
    async def answer(body: AnswerRequest, p: Caller) -> Response:
        """A grounded answer from the retrieved chunks, citing them as `[chunk_id]`, with usage.
        Extractive (offline) unless the server has an LLM configured (`HYBRIDMEM_LLM`)."""
        ns = p.namespace(body.namespace)
        d.check_top_k(body.top_k)
        ans = await d.expensive(p)(
            common.ask,
            d.memory(),
            body.question,
            top_k=body.top_k,
            metadata_filter=body.metadata_filter,
            rerank=body.rerank,
            reranker=body.reranker,
            namespace=ns,
            query_id=body.query_id,
            **body.model_dump(include=set(SCOPE_FIELDS), exclude_defaults=True, by_alias=True),
        )
        return _json(ans)


def _memory_routes(app: FastAPI, d: _Deps) -> None:
    @app.post("/v1/memories", response_model=WriteReport, tags=["memories"], responses=_errors(401, 403, 413, 422, 504))
    async def add_memories(body: MemoriesRequest, p: Caller) -> WriteReport:
        """Store a batch of memories, idempotent by id (same id + same content = unchanged)."""
        ns = p.namespace(body.namespace)
        if len(body.memories) > d.cfg.max_batch:
            raise ValidationError(
                f"at most {d.cfg.max_batch} memories per request, got {len(body.memories)}", field="memories"
            )
        docs = [Document(text=m.text, id=m.id, metadata=m.metadata, source=m.source) for m in body.memories]
        return _written(await d.runner.write(d.memory().add_documents, docs, namespace=ns), ns)

    @app.get(
        "/v1/memories/{doc_id:path}",
        response_model=StoredDocument,
        tags=["memories"],
        responses=_errors(401, 403, 404, 422, 504),
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
        responses=_errors(401, 403, 404, 413, 422, 504),
    )
    async def put_memory(doc_id: str, body: MemoryUpdate, p: Caller, namespace: NamespaceQuery = None) -> WriteReport:
        """Replace an existing memory's text (and metadata/source when given); 404 if it does not
        exist (create with POST /v1/memories)."""
        ns = p.namespace(namespace)
        return _written(
            await d.runner.write(
                d.memory().update, doc_id, body.text, metadata=body.metadata, source=body.source, namespace=ns
            ),
            ns,
        )

    @app.delete(
        "/v1/memories/{doc_id:path}",
        response_model=DeleteReport,
        tags=["memories"],
        responses=_errors(401, 403, 404, 422, 504),
    )
    async def delete_memory(doc_id: str, p: Caller, namespace: NamespaceQuery = None) -> DeleteReport:
        """Delete a document (by id) or a single chunk (by chunk id) from every index."""
        ns = p.namespace(namespace)
        found: list[str] = await d.runner.write(d.memory().delete, [doc_id], namespace=ns)
        if not found:
            raise NotFoundError(f"no document or chunk {doc_id!r} in namespace {ns!r}")
        return DeleteReport(deleted=found, namespace=ns)


def _agent_routes(app: FastAPI, d: _Deps) -> None:
    """Agent memory (docs/agent-memory.md): chat messages, versions, supersession, soft deletes."""

    @app.post(
        "/v1/messages", response_model=MessagesReport, tags=["agent memory"], responses=_errors(401, 403, 413, 422, 504)
    )
    async def add_messages(body: MessagesRequest, p: Caller) -> MessagesReport:
        """Store chat messages as memories of a session, turns numbered after its last one."""
        ns = p.namespace(body.namespace)
        if len(body.messages) > d.cfg.max_batch:
            raise ValidationError(
                f"at most {d.cfg.max_batch} messages per request, got {len(body.messages)}", field="messages"
            )
        msgs = [m.model_dump(exclude_none=True) for m in body.messages]  # the core checks them again
        scope = {"session_id": body.session_id, "user_id": body.user_id, "agent_id": body.agent_id}
        try:
            report: IngestReport = await d.runner.write(d.memory().add_messages, msgs, **scope, namespace=ns)
        except ValidationError as e:
            raise common.dotted(e) from None
        return MessagesReport(**report.model_dump(), namespace=ns, session_id=body.session_id)

    @app.post(
        "/v1/remember",
        response_model=RememberReport,
        tags=["agent memory"],
        responses=_errors(401, 403, 413, 422, 429, 504),
    )
    async def remember(body: RememberRequest, p: Caller) -> RememberReport:
        """Store a statement; with `reconcile`, the LLM decides whether it is new (ADD), changes a
        memory (UPDATE, history kept), retracts one (DELETE, soft) or is held already (NONE)."""
        ns = p.namespace(body.namespace)
        args = body.model_dump(exclude={"namespace", "text"})
        decision: MemoryDecision = await d.expensive(p).write(d.memory().remember, body.text, **args, namespace=ns)
        return RememberReport(**decision.model_dump(), namespace=ns)

    @app.get(
        "/v1/memories/{doc_id:path}/history",
        response_model=MemoryHistory,
        tags=["agent memory"],
        responses=_errors(401, 403, 404, 422, 504),
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
        responses=_errors(401, 403, 404, 413, 422, 504),
    )
    async def supersede(
        doc_id: str, body: SupersedeRequest, p: Caller, namespace: NamespaceQuery = None
    ) -> WriteReport:
        """A new version of a memory (text, or a message keeping its session and turn); the old one
        stays in its history with `valid_to`. 404 when the memory is not current."""
        ns = p.namespace(namespace)
        new = body.text if body.message is None else body.message.model_dump(exclude_none=True)
        report = await d.runner.write(common.supersede, d.memory(), doc_id, new, namespace=ns, reason=body.reason)
        return _written(report, ns)

    @app.post(
        "/v1/memories/{doc_id:path}/forget",
        response_model=ForgetReport,
        tags=["agent memory"],
        responses=_errors(401, 403, 404, 413, 422, 504),
    )
    async def forget(
        doc_id: str, p: Caller, body: ForgetRequest | None = None, namespace: NamespaceQuery = None
    ) -> ForgetReport:
        """A soft delete: the memory stops being current now and stays in its history (`as_of` an
        earlier time still finds it; DELETE removes every version). The body may be left out."""
        ns = p.namespace(namespace)
        last = await d.runner.write(common.forget, d.memory(), doc_id, namespace=ns, reason=body and body.reason)
        return ForgetReport(id=doc_id, version=last["version"], valid_to=last["valid_to"], namespace=ns)


def _document_routes(app: FastAPI, d: _Deps) -> None:
    @app.post(
        UPLOAD_PATH, response_model=WriteReport, tags=["memories"], responses=_errors(401, 403, 413, 422, 429, 504)
    )
    async def upload_documents(
        files: Annotated[list[UploadFile], File(description="Text files: .md .txt .rst .html .json .jsonl")],
        p: Caller,
        namespace: Annotated[str | None, Form(min_length=1, max_length=128)] = None,
        metadata: Annotated[str | None, Form(description="A JSON object added to every document's metadata.")] = None,
        id: Annotated[
            str | None, Form(min_length=1, max_length=512, description="Document id (one file only).")
        ] = None,
    ) -> WriteReport:
        """Upload files; each becomes a document (JSON/JSONL: one per record), chunked and indexed.
        The id defaults to the file name without its suffix; binary files are skipped and listed."""
        ns = p.namespace(namespace)
        if len(files) > d.cfg.max_batch:
            raise ValidationError(f"at most {d.cfg.max_batch} files per request, got {len(files)}", field="files")
        if id is not None and len(files) != 1:
            raise ValidationError("an id needs exactly one file", field="id")
        meta = _form_metadata(metadata)
        uploads = [(f.filename or f"upload-{i}.txt", await f.read()) for i, f in enumerate(files)]
        return await d.expensive(p).write(_ingest_uploads, d.memory(), uploads, ns, meta, id)


async def _graph_job(d: _Deps, p: Principal, body: GraphBuildRequest | None, kind: str) -> Response:
    """Start (or join) the namespace's graph job; the report if it ends within the wait, else 202."""
    ns = p.namespace(body.namespace if body is not None else None)
    memory = d.memory()
    fn = memory.graph.build if kind == "build" else memory.graph.update
    job = d.jobs.start(ns, kind, fn)
    most = 0.9 * d.cfg.request_timeout
    wait = most if body is None or body.wait is None else min(body.wait, most)
    if wait > 0:
        await asyncio.wait([asyncio.wrap_future(job.future)], timeout=wait)
    if job.future.done():
        e = job.future.exception()
        if e is not None:
            raise e
        return _json(job.future.result())
    return _job_response(job, 202)


def _job_response(job: GraphJob, status: int = 200) -> Response:
    view = GraphJobView(**job.view())
    headers = {"Location": f"/v1/graph/jobs/{job.id}"} if status == 202 else None
    return Response(view.model_dump_json(), status_code=status, media_type="application/json", headers=headers)


def _graph_routes(app: FastAPI, d: _Deps) -> None:
    accepted: dict[int | str, dict[str, Any]] = {
        202: {"model": GraphJobView, "description": "Still running: poll GET /v1/graph/jobs/{job_id}"}
    }

    @app.post("/v1/graph/build", tags=["graph"], responses={**accepted, **_errors(401, 403, 413, 422, 429, 504)})
    async def graph_build(p: Caller, body: GraphBuildRequest | None = None) -> Response:
        """Extract every chunk of the namespace, detect communities, summarize them (a full rebuild),
        as a background job (one per namespace; a build asked while one runs joins it). The body may
        be left out (the key's default namespace)."""
        return await _graph_job(d, p, body, "build")

    @app.post("/v1/graph/update", tags=["graph"], responses={**accepted, **_errors(401, 403, 413, 422, 429, 504)})
    async def graph_update(p: Caller, body: GraphBuildRequest | None = None) -> Response:
        """Incremental refresh: re-extract changed chunks, re-summarize only changed communities (a
        background job, as a build). The body may be left out (the key's default namespace)."""
        return await _graph_job(d, p, body, "update")

    @app.get("/v1/graph/jobs/{job_id}", tags=["graph"], response_model=GraphJobView, responses=_errors(401, 404, 422))
    async def graph_job(job_id: Annotated[str, FastAPIPath(min_length=1, max_length=64)], p: Caller) -> Response:
        """A graph job's state, and its report once done (404: no such job, or not this key's)."""
        job = d.jobs.get(job_id)
        if job is None or not p.allows(job.namespace):
            raise NotFoundError(f"no graph job {job_id!r}")
        return _job_response(job)

    @app.get("/v1/graph/status", tags=["graph"], responses=_errors(401, 403, 422, 504))
    async def graph_status(p: Caller, namespace: NamespaceQuery = None) -> Response:
        """Entities, relations, fresh and stale communities, summary ages."""
        ns = p.namespace(namespace)
        return _json(await d.runner(d.memory().graph.status, ns))

    @app.post("/v1/graph/global", tags=["graph"], responses=_errors(401, 403, 404, 413, 422, 429, 504))
    async def graph_global(body: GraphGlobalRequest, p: Caller) -> Response:
        """A corpus-wide answer from community summaries, citing community and chunk ids."""
        ns = p.namespace(body.namespace)
        run = d.expensive(p)
        return _json(await run(d.memory().graph.ask_global, body.question, level=body.level, namespace=ns))


def _worker_status(mem: Any) -> WorkerStatus | None:
    try:
        return mem.worker_status() if mem is not None else None
    except Exception:  # liveness must answer even when the store does not
        return None


def _introspection_routes(app: FastAPI, d: _Deps) -> None:
    @app.get("/v1/stats", response_model=Stats, tags=["introspection"], responses=_errors(401, 403, 422, 504))
    async def stats(p: Caller, namespace: NamespaceQuery = None) -> Stats:
        """Documents, chunks, vectors and vectors still pending in the namespace; the embedder."""
        ns = p.namespace(namespace)
        s: Stats = await d.runner(d.memory().stats, ns)
        # a tenant sees its own namespaces only, and not where the server keeps its file
        hidden = {} if p.all_namespaces else {"path": ""}
        return s.model_copy(update={"namespaces": p.visible(s.namespaces), **hidden})

    @app.get("/healthz", response_model=Health, tags=["introspection"])
    async def healthz() -> Health:
        """Liveness: no key needed, no tenant data."""
        return Health(
            status="ok",
            version=__version__,
            auth=d.keys.enabled,
            embedding_worker_error=getattr(d.holder["memory"], "worker_error", None),
            embedding_worker=_worker_status(d.holder["memory"]),
        )

    @app.get("/metrics", response_class=PlainTextResponse, tags=["introspection"])
    async def prometheus() -> PlainTextResponse:
        """Prometheus text: requests, errors and latency per endpoint; latency and status per leg."""
        return PlainTextResponse(d.metrics.render(), media_type=CONTENT_TYPE)


# ---------------------------------------------------------------------------------------------- helpers


def _warm_up(mem: Any) -> None:
    try:
        getattr(mem, "embedder", None)
    except Exception as e:  # noqa: BLE001 - a broken embedder shows in the dense leg's report; log it here too
        log.warning("loading the query embedder failed: %s", e)
    # the default namespace's indexes (BM25 postings, vectors), so the first query does not load
    # them (at 1M chunks: seconds from a saved snapshot, tens of seconds from the store); a query
    # arriving meanwhile waits for this load instead of starting its own
    try:
        mem.wait_for_indexes(timeout=0)
    except Exception as e:  # noqa: BLE001 - the first query loads them again and reports its error
        log.warning("loading the indexes of the default namespace failed: %s: %s", type(e).__name__, e)


def _form_metadata(metadata: str | None) -> dict[str, Any]:
    """The upload form's ``metadata`` field: a JSON object ({} when absent)."""
    if not metadata:
        return {}
    try:
        meta = json.loads(metadata)
    except (json.JSONDecodeError, RecursionError) as e:
        raise ValidationError(f"not valid JSON: {e}", field="metadata") from None
    if not isinstance(meta, dict):
        raise ValidationError("must be a JSON object", field="metadata")
    return meta


def _safe_name(name: str, i: int) -> str:
    base = Path(name.replace("\\", "/")).name.strip()
    base = re.sub(r"[^\w.\-]+", "_", base)[:200].lstrip(".")
    return base or f"upload-{i}.txt"


def _load_upload(
    tmp: Path, i: int, name: str, data: bytes, meta: dict[str, Any], doc_id: str | None
) -> tuple[list[Document], list[dict[str, str]]]:
    """One uploaded file -> documents, as ``Memory.ingest_path`` loads a file
    (:func:`hybridmem.ingest.load_documents`), from a copy of the bytes in a directory of its own;
    the temporary path is then replaced by the uploaded name in sources and skip reasons (a client
    never sees the server's paths)."""
    path = tmp / str(i) / _safe_name(name, i)
    path.parent.mkdir()
    path.write_bytes(data)
    batch = load_documents(path, metadata=meta, doc_id=doc_id, base=path.parent)
    for doc in batch.docs:
        if doc.source == path.name:
            doc.source = name
    return batch.docs, [{"path": name, "reason": s["reason"].replace(path.as_posix(), name)} for s in batch.skipped]


def _ingest_uploads(
    mem: Any, uploads: list[tuple[str, bytes]], ns: str, meta: dict[str, Any], doc_id: str | None
) -> WriteReport:
    """Uploaded files -> documents (:func:`_load_upload`) -> ``Memory.add_documents``, in one call.

    As ``Memory.ingest_path`` but for two answers kept from the first version of this endpoint: an
    upload with nothing loadable is a 422 naming every reason, and an invalid document (say, a JSON
    record whose id has control characters) fails the request with a 422 instead of being skipped."""
    docs: list[Document] = []
    skipped: list[dict[str, str]] = []
    tmp = Path(tempfile.mkdtemp(prefix="hybridmem-upload-"))
    try:
        for i, (name, data) in enumerate(uploads):
            found, skip = _load_upload(tmp, i, name, data, meta, doc_id)
            docs += found
            skipped += skip
        if not docs:
            reasons = "; ".join(s["reason"] for s in skipped) or "no text"
            raise ValidationError(f"nothing to ingest: {reasons}", field="files")
        report: IngestReport = mem.add_documents(docs, namespace=ns)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report.skipped += skipped
    return _written(report, ns)


def run_server(config: ServerConfig, memory_or_factory: MemoryOrFactory, *, log_level: str | None = None) -> None:
    """Serve until interrupted. Refuses a non-loopback address when no API key is configured.
    Logs go where :func:`hybridmem.server.common.configure_logging` sent them (uvicorn's too; its
    access log is replaced by the request log's line per request)."""
    import uvicorn

    check_bind(config.host, config.api_keys)
    app = create_app(memory_or_factory, config)
    uvicorn.run(
        app,
        host=bare_host(config.host),  # "[::1]" is a URL's spelling; the socket wants ::1
        port=config.port,
        log_level=log_level or config.log_level,
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=max(5, int(config.request_timeout)),
    )
