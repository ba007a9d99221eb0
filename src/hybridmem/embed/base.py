"""The Embedder protocol, the spec-string registry, and shared helpers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from ..errors import EmbedderError, ValidationError

__all__ = ["Embedder", "BaseEmbedder", "create_embedder", "normalize_rows"]


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
    return m / norms


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
            raise EmbedderError(
                f"embedder {self.name!r} returned shape {tuple(out.shape)}, expected ({n}, {self.dim})"
            )
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
        return self._checked(self._embed([text], is_query=True), 1)[0]

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} dim={self.dim}>"


def create_embedder(spec: str | Embedder | None) -> Embedder:
    """Build an embedder from a spec string.

    ``e5`` (default, bundled multilingual-e5-small 4-bit), ``use`` (bundled multilingual USE v3),
    ``st:NAME_OR_PATH`` (sentence-transformers extra), ``openai:MODEL`` (any OpenAI-compatible
    ``/v1/embeddings``; ``HYBRIDMEM_OPENAI_BASE_URL`` / ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``),
    ``hash`` / ``hash:DIM`` (deterministic test embedder, no semantics).
    """
    if spec is None:
        spec = "e5"
    if not isinstance(spec, str):
        if isinstance(spec, Embedder):
            return spec
        raise ValidationError(f"not an embedder: {spec!r}", field="embedder")
    kind, _, arg = spec.strip().partition(":")
    kind = kind.lower()
    if kind == "e5":
        from .e5 import E5Embedder

        return E5Embedder(variant=arg or "original")
    if kind == "use":
        from .use import USEEmbedder

        return USEEmbedder()
    if kind == "st":
        if not arg:
            raise ValidationError("st: needs a model name or path, e.g. st:all-MiniLM-L6-v2", field="embedder")
        from .sentence_transformers import SentenceTransformerEmbedder

        return SentenceTransformerEmbedder(arg)
    if kind == "openai":
        if not arg:
            raise ValidationError("openai: needs a model, e.g. openai:nomic-embed-text", field="embedder")
        from .openai import OpenAIEmbedder

        return OpenAIEmbedder(arg)
    if kind == "hash":
        from .hashing import HashEmbedder

        return HashEmbedder(dim=int(arg) if arg else 256)
    raise ValidationError(
        f"unknown embedder {spec!r}; use e5, use, st:NAME_OR_PATH, openai:MODEL or hash[:DIM]",
        field="embedder",
    )
