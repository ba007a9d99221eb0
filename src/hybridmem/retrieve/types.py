"""Small types the legs share: a ranked hit and the query encoder the dense leg calls."""

from __future__ import annotations

from typing import Protocol

import numpy as np

__all__ = ["LegHit", "QueryEncoder"]

LegHit = tuple[int, float]  # (chunk rowid, raw score)


class QueryEncoder(Protocol):
    """Turns a query into its vector (cached; the model is loaded on first use)."""

    @property
    def name(self) -> str: ...
    def vector(self, text: str) -> np.ndarray: ...
