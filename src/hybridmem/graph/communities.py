"""Hierarchical Leiden communities (graspologic-native) on the weighted undirected projection of
the entity graph, and community fingerprints (what decides whether a summary must be redone)."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from ..errors import ValidationError

__all__ = ["Community", "detect_communities", "fingerprint", "to_networkx", "undirected_weights"]


@dataclass
class Community:
    community_id: str  # "L{level}-{n}", n numbered by size within its level
    level: int
    members: list[int]  # entity ids
    parent: str | None = None
    children: list[str] = field(default_factory=list)


def undirected_weights(relations: Iterable[tuple[int, int, str, float, str]]) -> dict[tuple[int, int], float]:
    """The weighted undirected projection: weights of a pair's relations summed, both directions."""
    w: dict[tuple[int, int], float] = defaultdict(float)
    for s, d, _typ, weight, _ in relations:
        if s == d:
            continue
        a, b = (s, d) if s < d else (d, s)
        w[(a, b)] += float(weight)
    return dict(w)


def to_networkx(
    entities: Mapping[int, tuple[Any, ...]], relations: Iterable[tuple[int, int, str, float, str]]
) -> nx.DiGraph:
    """The directed entity graph (cycles allowed); parallel relations of one pair keep their types."""
    g = nx.DiGraph()
    for eid, (key, name, typ, *_rest) in entities.items():
        g.add_node(eid, key=key, name=name, type=typ)
    for s, d, typ, weight, desc in relations:
        if g.has_edge(s, d):
            g[s][d]["weight"] += weight
            g[s][d]["types"].append(typ)
        else:
            g.add_edge(s, d, weight=weight, types=[typ], description=desc)
    return g


def detect_communities(
    weights: Mapping[tuple[int, int], float],
    *,
    max_cluster_size: int = 25,
    max_levels: int = 3,
    resolution: float = 1.0,
    seed: int = 42,
    start: Mapping[int, int] | None = None,
) -> list[Community]:
    """Hierarchical Leiden: communities of level 0 cover the graph; a community larger than
    ``max_cluster_size`` is split again into level-1 communities, and so on up to ``max_levels``
    levels (deeper splits are folded into the last level). Deterministic for a given ``seed``.
    ``start``: the previous top-level partition (entity id -> community number), so an incremental
    update moves as few entities as it can and most fingerprints (and summaries) survive."""
    if max_cluster_size < 2:
        raise ValidationError("max_cluster_size must be at least 2", field="max_cluster_size")
    if max_levels < 1:
        raise ValidationError("max_levels must be at least 1", field="max_levels")
    if not weights:
        return []
    from graspologic_native import hierarchical_leiden

    edges = [(str(a), str(b), float(w)) for (a, b), w in sorted(weights.items()) if w > 0]
    if not edges:
        return []
    starting = None
    if start:
        nodes = sorted({int(a) for a, _, _ in edges} | {int(b) for _, b, _ in edges})
        fresh = max(start.values(), default=0) + 1
        starting = {}
        for n in nodes:
            if n in start:
                starting[str(n)] = int(start[n])
            else:
                starting[str(n)] = fresh
                fresh += 1
    clusters = hierarchical_leiden(
        edges,
        starting_communities=starting,
        resolution=resolution,
        max_cluster_size=max_cluster_size,
        seed=seed,
        iterations=1,
    )
    by: dict[tuple[int, int], set[int]] = defaultdict(set)
    parent_of: dict[tuple[int, int], tuple[int, int] | None] = {}
    for hc in clusters:
        level = min(hc.level, max_levels - 1)
        key = (level, hc.cluster)
        by[key].add(int(hc.node))
        if key not in parent_of:
            if hc.level == 0 or hc.parent_cluster is None:
                parent_of[key] = None
            else:
                parent_of[key] = (min(hc.level - 1, max_levels - 1), hc.parent_cluster)
    # levels folded into the last one: a cluster's parent at the same level is its own ancestor
    for key, par in list(parent_of.items()):
        while par is not None and par[0] == key[0]:
            par = parent_of.get(par)
        parent_of[key] = par
    # stable names: by level, then size (descending), then smallest member
    order = sorted(by, key=lambda k: (k[0], -len(by[k]), min(by[k])))
    counters: dict[int, int] = defaultdict(int)
    names: dict[tuple[int, int], str] = {}
    for k in order:
        names[k] = f"L{k[0]}-{counters[k[0]]}"
        counters[k[0]] += 1
    out = {k: Community(names[k], k[0], sorted(by[k])) for k in order}
    for k, c in out.items():
        par = parent_of.get(k)
        if par is not None and par in out:
            c.parent = out[par].community_id
            out[par].children.append(c.community_id)
    return [out[k] for k in order]


def fingerprint(member_keys: Iterable[str], prov_hashes: Mapping[str, str | None]) -> str:
    """Hash of the sorted member entity keys and of each member's provenance hash (the text of the
    chunks that mention it). Any stale or changed member changes it."""
    h = hashlib.sha1()
    for k in sorted(member_keys):
        h.update(k.encode())
        h.update(b"\x00")
        h.update((prov_hashes.get(k) or "stale").encode())
        h.update(b"\x01")
    return h.hexdigest()[:20]
