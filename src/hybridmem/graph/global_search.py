"""Global answers: map-reduce over the summaries of one community level, the map and reduce steps
by the chat model (or extractive without one, or when a call fails), invented citations removed."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .. import config
from ..errors import LLMError, NotFoundError, ValidationError
from ..llm.base import ChatModel
from ..models import Usage
from .reads import stale_community_ids
from .search import (
    GlobalAnswer,
    MapPoint,
    MapResult,
    ReduceResult,
    cited_ids,
    estimate_tokens,
    map_messages,
    offline_map,
    rank_communities,
    reduce_messages,
)
from .store import GraphStore, StoredCommunity


def check_question(question: str, max_communities: int, map_batch: int) -> None:
    """A global question's arguments, checked before anything is read."""
    if not isinstance(question, str) or not question.strip():
        raise ValidationError("question must not be empty", field="question")
    if len(question) > config.MAX_QUERY_CHARS:
        raise ValidationError(f"question longer than {config.MAX_QUERY_CHARS} characters", field="question")
    if max_communities < 1 or map_batch < 1:
        raise ValidationError("max_communities and map_batch must be at least 1", field="max_communities")


def ask_global(
    gstore: GraphStore,
    ns: str,
    question: str,
    *,
    level: int | None,
    max_communities: int,
    map_batch: int,
    model: Callable[[], ChatModel | None],
    t0: float,
) -> GlobalAnswer:
    """Map-reduce over the summaries of one community level (default: the top level, 0): the
    ``max_communities`` most relevant summaries are mapped to rated key points (``map_batch``
    summaries per call), and the best points reduced to one answer citing community and chunk ids."""
    comms = gstore.communities(ns)
    if not comms:
        raise NotFoundError(f"namespace {ns!r} has no graph communities: run `hybridmem graph build` first")
    levels = sorted({c.level for c in comms})
    lvl = levels[0] if level is None else level
    if lvl not in levels:
        raise ValidationError(f"no community level {lvl}; levels: {', '.join(map(str, levels))}", field="level")
    pool = [c for c in comms if c.level == lvl]
    chosen = [c for c, _ in rank_communities(question, pool)[:max_communities]]
    chat = model()
    usage = Usage()
    notes: list[str] = []
    known = {c.community_id for c in chosen}
    points, prompt_chars = _map(question, chosen, map_batch, chat, usage, notes)
    answer, answerer = "", "extractive"
    comm_ids: list[str] = []
    chunk_ids: list[str] = []
    all_chunks = {x for c in chosen for x in c.chunk_ids}
    if points:
        msgs = reduce_messages(question, points)
        prompt_chars += sum(len(m["content"]) for m in msgs)
        reduced = _reduce(msgs, chat, known, all_chunks, usage, notes) if chat is not None else None
        if reduced is not None:
            answer, answerer, comm_ids, chunk_ids = reduced
        else:
            top = points[:3]
            answer = " ".join(f"{p.answer} [{p.community_id}]" for p in top)
            comm_ids = [p.community_id for p in top]
            chunk_ids = [x for x in cited_ids(answer) if x in all_chunks]
    found = bool(points)
    if not found:
        answer = "The community summaries do not answer this question."
    if chat is None:
        notes.append("no LLM configured: extractive map-reduce (the best summary line of each community)")
    stale_ids = stale_community_ids(gstore, ns) & {c.community_id for c in chosen}
    pending = gstore.pending_count(ns)
    if stale_ids:
        notes.append(f"built on stale summaries ({', '.join(sorted(stale_ids))}): run `hybridmem graph update`")
    if pending:
        notes.append(f"{pending} chunks were added or changed since the graph was updated")
    return GlobalAnswer(
        question=question,
        answer=answer.strip(),
        found=found,
        level=lvl,
        community_ids=comm_ids,
        chunk_ids=chunk_ids,
        points=points,
        communities_used=len(chosen),
        communities_total=len(pool),
        stale=bool(stale_ids) or pending > 0,
        answerer=answerer,
        notes=notes,
        prompt_tokens=usage.prompt_tokens if usage.calls else estimate_tokens("x" * prompt_chars),
        usage=usage if usage.calls else None,
        namespace=ns,
        took_ms=round((time.perf_counter() - t0) * 1000, 3),
    )


def _map(
    question: str,
    chosen: list[StoredCommunity],
    map_batch: int,
    model: ChatModel | None,
    usage: Usage,
    notes: list[str],
) -> tuple[list[MapPoint], int]:
    """The map step: rated key points from ``map_batch`` summaries per call (extractive without
    a model, or when a call fails), the best 12 kept; and the prompt characters sent."""
    points: list[MapPoint] = []
    prompt_chars = 0
    for i in range(0, len(chosen), map_batch):
        batch = chosen[i : i + map_batch]
        msgs = map_messages(question, batch)
        prompt_chars += sum(len(m["content"]) for m in msgs)
        if model is None:
            points += offline_map(question, batch)
            continue
        try:
            comp = model.complete(msgs, schema=MapResult, purpose="graph:map")
            usage.merge(comp.usage)
            assert isinstance(comp.data, MapResult)
            points += [p for p in comp.data.points if p.community_id in {c.community_id for c in batch}]
        except LLMError as e:
            usage.merge(e.usage if isinstance(e.usage, Usage) else None)
            notes.append(f"map call failed ({e}); extractive points instead")
            points += offline_map(question, batch)
    return sorted((p for p in points if p.score > 0), key=lambda p: -p.score)[:12], prompt_chars


def _reduce(
    msgs: list[Any], model: ChatModel, known: set[str], all_chunks: set[str], usage: Usage, notes: list[str]
) -> tuple[str, str, list[str], list[str]] | None:
    """The reduce step by the model: (answer, answerer, community ids, chunk ids) with invented
    citations removed; None when the call fails (the caller answers extractively)."""
    try:
        comp = model.complete(msgs, schema=ReduceResult, purpose="graph:reduce")
    except LLMError as e:
        usage.merge(e.usage if isinstance(e.usage, Usage) else None)
        notes.append(f"reduce call failed ({e}); extractive answer instead")
        return None
    usage.merge(comp.usage)
    assert isinstance(comp.data, ReduceResult)
    answer = comp.data.answer
    cites = cited_ids(answer) + comp.data.community_ids + comp.data.chunk_ids
    comm_ids = [x for x in dict.fromkeys(cites) if x in known]
    chunk_ids = [x for x in dict.fromkeys(cites) if x in all_chunks]
    invented = [x for x in dict.fromkeys(cited_ids(answer)) if x not in known and x not in all_chunks]
    if invented:
        notes.append(f"removed citations not in the community reports: {', '.join(invented)}")
        for x in invented:
            answer = answer.replace(f"[{x}]", "")
    return answer, model.name, comm_ids, chunk_ids
