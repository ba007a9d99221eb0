"""Where the entities of a graph picture go: communities in the cells of a grid (a spring
layout in each disc), a neighbourhood in rings around its centre."""

from __future__ import annotations

import math


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
