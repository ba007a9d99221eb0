"""A tiny deterministic embedder for unit tests: hashed character trigrams (no semantics, no model)."""

from __future__ import annotations

import hashlib

import numpy as np

from .base import BaseEmbedder

__all__ = ["DEFAULT_DIM", "HashEmbedder", "hash_name"]

DEFAULT_DIM = 256


def hash_name(dim: int = DEFAULT_DIM) -> str:
    """The recorded name of a ``hash:DIM`` embedder."""
    return f"hash:{int(dim)}"


class HashEmbedder(BaseEmbedder):
    """Bag of hashed word and character-trigram features. Same text → same vector, always."""

    batch_size = 256

    def __init__(self, dim: int = DEFAULT_DIM) -> None:
        self.dim = int(dim)
        self.name = hash_name(self.dim)

    def _vector(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim, dtype=np.float32)
        t = f" {text.casefold()} "
        feats = [t[i : i + 3] for i in range(len(t) - 2)] + t.split()
        for f in feats:
            h = int.from_bytes(hashlib.blake2b(f.encode(), digest_size=8).digest(), "little")
            v[h % self.dim] += 1.0 if (h >> 32) & 1 else -1.0
        if not v.any():
            v[0] = 1.0
        return v

    def _embed(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        return np.stack([self._vector(t) for t in texts])
