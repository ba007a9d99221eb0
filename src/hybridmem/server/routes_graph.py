"""The graph routes (``/v1/graph/...``): builds and updates as background jobs, their state, the
graph's status, corpus-wide answers from community summaries."""

from __future__ import annotations

import asyncio
import functools
from typing import Annotated, Any, Literal

from fastapi import FastAPI, Query
from fastapi import Path as FastAPIPath
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field

from ..errors import NotFoundError
from ..models import Namespace, Question, RequestModel
from .auth import Principal
from .jobs import GraphJob
from .routing import Caller, Deps, NamespaceQuery, error_responses, json_response

# ---------------------------------------------------------------------------------------------- models


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


# ---------------------------------------------------------------------------------------------- routes


async def _graph_job(d: Deps, p: Principal, body: GraphBuildRequest | None, kind: str) -> Response:
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
        return json_response(job.future.result())
    return _job_response(job, 202)


def _job_response(job: GraphJob, status: int = 200) -> Response:
    view = GraphJobView(**job.view())
    headers = {"Location": f"/v1/graph/jobs/{job.id}"} if status == 202 else None
    return Response(view.model_dump_json(), status_code=status, media_type="application/json", headers=headers)


def register(app: FastAPI, d: Deps) -> None:
    accepted: dict[int | str, dict[str, Any]] = {
        202: {"model": GraphJobView, "description": "Still running: poll GET /v1/graph/jobs/{job_id}"}
    }

    @app.post(
        "/v1/graph/build", tags=["graph"], responses={**accepted, **error_responses(401, 403, 413, 422, 429, 504)}
    )
    async def graph_build(p: Caller, body: GraphBuildRequest | None = None) -> Response:
        """Extract every chunk of the namespace, detect communities, summarize them (a full rebuild),
        as a background job (one per namespace; a build asked while one runs joins it). The body may
        be left out (the key's default namespace)."""
        return await _graph_job(d, p, body, "build")

    @app.post(
        "/v1/graph/update", tags=["graph"], responses={**accepted, **error_responses(401, 403, 413, 422, 429, 504)}
    )
    async def graph_update(p: Caller, body: GraphBuildRequest | None = None) -> Response:
        """Incremental refresh: re-extract changed chunks, re-summarize only changed communities (a
        background job, as a build). The body may be left out (the key's default namespace)."""
        return await _graph_job(d, p, body, "update")

    @app.get(
        "/v1/graph/jobs/{job_id}", tags=["graph"], response_model=GraphJobView, responses=error_responses(401, 404, 422)
    )
    async def graph_job(job_id: Annotated[str, FastAPIPath(min_length=1, max_length=64)], p: Caller) -> Response:
        """A graph job's state, and its report once done (404: no such job, or not this key's)."""
        job = d.jobs.get(job_id)
        if job is None or not p.allows(job.namespace):
            raise NotFoundError(f"no graph job {job_id!r}")
        return _job_response(job)

    _register_reads(app, d)


def _register_reads(app: FastAPI, d: Deps) -> None:
    """The graph's reads: status, communities, entities, the corpus-wide answer."""

    @app.get("/v1/graph/status", tags=["graph"], responses=error_responses(401, 403, 422, 504))
    async def graph_status(p: Caller, namespace: NamespaceQuery = None) -> Response:
        """Entities, relations, fresh and stale communities, summary ages."""
        ns = p.namespace(namespace)
        return json_response(await d.runner(d.memory().graph.status, ns))

    @app.get("/v1/graph/communities", tags=["graph"], responses=error_responses(401, 403, 422, 504))
    async def graph_communities(
        p: Caller,
        namespace: NamespaceQuery = None,
        level: Annotated[int | None, Query(ge=0, le=16, description="Only this level (0 = top).")] = None,
        limit: Annotated[int, Query(ge=1, le=500, description="Communities returned (most important first).")] = 50,
    ) -> Response:
        """Communities with title, level, size, summary and whether it is stale (the explorer's graph view)."""
        ns = p.namespace(namespace)
        return JSONResponse(await d.runner(functools.partial(_communities, d.memory().graph, ns, level, limit)))

    @app.get("/v1/graph/entities", tags=["graph"], responses=error_responses(401, 403, 422, 504))
    async def graph_find(
        p: Caller,
        q: Annotated[str, Query(min_length=1, max_length=512, description="Part of an entity's name.")],
        namespace: NamespaceQuery = None,
        limit: Annotated[int, Query(ge=1, le=100, description="Entities at most.")] = 20,
    ) -> Response:
        """Entities whose name matches ``q`` (any variant; the name, names starting with it, a word
        starting with it, holding it, then near spellings), best first, ties by mentions."""
        ns = p.namespace(namespace)
        return JSONResponse(await d.runner(functools.partial(d.memory().graph.find, q, ns, limit=limit)))

    @app.get("/v1/graph/entities/{name:path}", tags=["graph"], responses=error_responses(401, 403, 404, 422, 504))
    async def graph_entity(
        name: Annotated[str, FastAPIPath(min_length=1, max_length=512)],
        p: Caller,
        namespace: NamespaceQuery = None,
        limit: Annotated[int, Query(ge=1, le=200, description="Relations each way, and chunks, at most.")] = 100,
    ) -> Response:
        """An entity by any variant of its name: type, provenance, communities, and its relations
        each way (its neighbourhood, at most ``limit`` each way); 404 names close names."""
        ns = p.namespace(namespace)
        info = await d.runner(functools.partial(d.memory().graph.show, name, ns, limit=limit))
        info["relations_out"] = info["relations_out"][:limit]
        info["relations_in"] = info["relations_in"][:limit]
        for part in ("documents", "chunks"):  # a hub is in hundreds of documents: the first, and how many
            info[f"{part}_total"] = len(info[part])
            info[part] = info[part][:limit]
        return JSONResponse(info)

    @app.post("/v1/graph/global", tags=["graph"], responses=error_responses(401, 403, 404, 413, 422, 429, 504))
    async def graph_global(body: GraphGlobalRequest, p: Caller) -> Response:
        """A corpus-wide answer from community summaries, citing community and chunk ids."""
        ns = p.namespace(body.namespace)
        run = d.expensive(p)
        return json_response(await run(d.memory().graph.ask_global, body.question, level=body.level, namespace=ns))


def _communities(graph: Any, ns: str, level: int | None, limit: int) -> dict[str, Any]:
    comms = graph.communities(ns, level=level)
    stale = graph.stale_community_ids(ns)
    page = sorted(comms, key=lambda c: (c.level, -c.importance, c.community_id))[:limit]
    return {
        "namespace": ns,
        "total": len(comms),
        "communities": [
            {
                "community_id": c.community_id,
                "level": c.level,
                "parent": c.parent,
                "size": len(c.members),
                "members": c.members[:50],
                "title": c.title,
                "summary": c.summary,
                "stale": c.community_id in stale,
                "summarized_at": c.summarized_at,
            }
            for c in page
        ],
    }
