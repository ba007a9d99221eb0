"""Adapters of the systems bench/peers.py compares, one small module each.

Every adapter has the same shape::

    class Peer:
        name: str                      # label in tables and charts
        notes: str                     # how it is configured (goes into the JSON and docs)
        def __init__(self, emb: VectorLookup, workdir: Path, depth: int): ...
        def build(self, docs: list[dict]) -> None      # docs: {"id", "text"}; searchable afterwards
        def search(self, text: str, k: int) -> list[str]   # ranked doc ids, best first

``emb`` is a :class:`VectorLookup`: a dict text -> vector for documents and one for queries, filled
once from the bench cache (SciFact, e5) or the synthetic look-up embedder (bench/latency.py). Every
system embeds through it, so all of them see exactly the same vectors and no model runs while they
are measured. ``depth`` is the candidate depth of each leg before fusion (hybridmem's default
``fetch_k`` = 2 × top_k = 20); the fusion peers are given the same depth.

Modules are imported lazily (``load(name)``), so each measured subprocess imports only its own peer.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Sequence

import numpy as np

SYSTEMS = {
    "hybridmem": ("hybridmem", "Peer"),
    "hybridmem-exact": ("hybridmem", "PeerExact"),
    "langchain-ensemble": ("langchain_ensemble", "Peer"),
    "llamaindex-fusion": ("llamaindex_fusion", "Peer"),
    "lancedb-hybrid": ("lancedb_hybrid", "Peer"),
    "bm25s": ("bm25s_only", "Peer"),
    "numpy-exact": ("numpy_exact", "Peer"),
}

_WORD = re.compile(r"\w+", re.UNICODE)


def simple_tokens(text: str) -> list[str]:
    """Lower-cased word tokens: what a user passes as ``preprocess_func`` to rank_bm25-based
    retrievers (their default, ``str.split``, keeps case and punctuation glued to words)."""
    return _WORD.findall(text.lower())


class VectorLookup:
    """The look-up embedder: the Embedder protocol (``name``, ``dim``, ``embed_documents``,
    ``embed_query``) answered from two dicts filled in advance. A text it does not know is an error,
    never a silent re-embedding."""

    def __init__(self, name: str, dim: int, docs: dict[str, np.ndarray], queries: dict[str, np.ndarray]) -> None:
        self.name = name
        self.dim = dim
        self.docs = docs
        self.queries = queries

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        try:
            return np.stack([self.docs[t] for t in texts]).astype(np.float32, copy=False)
        except KeyError as e:
            raise KeyError(
                f"document text not in the look-up table (run bench/precompute.py?): {str(e)[:80]}"
            ) from None

    def embed_query(self, text: str) -> np.ndarray:
        try:
            return self.queries[text]
        except KeyError:
            raise KeyError(f"query not in the look-up table: {text[:80]!r}") from None


def load(system: str):
    mod, cls = SYSTEMS[system]
    return getattr(importlib.import_module(f"bench.peer_adapters.{mod}"), cls)
