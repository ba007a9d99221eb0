"""The introspection routes: ``/v1/stats`` (per namespace), ``/healthz`` (liveness, no key),
``/metrics`` (Prometheus) and ``/v1/export`` (the export file, streamed; admin keys only)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import FastAPI, Query
from fastapi.responses import PlainTextResponse, StreamingResponse
from pydantic import BaseModel

from .. import __version__
from ..errors import NotFoundError
from ..models import Stats, WorkerStatus
from .auth import ForbiddenError
from .metrics import CONTENT_TYPE
from .routing import Caller, Deps, NamespaceQuery, error_responses

# ---------------------------------------------------------------------------------------------- models


class Health(BaseModel):
    #: ``degraded``: the server answers but writes are refused (``reason`` says why)
    status: Literal["ok", "degraded"]
    version: str
    auth: bool
    reason: str | None = None
    embedding_worker_error: str | None = None
    #: the embedding worker's progress: vectors/s over the last minute, queue, batch running, errors
    embedding_worker: WorkerStatus | None = None


# ---------------------------------------------------------------------------------------------- routes


def _worker_status(mem: Any) -> WorkerStatus | None:
    try:
        return mem.worker_status() if mem is not None else None
    except Exception:  # liveness must answer even when the store does not
        return None


def _export_lines(mem: Any, names: list[str], vectors: bool, graph: bool) -> Any:
    """The export file's lines (run in the server's thread pool as the client reads them)."""
    from ..transfer.dump import records, to_json

    for rec in records(mem.store, names, vectors=vectors, graph=graph, source="http"):
        yield to_json(rec) + "\n"


def _register_export(app: FastAPI, d: Deps) -> None:
    @app.get(
        "/v1/export",
        tags=["introspection"],
        response_class=StreamingResponse,
        responses={**error_responses(401, 403, 404, 422), 200: {"content": {"application/x-ndjson": {}}}},
    )
    async def export(
        p: Caller,
        namespace: Annotated[list[str] | None, Query(max_length=100, description="Namespaces (default: all).")] = None,
        vectors: bool = False,
        graph: bool = False,
    ) -> StreamingResponse:
        """The memory as an export file (docs/export-format.md), streamed as JSON Lines: for keys of
        every namespace (``*``) only, as ``hybridmem export`` writes it; ``hybridmem import`` reads it."""
        if not p.all_namespaces:
            raise ForbiddenError("exporting needs an admin key (one configured for every namespace, '*')", field=None)
        mem = d.memory()
        held = await d.runner(mem.store.namespaces)
        names = list(dict.fromkeys(namespace)) if namespace else held
        missing = [n for n in names if n not in held]
        if missing:
            raise NotFoundError(f"no namespace {', '.join(map(repr, missing))}")
        return StreamingResponse(
            _export_lines(mem, names, vectors, graph),
            media_type="application/x-ndjson",
            headers={"Content-Disposition": 'attachment; filename="hybridmem-export.jsonl"'},
        )


def register(app: FastAPI, d: Deps) -> None:
    _register_export(app, d)

    @app.get("/v1/stats", response_model=Stats, tags=["introspection"], responses=error_responses(401, 403, 422, 504))
    async def stats(p: Caller, namespace: NamespaceQuery = None) -> Stats:
        """Documents, chunks, vectors and vectors still pending in the namespace; the embedder."""
        ns = p.namespace(namespace)
        s: Stats = await d.runner(d.memory().stats, ns)
        # a tenant sees its own namespaces only, and not where the server keeps its file
        hidden = {} if p.all_namespaces else {"path": ""}
        return s.model_copy(update={"namespaces": p.visible(s.namespaces), **hidden})

    @app.get("/healthz", response_model=Health, tags=["introspection"])
    async def healthz() -> Health:
        """Liveness: no key needed, no tenant data; ``degraded`` with the reason while writes are
        refused for space (they resume by themselves once there is some)."""
        mem = d.holder["memory"]
        full = getattr(getattr(mem, "store", None), "full", None)  # None before the memory is open
        return Health(
            status="degraded" if full else "ok",
            reason=full,
            version=__version__,
            auth=d.keys.enabled,
            embedding_worker_error=getattr(d.holder["memory"], "worker_error", None),
            embedding_worker=_worker_status(d.holder["memory"]),
        )

    @app.get("/metrics", response_class=PlainTextResponse, tags=["introspection"])
    async def prometheus() -> PlainTextResponse:
        """Prometheus text: requests, errors and latency per endpoint; latency and status per leg."""
        return PlainTextResponse(d.metrics.render(), media_type=CONTENT_TYPE)
