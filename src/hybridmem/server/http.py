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
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from .. import __version__
from ..errors import HybridMemError, StoreError, ValidationError
from ..models import AnswerRequest
from . import (
    common,
    routes_admin,
    routes_agent,
    routes_documents,
    routes_graph,
    routes_memories,
    routes_query,
    routes_ui,
)
from .auth import HostPolicy, KeyRing, bare_host, check_bind
from .common import LoopbackGuard, NotImplementedOnServer, RequestLog, log_failure, with_request_id
from .config import ServerConfig
from .jobs import GraphJobs
from .limits import ERROR_KEY, BodySizeLimit, Runner, StartTracker, StoreBusyError, error_body
from .metrics import Metrics, MetricsMiddleware
from .routes_documents import UPLOAD_PATH
from .routing import Deps, RouteGroup

__all__ = ["AnswerRequest", "NotImplementedOnServer", "ROUTE_GROUPS", "create_app", "error_body", "run_server"]

log = logging.getLogger(__name__)
log.addHandler(logging.NullHandler())

#: the route groups, registered in this order (a module ``routes_*.py`` each; a new group is one
#: module and one line here). The agent routes come before the memory routes: GET
#: /v1/memories/{id}/history must match before GET /v1/memories/{id:path}.
ROUTE_GROUPS: tuple[RouteGroup, ...] = (
    routes_query.register,
    routes_agent.register,
    routes_memories.register,
    routes_documents.register,
    routes_graph.register,
    routes_admin.register,
    routes_ui.register,
)


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
    deps = Deps(cfg, keys, runner, metrics, holder, jobs)
    app = _new_app(deps, _lifespan(deps, memory_or_factory if owned else None))
    for register in ROUTE_GROUPS:
        register(app, deps)
    return app


def _lifespan(d: Deps, factory: Callable[[], Any] | None) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
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


def _new_app(d: Deps, lifespan: Callable[[FastAPI], AbstractAsyncContextManager[None]]) -> FastAPI:
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
