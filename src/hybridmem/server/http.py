"""The HTTP API (FastAPI): a thin adapter over :class:`hybridmem.Memory`.

Every error is JSON ``{"error": {"type", "message", "field"}}`` with the status of the exception
(``HybridMemError.http_status``), mapped here in one place; never a traceback. Tenancy: an API key
maps to the namespaces it may use (401 without a valid key, 403 for another namespace).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import re
import shutil
import sqlite3
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

from fastapi import Depends, FastAPI, File, Form, Query, Request, Security, UploadFile
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from .. import __version__
from .. import config as core_config
from ..errors import HybridMemError, NotFoundError, ValidationError
from ..models import Document, IngestReport, QueryRequest, QueryResponse, Stats
from .auth import AuthError, KeyRing, Principal, check_bind
from .config import ServerConfig
from .limits import ERROR_KEY, BodySizeLimit, Runner, StartTracker, StoreBusyError
from .metrics import CONTENT_TYPE, Metrics, MetricsMiddleware

try:  # the grounded-answer model lands with the LLM layer
    from ..models import Answer as _AnswerModel
except ImportError:  # pragma: no cover - depends on the LLM layer being present
    _AnswerModel = None  # type: ignore[assignment,misc]

__all__ = ["create_app", "run_server", "error_body"]

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


class MemoryIn(BaseModel):
    """One memory to store. Same id + same content is a no-op; same id + new content an update."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(..., min_length=1, description="The memory's text (chunked and indexed).")
    id: str | None = Field(None, min_length=1, max_length=512,
                           description="Stable id; omitted = derived from the text (content-addressed).")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Filterable metadata (JSON object).")
    source: str | None = Field(None, max_length=4096)


class MemoriesRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    memories: list[MemoryIn] = Field(..., min_length=1, description="The batch (one transaction per 64).")
    namespace: str | None = Field(None, min_length=1, max_length=128)


class MemoryUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(..., min_length=1)
    metadata: dict[str, Any] | None = Field(None, description="Replaces the metadata; omitted = kept.")
    source: str | None = Field(None, max_length=4096, description="Omitted = kept.")


class WriteReport(IngestReport):
    namespace: str


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
    chunks: list[StoredChunk]
    namespace: str


class AnswerRequest(BaseModel):
    """A question to answer from the memory, with citations (``[chunk_id]``)."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(..., min_length=1, max_length=core_config.MAX_QUERY_CHARS)
    top_k: int = Field(5, ge=1, le=core_config.MAX_TOP_K, description="Chunks retrieved as the context.")
    metadata_filter: dict[str, Any] = Field(default_factory=dict)
    rerank: bool = Field(True, description="Rerank the fused candidates before answering.")
    reranker: Literal["auto", "llm", "identifier"] | None = None
    namespace: str | None = Field(None, min_length=1, max_length=128)
    query_id: str | None = Field(None, max_length=256)


class GraphBuildRequest(BaseModel):
    """Build or refresh the namespace's entity graph offline (rules + extractive summaries, or the
    server's LLM when one is configured). ``update`` redoes only what changed since the last run."""

    model_config = ConfigDict(extra="forbid")

    namespace: str | None = Field(None, min_length=1, max_length=128)


