"""Reading a namespace's graph: its status and stale communities, an entity with its relations,
the graph as networkx, GraphML or JSON."""

from __future__ import annotations

import difflib
import json
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from ..errors import NotFoundError, ValidationError
from ..store.base import Store
from .communities import fingerprint, to_networkx
from .extract import entity_key
from .store import GraphStore

if TYPE_CHECKING:
    import networkx as nx


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


def status(store: Store, gstore: GraphStore, ns: str) -> GraphStatus:
    """What the namespace's graph holds, how fresh its communities are, what summarized them."""
    state = gstore.state(ns)
    if state is None:
        return GraphStatus(namespace=ns, built=False, chunks_pending=store.counts(ns)["chunks"])
    counts = gstore.counts(ns)
    comms = gstore.communities(ns)
    hashes = gstore.entity_hashes(ns)
    stale = sum(
        1 for c in comms if fingerprint(c.members, hashes) != c.fingerprint or any(k not in hashes for k in c.members)
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
        chunks_extracted=gstore.extracted_count(ns),
        chunks_pending=gstore.pending_count(ns),
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


def stale_community_ids(gstore: GraphStore, ns: str) -> set[str]:
    """The communities whose members changed (or left) since they were summarized."""
    hashes = gstore.entity_hashes(ns)
    return {
        c.community_id
        for c in gstore.communities(ns)
        if fingerprint(c.members, hashes) != c.fingerprint or any(k not in hashes for k in c.members)
    }


def show(store: Store, gstore: GraphStore, ns: str, name: str, limit: int) -> dict[str, Any]:
    """An entity (by any variant of its name): type, provenance, relations, communities."""
    if not isinstance(name, str) or not name.strip():
        raise ValidationError("entity name must not be empty", field="entity")
    data = gstore.load_for_reads(ns)
    key = entity_key(name)
    eid = next((i for i, v in data.entities.items() if v[0] == key), None)
    if eid is None:
        close = [m["name"] for m in _matches(data, key, 10)]
        hint = f"; did you mean: {', '.join(close)}" if close else ""
        raise NotFoundError(f"no entity {name!r} in the graph of namespace {ns!r}{hint}")
    k, ename, typ, _ph, desc = data.entities[eid]
    rows = store.fetch(list(data.mentions.get(eid, {})), ns)
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
        "communities": [c.community_id for c in gstore.communities(ns) if k in c.members],
    }


#: names compared for near spellings, at most (difflib is about 10 µs a name)
NEAR_CANDIDATES = 20_000


def find(gstore: GraphStore, ns: str, text: str, limit: int) -> dict[str, Any]:
    """Entities whose name matches ``text`` (any variant: case, accents, spacing), best first: the
    name itself, names starting with it, names with a word starting with it, names holding it,
    then near spellings; ties by mentions. What the explorer's entity box suggests."""
    if not isinstance(text, str) or not text.strip():
        raise ValidationError("the entity text to look for must not be empty", field="q")
    data = gstore.load_for_reads(ns)
    return {"namespace": ns, "total_entities": len(data.entities), "entities": _matches(data, entity_key(text), limit)}


def _matches(data: Any, key: str, limit: int) -> list[dict[str, Any]]:
    if not key:
        return []
    mentions = {eid: sum(m.values()) for eid, m in data.mentions.items()}
    ranked: list[tuple[int, int, str, int]] = []
    for eid, v in data.entities.items():
        k = v[0]
        if k == key:
            tier = 0
        elif k.startswith(key):
            tier = 1
        elif any(w.startswith(key) for w in k.split()):
            tier = 2
        elif key in k:
            tier = 3
        else:
            continue
        ranked.append((tier, -mentions.get(eid, 0), k, eid))
    ranked.sort()
    ids = [r[3] for r in ranked[:limit]]
    if len(ids) < limit:  # near spellings: a typo still finds the entity
        # among names of about its length, at most NEAR_CANDIDATES of them: a bounded cost on any graph
        by_key = {v[0]: eid for eid, v in data.entities.items() if abs(len(v[0]) - len(key)) <= 3}
        pool = list(by_key)[:NEAR_CANDIDATES]
        near = difflib.get_close_matches(key, pool, n=limit - len(ids), cutoff=0.8)
        ids += [by_key[k] for k in near if by_key[k] not in ids]
    return [
        {
            "name": data.entities[i][1],
            "key": data.entities[i][0],
            "type": data.entities[i][2],
            "mentions": mentions.get(i, 0),
        }
        for i in ids
    ]


def to_digraph(store: Store, gstore: GraphStore, ns: str) -> nx.DiGraph:
    """The graph as a networkx DiGraph: entities with their communities and chunks, relations."""
    data = gstore.load_for_reads(ns)
    g = to_networkx(data.entities, data.relations)
    comm: dict[str, dict[str, str]] = {}
    for c in gstore.communities(ns):
        for k in c.members:
            comm.setdefault(k, {})[f"community_L{c.level}"] = c.community_id
    rows = store.fetch([r for m in data.mentions.values() for r in m], ns)
    for eid in g.nodes:
        attrs = g.nodes[eid]
        attrs.update(comm.get(attrs["key"], {}))
        attrs["chunks"] = " ".join(sorted(rows[r].chunk_id for r in data.mentions.get(eid, {}) if r in rows))
    return g


def export_format(fmt: str) -> str:
    """The export format, checked: "json" or "graphml"."""
    fmt = fmt.lower()
    if fmt not in ("json", "graphml"):
        raise ValidationError(f"unknown export format {fmt!r}; use graphml or json", field="format")
    return fmt


def export(store: Store, gstore: GraphStore, ns: str, fmt: str) -> str:
    """The graph as GraphML, or as JSON with its communities (``fmt`` checked by :func:`export_format`)."""
    import networkx as nx

    g = to_digraph(store, gstore, ns)
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
                for c in gstore.communities(ns)
            ],
        },
        ensure_ascii=False,
        indent=1,
    )
