"""Embedders: one protocol, one module per backend, chosen by a spec string."""

from .base import BaseEmbedder, Embedder, create_embedder

__all__ = ["Embedder", "BaseEmbedder", "create_embedder"]
