"""Embedders: one protocol, one module per backend, chosen by a spec string."""

from .base import BaseEmbedder, Embedder
from .registry import (
    create_embedder,
    embedder_name,
    spec_for_name,
    wants_separate_worker_instance,
)

__all__ = [
    "BaseEmbedder",
    "Embedder",
    "create_embedder",
    "embedder_name",
    "spec_for_name",
    "wants_separate_worker_instance",
]
