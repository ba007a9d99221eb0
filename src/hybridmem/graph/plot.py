"""Pictures of an entity graph that stay readable at any size (``GraphRAG.plot``).

Two views, both bounded (``max_nodes`` entities, ``labels`` labels):

- communities (the default): the ``top`` largest communities of one level, each by its most central
  members (weighted degree inside the community), each community laid out in its own cell of a grid;
- neighbourhood (``entity=``): an entity and its strongest neighbours within 1 or 2 hops, in rings
  around it, coloured by community.

Edges are thinned to each entity's strongest few; labels go to the most central entities, round
robin over the communities, and a label that would overlap one already placed is left out; the
legend has its own panel inside the figure. Matplotlib is used without pyplot (no global state).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import NotFoundError, ValidationError
from .communities import undirected_weights
from .extract import entity_key
from .store import GraphData, StoredCommunity

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.text import Text

__all__ = ["PlotSelection", "select", "select_communities", "select_neighbourhood", "figure", "save"]

#: legend entries at most in the neighbourhood view (the other communities share one grey entry)
MAX_GROUPS = 9
#: edges kept per entity (its strongest ones among the entities drawn)
EDGES_PER_NODE = 3
#: a label is cut to this many characters
LABEL_CHARS = 28
#: a legend entry is cut to this many characters
LEGEND_CHARS = 44
_OTHER = "#b4b4b4"


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


# ------------------------------------------------------------------------------ layouts
def _grid_layout(
    per_group: list[list[int]], adj: dict[int, dict[int, float]]
) -> tuple[dict[int, tuple[float, float]], list[tuple[float, float, float]]]:
    """Each community in its own cell of a grid (largest first, row by row), laid out by a spring
    model inside a disc whose radius grows with the entities drawn; and the discs."""
    import networkx as nx

    pos: dict[int, tuple[float, float]] = {}
    cells: list[tuple[float, float, float]] = []
    k = len(per_group)
    # the grid whose cells are largest in a graph panel about 1.3 times wider than high
    cols = max(range(1, k + 1), key=lambda c: (min(1.3 / c, 1.0 / math.ceil(k / c)), -c)) if k else 1
    step = 2 * (0.45 + 0.75 + 0.3) + 0.25  # two largest discs side by side, and a gap
    biggest = max((len(g) for g in per_group), default=1)
    for i, members in enumerate(per_group):
        cx, cy = (i % cols) * step, -(i // cols) * step
        radius = 0.45 + 0.75 * math.sqrt(len(members) / biggest)
        h = nx.Graph()
        h.add_nodes_from(members)
        inside = set(members)
        h.add_weighted_edges_from(
            (a, b, w) for a in members for b, w in adj.get(a, {}).items() if b in inside and a < b
        )
        if len(members) == 1:
            local = {members[0]: (0.0, 0.0)}
        else:
            raw = nx.spring_layout(h, seed=7, k=1.6 / math.sqrt(len(members)), iterations=80, weight=None)
            xs = [p[0] for p in raw.values()]
            ys = [p[1] for p in raw.values()]
            mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
            far = max(math.hypot(x - mx, y - my) for x, y in zip(xs, ys)) or 1.0
            local = {n: ((p[0] - mx) / far, (p[1] - my) / far) for n, p in raw.items()}
        for n, (x, y) in local.items():
            pos[n] = (cx + radius * x, cy + radius * y)
        cells.append((cx, cy, radius + 0.3))
    return pos, cells


def _ring_layout(
    centre: int, ring1: list[int], ring2: list[int], adj: dict[int, dict[int, float]], group: dict[int, int]
) -> dict[int, tuple[float, float]]:
    """The centre in the middle, ring 1 around it (grouped by community, radii staggered when
    crowded), each ring-2 entity near its strongest ring-1 neighbour."""
    pos: dict[int, tuple[float, float]] = {centre: (0.0, 0.0)}
    order = sorted(ring1, key=lambda n: (group.get(n, -1) < 0, group.get(n, -1), -adj[centre].get(n, 0.0), n))
    angle: dict[int, float] = {}
    stagger = min(3, len(order) // 25 + 1)
    for i, n in enumerate(order):
        angle[n] = 2 * math.pi * i / max(1, len(order))
        r = 1.0 + 0.22 * (i % stagger)
        pos[n] = (r * math.cos(angle[n]), r * math.sin(angle[n]))
    # ring 2: evenly round the circle, in the order of each entity's strongest ring-1 neighbour
    parent = {n: max(order, key=lambda a: (adj.get(a, {}).get(n, 0.0), -a)) for n in ring2} if order else {}
    rank = {n: i for i, n in enumerate(order)}
    outer = sorted(ring2, key=lambda n: (rank.get(parent.get(n, centre), 0), group.get(n, -1), n))
    for j, n in enumerate(outer):
        a = 2 * math.pi * (j + 0.5) / len(outer)
        r = 2.2 + 0.3 * (j % 3)
        pos[n] = (r * math.cos(a), r * math.sin(a))
    return pos


# ------------------------------------------------------------------------------ drawing
def figure(sel: PlotSelection, *, labels: int = 40) -> Figure:
    """The picture of a selection: a graph panel and a legend panel, both inside the figure."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if labels < 0:
        raise ValidationError("labels must be at least 0", field="labels")
    fig = Figure(figsize=(14, 9), dpi=110, facecolor="white")
    FigureCanvasAgg(fig)
    grid = fig.add_gridspec(1, 2, width_ratios=[3.3, 1.0], wspace=0.02, left=0.01, right=0.99, top=0.94, bottom=0.02)
    ax = fig.add_subplot(grid[0])
    side = fig.add_subplot(grid[1])
    ax.axis("off")
    side.axis("off")
    colours = _colours(len([x for x in sel.legend if x != "other communities"]))
    colour = {n: colours[g] if g >= 0 else _OTHER for n, g in sel.group.items()}
    _draw_graph(ax, sel, colour)
    fig.text(0.01, 0.985, sel.title, fontsize=10, ha="left", va="top")
    _draw_labels(fig, ax, sel, labels)
    _draw_legend(fig, side, sel, colours)
    return fig


