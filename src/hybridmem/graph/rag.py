"""The GraphRAG layer over one store: build / incremental update, status, communities, entity
lookup, export, plot, the local ``graph`` leg and global map-reduce answers."""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, Field

from .. import config
from ..errors import LLMError, NotFoundError, ValidationError
from ..llm.base import ChatModel
from ..llm.registry import resolve_llm
from ..models import Usage
from ..store.base import Store
from ..text.tokenize import fold
from .communities import Community, detect_communities, fingerprint, to_networkx, undirected_weights
from .extract import Extractor, LLMExtractor, RuleExtractor, entity_key
from .search import (
    GlobalAnswer,
    LocalGraphIndex,
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
from .summaries import Summary, build_input, extractive_summary, llm_summary

if TYPE_CHECKING:
    import networkx as nx

_WORDS = re.compile(r"[^\W_][\w.-]*")

__all__ = ["GraphRAG", "GraphReport", "GraphStatus", "DEFAULT_PARAMS"]

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


class GraphStatus(BaseModel):
    namespace: str
    built: bool
    built_at: str | None = None
    entities: int = 0
    stale_entities: int = 0
    relations: int = 0
    cooccurrence_edges: int = 0
    chunks_extracted: int = 0
    #: chunks added or rewritten since the last update (not yet in the graph)
    chunks_pending: int = 0
    communities: int = 0
    fresh_communities: int = 0
    stale_communities: int = 0
    levels: list[int] = Field(default_factory=list)
    oldest_summary: str | None = None
    newest_summary: str | None = None
    oldest_summary_age_s: float | None = None
    summarizers: dict[str, int] = Field(default_factory=dict)
    params: dict[str, Any] = Field(default_factory=dict)


def _age(ts: str | None) -> float | None:
    if not ts:
        return None
    try:
        return round((datetime.now(timezone.utc) - datetime.fromisoformat(ts)).total_seconds(), 1)
    except ValueError:
        return None


class GraphRAG:
    """Reached as ``memory.graph``; every method takes an optional namespace (default: the memory's).

    ``namespace`` turns an optional namespace into a checked one (the memory's default when None);
    ``llm`` returns the memory's chat model (None: offline paths)."""

    def __init__(
        self, store: Store, *, namespace: Callable[[str | None], str], llm: Callable[[], ChatModel | None]
    ) -> None:
        self.store = store
        self._namespace = namespace
        self._llm = llm
        self.gstore = GraphStore(store)
        self._local: dict[str, LocalGraphIndex] = {}
        self._keys: dict[str, tuple[int, set[str]]] = {}
        self._lock = threading.Lock()

    def _ns(self, namespace: str | None) -> str:
        return self._namespace(namespace)

    # ------------------------------------------------------------------ build / update
    def build(self, namespace: str | None = None, **kwargs: Any) -> GraphReport:
        """Extract every chunk, detect communities, summarize them all (``update(rebuild=True)``)."""
        return self.update(namespace, rebuild=True, **kwargs)

    def update(
        self,
        namespace: str | None = None,
        *,
        llm: str | ChatModel | None = None,
        extractor: str | Extractor | None = None,
        summarizer: str | None = None,
        rebuild: bool = False,
        max_cluster_size: int | None = None,
        max_levels: int | None = None,
        resolution: float | None = None,
        batch_size: int = 4,
        progress: Callable[[str, int, int | None], None] | None = None,
    ) -> GraphReport:
        """Incremental refresh: extract only chunks not yet in the graph (new or rewritten; deleted
        chunks already left with their provenance), re-detect communities, and summarize only the
        communities whose fingerprint changed (others keep their summary: no LLM call).

        ``extractor``/``summarizer``: ``rules``/``extractive`` (offline), ``llm``, or ``auto`` (the
        LLM when one is configured, the default). ``llm``: a spec or ChatModel (default: the memory's).
        """
        t0 = time.perf_counter()
        ns = self._ns(namespace)
        model, ext, use_llm_summary = self._models(llm, extractor, summarizer, batch_size)
        state = self.gstore.state(ns)
        params = self._params(
            state, rebuild, max_cluster_size=max_cluster_size, max_levels=max_levels, resolution=resolution
        )
        if ns not in self.store.namespaces():
            raise NotFoundError(f"namespace {ns!r} is empty: add documents before building its graph")
        summarizer_name = model.name if use_llm_summary and model is not None else "extractive"
        report = GraphReport(namespace=ns, extractor=ext.name, summarizer=summarizer_name)
        usage = Usage()
        if rebuild:
            self.gstore.clear(ns)
        # 1. extraction of the chunks not in the graph yet
        t1 = time.perf_counter()
        report.chunks_extracted = self._extract_pending(
            ns, ext, 64 if isinstance(ext, RuleExtractor) else batch_size * 4, usage, progress
        )
        report.extract_s = round(time.perf_counter() - t1, 3)
        self.gstore.refresh_provenance(ns)
        # 2. communities
        t2 = time.perf_counter()
        data = self.gstore.load(ns)
        hashes = {v[0]: v[3] for v in data.entities.values()}
        previous = self.gstore.communities(ns)
        same_params = state is not None and all(state["params"].get(k) == params[k] for k in DEFAULT_PARAMS)
        if previous and report.chunks_extracted == 0 and same_params and not rebuild:
            # nothing new was extracted: only deletions happened (or nothing). Keep the partition,
            # drop deleted entities from it and prune their chunks from the summaries: no model call
            kept: list[StoredCommunity]
            report.summaries_pruned, kept = self._prune(ns, previous, hashes)
            self.gstore.write_communities(ns, kept, params)
            report.detect_s = round(time.perf_counter() - t2, 3)
            report.summaries_reused = len(kept) - report.summaries_pruned
            return self._finish(report, ns, kept, usage, t0)
        weights = undirected_weights(data.relations)
        kept = []
        if previous and not rebuild and same_params:
            kept, comms = self._redetect_locally(previous, data, hashes, weights, params)
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
        stored = self._summaries(
            comms, kept, previous, data, hashes, model if use_llm_summary else None, usage, report, progress
        )
        report.summarize_s = round(time.perf_counter() - t3, 3)
        self.gstore.write_communities(ns, stored, params)
        return self._finish(report, ns, stored, usage, t0)

    def _models(
        self, llm: str | ChatModel | None, extractor: str | Extractor | None, summarizer: str | None, batch_size: int
    ) -> tuple[ChatModel | None, Extractor, bool]:
        """The chat model, the extractor and whether summaries come from the model."""
        model = self._model(llm)
        ext = self._extractor(extractor, model, batch_size)
        use_llm_summary = self._pick(summarizer, "summarizer", ("extractive", "llm"), model) == "llm"
        if use_llm_summary and model is None:
            raise ValidationError("summarizer 'llm' needs an LLM (set HYBRIDMEM_LLM or pass llm=)", field="summarizer")
        return model, ext, use_llm_summary

    @staticmethod
    def _params(state: dict[str, Any] | None, rebuild: bool, **given: float | int | None) -> dict[str, Any]:
        """Community detection parameters: the defaults, then the stored graph's (unless rebuilding),
        then the ones given."""
        params = dict(DEFAULT_PARAMS)
        if state is not None and not rebuild:
            params.update(state.get("params") or {})
        params.update({k: v for k, v in given.items() if v is not None})
        if params["resolution"] <= 0:
            raise ValidationError("resolution must be > 0", field="resolution")
        return params

    def _extract_pending(
        self, ns: str, ext: Extractor, step: int, usage: Usage, progress: Callable[[str, int, int | None], None] | None
    ) -> int:
        """Extract every chunk not in the graph yet, ``step`` at a time; returns how many."""
        total = self.gstore.pending_count(ns)
        done = 0
        while True:
            chunks = self.gstore.pending_chunks(ns, step)
            if not chunks:
                return done
            try:
                items = ext.extract(chunks)
            finally:
                if ext.usage is not None:
                    usage.merge(ext.usage)
                    ext.usage = Usage()
            self.gstore.write_extractions(ns, ext.name, items)
            done += len(chunks)
            if progress:
                progress("extract", len(chunks), total)

    def _summaries(
        self,
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
                s = self._summarize(c, data, done, model, usage)
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

    def _redetect_locally(
        self,
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

    def _finish(
        self, report: GraphReport, ns: str, stored: list[StoredCommunity], usage: Usage, t0: float
    ) -> GraphReport:
        counts = self.gstore.counts(ns)
        report.entities, report.relations = counts["entities"], counts["relations"]
        report.cooccurrence_edges = counts["cooccurrence_edges"]
        report.communities = len(stored)
        report.levels = len({c.level for c in stored})
        report.llm_calls = usage.calls
        report.usage = usage if usage.calls else None
        report.took_s = round(time.perf_counter() - t0, 3)
        return report

    def _prune(
        self, ns: str, previous: list[StoredCommunity], hashes: dict[str, str | None]
    ) -> tuple[int, list[StoredCommunity]]:
        """Communities after deletions only: deleted entities leave their communities (empty ones
        go), citations of deleted chunks leave the summaries; fingerprints are recomputed."""
        cited = sorted({x for c in previous for x in c.chunk_ids})
        alive = self.gstore.existing_chunk_ids(ns, cited)
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

    def _summarize(self, c: Any, data: Any, done: dict[str, Summary], model: ChatModel | None, usage: Usage) -> Summary:
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
        rows = self.store.fetch(best)
        texts = {r: (row.chunk_id, row.text) for r, row in rows.items()}
        inp = build_input(
            c.community_id, c.level, c.members, data.entities, data.mentions, data.relations, texts, children
        )
        if model is None:
            return extractive_summary(inp)
        try:
            return llm_summary(inp, model, usage)
        except LLMError as e:
            usage.merge(e.usage if isinstance(e.usage, Usage) else None)
            log.warning("LLM summary of %s failed (%s): extractive summary instead", c.community_id, e)
            s = extractive_summary(inp)
            return s

    def _model(self, llm: str | ChatModel | None) -> ChatModel | None:
        if llm is None:
            return self._llm()

        return resolve_llm(llm)

    @staticmethod
    def _pick(choice: str | None, field: str, names: tuple[str, str], model: ChatModel | None) -> str:
        c = (choice or "auto").strip().lower()
        if c == "auto":
            return names[1] if model is not None else names[0]
        if c not in names:
            raise ValidationError(f"unknown {field} {choice!r}; use auto, {', '.join(names)}", field=field)
        return c

    def _extractor(self, extractor: str | Extractor | None, model: ChatModel | None, batch_size: int) -> Extractor:
        if extractor is not None and not isinstance(extractor, str):
            return extractor
        pick = self._pick(extractor, "extractor", ("rules", "llm"), model)
        if pick == "llm":
            if model is None:
                raise ValidationError(
                    "extractor 'llm' needs an LLM (set HYBRIDMEM_LLM or pass llm=)", field="extractor"
                )
            return LLMExtractor(model, batch_size=batch_size)
        return RuleExtractor()

    # ------------------------------------------------------------------ status / reads
    def status(self, namespace: str | None = None) -> GraphStatus:
        ns = self._ns(namespace)
        state = self.gstore.state(ns)
        if state is None:
            return GraphStatus(namespace=ns, built=False, chunks_pending=self.store.counts(ns)["chunks"])
        counts = self.gstore.counts(ns)
        comms = self.gstore.communities(ns)
        hashes = self.gstore.entity_hashes(ns)
        stale = sum(
            1
            for c in comms
            if fingerprint(c.members, hashes) != c.fingerprint or any(k not in hashes for k in c.members)
        )
        times = sorted(c.summarized_at for c in comms if c.summarized_at)
        models: dict[str, int] = {}
        for c in comms:
            models[c.summary_model or "?"] = models.get(c.summary_model or "?", 0) + 1
        return GraphStatus(
            namespace=ns,
            built=state["built_at"] is not None,
            built_at=state["built_at"],
            entities=counts["entities"],
            stale_entities=counts["stale_entities"],
            relations=counts["relations"],
            cooccurrence_edges=counts["cooccurrence_edges"],
            chunks_extracted=self.gstore.extracted_count(ns),
            chunks_pending=self.gstore.pending_count(ns),
            communities=len(comms),
            fresh_communities=len(comms) - stale,
            stale_communities=stale,
            levels=sorted({c.level for c in comms}),
            oldest_summary=times[0] if times else None,
            newest_summary=times[-1] if times else None,
            oldest_summary_age_s=_age(times[0] if times else None),
            summarizers=models,
            params=state["params"],
        )

    def stale_community_ids(self, namespace: str | None = None) -> set[str]:
        ns = self._ns(namespace)
        hashes = self.gstore.entity_hashes(ns)
        return {
            c.community_id
            for c in self.gstore.communities(ns)
            if fingerprint(c.members, hashes) != c.fingerprint or any(k not in hashes for k in c.members)
        }

    def communities(self, namespace: str | None = None, level: int | None = None) -> list[StoredCommunity]:
        return self.gstore.communities(self._ns(namespace), level)

    def show(self, name: str, namespace: str | None = None, *, limit: int = 20) -> dict[str, Any]:
        """An entity (by any variant of its name): type, provenance, relations, communities."""
        ns = self._ns(namespace)
        if not isinstance(name, str) or not name.strip():
            raise ValidationError("entity name must not be empty", field="entity")
        data = self.gstore.load(ns)
        key = entity_key(name)
        eid = next((i for i, v in data.entities.items() if v[0] == key), None)
        if eid is None:
            close = sorted(v[1] for v in data.entities.values() if key and key in v[0])[:10]
            hint = f"; did you mean: {', '.join(close)}" if close else ""
            raise NotFoundError(f"no entity {name!r} in the graph of namespace {ns!r}{hint}")
        k, ename, typ, _ph, desc = data.entities[eid]
        rows = self.store.fetch(list(data.mentions.get(eid, {})), ns)
        out_rel: list[dict[str, Any]]
        in_rel: list[dict[str, Any]]
        out_rel, in_rel = [], []
        for s, d, t, w, rdesc in data.relations:
            if s == eid:
                out_rel.append({"type": t, "target": data.entities[d][1], "weight": w, "description": rdesc})
            elif d == eid:
                in_rel.append({"type": t, "source": data.entities[s][1], "weight": w, "description": rdesc})
        out_rel.sort(key=lambda r: (r["type"] == "co_occurs", -r["weight"]))
        in_rel.sort(key=lambda r: (r["type"] == "co_occurs", -r["weight"]))
        return {
            "name": ename,
            "key": k,
            "type": typ,
            "description": desc,
            "chunks": sorted(r.chunk_id for r in rows.values()),
            "documents": sorted({r.doc_id for r in rows.values()}),
            "relations_out": out_rel[:limit],
            "relations_in": in_rel[:limit],
            "communities": [c.community_id for c in self.gstore.communities(ns) if k in c.members],
        }

    def to_networkx(self, namespace: str | None = None) -> nx.DiGraph:
        ns = self._ns(namespace)
        data = self.gstore.load(ns)
        g = to_networkx(data.entities, data.relations)
        comm: dict[str, dict[str, str]] = {}
        for c in self.gstore.communities(ns):
            for k in c.members:
                comm.setdefault(k, {})[f"community_L{c.level}"] = c.community_id
        rows = self.store.fetch([r for m in data.mentions.values() for r in m], ns)
        for eid in g.nodes:
            attrs = g.nodes[eid]
            attrs.update(comm.get(attrs["key"], {}))
            attrs["chunks"] = " ".join(sorted(rows[r].chunk_id for r in data.mentions.get(eid, {}) if r in rows))
        return g

    def export(self, fmt: str = "json", namespace: str | None = None) -> str:
        fmt = fmt.lower()
        if fmt not in ("json", "graphml"):
            raise ValidationError(f"unknown export format {fmt!r}; use graphml or json", field="format")
        import networkx as nx

        g = self.to_networkx(namespace)
        if fmt == "graphml":
            h = nx.DiGraph()
            for n, a in g.nodes(data=True):
                h.add_node(a["key"], **{k: v for k, v in a.items() if k != "key"})
            for s, d, a in g.edges(data=True):
                h.add_edge(
                    g.nodes[s]["key"],
                    g.nodes[d]["key"],
                    weight=a["weight"],
                    types=",".join(a["types"]),
                    description=a.get("description", ""),
                )
            return "\n".join(nx.generate_graphml(h))
        ns = self._ns(namespace)
        return json.dumps(
            {
                "namespace": ns,
                "entities": [
                    {
                        "key": a["key"],
                        "name": a["name"],
                        "type": a["type"],
                        "chunks": a["chunks"].split(),
                        **{k: v for k, v in a.items() if k.startswith("community_")},
                    }
                    for _, a in g.nodes(data=True)
                ],
                "relations": [
                    {
                        "source": g.nodes[s]["key"],
                        "target": g.nodes[d]["key"],
                        "types": a["types"],
                        "weight": a["weight"],
                        "description": a.get("description", ""),
                    }
                    for s, d, a in g.edges(data=True)
                ],
                "communities": [
                    {
                        "id": c.community_id,
                        "level": c.level,
                        "parent": c.parent,
                        "title": c.title,
                        "size": len(c.members),
                        "fingerprint": c.fingerprint,
                        "summary": c.summary,
                        "chunk_ids": c.chunk_ids,
                        "summary_model": c.summary_model,
                        "summarized_at": c.summarized_at,
                    }
                    for c in self.gstore.communities(ns)
                ],
            },
            ensure_ascii=False,
            indent=1,
        )

    # ------------------------------------------------------------------ write hook (staleness on add)
    def on_write(self, namespace: str, chunk_texts: list[str]) -> int:
        """Called by Memory after a committed write: existing entities that the new chunks name
        (words and 2-3-word runs matched against entity keys; no extraction, no model) are marked
        stale, so their communities show as stale until ``graph update``. Returns entities marked."""
        if not chunk_texts or self.gstore.state(namespace) is None:
            return 0
        version = self.gstore.version(namespace)[0]
        cached = self._keys.get(namespace)
        if cached is None or cached[0] != version:
            keys = set(self.gstore.entity_hashes(namespace))
            cached = self._keys[namespace] = (version, keys)
        keys = cached[1]
        hits: set[str] = set()
        for text in chunk_texts:
            words = [w.replace("_", "-").strip(".-") for w in _WORDS.findall(fold(text))]
            for n in (1, 2, 3):
                for i in range(len(words) - n + 1):
                    k = "-".join(words[i : i + n])
                    if k not in keys and n == 1 and any(c.isdigit() for c in k):
                        k = entity_key(k)  # "kb5034441" is keyed "kb-5034441", "http504" "http-504"
                    if k in keys:
                        hits.add(k)
        return self.gstore.mark_stale(namespace, sorted(hits)) if hits else 0

    # ------------------------------------------------------------------ local search (the graph leg)
    def local_index(self, namespace: str) -> LocalGraphIndex:
        version = self.gstore.version(namespace)
        idx = self._local.get(namespace)
        if idx is not None and idx.version == version:
            return idx
        with self._lock:
            idx = self._local.get(namespace)
            if idx is None or idx.version != version:
                idx = self._local[namespace] = LocalGraphIndex(self.gstore.load(namespace))
        return idx

    def search_leg(self, namespace: str, text: str, allowed: np.ndarray | None, k: int) -> list[tuple[int, float]]:
        """Ranked (chunk rowid, score) of the ``graph`` leg; empty when the namespace has no graph."""
        if self.gstore.state(namespace) is None:
            return []
        return self.local_index(namespace).search(text, allowed, k)

    # ------------------------------------------------------------------ global search
    def ask_global(
        self,
        question: str,
        *,
        level: int | None = None,
        max_communities: int = 8,
        map_batch: int = 4,
        llm: str | ChatModel | None = None,
        namespace: str | None = None,
    ) -> GlobalAnswer:
        """Map-reduce over the summaries of one community level (default: the top level, 0): the
        ``max_communities`` most relevant summaries are mapped to rated key points (``map_batch``
        summaries per call), and the best points reduced to one answer citing community and chunk ids."""
        t0 = time.perf_counter()
        if not isinstance(question, str) or not question.strip():
            raise ValidationError("question must not be empty", field="question")
        if len(question) > config.MAX_QUERY_CHARS:
            raise ValidationError(f"question longer than {config.MAX_QUERY_CHARS} characters", field="question")
        if max_communities < 1 or map_batch < 1:
            raise ValidationError("max_communities and map_batch must be at least 1", field="max_communities")
        ns = self._ns(namespace)
        comms = self.gstore.communities(ns)
        if not comms:
            raise NotFoundError(f"namespace {ns!r} has no graph communities: run `hybridmem graph build` first")
        levels = sorted({c.level for c in comms})
        lvl = levels[0] if level is None else level
        if lvl not in levels:
            raise ValidationError(f"no community level {lvl}; levels: {', '.join(map(str, levels))}", field="level")
        pool = [c for c in comms if c.level == lvl]
        chosen = [c for c, _ in rank_communities(question, pool)[:max_communities]]
        model = self._model(llm)
        usage = Usage()
        notes: list[str] = []
        known = {c.community_id for c in chosen}
        points, prompt_chars = self._map(question, chosen, map_batch, model, usage, notes)
        answer, answerer = "", "extractive"
        comm_ids: list[str] = []
        chunk_ids: list[str] = []
        all_chunks = {x for c in chosen for x in c.chunk_ids}
        if points:
            msgs = reduce_messages(question, points)
            prompt_chars += sum(len(m["content"]) for m in msgs)
            reduced = self._reduce(msgs, model, known, all_chunks, usage, notes) if model is not None else None
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
        if model is None:
            notes.append("no LLM configured: extractive map-reduce (the best summary line of each community)")
        stale_ids = self.stale_community_ids(ns) & {c.community_id for c in chosen}
        pending = self.gstore.pending_count(ns)
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

    @staticmethod
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

    @staticmethod
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

    # ------------------------------------------------------------------ picture
    def plot(
        self,
        path: str,
        namespace: str | None = None,
        *,
        top: int = 8,
        max_nodes: int = 80,
        level: int | None = None,
        entity: str | None = None,
        hops: int = 1,
        labels: int = 40,
    ) -> dict[str, Any]:
        """A PNG that stays readable at any graph size (``hybridmem.graph.plot``). By default the
        ``top`` largest communities of ``level`` (default: the top level), each by its most central
        entities, ``max_nodes`` entities in all; with ``entity``, that entity (any variant of its name)
        and its strongest neighbours within ``hops`` (1 or 2). At most ``labels`` labels, none
        overlapping another; the legend has its own panel inside the picture."""
        from . import plot as gplot

        ns = self._ns(namespace)
        comms = self.gstore.communities(ns)
        if not comms:
            raise NotFoundError(f"namespace {ns!r} has no graph communities: run `hybridmem graph build` first")
        sel = gplot.select(
            self.gstore.load(ns),
            comms,
            top=top,
            max_nodes=max_nodes,
            level=level,
            entity=entity,
            hops=hops,
            namespace=ns,
        )
        fig = gplot.figure(sel, labels=labels)
        gplot.save(fig, path)
        labelled = sum(1 for ax in fig.axes for t in ax.texts if getattr(t, "xy", None) is not None)
        return {
            "path": str(path),
            "mode": sel.mode,
            "nodes": len(sel.nodes),
            "edges": len(sel.edges),
            "labels": labelled,
            "entities": sel.total_entities,
            "communities": sel.communities,
            "entity": sel.names[sel.centre] if sel.centre is not None else None,
        }
