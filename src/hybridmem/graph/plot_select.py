"""What a graph picture shows (:class:`PlotSelection`): the communities view (the largest
communities, each by its most central members) or the neighbourhood of one entity, edges thinned."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..errors import NotFoundError, ValidationError
from .communities import undirected_weights
from .extract import entity_key
from .plot_layout import _grid_layout, _ring_layout
from .store import GraphData, StoredCommunity

#: legend entries at most in the neighbourhood view (the other communities share one grey entry)
MAX_GROUPS = 9
#: edges kept per entity (its strongest ones among the entities drawn)
EDGES_PER_NODE = 3


@dataclass
class PlotSelection:
    """What one picture shows: entities (most important first), their groups and positions."""

    mode: str  # "communities" or "neighbourhood"
    title: str
    nodes: list[int]
    names: dict[int, str]
    group: dict[int, int]  # entity id -> legend entry (-1: other communities)
    legend: list[str]
    edges: list[tuple[int, int, float]]
    strength: dict[int, float]  # weighted degree in the whole graph (node size)
    communities: list[str]  # community ids shown
    total_entities: int
    centre: int | None = None
    pos: dict[int, tuple[float, float]] = field(default_factory=dict)
    #: (x, y, radius) of each community's cell in the communities view, in legend order
    cells: list[tuple[float, float, float]] = field(default_factory=list)
    #: radii of the hop rings in the neighbourhood view
    rings: list[float] = field(default_factory=list)


def _adjacency(data: GraphData) -> dict[int, dict[int, float]]:
    adj: dict[int, dict[int, float]] = defaultdict(dict)
    for (a, b), w in undirected_weights(data.relations).items():
        if a in data.entities and b in data.entities:
            adj[a][b] = w
            adj[b][a] = w
    return adj


def _check(top: int, max_nodes: int, hops: int) -> None:
    if top < 1:
        raise ValidationError("top must be at least 1", field="top")
    if max_nodes < 2:
        raise ValidationError("max_nodes must be at least 2", field="max_nodes")
    if hops not in (1, 2):
        raise ValidationError("hops must be 1 or 2", field="hops")


def _level(comms: Sequence[StoredCommunity], level: int | None) -> int:
    levels = sorted({c.level for c in comms})
    lvl = levels[0] if level is None else level
    if lvl not in levels:
        raise ValidationError(f"no community level {lvl}; levels: {', '.join(map(str, levels))}", field="level")
    return lvl


def select(
    data: GraphData,
    comms: Sequence[StoredCommunity],
    *,
    top: int = 8,
    max_nodes: int = 80,
    level: int | None = None,
    entity: str | None = None,
    hops: int = 1,
    namespace: str = "",
) -> PlotSelection:
    """The communities view, or the neighbourhood of ``entity`` when one is given."""
    _check(top, max_nodes, hops)
    if entity is not None:
        return select_neighbourhood(
            data, comms, entity, hops=hops, max_nodes=max_nodes, level=level, namespace=namespace
        )
    return select_communities(data, comms, top=top, max_nodes=max_nodes, level=level, namespace=namespace)


def _quotas(sizes: Sequence[int], budget: int) -> list[int]:
    """Entities drawn per community: an even share of ``budget``, what a small community cannot
    use going to the larger ones (listed first)."""
    q = [0] * len(sizes)
    left = budget
    while left > 0:
        open_ = [i for i, n in enumerate(sizes) if q[i] < n]
        if not open_:
            break
        share = max(1, left // len(open_))
        for i in open_:
            add = min(share, sizes[i] - q[i], left)
            q[i] += add
            left -= add
            if left == 0:
                break
    return q


def select_communities(
    data: GraphData,
    comms: Sequence[StoredCommunity],
    *,
    top: int = 8,
    max_nodes: int = 80,
    level: int | None = None,
    namespace: str = "",
) -> PlotSelection:
    """The ``top`` largest communities of ``level`` (default: the top one), each by its most central
    members, ``max_nodes`` entities in all."""
    _check(top, max_nodes, 1)
    lvl = _level(comms, level)
    pool = sorted((c for c in comms if c.level == lvl), key=lambda c: (-len(c.members), c.community_id))
    adj = _adjacency(data)
    strength = {n: sum(nb.values()) for n, nb in adj.items()}
    key_to_id = {v[0]: eid for eid, v in data.entities.items()}
    chosen = pool[:top]
    members = [[key_to_id[k] for k in c.members if k in key_to_id] for c in chosen]
    quotas = _quotas([len(m) for m in members], max_nodes)
    nodes: list[int] = []
    group: dict[int, int] = {}
    shown: list[StoredCommunity] = []
    per_group: list[list[int]] = []
    for c, ids, quota in zip(chosen, members, quotas):
        if quota == 0:
            continue
        inside = set(ids)
        score = {n: sum(w for nb, w in adj.get(n, {}).items() if nb in inside) for n in ids}
        best = sorted(ids, key=lambda n: (-score[n], -strength.get(n, 0.0), data.entities[n][0]))[:quota]
        for n in best:
            group[n] = len(shown)
        nodes += best
        per_group.append(best)
        shown.append(c)
    legend = [f"{c.community_id} ({len(c.members):,}): {c.title}" for c in shown]
    sel = PlotSelection(
        mode="communities",
        title=(
            f"namespace {namespace!r}: the {len(shown)} largest of {len(pool):,} communities of level {lvl}, "
            f"{len(nodes)} of {len(data.entities):,} entities"
        ),
        nodes=nodes,
        names={n: data.entities[n][1] for n in nodes},
        group=group,
        legend=legend,
        edges=_thin(nodes, adj),
        strength={n: strength.get(n, 0.0) for n in nodes},
        communities=[c.community_id for c in shown],
        total_entities=len(data.entities),
    )
    sel.pos, sel.cells = _grid_layout(per_group, adj)
    return sel


def _hops(adj: dict[int, dict[int, float]], centre: int, hops: int, budget: int) -> tuple[list[int], list[int]]:
    """The strongest neighbours of ``centre`` (ring 1) and, with 2 hops, their strongest neighbours
    (ring 2, by summed weight to ring 1): ``budget`` entities in all, half of them at most in ring 1
    when ring 2 has candidates."""
    nb = adj.get(centre, {})
    ring1 = sorted(nb, key=lambda n: (-nb[n], n))
    if hops == 1:
        return ring1[:budget], []
    first = ring1[: max(1, budget // 2)]
    near = set(ring1) | {centre}
    score: dict[int, float] = defaultdict(float)
    for a in first:
        for b, w in adj.get(a, {}).items():
            if b not in near:
                score[b] += w
    ring2 = sorted(score, key=lambda n: (-score[n], n))[: budget - len(first)]
    first += ring1[len(first) : len(first) + budget - len(first) - len(ring2)]
    return first, ring2


def select_neighbourhood(
    data: GraphData,
    comms: Sequence[StoredCommunity],
    entity: str,
    *,
    hops: int = 1,
    max_nodes: int = 80,
    level: int | None = None,
    namespace: str = "",
) -> PlotSelection:
    """``entity`` (any variant of its name) and its strongest neighbours within ``hops``, coloured
    by their community of ``level`` (default: the top one)."""
    _check(1, max_nodes, hops)
    key = entity_key(entity)
    centre = next((i for i, v in data.entities.items() if v[0] == key), None)
    if centre is None:
        close = sorted(v[1] for v in data.entities.values() if key and key in v[0])[:10]
        hint = f"; did you mean: {', '.join(close)}" if close else ""
        raise NotFoundError(f"no entity {entity!r} in the graph of namespace {namespace!r}{hint}")
    lvl = _level(comms, level) if comms else 0
    adj = _adjacency(data)
    strength = {n: sum(nb.values()) for n, nb in adj.items()}
    ring1, ring2 = _hops(adj, centre, hops, max_nodes - 1)
    nodes = [centre, *ring1, *ring2]
    comm_of: dict[str, StoredCommunity] = {}
    for c in comms:
        if c.level == lvl:
            for k in c.members:
                comm_of[k] = c
    cid = {n: comm_of[data.entities[n][0]] for n in nodes if data.entities[n][0] in comm_of}
    counts = Counter(cid[n].community_id for n in nodes if n in cid)
    if centre in cid:  # the centre's community comes first
        counts[cid[centre].community_id] += len(nodes)
    kept = [c for c, _ in counts.most_common(MAX_GROUPS)]
    by_id = {c.community_id: c for c in cid.values()}
    legend = [f"{c} ({len(by_id[c].members):,}): {by_id[c].title}" for c in kept]
    group = {n: kept.index(cid[n].community_id) if n in cid and cid[n].community_id in kept else -1 for n in nodes}
    if len(kept) < len(counts) or any(n not in cid for n in nodes):
        legend.append("other communities")
    name = data.entities[centre][1]
    sel = PlotSelection(
        mode="neighbourhood",
        title=(
            f"namespace {namespace!r}: {name!r} and its neighbours within {hops} hop{'s' * (hops > 1)}, "
            f"{len(nodes)} of {len(data.entities):,} entities (communities of level {lvl})"
        ),
        nodes=nodes,
        names={n: data.entities[n][1] for n in nodes},
        group=group,
        legend=legend,
        edges=_thin(nodes, adj, keep={centre}),
        strength={n: strength.get(n, 0.0) for n in nodes},
        communities=kept,
        total_entities=len(data.entities),
        centre=centre,
    )
    sel.pos = _ring_layout(centre, ring1, ring2, adj, group)
    sel.rings = [1.0 + 0.11 * (min(3, len(ring1) // 25 + 1) - 1), 2.5][: 1 + bool(ring2)] if ring1 else []
    return sel


def _thin(
    nodes: Sequence[int], adj: dict[int, dict[int, float]], keep: set[int] | None = None
) -> list[tuple[int, int, float]]:
    """The edges among ``nodes`` that are among the ``EDGES_PER_NODE`` strongest of one end (all
    the edges of the ``keep`` entities)."""
    drawn = set(nodes)
    out: dict[tuple[int, int], float] = {}
    for n in nodes:
        nbs = sorted(((w, m) for m, w in adj.get(n, {}).items() if m in drawn and m != n), reverse=True)
        for w, m in nbs if keep and n in keep else nbs[:EDGES_PER_NODE]:
            out[(min(n, m), max(n, m))] = w
    return [(a, b, w) for (a, b), w in sorted(out.items())]
