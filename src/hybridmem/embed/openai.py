"""Embedder for any OpenAI-compatible ``POST {base_url}/embeddings`` endpoint (OpenAI, Ollama, vLLM,
LM Studio), standard library only."""

from __future__ import annotations

import json
import math
import os
from typing import Any

import numpy as np

from ..errors import EmbedderError, ValidationError
from ..httputil import post
from ..retry import RetryPolicy, call_with_retry
from .base import BaseEmbedder

__all__ = ["DEFAULT_BASE_URL", "OpenAIEmbedder"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
PROBE_TEXT = "dimension probe"
# A misbehaving server must not be able to park a caller for minutes via Retry-After.
MAX_RETRY_DELAY = 60.0
# 408 is a server-side timeout; every other 4xx means the request itself is wrong.
_RETRYABLE_STATUS = frozenset({408, 429})
_USER_AGENT = "hybridmem-openai-embedder"


class OpenAIEmbedder(BaseEmbedder):
    """Queries and documents go to the same endpoint; ``query_prefix`` / ``document_prefix`` are
    prepended verbatim for models that expect role markers (e.g. ``"query: "`` for e5).

    ``dim`` is checked, not requested: no ``dimensions`` field is sent, since most non-OpenAI
    servers reject it. When not given, it is learnt from the first response (or from a one-text
    probe request if ``.dim`` is read before anything was embedded).
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        dim: int | None = None,
        timeout: float = 30.0,
        max_retries: int = 4,
        batch_size: int = 64,
        *,
        backoff: float = 0.5,
        query_prefix: str = "",
        document_prefix: str = "",
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ValidationError("model must be a non-empty string", field="embedder")
        if dim is not None and (not isinstance(dim, int) or isinstance(dim, bool) or dim <= 0):
            raise ValidationError(f"dim must be a positive integer, got {dim!r}", field="embedder")
        if not timeout > 0:
            raise ValidationError(f"timeout must be > 0, got {timeout!r}", field="embedder")
        if not isinstance(max_retries, int) or max_retries < 0:
            raise ValidationError(f"max_retries must be an integer >= 0, got {max_retries!r}", "embedder")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValidationError(f"batch_size must be an integer >= 1, got {batch_size!r}", field="embedder")
        if not backoff >= 0:
            raise ValidationError(f"backoff must be >= 0, got {backoff!r}", field="embedder")

        url = (
            (
                base_url
                or os.environ.get("HYBRIDMEM_OPENAI_BASE_URL")
                or os.environ.get("OPENAI_BASE_URL")
                or DEFAULT_BASE_URL
            )
            .strip()
            .rstrip("/")
        )
        if not url.startswith(("http://", "https://")):
            raise ValidationError(f"base_url must start with http:// or https://, got {url!r}", "embedder")

        self.model = model.strip()
        self.base_url = url
        self.endpoint = f"{url}/embeddings"
        # Empty string counts as "no key", so local servers work with OPENAI_API_KEY="" exported.
        self._api_key = (
            api_key or os.environ.get("HYBRIDMEM_OPENAI_API_KEY") or os.environ.get("OPENAI_API_KEY") or None
        )
        self._dim: int | None = dim
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self.batch_size = batch_size
        self.backoff = float(backoff)
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self.name = f"openai:{self.model}"

    # --- dim: lazy, so constructing an embedder never touches the network -----------------------

    @property
    def dim(self) -> int:
        if self._dim is None:
            vectors = self._request([PROBE_TEXT])
            self._dim = int(vectors.shape[1])
        return self._dim

    @dim.setter
    def dim(self, value: int) -> None:
        self._dim = int(value)

    def __repr__(self) -> str:
        # Not via self.dim: a repr must not trigger a network call. The key is never shown.
        dim = self._dim if self._dim is not None else "?"
        return f"<{type(self).__name__} {self.name} base_url={self.base_url} dim={dim}>"

    # --- BaseEmbedder hook ----------------------------------------------------------------------

    def _embed(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        prefix = self.query_prefix if is_query else self.document_prefix
        out = self._request([prefix + t for t in texts] if prefix else texts)
        if self._dim is None:
            # The first real response fixes dim, saving a probe; later batches are checked against it.
            self._dim = int(out.shape[1])
        return out

    # --- HTTP -----------------------------------------------------------------------------------

    @property
    def retry_policy(self) -> RetryPolicy:
        """``max_retries`` retries after the first request, no overall time budget; the backoff
        doubles from ``backoff`` with up to ``backoff`` of jitter added, every wait (a server's
        ``Retry-After`` included) capped at ``MAX_RETRY_DELAY``."""
        return RetryPolicy(
            max_attempts=self.max_retries + 1,
            backoff=self.backoff,
            max_backoff=MAX_RETRY_DELAY,
            max_retry_after=MAX_RETRY_DELAY,
            total_timeout=math.inf,
            jitter="added",
        )

    def _request(self, texts: list[str]) -> np.ndarray:
        body = json.dumps({"model": self.model, "input": texts, "encoding_format": "float"}).encode("utf-8")
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}

        def attempt(timeout: float) -> bytes:
            return post(
                self.endpoint,
                body,
                headers,
                timeout,
                what=self.name,
                error=EmbedderError,
                retry_status=_RETRYABLE_STATUS,
                user_agent=_USER_AGENT,
            )

        raw = call_with_retry(
            attempt, self.retry_policy, timeout=self.timeout, what=f"{self.name}: {self.endpoint}", error=EmbedderError
        )
        return self._parse(raw, len(texts))

    def _parse(self, raw: bytes, n: int) -> np.ndarray:
        try:
            payload = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            snippet = raw[:200].decode("utf-8", "replace")
            raise EmbedderError(f"{self.name}: response is not valid JSON: {snippet!r}") from None
        data = payload.get("data") if isinstance(payload, dict) else None
        if not isinstance(data, list):
            raise EmbedderError(f"{self.name}: response has no 'data' list (keys: {_keys(payload)})")
        if len(data) != n:
            raise EmbedderError(f"{self.name}: server returned {len(data)} embeddings for {n} inputs")

        rows: list[Any] = [None] * n
        for pos, item in enumerate(data):
            if not isinstance(item, dict) or "embedding" not in item:
                raise EmbedderError(f"{self.name}: data[{pos}] has no 'embedding' field")
            # Servers may return items out of order; 'index' is authoritative, position the fallback.
            idx = item.get("index", pos)
            if not isinstance(idx, int) or isinstance(idx, bool) or not 0 <= idx < n or rows[idx] is not None:
                raise EmbedderError(f"{self.name}: data[{pos}] has an invalid or duplicate index {idx!r}")
            emb = item["embedding"]
            if not isinstance(emb, list) or not emb:
                # A string here means the server ignored encoding_format and sent base64.
                raise EmbedderError(f"{self.name}: data[{pos}].embedding is not a non-empty list of floats")
            rows[idx] = emb

        width = len(rows[0])
        if any(len(r) != width for r in rows):
            raise EmbedderError(f"{self.name}: embeddings in one response have different lengths")
        try:
            return np.asarray(rows, dtype=np.float32)
        except (TypeError, ValueError):
            raise EmbedderError(f"{self.name}: embeddings contain non-numeric values") from None


def _keys(payload: Any) -> str:
    return ", ".join(sorted(map(str, payload))) if isinstance(payload, dict) else type(payload).__name__
