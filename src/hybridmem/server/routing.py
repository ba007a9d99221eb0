"""What every route group of the HTTP API shares: its dependencies (:class:`Deps`), the caller
(:data:`Caller`, authenticated by the app's :class:`KeyRing`), the ``namespace`` query parameter,
the error responses a route declares and the models more than one group answers with.

A route group is a module ``routes_*.py`` whose ``register(app, deps)`` adds its routes; it is
listed once in :data:`hybridmem.server.http.ROUTE_GROUPS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Query, Request, Security
from fastapi.responses import Response
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel

from ..errors import ValidationError
from ..models import IngestReport
from .auth import KeyRing, Principal
from .common import TENANT_KEY
from .config import ServerConfig
from .jobs import GraphJobs
from .limits import Runner, StoreBusyError, TenantRunner
from .metrics import Metrics

# ---------------------------------------------------------------------------------------------- models


class ErrorDetail(BaseModel):
    type: str
    message: str
    field: str | None = None


class ErrorResponse(BaseModel):
    error: ErrorDetail


class WriteReport(IngestReport):
    namespace: str


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """A route's ``responses=``: the error statuses it may answer, documented in the OpenAPI schema."""
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
        507: "The store's disk (or size limit) is full: nothing of the write was kept (Retry-After)",
    }
    return {c: {"model": ErrorResponse, "description": text.get(c, "Error")} for c in codes}


def json_response(obj: BaseModel) -> Response:
    """The model as JSON, as is (no response-model validation)."""
    return Response(obj.model_dump_json(), media_type="application/json")


def written(report: IngestReport, ns: str) -> WriteReport:
    """A write's report, with the namespace it went to."""
    return WriteReport(**report.model_dump(), namespace=ns)


# ---------------------------------------------------------------------------------------------- dependencies

_API_KEY_HEADER = APIKeyHeader(name="X-API-Key", auto_error=False, description="An API key.")
_BEARER = HTTPBearer(auto_error=False, description="An API key as a bearer token.")


def principal(
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
Caller = Annotated[Principal, Depends(principal)]
#: the ``namespace`` query parameter
NamespaceQuery = Annotated[
    str | None,
    Query(min_length=1, max_length=128, description="Namespace (default: the key's first namespace, else 'default')."),
]


@dataclass
class Deps:
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

    def check_batch(self, n: int, what: str) -> None:
        """At most ``max_batch`` items (``what``: memories, messages, files) in one request."""
        if n > self.cfg.max_batch:
            raise ValidationError(f"at most {self.cfg.max_batch} {what} per request, got {n}", field=what)

    def check_top_k(self, top_k: int, fetch_k: int | None = None) -> None:
        cfg = self.cfg
        if top_k > cfg.max_top_k:
            raise ValidationError(f"must be <= {cfg.max_top_k} on this server, got {top_k}", field="top_k")
        if fetch_k is not None and fetch_k > cfg.max_fetch_k:
            raise ValidationError(f"must be <= {cfg.max_fetch_k} on this server, got {fetch_k}", field="fetch_k")


#: a route group's registration: adds its routes to the app
RouteGroup = Callable[[FastAPI, Deps], None]
