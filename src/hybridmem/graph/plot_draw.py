"""Drawing a :class:`~hybridmem.graph.plot_select.PlotSelection` with matplotlib (no pyplot): the
graph panel, labels that do not overlap, the legend in its own panel; saving the figure."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from ..errors import ValidationError
from .plot_select import EDGES_PER_NODE, PlotSelection

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.text import Text

#: a label is cut to this many characters
LABEL_CHARS = 28
#: a legend entry is cut to this many characters
LEGEND_CHARS = 44
_OTHER = "#b4b4b4"


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
