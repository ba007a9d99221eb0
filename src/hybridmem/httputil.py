"""Small HTTP helpers shared by the OpenAI-compatible embedder and the chat model providers."""

from __future__ import annotations

import email.utils
import json
import time
import urllib.error
from typing import Any

__all__ = ["error_message", "retry_after"]


def error_message(exc: urllib.error.HTTPError) -> str:
    """The server's own error text: OpenAI/Gemini/Anthropic ``{"error": {"message"}}``,
    Ollama ``{"error": "..."}``, or the raw body."""
    try:
        raw = exc.read()
    except Exception:  # the body is a courtesy; never let reading it mask the HTTP error
        raw = b""
    text = raw.decode("utf-8", "replace").strip()
    try:
        payload = json.loads(text)
    except ValueError:
        return text[:500] or (exc.reason if isinstance(exc.reason, str) else "") or "no error message"
    if isinstance(payload, dict):
        err = payload.get("error", payload.get("detail", payload.get("message")))
        if isinstance(err, dict):
            err = err.get("message") or err
        if err:
            return str(err)[:500]
    return text[:500]


def retry_after(headers: Any) -> float | None:
    """``Retry-After`` in seconds (or an HTTP date); None when absent or unparsable."""
    value = headers.get("Retry-After") if headers is not None else None
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
