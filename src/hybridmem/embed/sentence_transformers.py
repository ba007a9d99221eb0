"""Embedder backed by a local sentence-transformers model (the ``hybridmem[st]`` extra), loaded offline."""

from __future__ import annotations

import os

import numpy as np

from ..errors import EmbedderError, ValidationError
from .base import BaseEmbedder

__all__ = ["SentenceTransformerEmbedder"]

INSTALL_HINT = "sentence-transformers is not installed: pip install 'hybridmem[st]' (torch==2.13.0 on CPU)"
_TRUTHY = {"1", "ON", "YES", "TRUE"}


class SentenceTransformerEmbedder(BaseEmbedder):
    """``model`` is a Hugging Face model id already in the local cache, or a path to a saved model.

    ``query_prefix`` / ``document_prefix`` are prepended verbatim (e.g. ``"query: "`` /
    ``"passage: "`` for e5 models); vectors come back L2-normalised.
    """

    def __init__(
        self,
        model: str,
        device: str = "cpu",
        query_prefix: str = "",
        document_prefix: str = "",
        batch_size: int = 32,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ValidationError("model must be a non-empty model name or path", field="embedder")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValidationError(f"batch_size must be an integer >= 1, got {batch_size!r}", field="embedder")
        model = model.strip()

        # Must happen before the import: huggingface_hub reads HF_HUB_OFFLINE once, at import time.
        # A user who wants downloads sets HF_HUB_OFFLINE=0 themselves, and we respect it.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        offline = os.environ["HF_HUB_OFFLINE"].strip().upper() in _TRUTHY

        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise EmbedderError(INSTALL_HINT) from exc

        try:
            # local_files_only as well, in case huggingface_hub was imported before the env var was set.
            self._model = SentenceTransformer(model, device=device, local_files_only=offline)
        except Exception as exc:  # torch/transformers/hub raise a zoo of types; surface them as one
            hint = (
                " (offline mode: download it first, e.g. `huggingface-cli download NAME`, "
                "or pass a local path; set HF_HUB_OFFLINE=0 to allow downloads)"
                if offline and not os.path.exists(model)
                else ""
            )
            raise EmbedderError(f"could not load sentence-transformers model {model!r}: {exc}{hint}") from exc

        self.model = model
        self.device = device
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self.batch_size = batch_size
        self.name = f"st:{model}"
        self.dim = self._discover_dim()

    def _discover_dim(self) -> int:
        # Renamed in newer releases; some models (e.g. without a Pooling/Dense config) report None.
        getter = getattr(self._model, "get_sentence_embedding_dimension", None) or getattr(
            self._model, "get_embedding_dimension", None
        )
        dim = getter() if getter is not None else None
        if not dim:
            dim = int(np.atleast_2d(self._encode(["dimension probe"])).shape[1])
        return int(dim)

    def _encode(self, texts: list[str]) -> np.ndarray:
        try:
            out = self._model.encode(
                texts,
                batch_size=self.batch_size,
                show_progress_bar=False,
                normalize_embeddings=True,
                convert_to_numpy=True,
            )
        except Exception as exc:
            raise EmbedderError(f"{self.name}: encode failed: {exc}") from exc
        return np.asarray(out, dtype=np.float32)

    def _embed(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        prefix = self.query_prefix if is_query else self.document_prefix
        out = self._encode([prefix + t for t in texts] if prefix else texts)
        return np.atleast_2d(out)
