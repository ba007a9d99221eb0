"""Pictures of an entity graph that stay readable at any size (``GraphRAG.plot``).

Two views, both bounded (``max_nodes`` entities, ``labels`` labels):

- communities (the default): the ``top`` largest communities of one level, each by its most central
  members (weighted degree inside the community), each community laid out in its own cell of a grid;
- neighbourhood (``entity=``): an entity and its strongest neighbours within 1 or 2 hops, in rings
  around it, coloured by community.

Edges are thinned to each entity's strongest few; labels go to the most central entities, round
robin over the communities, and a label that would overlap one already placed is left out; the
legend has its own panel inside the figure. Matplotlib is used without pyplot (no global state).
Selection is in ``plot_select``, layouts in ``plot_layout``, drawing in ``plot_draw``; this module
keeps their public names.
"""

from __future__ import annotations

from .plot_draw import LABEL_CHARS, LEGEND_CHARS, figure, save
from .plot_select import (
    EDGES_PER_NODE,
    MAX_GROUPS,
    PlotSelection,
    select,
    select_communities,
    select_neighbourhood,
)

__all__ = [
    "PlotSelection",
    "select",
    "select_communities",
    "select_neighbourhood",
    "figure",
    "save",
    "EDGES_PER_NODE",
    "LABEL_CHARS",
    "LEGEND_CHARS",
    "MAX_GROUPS",
]
