"""A persistent embedding cache: wraps any embedder, stores vectors by (model, role, sha256(text)).

Used by benchmarks and evaluation so a corpus is embedded once per model, whatever is measured.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .base import Embedder

__all__ = ["CachedEmbedder"]


def _key(role: str, text: str) -> bytes:
    return hashlib.sha256(f"{role}\x00{text}".encode()).digest()


class CachedEmbedder:
    """Same ``name``/``dim`` as the wrapped embedder, so a store cannot tell them apart."""

    def __init__(self, inner: Embedder, path: str | Path) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS emb (model TEXT, key BLOB, vec BLOB, PRIMARY KEY (model, key))")
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def _get(self, keys: list[bytes]) -> dict[bytes, np.ndarray]:
        found: dict[bytes, np.ndarray] = {}
        with self._lock:
            for i in range(0, len(keys), 500):
                part = keys[i : i + 500]
                q = f"SELECT key, vec FROM emb WHERE model=? AND key IN ({','.join('?' * len(part))})"
                for k, v in self._db.execute(q, [self.name, *part]):
                    found[k] = np.frombuffer(v, dtype=np.float32)
        return found

    def _put(self, keys: list[bytes], vecs: np.ndarray) -> None:
        with self._lock, self._db:
            self._db.executemany(
                "INSERT OR REPLACE INTO emb VALUES (?, ?, ?)",
                [(self.name, k, np.asarray(v, dtype=np.float32).tobytes()) for k, v in zip(keys, vecs)],
            )

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        keys = [_key("passage", t) for t in texts]
        found = self._get(keys)
        missing = [i for i, k in enumerate(keys) if k not in found]
        self.hits += len(texts) - len(missing)
        self.misses += len(missing)
        if missing:
            vecs = self.inner.embed_documents([texts[i] for i in missing])
            self._put([keys[i] for i in missing], vecs)
            for i, v in zip(missing, vecs):
                found[keys[i]] = v
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([found[k] for k in keys]).astype(np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        k = _key("query", text)
        found = self._get([k])
        if k in found:
            self.hits += 1
            return found[k]
        self.misses += 1
        v = self.inner.embed_query(text)
        self._put([k], v[None, :])
        return v
