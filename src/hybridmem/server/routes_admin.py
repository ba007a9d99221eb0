"""The introspection routes: ``/v1/stats`` (per namespace), ``/healthz`` (liveness, no key) and
``/metrics`` (Prometheus)."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import FastAPI
from fastapi.responses import PlainTextResponse
from pydantic import BaseModel

from .. import __version__
from ..models import Stats, WorkerStatus
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


def register(app: FastAPI, d: Deps) -> None:
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
