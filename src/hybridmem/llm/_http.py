"""POST a JSON body, get a JSON object back, standard library only; transient failures become
:class:`Retryable`, the others :class:`HTTPStatusError` with the server's own message."""

from __future__ import annotations

import email.utils
import http.client
import json
import socket
import ssl
import time
import urllib.error
import urllib.request
from typing import Any

from ..errors import LLMError
from .retry import Retryable

__all__ = ["HTTPStatusError", "post_json"]

# 408 is a server-side timeout, 409 a transient conflict; every other 4xx means the request is wrong
_RETRYABLE_STATUS = frozenset({408, 409, 429})
_USER_AGENT = "hybridmem-llm"


class HTTPStatusError(LLMError):
    """A non-retryable HTTP error (400, 401, 404, ...)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def post_json(url: str, body: dict[str, Any], headers: dict[str, str], timeout: float, *, what: str,
              auth_hint: str = "") -> dict[str, Any]:
    data = json.dumps(body, ensure_ascii=False).encode("utf-8")
    req = urllib.request.Request(
        url, data=data, method="POST",
        headers={"Content-Type": "application/json", "Accept": "application/json", "User-Agent": _USER_AGENT, **headers},
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
    except urllib.error.HTTPError as exc:
        status, detail = exc.code, _error_message(exc)
        if status in _RETRYABLE_STATUS or status >= 500:
            raise Retryable(f"HTTP {status}: {detail}", _retry_after(exc.headers)) from None
        hint = f" ({auth_hint})" if status in (401, 403) and auth_hint else ""
        raise HTTPStatusError(f"{what}: {url} returned HTTP {status}: {detail}{hint}", status) from None
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, ssl.SSLCertVerificationError):  # will not fix itself between attempts
            raise LLMError(f"{what}: TLS certificate check failed for {url}: {exc.reason}") from None
        if isinstance(exc.reason, (TimeoutError, socket.timeout)):
            raise Retryable(f"timed out after {timeout:.3g}s") from None
        raise Retryable(f"connection error: {exc.reason}") from None
    except (TimeoutError, socket.timeout):
        raise Retryable(f"timed out after {timeout:.3g}s") from None
    except (ConnectionError, http.client.HTTPException) as exc:  # e.g. RemoteDisconnected, IncompleteRead
        raise Retryable(f"connection error: {type(exc).__name__}: {exc}") from None
    try:
        payload = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise LLMError(f"{what}: response is not JSON: {raw[:200].decode('utf-8', 'replace')!r}") from None
    if not isinstance(payload, dict):
        raise LLMError(f"{what}: response is a JSON {type(payload).__name__}, expected an object")
    return payload


def _error_message(exc: urllib.error.HTTPError) -> str:
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


def _retry_after(headers: Any) -> float | None:
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
