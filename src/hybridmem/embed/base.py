"""The Embedder protocol and the shared provider base; specs are mapped to providers by
:mod:`hybridmem.embed.registry`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, cast, runtime_checkable

import numpy as np

from ..errors import EmbedderError

__all__ = ["BaseEmbedder", "Embedder", "normalize_rows"]


@runtime_checkable
class Embedder(Protocol):
    """Turns text into L2-normalised float32 vectors.

    ``name`` identifies model *and* variant (it is recorded in the store, so two embedders with the
    same name must produce interchangeable vectors); ``dim`` is the vector size.
    """

    name: str
    dim: int

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dim) float32, rows L2-normalised."""
        ...

    def embed_query(self, text: str) -> np.ndarray:
        """(dim,) float32, L2-normalised."""
        ...


def normalize_rows(matrix: np.ndarray) -> np.ndarray:
    m = np.asarray(matrix, dtype=np.float32)
    if m.ndim == 1:
        n = float(np.linalg.norm(m))
        return m / n if n > 0 else m
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return cast(np.ndarray, m / norms)


class BaseEmbedder:
    """Batching, shape checks and normalisation; subclasses implement ``_embed``."""

    name: str = "base"
    dim: int = 0
    batch_size: int = 16

    def _embed(self, texts: list[str], *, is_query: bool) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError

    def _checked(self, out: np.ndarray, n: int) -> np.ndarray:
        out = np.asarray(out, dtype=np.float32)
        if out.ndim != 2 or out.shape != (n, self.dim):
            raise EmbedderError(f"embedder {self.name!r} returned shape {tuple(out.shape)}, expected ({n}, {self.dim})")
        if not np.isfinite(out).all():
            raise EmbedderError(f"embedder {self.name!r} returned non-finite values")
        return normalize_rows(out)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = []
        for i in range(0, len(texts), self.batch_size):
            batch = texts[i : i + self.batch_size]
            parts.append(self._checked(self._embed(batch, is_query=False), len(batch)))
        return np.vstack(parts)

    def embed_query(self, text: str) -> np.ndarray:
        return cast(np.ndarray, self._checked(self._embed([text], is_query=True), 1)[0])

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} dim={self.dim}>"
