"""Building and updating a namespace's graph: extraction of the pending chunks, community
detection (whole, or only where entities changed), summaries reused while a community's fingerprint
holds, pruning after deletes. :meth:`GraphRAG.update <hybridmem.graph.rag.GraphRAG.update>` drives it."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from pydantic import BaseModel

from ..errors import LLMError, NotFoundError, ValidationError
from ..llm.base import ChatModel
from ..models import Usage
from ..store.base import Store
from .communities import Community, detect_communities, fingerprint, undirected_weights
from .extract import Extractor, RuleExtractor
from .search import cited_ids
from .store import GraphStore, StoredCommunity
from .summaries import Summary, build_input, extractive_summary, llm_summary

log = logging.getLogger(__name__)
log.addHandler(logging.NullHandler())

#: community detection defaults (stored with the graph; ``graph update`` reuses them)
DEFAULT_PARAMS: dict[str, Any] = {"max_cluster_size": 25, "max_levels": 3, "resolution": 1.0, "seed": 42}


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class GraphReport(BaseModel):
    namespace: str
    chunks_extracted: int = 0
    extractor: str = "rules"
    entities: int = 0
    relations: int = 0
    cooccurrence_edges: int = 0
    communities: int = 0
    levels: int = 0
    summaries_made: int = 0
    summaries_reused: int = 0
    #: summaries of communities that only lost members or chunks (deletes): pruned, no model call
    summaries_pruned: int = 0
    summarizer: str = "extractive"
    llm_calls: int = 0
    usage: Usage | None = None
    extract_s: float = 0.0
    detect_s: float = 0.0
    summarize_s: float = 0.0
    took_s: float = 0.0


def community_params(state: dict[str, Any] | None, rebuild: bool, **given: float | int | None) -> dict[str, Any]:
    """Community detection parameters: the defaults, then the stored graph's (unless rebuilding),
    then the ones given."""
    params = dict(DEFAULT_PARAMS)
    if state is not None and not rebuild:
        params.update(state.get("params") or {})
    params.update({k: v for k, v in given.items() if v is not None})
    if params["resolution"] <= 0:
        raise ValidationError("resolution must be > 0", field="resolution")
    return params


def update_graph(
    store: Store,
    gstore: GraphStore,
    ns: str,
    *,
    ext: Extractor,
    model: ChatModel | None,
    state: dict[str, Any] | None,
    params: dict[str, Any],
    rebuild: bool,
    batch_size: int,
    progress: Callable[[str, int, int | None], None] | None,
    t0: float,
) -> GraphReport:
    """Extract the chunks not in the graph yet, re-detect communities (locally when the parameters
    did not change), summarize the communities whose fingerprint changed (``model``: None for
    extractive summaries); ``t0`` is when the update started (the report's ``took_s``)."""
    if ns not in store.namespaces():
        raise NotFoundError(f"namespace {ns!r} is empty: add documents before building its graph")
    summarizer_name = model.name if model is not None else "extractive"
    report = GraphReport(namespace=ns, extractor=ext.name, summarizer=summarizer_name)
    usage = Usage()
    if rebuild:
        gstore.clear(ns)
    # 1. extraction of the chunks not in the graph yet
    t1 = time.perf_counter()
    report.chunks_extracted = extract_pending(
        gstore, ns, ext, 64 if isinstance(ext, RuleExtractor) else batch_size * 4, usage, progress
    )
    report.extract_s = round(time.perf_counter() - t1, 3)
    gstore.refresh_provenance(ns)
    # 2. communities
    t2 = time.perf_counter()
    data = gstore.load(ns)
    hashes = {v[0]: v[3] for v in data.entities.values()}
    previous = gstore.communities(ns)
    same_params = state is not None and all(state["params"].get(k) == params[k] for k in DEFAULT_PARAMS)
    if previous and report.chunks_extracted == 0 and same_params and not rebuild:
        # nothing new was extracted: only deletions happened (or nothing). Keep the partition,
        # drop deleted entities from it and prune their chunks from the summaries: no model call
        kept: list[StoredCommunity]
        report.summaries_pruned, kept = prune(gstore, ns, previous, hashes)
        gstore.write_communities(ns, kept, params)
        report.detect_s = round(time.perf_counter() - t2, 3)
        report.summaries_reused = len(kept) - report.summaries_pruned
        return finish(gstore, report, ns, kept, usage, t0)
    weights = undirected_weights(data.relations)
    kept = []
    if previous and not rebuild and same_params:
        kept, comms = redetect_locally(previous, data, hashes, weights, params)
    else:
        comms = detect_communities(
            weights,
            max_cluster_size=int(params["max_cluster_size"]),
            max_levels=int(params["max_levels"]),
            resolution=float(params["resolution"]),
            seed=int(params["seed"]),
        )
    report.detect_s = round(time.perf_counter() - t2, 3)
    # 3. summaries, bottom-up, reused when the fingerprint did not change
    t3 = time.perf_counter()
    stored = summaries(store, comms, kept, previous, data, hashes, model, usage, report, progress)
    report.summarize_s = round(time.perf_counter() - t3, 3)
    gstore.write_communities(ns, stored, params)
    return finish(gstore, report, ns, stored, usage, t0)


def extract_pending(
    gstore: GraphStore,
    ns: str,
    ext: Extractor,
    step: int,
    usage: Usage,
    progress: Callable[[str, int, int | None], None] | None,
) -> int:
    """Extract every chunk not in the graph yet, ``step`` at a time; returns how many."""
    total = gstore.pending_count(ns)
    done = 0
    while True:
        chunks = gstore.pending_chunks(ns, step)
        if not chunks:
            return done
        try:
            items = ext.extract(chunks)
        finally:
            if ext.usage is not None:
                usage.merge(ext.usage)
                ext.usage = Usage()
        gstore.write_extractions(ns, ext.name, items)
        done += len(chunks)
        if progress:
            progress("extract", len(chunks), total)


def summaries(
    store: Store,
    comms: list[Any],
    kept: list[StoredCommunity],
    previous: list[StoredCommunity],
    data: Any,
    hashes: dict[str, str | None],
    model: ChatModel | None,
    usage: Usage,
    report: GraphReport,
    progress: Callable[[str, int, int | None], None] | None,
) -> list[StoredCommunity]:
    """Every community with its summary, bottom-up: an unchanged fingerprint keeps its summary
    (no model call) unless an LLM summary is wanted where there was an extractive one."""
    use_llm_summary = model is not None
    old = {c.fingerprint: c for c in previous}
    done: dict[str, Summary] = {}
    stored: list[StoredCommunity] = list(kept)
    report.summaries_reused += len(kept)
    for c in sorted(comms, key=lambda c: (-c.level, c.community_id)):
        keys = [data.entities[e][0] for e in c.members]
        fp = fingerprint(keys, hashes)
        prev = old.get(fp)
        want_model = model.name if model is not None else "extractive"
        if prev is not None and (prev.summary_model == want_model or not use_llm_summary):
            s = Summary(
                c.community_id,
                prev.title,
                prev.summary,
                prev.chunk_ids,
                prev.importance,
                prev.summary_model or "extractive",
            )
            summarized_at = prev.summarized_at
            report.summaries_reused += 1
        else:
            s = summarize(store, c, data, done, model, usage)
            summarized_at = _now()
            report.summaries_made += 1
        done[c.community_id] = s
        stored.append(
            StoredCommunity(
                c.community_id,
                c.level,
                c.parent,
                sorted(keys),
                fp,
                s.title,
                s.text,
                s.chunk_ids,
                s.importance,
                s.model,
                summarized_at,
            )
        )
        if progress:
            progress("summarize", 1, len(comms))
    return stored


def redetect_locally(
    previous: list[StoredCommunity],
    data: Any,
    hashes: dict[str, str | None],
    weights: dict[tuple[int, int], float],
    params: dict[str, Any],
) -> tuple[list[StoredCommunity], list[Any]]:
    """Incremental community detection: top-level communities whose fingerprint still holds
    are kept with all their descendants (and summaries); Leiden runs again only on the entities
    of the changed ones plus entities not placed yet. New communities get fresh ids."""
    top_level = min(c.level for c in previous)
    tops = [c for c in previous if c.level == top_level]
    changed = {
        c.community_id
        for c in tops
        if any(k not in hashes for k in c.members) or fingerprint(c.members, hashes) != c.fingerprint
    }
    kids: dict[str, list[StoredCommunity]] = {}
    c: StoredCommunity | Community  # the kept communities, then the new ones
    for c in previous:
        if c.parent:
            kids.setdefault(c.parent, []).append(c)
    kept: list[StoredCommunity] = []
    stack = [c for c in tops if c.community_id not in changed]
    while stack:
        c = stack.pop()
        kept.append(c)
        stack.extend(kids.get(c.community_id, []))
    key_to_id = {v[0]: eid for eid, v in data.entities.items()}
    placed = {k for c in tops for k in c.members}
    region = {key_to_id[k] for c in tops if c.community_id in changed for k in c.members if k in key_to_id}
    region |= {eid for k, eid in key_to_id.items() if k not in placed}
    sub = {(a, b): w for (a, b), w in weights.items() if a in region and b in region}
    comms = detect_communities(
        sub,
        max_cluster_size=int(params["max_cluster_size"]),
        max_levels=int(params["max_levels"]),
        resolution=float(params["resolution"]),
        seed=int(params["seed"]),
    )
    # fresh ids after the kept ones, level by level
    nxt: dict[int, int] = {}
    for c in kept:
        lvl, _, n = c.community_id[1:].partition("-")
        if lvl.isdigit() and n.isdigit():
            nxt[int(lvl)] = max(nxt.get(int(lvl), 0), int(n) + 1)
    rename: dict[str, str] = {}
    for c in comms:
        rename[c.community_id] = f"L{c.level}-{nxt.get(c.level, 0)}"
        nxt[c.level] = nxt.get(c.level, 0) + 1
    for c in comms:
        c.community_id = rename[c.community_id]
        c.parent = rename.get(c.parent) if c.parent else None
        c.children = [rename[x] for x in c.children]
    return kept, comms


def finish(
    gstore: GraphStore, report: GraphReport, ns: str, stored: list[StoredCommunity], usage: Usage, t0: float
) -> GraphReport:
    counts = gstore.counts(ns)
    report.entities, report.relations = counts["entities"], counts["relations"]
    report.cooccurrence_edges = counts["cooccurrence_edges"]
    report.communities = len(stored)
    report.levels = len({c.level for c in stored})
    report.llm_calls = usage.calls
    report.usage = usage if usage.calls else None
    report.took_s = round(time.perf_counter() - t0, 3)
    return report


def prune(
    gstore: GraphStore, ns: str, previous: list[StoredCommunity], hashes: dict[str, str | None]
) -> tuple[int, list[StoredCommunity]]:
    """Communities after deletions only: deleted entities leave their communities (empty ones
    go), citations of deleted chunks leave the summaries; fingerprints are recomputed."""
    cited = sorted({x for c in previous for x in c.chunk_ids})
    alive = gstore.existing_chunk_ids(ns, cited)
    kept: list[StoredCommunity] = []
    pruned = 0
    gone_ids: set[str] = set()
    for c in previous:
        members = [k for k in c.members if k in hashes]
        if not members:
            gone_ids.add(c.community_id)
            continue
        fp = fingerprint(members, hashes)
        if fp != c.fingerprint:
            pruned += 1
            dead = [x for x in c.chunk_ids if x not in alive]
            lines = []
            for ln in c.summary.split("\n"):
                ids = cited_ids(ln)
                if ids and all(i in dead for i in ids):
                    continue  # a line resting only on deleted chunks goes
                for d in dead:
                    ln = ln.replace(f" [{d}]", "").replace(f"[{d}]", "")
                lines.append(ln)
            c = StoredCommunity(
                c.community_id,
                c.level,
                c.parent,
                members,
                fp,
                c.title,
                "\n".join(lines),
                [x for x in c.chunk_ids if x in alive],
                c.importance,
                c.summary_model,
                c.summarized_at,
            )
        kept.append(c)
    for c in kept:
        if c.parent in gone_ids:
            c.parent = None
    return pruned, kept


def summarize(
    store: Store, c: Any, data: Any, done: dict[str, Summary], model: ChatModel | None, usage: Usage
) -> Summary:
    rowids: set[int] = set()
    children = [done[ch] for ch in c.children if ch in done]
    if not children:
        for e in c.members:
            rowids.update(data.mentions.get(e, {}))
    # the 40 chunks build_input keeps are chosen among these; fetch text only for the best ones
    score: dict[int, int] = {}
    for e in c.members:
        for r in data.mentions.get(e, {}):
            if r in rowids:
                score[r] = score.get(r, 0) + 1
    best = sorted(score, key=lambda r: (-score[r], r))[:40]
    rows = store.fetch(best)
    texts = {r: (row.chunk_id, row.text) for r, row in rows.items()}
    inp = build_input(c.community_id, c.level, c.members, data.entities, data.mentions, data.relations, texts, children)
    if model is None:
        return extractive_summary(inp)
    try:
        return llm_summary(inp, model, usage)
    except LLMError as e:
        usage.merge(e.usage if isinstance(e.usage, Usage) else None)
        log.warning("LLM summary of %s failed (%s): extractive summary instead", c.community_id, e)
        s = extractive_summary(inp)
        return s
