"""Rerankers: listwise LLM reranking (RankGPT-style: ids not positions, a sliding window from the
bottom up, the model's list repaired) and the offline identifier reranker."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, field_validator

from .errors import LLMError
from .llm.base import ChatModel, Message
from .models import QueryResult, Usage
from .text.tokenize import fold, identifier_tokens, tokenize

__all__ = [
    "Reranker",
    "RerankOutcome",
    "IdentifierReranker",
    "LLMReranker",
    "RankedIds",
    "repair_ids",
    "windows",
    "WINDOW",
    "STEP",
]

log = logging.getLogger(__name__)
log.addHandler(logging.NullHandler())

#: candidates one LLM call sees, and the step of the sliding window above that
WINDOW = 20
STEP = 10
#: characters of each candidate shown to the model (20 × 600 ≈ 3–4k tokens: fits small local models)
MAX_CHARS = 600


@dataclass
class RerankOutcome:
    #: positions into the candidate list, best first (a permutation of range(len(candidates)))
    order: list[int]
    #: False when the reranker failed and the fused order was kept
    reranked: bool
    reranker: str
    note: str | None = None
    usage: Usage | None = None


@runtime_checkable
class Reranker(Protocol):
    name: str

    def rerank(self, query: str, candidates: Sequence[QueryResult]) -> RerankOutcome: ...


# ---------------------------------------------------------------------------------- pure parts
def repair_ids(answer: Sequence[Any], docs: Sequence[str], candidates: Sequence[int]) -> list[int]:
    """The model's id list turned into a permutation of ``candidates`` (positions into ``docs``).

    Ids not among the candidates are ignored, repeats removed, and candidates the model forgot are
    appended in their given (fused) order; an empty list therefore keeps the given order.
    ``repair_ids(['c', 'zzz', 'c', 'a'], ['a', 'b', 'c'], [0, 1, 2]) == [2, 0, 1]``.
    """
    pos: dict[str, int] = {}
    p: int | None  # a candidate, then the candidate an answer id names (if any)
    for p in candidates:
        pos.setdefault(str(docs[p]), p)
    out: dict[int, None] = {}
    for raw in answer:
        key = str(raw).strip()
        if key not in pos and len(key) > 2 and key[0] == "[" and key[-1] == "]":
            key = key[1:-1].strip()  # the model echoed the brackets of the prompt
        p = pos.get(key)
        if p is not None:
            out.setdefault(p, None)
    for p in candidates:
        out.setdefault(p, None)
    return list(out)


def windows(n: int, size: int = WINDOW, step: int = STEP) -> list[tuple[int, int]]:
    """``[start, end)`` windows from the bottom of an ``n``-list up, the last one starting at 0, so a
    good candidate deep in the list can climb ``size - step`` places per window all the way up."""
    if n <= 0:
        return []
    out = []
    end = n
    while True:
        start = max(0, end - size)
        out.append((start, end))
        if start == 0:
            return out
        end -= step


def _snippet(text: str, max_chars: int) -> str:
    flat = " ".join(text.split())
    if len(flat) <= max_chars:
        return flat
    cut = flat[:max_chars]
    space = cut.rfind(" ")
    return (cut[:space] if space > max_chars * 0.7 else cut) + " …"


_WORDISH = re.compile(r"[^\s,;!?«»()\[\]{}\"']+")


def cited_identifiers(query: str) -> list[str]:
    """The identifiers of a question as the user wrote them (``HEL-4040``, ``max_connections``)."""
    wanted = set(identifier_tokens(query))
    out: dict[str, None] = {}
    for m in _WORDISH.finditer(query):
        word = m.group().rstrip(".:")
        if fold(word) in wanted:
            out.setdefault(word, None)
    return list(out)


# ---------------------------------------------------------------------------------- offline
class IdentifierReranker:
    """Candidates holding more of the exact identifiers the question cites (error codes, parameter
    names, versions, ``HTTP 504``) move ahead; fused order otherwise. No model, no network."""

    name = "identifier"

    def rerank(self, query: str, candidates: Sequence[QueryResult]) -> RerankOutcome:
        n = len(candidates)
        idents = set(identifier_tokens(query))
        if not idents:
            return RerankOutcome(list(range(n)), True, self.name, "the question cites no exact identifier: fused order")
        hits = [len(idents.intersection(tokenize(c.text, None))) for c in candidates]
        order = sorted(range(n), key=lambda i: (-hits[i], i))  # stable: fused order among equals
        note = None if any(hits) else "no candidate contains the identifier(s) the question cites: fused order"
        return RerankOutcome(order, True, self.name, note)


# ---------------------------------------------------------------------------------- LLM
class RankedIds(BaseModel):
    """What the model returns: candidate ids, most relevant first."""

    ids: list[str]

    @field_validator("ids", mode="before")
    @classmethod
    def _scalars_as_text(cls, v: Any) -> Any:
        # numeric chunk ids come back as JSON numbers from some models
        if isinstance(v, list):
            return [str(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else x for x in v]
        return v


_SYSTEM = "You rank search results by how well they answer a question. You reply with a JSON object only."


def rerank_messages(query: str, candidates: Sequence[QueryResult], max_chars: int = MAX_CHARS) -> list[Message]:
    idents = cited_identifiers(query)
    rule = (
        "A passage that contains the exact identifier cited in the question (error code, parameter name, "
        "version, status code) goes first" + (f"; this question cites: {', '.join(idents)}." if idents else ".")
    )
    passages = "\n".join(f"[{c.chunk_id}] {_snippet(c.text, max_chars)}" for c in candidates)
    user = (
        f"Question: {query}\n\n"
        f"{len(candidates)} passages, each introduced by its id in square brackets:\n\n{passages}\n\n"
        "Rank the passages from most to least useful to answer the question.\n"
        f"- {rule}\n"
        "- Use the ids exactly as written between the brackets; do not number the passages.\n"
        'Reply with JSON: {"ids": ["<id>", ...]}, most relevant first.'
    )
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}]


class LLMReranker:
    """Listwise reranking by a chat model. Any failure (after the model's own retries and one
    repair attempt) keeps the fused order, with ``reranked: False`` and the reason."""

    def __init__(self, llm: ChatModel, *, window: int = WINDOW, step: int = STEP, max_chars: int = MAX_CHARS) -> None:
        if not (1 <= step < window):
            raise ValueError(f"need 1 <= step < window, got step={step} window={window}")
        self.llm = llm
        self.name = f"llm:{llm.name}"
        self.window, self.step, self.max_chars = window, step, max_chars

    def rerank(self, query: str, candidates: Sequence[QueryResult]) -> RerankOutcome:
        n = len(candidates)
        usage = Usage()
        if n < 2:
            return RerankOutcome(list(range(n)), True, self.name, "fewer than two candidates: nothing to rerank")
        docs = [c.chunk_id for c in candidates]
        order = list(range(n))
        try:
            for start, end in windows(n, self.window, self.step):
                part = order[start:end]
                out = self.llm.complete(
                    rerank_messages(query, [candidates[i] for i in part], self.max_chars),
                    schema=RankedIds,
                    purpose="rerank",
                )
                usage.merge(out.usage)
                assert isinstance(out.data, RankedIds)
                order[start:end] = repair_ids(out.data.ids, docs, part)
        except LLMError as e:
            usage.merge(e.usage if isinstance(e.usage, Usage) else None)
            return RerankOutcome(list(range(n)), False, self.name, f"LLM rerank failed, fused order kept: {e}", usage)
        except Exception as e:  # a reranker must never sink the query
            log.exception("%s: unexpected rerank failure", self.name)
            return RerankOutcome(
                list(range(n)), False, self.name, f"LLM rerank failed, fused order kept: {type(e).__name__}: {e}", usage
            )
        return RerankOutcome(order, True, self.name, None, usage)
