"""Extracted facts as answer-level evaluation modes (``--modes facts`` and ``facts+turns``): a copy
of the dataset's index in which the answering model has extracted facts from every session of the
questions' conversations (``Memory.extract_session``: the extraction and its conflict checks, the
calls cached like the answers), searched for facts only (Mem0's way) or for facts and turns.

A fact hit stands for the turns it came from (``source_turns``) in the evidence recall, so the
retrieval columns stay comparable with the turn modes. The copy is made afresh for each run and
removed after it; a re-run costs no model call (every call is in the answers' cache)."""

from __future__ import annotations

import os
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..embed import create_embedder
from ..embed.cache import CachedEmbedder
from ..llm.base import ChatModel
from ..memory import Memory
from .datasets import Dataset
from .llm_cache import CachedChatModel, CallCache, Tally
from .modes import EvalConfig, Progress
from .runner import search_request

__all__ = ["FACT_MODES", "build_facts", "fact_request", "evidence_ranking"]

#: mode -> the kinds it searches (None: facts and turns)
FACT_MODES: dict[str, str | None] = {"facts": "fact", "facts+turns": None}
EXTRACT_BATCH = 20


def fact_request(ds: Dataset, qid: str, mode: str, top_k: int) -> dict[str, Any]:
    """The search of a fact mode: plain hybrid in the question's scope, facts only for ``facts``."""
    req = search_request(ds, qid, "hybrid", top_k)
    kind = FACT_MODES[mode]
    if kind is not None:
        own = req.get("metadata_filter")
        req["metadata_filter"] = {"$and": [own, {"kind": kind}]} if own else {"kind": kind}
    return req


def evidence_ranking(resp: Any) -> list[str]:
    """Document ids in rank order, a fact standing for its source turns (the evidence it came from)."""
    ids: list[str] = []
    for r in resp.results:
        turns = (r.metadata or {}).get("source_turns") if getattr(r, "kind", None) == "fact" else None
        ids += list(turns) if isinstance(turns, list) and turns else [r.doc_id]
    return list(dict.fromkeys(ids))


def build_facts(
    ds: Dataset,
    cfg: EvalConfig,
    index: dict[str, Any],
    model: ChatModel,
    cache: CallCache,
    progress: Progress | None = None,
) -> tuple[Memory, Path, dict[str, Any]]:
    """A copy of the index with facts extracted from every session of ``ds`` by ``model`` (through
    the cache); the memory, its folder (for the caller to remove) and what extraction did and cost."""
    src = Path(index["path"])
    dst = src.with_name(f".{src.name}-facts-{os.getpid()}")
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    tally = Tally()
    embedder = CachedEmbedder(create_embedder(cfg.embedder), Path(cfg.cache_dir) / "embeddings.db")
    llm = CachedChatModel(model, cache, tally)
    mem = Memory(dst / "memory.db", embedder=embedder, chunk_size=ds.chunk_size, auto_embed=False, llm=llm)
    users = {str(sc["user_id"]) for sc in ds.scopes.values() if sc.get("user_id")}  # the questions' conversations
    sessions = sorted(
        {
            str(meta["session_id"])
            for meta in (d.get("metadata") or {} for d in ds.docs)
            if meta.get("session_id") and (not users or str(meta.get("user_id")) in users)
        }
    )
    tick = progress("extracting facts", len(sessions)) if progress else None
    pending = dropped = 0
    events: dict[str, int] = {}
    for s in sessions:
        rep = mem.extract_session(s, extract_batch=EXTRACT_BATCH)
        pending += rep.pending
        for b in rep.batches:
            dropped += len(b.dropped)
            for f in b.facts:
                events[f.event] = events.get(f.event, 0) + 1
        if tick:
            tick(1)
    mem.wait_for_vectors()
    facts, cursor = 0, None
    while events:  # the facts current now (an update replaced one, a retraction forgot one)
        page = mem.list(cursor, 1000, metadata_filter={"kind": "fact"})
        facts += page.count
        cursor = page.next_cursor
        if cursor is None:
            break
    info = {
        "sessions": len(sessions),
        "facts_stored": facts,
        "events": events,
        "dropped": dropped,
        "batches_pending": pending,
        "extract_batch": EXTRACT_BATCH,
        "model": model.name,
        "tokens": asdict(tally),
    }
    return mem, dst, info
