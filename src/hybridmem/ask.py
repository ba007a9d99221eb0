"""The ask pipeline: which LLM and reranker run, reranked retrieval, and the grounded answer.

``mode: "rerank"`` searches and ``Memory.ask`` both come through here: fused candidates from the
searcher, reordered by the chosen reranker (any failure keeps the fused order), cut to ``top_k``;
``ask`` then answers from those chunks only (an LLM when one is configured, else extractively).
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Protocol

from .answer import extractive_answer, llm_answer
from .errors import HybridMemError, LLMError, ValidationError
from .llm.base import ChatModel
from .llm.registry import LLM_ENV, resolve_llm
from .models import Answer, Citation, QueryRequest, QueryResponse, Usage
from .rerank import IdentifierReranker, LLMReranker, Reranker, RerankOutcome

__all__ = ["AskPipeline", "LLMChoice", "RERANKER_ENV", "RERANKERS", "ask_request", "check_reranker"]

log = logging.getLogger(__name__)

#: the reranker of ``mode: "rerank"`` when neither the request nor ``Memory(reranker=)`` names one
RERANKER_ENV = "HYBRIDMEM_RERANKER"
RERANKERS = ("auto", "llm", "identifier")
_NO_LLM = f"no LLM configured (set {LLM_ENV}, or pass llm= / --llm)"
_SWITCHED_OFF = 'no LLM (switched off with llm="none")'


def check_reranker(choice: str | Reranker | None) -> str | Reranker:
    """A reranker choice, validated; None reads ``HYBRIDMEM_RERANKER`` (default ``auto``)."""
    if choice is None:
        choice = os.environ.get(RERANKER_ENV) or "auto"
    if isinstance(choice, str):
        c = choice.strip().lower()
        if c not in RERANKERS:
            raise ValidationError(f"unknown reranker {choice!r}; use {', '.join(RERANKERS)}", field="reranker")
        return c
    if isinstance(choice, Reranker):
        return choice
    raise ValidationError(
        f"a reranker is one of {', '.join(RERANKERS)} or a Reranker, got {choice!r}", field="reranker"
    )


def ask_request(
    question: str,
    top_k: int,
    metadata_filter: dict[str, Any] | None,
    rerank: bool,
    namespace: str | None,
    query_id: str | None,
    reranker: str | None,
) -> dict[str, Any]:
    """The query fields of ``Memory.ask(question, ...)``: a reranked search (hybrid without ``rerank``)."""
    data: dict[str, Any] = {
        "search_text": question,
        "top_k": top_k,
        "metadata_filter": metadata_filter or {},
        "mode": "rerank" if rerank else "hybrid",
        "namespace": namespace,
    }
    if query_id is not None:
        data["query_id"] = query_id
    if reranker is not None:
        data["reranker"] = reranker
    return data


class LLMChoice:
    """The memory's chat model: given explicitly (built now, so a missing key fails at once), or
    read from ``HYBRIDMEM_LLM`` on first use, where an unusable one only becomes a note (it must
    not break ingest or search). Never a default paid API."""

    def __init__(self, llm: str | ChatModel | None) -> None:
        self._model: ChatModel | None = resolve_llm(llm) if llm is not None else None
        self._ready = llm is not None
        self.note: str | None = _SWITCHED_OFF if self._ready and self._model is None else None

    @property
    def model(self) -> ChatModel | None:
        """The configured chat model; None when there is none (offline paths)."""
        if not self._ready:
            try:
                self._model = resolve_llm(None)
            except HybridMemError as e:
                self.note = f"{LLM_ENV} is set but unusable ({e})"
                log.warning("%s", self.note)
            self._ready = True
        return self._model

    def set(self, model: ChatModel | None) -> None:
        """Use ``model`` from now on (None: no LLM)."""
        self._model, self._ready = model, True

    def pick(self, llm: str | ChatModel | None) -> tuple[ChatModel | None, str]:
        """The model for one call (``llm`` overrides the memory's) and, when there is none, why."""
        if llm is None:
            model = self.model
            return model, self.note or _NO_LLM
        return resolve_llm(llm), _SWITCHED_OFF


class SearchFn(Protocol):
    def __call__(
        self, req: QueryRequest, namespace: str, *, fetch_k: int | None = None, keep: int | None = None
    ) -> QueryResponse: ...


class AskPipeline:
    """Reranked retrieval and grounded answers over one searcher."""

    def __init__(self, search: SearchFn, llms: LLMChoice, reranker: str | Reranker) -> None:
        self._search = search
        self.llms = llms
        self.reranker = reranker

    def search(self, req: QueryRequest, ns: str) -> QueryResponse:
        """A query of the contract; reranked when the request asks for it."""
        if not req.wants_rerank:
            return self._search(req, ns)
        llm, why = self.llms.pick(None)
        return self.reranked_search(req, ns, llm, why)

    def _pick_reranker(self, choice: str | None, llm: ChatModel | None, why_no_llm: str) -> tuple[Reranker, str | None]:
        pick = choice if choice is not None else self.reranker
        if not isinstance(pick, str):
            return pick, None
        if pick == "identifier":
            return IdentifierReranker(), None
        if llm is not None:
            return LLMReranker(llm), None
        asked = " instead of the LLM reranker asked for" if pick == "llm" else ""
        return IdentifierReranker(), f"{why_no_llm}: offline identifier reranker used{asked}"

    def reranked_search(
        self, req: QueryRequest, ns: str, llm: ChatModel | None, why_no_llm: str, *, note_no_llm: bool = True
    ) -> QueryResponse:
        """Fused candidates (``effective_fetch_k(rerank=True)`` of them), reordered, cut to top_k.
        ``rrf_score`` stays the fused score; any reranker failure keeps the fused order."""
        t0 = time.perf_counter()
        depth = req.effective_fetch_k(rerank=True)
        resp = self._search(req, ns, fetch_k=depth, keep=depth)
        reranker, note = self._pick_reranker(req.reranker, llm, why_no_llm)
        n = len(resp.results)
        try:
            outcome = reranker.rerank(req.search_text, resp.results)
            if sorted(outcome.order) != list(range(n)):
                raise ValueError(f"the reranker returned {outcome.order!r}, not a permutation of {n} candidates")
        except Exception as e:  # a custom reranker must not sink the query either
            log.warning("reranker %s failed: %s", getattr(reranker, "name", reranker), e)
            outcome = RerankOutcome(
                list(range(n)),
                False,
                getattr(reranker, "name", type(reranker).__name__),
                f"rerank failed, fused order kept: {type(e).__name__}: {e}",
            )
        resp.results = [resp.results[i] for i in outcome.order][: req.top_k]
        resp.total_retrieved = len(resp.results)
        resp.reranked, resp.reranker = outcome.reranked, outcome.reranker
        notes = [x for x in (note if note_no_llm else None, outcome.note) if x]
        resp.rerank_note = "; ".join(notes) or None
        resp.usage = outcome.usage if outcome.usage is not None and outcome.usage.calls else None
        resp.took_ms = round((time.perf_counter() - t0) * 1000, 3)
        return resp

    def ask(self, req: QueryRequest, ns: str, llm: str | ChatModel | None = None) -> Answer:
        """Answer ``req.search_text`` from the memory: retrieve (reranked when ``req.mode`` is
        ``rerank``), then answer only from those chunks, citing ``[chunk_id]``s (see ``Memory.ask``)."""
        t0 = time.perf_counter()
        model, why_no_llm = self.llms.pick(llm)
        question = req.search_text
        notes: list[str] = []
        if req.mode == "rerank":
            resp = self.reranked_search(req, ns, model, why_no_llm, note_no_llm=False)
        else:
            resp = self._search(req, ns)
        if model is None:
            offline = "identifier reranker, extractive answer" if resp.reranker == "identifier" else "extractive answer"
            notes.append(f"{why_no_llm}: offline paths ({offline})")
        if resp.rerank_note:
            notes.append(f"rerank: {resp.rerank_note}")
        usage = Usage().merge(resp.usage)
        if model is None:
            draft = extractive_answer(question, resp.results)
        else:
            try:
                draft = llm_answer(question, resp.results, model)
            except LLMError as e:
                usage.merge(e.usage if isinstance(e.usage, Usage) else None)
                draft = extractive_answer(question, resp.results)
                notes.append(f"the LLM answer failed ({e}); extractive answer instead")
        usage.merge(draft.usage)
        notes += draft.notes
        by_id = {r.chunk_id: r for r in resp.results}
        return Answer(
            query_id=req.query_id,
            question=question,
            answer=draft.answer,
            found=draft.found,
            citations=[Citation(chunk_id=c, doc_id=by_id[c].doc_id, source=by_id[c].source) for c in draft.cited],
            invented_citations=draft.invented,
            answerer=draft.answerer,
            reranked=resp.reranked,
            reranker=resp.reranker,
            notes=notes,
            usage=usage if usage.calls else None,
            results=resp.results,
            namespace=ns,
            took_ms=round((time.perf_counter() - t0) * 1000, 3),
        )