def _colours(n: int) -> list[Any]:
    """Distinct colours: tab10 without its grey (grey means "other communities"), then the light
    tab20 shades, cycling after 18."""
    from matplotlib import colormaps

    dark = [colormaps["tab10"](i) for i in range(10) if i != 7]
    light = [colormaps["tab20"](2 * i + 1) for i in range(10) if i != 7]
    palette = dark + light
    return [palette[i % len(palette)] for i in range(max(1, n))]


def _draw_graph(ax: Axes, sel: PlotSelection, colour: dict[int, Any]) -> None:
    from matplotlib.collections import LineCollection
    from matplotlib.patches import Circle

    pos = sel.pos
    for i, (x, y, r) in enumerate(sel.cells):  # a faint disc and the id of each community
        tint = colour[next(n for n in sel.nodes if sel.group[n] == i)]
        ax.add_patch(Circle((x, y), r, facecolor=(*tint[:3], 0.06), edgecolor=(*tint[:3], 0.35), lw=0.8, zorder=0))
        ax.text(x - r * 0.7, y + r * 0.75, sel.communities[i], fontsize=8, color=tint, ha="right", zorder=0)
    for r in sel.rings:  # the hop rings, dashed
        ax.add_patch(Circle((0, 0), r, fill=False, edgecolor="#999999", lw=0.6, ls=(0, (4, 4)), zorder=0))
    top_w = max((w for _, _, w in sel.edges), default=1.0)
    segs, cols, widths = [], [], []
    for a, b, w in sel.edges:
        segs.append([pos[a], pos[b]])
        same = sel.group.get(a) == sel.group.get(b) and sel.group.get(a, -1) >= 0
        cols.append((*colour[a][:3], 0.45) if same and not isinstance(colour[a], str) else (0.55, 0.55, 0.55, 0.14))
        widths.append(0.4 + 2.2 * math.log1p(w) / math.log1p(top_w))
    ax.add_collection(LineCollection(segs, colors=cols, linewidths=widths, zorder=1))
    top_s = max(sel.strength.values(), default=1.0) or 1.0
    xs = [pos[n][0] for n in sel.nodes] + [x + s * r for x, _, r in sel.cells for s in (-1, 1)]
    ys = [pos[n][1] for n in sel.nodes] + [y + s * r for _, y, r in sel.cells for s in (-1, 1)]
    sizes = [30 + 330 * math.log1p(sel.strength[n]) / math.log1p(top_s) for n in sel.nodes]
    edge = ["black" if n == sel.centre else "white" for n in sel.nodes]
    ax.scatter(
        xs[: len(sel.nodes)],
        ys[: len(sel.nodes)],
        s=sizes,
        c=[colour[n] for n in sel.nodes],
        edgecolors=edge,
        linewidths=0.8,
        zorder=2,
    )
    pad_x = (max(xs) - min(xs)) * 0.06 + 0.3 if xs else 1.0
    pad_y = (max(ys) - min(ys)) * 0.06 + 0.3 if ys else 1.0
    ax.set_xlim(min(xs, default=0) - pad_x, max(xs, default=0) + pad_x)
    ax.set_ylim(min(ys, default=0) - pad_y, max(ys, default=0) + pad_y)
    ax.set_aspect("equal", adjustable="box")  # discs stay round, rings stay rings
    ax.apply_aspect()  # now, so that label boxes are measured in the final limits


