"""The query routes: hybrid search (``/v1/query``) and grounded answers (``/v1/answer``)."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.responses import Response

from ..models import SCOPE_FIELDS, AnswerRequest, QueryRequest, QueryResponse
from . import common
from .routing import Caller, Deps, error_responses, json_response

try:  # the grounded-answer model lands with the LLM layer
    from ..models import Answer as _AnswerModel
except ImportError:  # pragma: no cover - depends on the LLM layer being present
    _AnswerModel = None  # type: ignore[assignment,misc]


def register(app: FastAPI, d: Deps) -> None:
    @app.post(
        "/v1/query",
        response_model=QueryResponse,
        tags=["query"],
        responses=error_responses(401, 403, 413, 422, 429, 504),
    )
    async def query(req: QueryRequest, p: Caller) -> Response:
        """Hybrid (BM25 ‖ dense, fused by RRF), `bm25`, `vector` or `rerank` search: exactly the
        JSON query contract, plus `mode`, `rerank`, `reranker`, `fetch_k` and `namespace`."""
        ns = p.namespace(req.namespace)
        d.check_top_k(req.top_k, req.fetch_k)
        req = req.model_copy(update={"namespace": ns})
        resp: QueryResponse = await d.expensive(p)(d.memory().search, req)
        d.metrics.observe_legs(resp.legs)
        d.metrics.observe_read(resp.read_from)
        return json_response(resp)

    @app.post(
        "/v1/answer",
        response_model=_AnswerModel,
        tags=["query"],
        responses=error_responses(401, 403, 413, 422, 429, 501, 504),
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
        return json_response(ans)