class GraphGlobalRequest(BaseModel):
    """A corpus-wide question answered by map-reduce over community summaries."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(..., min_length=1, max_length=core_config.MAX_QUERY_CHARS)
    level: int | None = Field(None, ge=0, le=16, description="Community level (default: the top, 0).")
    namespace: str | None = Field(None, min_length=1, max_length=128)


class Health(BaseModel):
    status: Literal["ok"]
    version: str
    auth: bool
    embedding_worker_error: str | None = None


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    text = {401: "Missing or invalid API key", 403: "The key may not use this namespace",
            404: "Not found", 413: "Request body too large", 422: "Invalid request (the field is named)",
            501: "Not available on this server", 504: "The request timed out"}
    return {c: {"model": ErrorResponse, "description": text.get(c, "Error")} for c in codes}


# ---------------------------------------------------------------------------------------------- errors

_TYPES: dict[str, str] = {
    "ValidationError": "validation_error",
    "FilterError": "filter_error",
    "NotFoundError": "not_found",
    "StoreError": "store_error",
    "EmbedderMismatchError": "embedder_mismatch",
    "EmbedderError": "embedder_error",
    "IngestError": "ingest_error",
    "LLMError": "llm_error",
    "AuthError": "unauthorized",
    "ForbiddenError": "forbidden",
    "RequestTimeoutError": "timeout",
    "StoreBusyError": "busy",
    "NotImplementedOnServer": "not_implemented",
}
_HTTP_TYPES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
               405: "method_not_allowed", 413: "payload_too_large", 415: "unsupported_media_type",
               422: "validation_error"}


def _type_of(e: BaseException) -> str:
    for cls in type(e).__mro__:
        if cls.__name__ in _TYPES:
            return _TYPES[cls.__name__]
    return re.sub(r"(?<!^)(?=[A-Z])", "_", type(e).__name__).lower().removesuffix("_error") + "_error"


def error_body(type_: str, message: str, field: str | None = None) -> dict[str, Any]:
    return {"error": {"type": type_, "message": message, "field": field}}


def _error(request: Request, status: int, type_: str, message: str, field: str | None = None,
           headers: dict[str, str] | None = None) -> JSONResponse:
    request.scope[ERROR_KEY] = type_
    return JSONResponse(error_body(type_, message, field), status_code=status, headers=headers)


class NotImplementedOnServer(HybridMemError):
    http_status = 501


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(HybridMemError)
    async def _hybridmem(request: Request, e: HybridMemError) -> JSONResponse:
        status = int(getattr(e, "http_status", 500) or 500)
        field = getattr(e, "field", None)
        headers = {"WWW-Authenticate": "Bearer"} if isinstance(e, AuthError) else None
        if isinstance(e, StoreBusyError):
            headers = {"Retry-After": "1"}
        if status >= 500 and not isinstance(e, (StoreBusyError, NotImplementedOnServer)):
            log.warning("%s %s -> %d %s: %s", request.method, request.url.path, status, type(e).__name__, e)
        return _error(request, status, _TYPES.get(type(e).__name__) or _type_of(e), str(e), field, headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, e: RequestValidationError) -> JSONResponse:
        errs = e.errors()
        if not errs:
            return _error(request, 422, "validation_error", "invalid request")
        err = errs[0]
        loc = [str(p) for p in err.get("loc", ())]
        if loc and loc[0] in ("body", "query", "path", "header", "cookie", "form"):
            loc = loc[1:]
        if err.get("type") == "json_invalid":
            detail = (err.get("ctx") or {}).get("error", "malformed JSON")
            return _error(request, 422, "validation_error", f"request body is not valid JSON: {detail}")
        field = ".".join(loc) or None
        msg = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
        more = f" (and {len(errs) - 1} more problem{'s' if len(errs) > 2 else ''})" if len(errs) > 1 else ""
        return _error(request, 422, "validation_error", (f"{field}: {msg}" if field else msg) + more, field)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, e: StarletteHTTPException) -> JSONResponse:
        message = e.detail if isinstance(e.detail, str) else json.dumps(e.detail)
        if e.status_code == 404 and message == "Not Found":
            message = f"no such endpoint: {request.method} {request.url.path} (see /docs)"
        if e.status_code == 400 and message == "There was an error parsing the body":
            # FastAPI's answer to a body json/multipart could not parse (e.g. nested too deeply)
            return _error(request, 422, "validation_error", "request body could not be parsed (malformed, or "
                          "nested too deeply)")
        return _error(request, e.status_code, _HTTP_TYPES.get(e.status_code, "http_error"), message,
                      headers=getattr(e, "headers", None))

    @app.exception_handler(sqlite3.Error)
    async def _sqlite(request: Request, e: sqlite3.Error) -> JSONResponse:
        if "locked" in str(e).lower() or "busy" in str(e).lower():
            return _error(request, 503, "busy", "the store is busy; retry shortly", headers={"Retry-After": "1"})
        log.warning("%s %s: store error %s", request.method, request.url.path, e)
        return _error(request, 500, "store_error", f"store error: {e}")

    @app.exception_handler(UnicodeError)
    async def _unicode(request: Request, e: UnicodeError) -> JSONResponse:
        # JSON may escape unpaired surrogates (\ud800) into free-form values (metadata, filters)
        # that no store can encode: bad input, not a server fault
        return _error(request, 422, "validation_error", "the request holds invalid Unicode (an unpaired "
                      "surrogate such as \\ud800)")


class CatchAll:
    """Innermost middleware: an unexpected exception becomes a JSON 500 (details only in the log)
    and the connection stays usable. (Starlette's own last-resort handler re-raises to the server,
    which then drops the keep-alive connection.)"""

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
            if tracked.started or isinstance(e, StarletteHTTPException):
                raise
            log.error("%s %s failed", scope.get("method"), scope.get("path"), exc_info=e)
            scope[ERROR_KEY] = "internal_error"
            resp = JSONResponse(error_body("internal_error", "internal error (details are in the server log)"),
                                status_code=500)
            await resp(scope, receive, send)


# ---------------------------------------------------------------------------------------------- the app

MemoryOrFactory = Any  # a Memory, or a zero-argument callable returning one (opened at startup, closed at shutdown)


def create_app(memory_or_factory: MemoryOrFactory, config: ServerConfig | None = None) -> FastAPI:
    """The FastAPI app over one Memory (all namespaces: each request works in one).

    ``memory_or_factory``: a ready Memory (the caller closes it) or a callable that opens one at
    startup (closed at shutdown)."""
    cfg = (config or ServerConfig()).validate()
    keys = KeyRing(cfg.api_keys, cfg.default_namespace)
    metrics = Metrics()
    runner = Runner(cfg.worker_threads, cfg.request_timeout, cfg.write_retries)
    owned = callable(memory_or_factory) and not hasattr(memory_or_factory, "search")
    holder: dict[str, Any] = {"memory": None if owned else memory_or_factory}

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if owned:
            holder["memory"] = memory_or_factory()
        # load the query embedder in the background now rather than in the first query
        asyncio.get_running_loop().run_in_executor(runner.executor, _warm_up, holder["memory"])
        try:
            yield
        finally:
            runner.shutdown()
            if owned and holder["memory"] is not None:
                holder["memory"].close()

    app = FastAPI(
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
    app.state.config, app.state.metrics, app.state.keys = cfg, metrics, keys
    _install_error_handlers(app)
    # the last added is the outermost: metrics see every response, 413s and 500s included
    app.add_middleware(CatchAll)
    app.add_middleware(BodySizeLimit, limit=cfg.max_body_bytes, upload_limit=cfg.max_upload_bytes,
                       upload_paths=(UPLOAD_PATH,))
    app.add_middleware(MetricsMiddleware, metrics=metrics, routes=lambda: app.routes)

    api_key_header = APIKeyHeader(name="X-API-Key", auto_error=False, description="An API key.")
    bearer = HTTPBearer(auto_error=False, description="An API key as a bearer token.")

    def principal(
        key: str | None = Security(api_key_header),
        cred: HTTPAuthorizationCredentials | None = Security(bearer),
    ) -> Principal:
        return keys.authenticate(key or (cred.credentials if cred is not None else None))

    def memory() -> Any:
        mem = holder["memory"]
        if mem is None:  # pragma: no cover - only between startup failure and shutdown
            raise StoreBusyError("the memory is not open yet")
        return mem

    def check_top_k(top_k: int, fetch_k: int | None = None) -> None:
        if top_k > cfg.max_top_k:
            raise ValidationError(f"must be <= {cfg.max_top_k} on this server, got {top_k}", field="top_k")
        if fetch_k is not None and fetch_k > cfg.max_fetch_k:
            raise ValidationError(f"must be <= {cfg.max_fetch_k} on this server, got {fetch_k}", field="fetch_k")

    ns_query = Query(None, min_length=1, max_length=128,
                     description="Namespace (default: the key's first namespace, else 'default').")

    # ------------------------------------------------------------------ queries
    @app.post("/v1/query", response_model=QueryResponse, tags=["query"],
              responses=_errors(401, 403, 413, 422, 504))
    async def query(req: QueryRequest, p: Principal = Depends(principal)) -> Response:
        """Hybrid (BM25 ‖ dense, fused by RRF), `bm25`, `vector` or `rerank` search: exactly the
        JSON query contract, plus `mode`, `rerank`, `reranker`, `fetch_k` and `namespace`."""
        ns = p.namespace(req.namespace)
        check_top_k(req.top_k, req.fetch_k)
        req = req.model_copy(update={"namespace": ns})
        resp: QueryResponse = await runner(memory().search, req)
        metrics.observe_legs(resp.legs)
        return Response(resp.model_dump_json(), media_type="application/json")

    @app.post("/v1/answer", response_model=_AnswerModel, tags=["query"],
              responses=_errors(401, 403, 413, 422, 501, 504))
    async def answer(body: AnswerRequest, p: Principal = Depends(principal)) -> Response:
        """A grounded answer from the retrieved chunks, citing them as `[chunk_id]`, with usage.
        Extractive (offline) unless the server has an LLM configured (`HYBRIDMEM_LLM`)."""
        ns = p.namespace(body.namespace)
        check_top_k(body.top_k)
        mem = memory()
        ask = getattr(mem, "ask", None)
        if ask is None:
            raise NotImplementedOnServer("grounded answers are not available in this hybridmem version")
        wanted = {"top_k": body.top_k, "metadata_filter": body.metadata_filter, "rerank": body.rerank,
                  "reranker": body.reranker, "namespace": ns, "query_id": body.query_id}
        params = inspect.signature(ask).parameters
        kwargs = {k: v for k, v in wanted.items() if v is not None and k in params}
        ans = await runner(ask, body.question, **kwargs)
        return Response(ans.model_dump_json(), media_type="application/json")

    # ------------------------------------------------------------------ writes
    @app.post("/v1/memories", response_model=WriteReport, tags=["memories"],
              responses=_errors(401, 403, 413, 422, 504))
    async def add_memories(body: MemoriesRequest, p: Principal = Depends(principal)) -> WriteReport:
        """Store a batch of memories, idempotent by id (same id + same content = unchanged)."""
        ns = p.namespace(body.namespace)
        if len(body.memories) > cfg.max_batch:
            raise ValidationError(f"at most {cfg.max_batch} memories per request, got {len(body.memories)}",
                                  field="memories")
        docs = [Document(text=m.text, id=m.id, metadata=m.metadata, source=m.source) for m in body.memories]
        report: IngestReport = await runner.write(memory().add_documents, docs, namespace=ns)
        return WriteReport(**report.model_dump(), namespace=ns)

    @app.get("/v1/memories/{doc_id:path}", response_model=StoredDocument, tags=["memories"],
             responses=_errors(401, 403, 404, 422, 504))
    async def get_memory(doc_id: str, namespace: str | None = ns_query,
                         p: Principal = Depends(principal)) -> StoredDocument:
        """One stored document or memory, with its chunks."""
        ns = p.namespace(namespace)
        doc = await runner(memory().get, doc_id, namespace=ns)
        return StoredDocument(**doc, namespace=ns)

    @app.put("/v1/memories/{doc_id:path}", response_model=WriteReport, tags=["memories"],
             responses=_errors(401, 403, 404, 413, 422, 504))
    async def put_memory(doc_id: str, body: MemoryUpdate, namespace: str | None = ns_query,
                         p: Principal = Depends(principal)) -> WriteReport:
        """Replace an existing memory's text (and metadata/source when given); 404 if it does not
        exist (create with POST /v1/memories)."""
        ns = p.namespace(namespace)
        report: IngestReport = await runner.write(memory().update, doc_id, body.text, metadata=body.metadata,
                                                  source=body.source, namespace=ns)
        return WriteReport(**report.model_dump(), namespace=ns)

    @app.delete("/v1/memories/{doc_id:path}", response_model=DeleteReport, tags=["memories"],
                responses=_errors(401, 403, 404, 422, 504))
    async def delete_memory(doc_id: str, namespace: str | None = ns_query,
                            p: Principal = Depends(principal)) -> DeleteReport:
        """Delete a document (by id) or a single chunk (by chunk id) from every index."""
        ns = p.namespace(namespace)
        found: list[str] = await runner.write(memory().delete, [doc_id], namespace=ns)
        if not found:
            raise NotFoundError(f"no document or chunk {doc_id!r} in namespace {ns!r}")
        return DeleteReport(deleted=found, namespace=ns)

    @app.post(UPLOAD_PATH, response_model=WriteReport, tags=["memories"],
              responses=_errors(401, 403, 413, 422, 504))
    async def upload_documents(
        files: list[UploadFile] = File(..., description="Text files: .md .txt .rst .html .json .jsonl"),
        namespace: str | None = Form(None, min_length=1, max_length=128),
        metadata: str | None = Form(None, description="A JSON object added to every document's metadata."),
        id: str | None = Form(None, min_length=1, max_length=512, description="Document id (one file only)."),
        p: Principal = Depends(principal),
    ) -> WriteReport:
        """Upload files; each becomes a document (JSON/JSONL: one per record), chunked and indexed.
        The id defaults to the file name without its suffix; binary files are skipped and listed."""
        ns = p.namespace(namespace)
        if len(files) > cfg.max_batch:
            raise ValidationError(f"at most {cfg.max_batch} files per request, got {len(files)}", field="files")
        if id is not None and len(files) != 1:
            raise ValidationError("an id needs exactly one file", field="id")
        meta: dict[str, Any] = {}
        if metadata:
            try:
                meta = json.loads(metadata)
            except (json.JSONDecodeError, RecursionError) as e:
                raise ValidationError(f"not valid JSON: {e}", field="metadata") from None
            if not isinstance(meta, dict):
                raise ValidationError("must be a JSON object", field="metadata")
        uploads = [(f.filename or f"upload-{i}.txt", await f.read()) for i, f in enumerate(files)]
        return await runner.write(_ingest_uploads, memory(), uploads, ns, meta, id)

    # ------------------------------------------------------------------ graph (GraphRAG)
    def graph_json(obj: Any) -> Response:
        return Response(obj.model_dump_json(), media_type="application/json")

    @app.post("/v1/graph/build", tags=["graph"], responses=_errors(401, 403, 413, 422, 504))
    async def graph_build(body: GraphBuildRequest, p: Principal = Depends(principal)) -> Response:
        """Extract every chunk of the namespace, detect communities, summarize them (a full rebuild)."""
        ns = p.namespace(body.namespace)
        return graph_json(await runner(memory().graph.build, ns))

    @app.post("/v1/graph/update", tags=["graph"], responses=_errors(401, 403, 413, 422, 504))
    async def graph_update(body: GraphBuildRequest, p: Principal = Depends(principal)) -> Response:
        """Incremental refresh: re-extract changed chunks, re-summarize only changed communities."""
        ns = p.namespace(body.namespace)
        return graph_json(await runner(memory().graph.update, ns))

    @app.get("/v1/graph/status", tags=["graph"], responses=_errors(401, 403, 422, 504))
    async def graph_status(namespace: str | None = ns_query, p: Principal = Depends(principal)) -> Response:
        """Entities, relations, fresh and stale communities, summary ages."""
        ns = p.namespace(namespace)
        return graph_json(await runner(memory().graph.status, ns))

    @app.post("/v1/graph/global", tags=["graph"], responses=_errors(401, 403, 404, 413, 422, 504))
    async def graph_global(body: GraphGlobalRequest, p: Principal = Depends(principal)) -> Response:
        """A corpus-wide answer from community summaries, citing community and chunk ids."""
        ns = p.namespace(body.namespace)
        return graph_json(await runner(memory().graph.ask_global, body.question, level=body.level, namespace=ns))

    # ------------------------------------------------------------------ introspection
    @app.get("/v1/stats", response_model=Stats, tags=["introspection"], responses=_errors(401, 403, 422, 504))
    async def stats(namespace: str | None = ns_query, p: Principal = Depends(principal)) -> Stats:
        """Documents, chunks, vectors and vectors still pending in the namespace; the embedder."""
        ns = p.namespace(namespace)
        s: Stats = await runner(memory().stats, ns)
        # a tenant sees its own namespaces only, and not where the server keeps its file
        hidden = {} if p.all_namespaces else {"path": ""}
        return s.model_copy(update={"namespaces": p.visible(s.namespaces), **hidden})

    @app.get("/healthz", response_model=Health, tags=["introspection"])
    async def healthz() -> Health:
        """Liveness: no key needed, no tenant data."""
        return Health(status="ok", version=__version__, auth=keys.enabled,
                      embedding_worker_error=getattr(holder["memory"], "worker_error", None))

    @app.get("/metrics", response_class=PlainTextResponse, tags=["introspection"])
    async def prometheus() -> PlainTextResponse:
        """Prometheus text: requests, errors and latency per endpoint; latency and status per leg."""
        return PlainTextResponse(metrics.render(), media_type=CONTENT_TYPE)

    return app


def _warm_up(mem: Any) -> None:
    try:
        getattr(mem, "embedder", None)
    except Exception as e:  # a broken embedder shows in the dense leg's report; log it here too
        log.warning("loading the query embedder failed: %s", e)


def _safe_name(name: str, i: int) -> str:
    base = Path(name.replace("\\", "/")).name.strip()
    base = re.sub(r"[^\w.\-]+", "_", base)[:200].lstrip(".")
    return base or f"upload-{i}.txt"


def _ingest_uploads(mem: Any, uploads: list[tuple[str, bytes]], ns: str, meta: dict[str, Any],
                    doc_id: str | None) -> WriteReport:
    """Uploaded files -> documents through the same loaders as ``hybridmem ingest``."""
    from ..text.loaders import load_path

    docs: list[Document] = []
    skipped: list[dict[str, str]] = []
    tmp = Path(tempfile.mkdtemp(prefix="hybridmem-upload-"))
    try:
        for i, (name, data) in enumerate(uploads):
            safe = _safe_name(name, i)
            path = tmp / str(i) / safe
            path.parent.mkdir()
            path.write_bytes(data)
            found, skip = load_path(path, doc_id=doc_id)
            tmp_source = path.as_posix()
            for d in found:
                if d.source == tmp_source:
                    d.source = name
                d.metadata = {**d.metadata, **meta}
            docs += found
            skipped += [{"path": name, "reason": s.reason.replace(tmp_source, name)} for s in skip]
        if not docs:
            reasons = "; ".join(s["reason"] for s in skipped) or "no text"
            raise ValidationError(f"nothing to ingest: {reasons}", field="files")
        report = mem.add_documents(docs, namespace=ns)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report.skipped += skipped
    return WriteReport(**report.model_dump(), namespace=ns)


def run_server(config: ServerConfig, memory_or_factory: MemoryOrFactory, *, log_level: str = "info") -> None:
    """Serve until interrupted. Refuses a non-loopback address when no API key is configured."""
    import uvicorn

    check_bind(config.host, config.api_keys)
    app = create_app(memory_or_factory, config)
    uvicorn.run(app, host=config.host, port=config.port, log_level=log_level,
                timeout_graceful_shutdown=max(5, int(config.request_timeout)))