def _label_order(sel: PlotSelection) -> list[int]:
    """Who gets a label first: the centre, then the most central entity of each group in turn."""
    by_group: dict[int, list[int]] = defaultdict(list)
    for n in sel.nodes:
        if n != sel.centre:
            by_group[sel.group.get(n, -1)].append(n)
    for g in by_group.values():
        g.sort(key=lambda n: -sel.strength[n])
    order = [sel.centre] if sel.centre is not None else []
    queues = [by_group[g] for g in sorted(by_group, key=lambda g: (g < 0, g))]
    while any(queues):
        for q in queues:
            if q:
                order.append(q.pop(0))
    return order


def _draw_labels(fig: Figure, ax: Axes, sel: PlotSelection, budget: int) -> list[Text]:
    """At most ``budget`` labels, in ``_label_order``; a label overlapping one already placed (or
    leaving the graph panel) is removed."""
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    panel = ax.get_window_extent(renderer)
    placed: list[Any] = [t.get_window_extent(renderer) for t in ax.texts]  # the community ids
    kept: list[Text] = []
    for n in _label_order(sel):
        if len(kept) >= budget:
            break
        name = sel.names[n]
        text = name if len(name) <= LABEL_CHARS else name[: LABEL_CHARS - 1] + "…"
        t = ax.annotate(
            text,
            sel.pos[n],
            xytext=(0, 7),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize=8 if n == sel.centre else 7,
            fontweight="bold" if n == sel.centre else "normal",
            zorder=3,
            bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.75},
        )
        box = t.get_window_extent(renderer)
        inside = panel.x0 <= box.x0 and box.x1 <= panel.x1 and panel.y0 <= box.y0 and box.y1 <= panel.y1
        if not inside or any(box.padded(2).overlaps(b) for b in placed):
            t.remove()
            continue
        placed.append(box)
        kept.append(t)
    return kept


def _draw_legend(fig: Figure, side: Axes, sel: PlotSelection, colours: list[Any]) -> None:
    """The legend in its own panel, entries cut to ``LEGEND_CHARS``; the font shrinks until the
    legend fits inside the figure."""
    from matplotlib.lines import Line2D

    handles = []
    for i, entry in enumerate(sel.legend):
        text = entry if len(entry) <= LEGEND_CHARS else entry[: LEGEND_CHARS - 1] + "…"
        col = _OTHER if entry == "other communities" else colours[i % len(colours)]
        handles.append(Line2D([], [], marker="o", linestyle="", color=col, markersize=7, label=text))
    note = (
        f"{len(sel.nodes)} of {sel.total_entities:,} entities drawn\nnode size: weighted degree\n"
        f"edges: the {EDGES_PER_NODE} strongest of each entity"
    )
    side.text(0.02, 0.0, note, transform=side.transAxes, fontsize=7, va="bottom", ha="left", color="#444444")
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    for size in (8, 7, 6, 5):
        legend = side.legend(
            handles=handles,
            loc="upper left",
            bbox_to_anchor=(0.0, 1.0),
            frameon=False,
            fontsize=size,
            title="communities",
            title_fontsize=size + 1,
            alignment="left",
        )
        box = legend.get_window_extent(renderer)
        if fig.bbox.x0 <= box.x0 and box.x1 <= fig.bbox.x1 and fig.bbox.y0 <= box.y0 and box.y1 <= fig.bbox.y1:
            break


def save(fig: Figure, path: str) -> None:
    fig.savefig(path, bbox_inches="tight", pad_inches=0.15, facecolor="white")
