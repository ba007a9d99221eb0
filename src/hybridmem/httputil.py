"""The one HTTP transport of the OpenAI-compatible embedder and the chat model providers: a JSON
POST, standard library only, whose transient failures become :class:`~hybridmem.retry.Retryable`
(for :func:`~hybridmem.retry.call_with_retry`) and the others the caller's error, carrying the
server's own message."""

from __future__ import annotations

import email.utils
import http.client
import json
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Collection
from typing import Any, cast

from .errors import HybridMemError
from .retry import Retryable

__all__ = ["error_message", "post", "retry_after"]


def post(
    url: str,
    data: bytes,
    headers: dict[str, str],
    timeout: float,
    *,
    what: str,
    error: type[HybridMemError],
    retry_status: Collection[int],
    user_agent: str,
    status_error: Callable[[str, int], Exception] | None = None,
    auth_hint: str = "",
) -> bytes:
    """POST a JSON body, return the raw response body.

    Raises :class:`Retryable` on a status in ``retry_status`` or >= 500, a timeout or a connection
    error; ``status_error(message, status)`` (default ``error(message)``) on any other HTTP error
    status, with ``auth_hint`` added on 401/403; ``error`` when the TLS certificate is refused.
    """
    req = urllib.request.Request(
        url,
        data=data,
        method="POST",
        headers={"Content-Type": "application/json", "Accept": "application/json", "User-Agent": user_agent, **headers},
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return cast(bytes, resp.read())  # urlopen() is typed as returning Any
    except urllib.error.HTTPError as exc:
        status, detail = exc.code, error_message(exc)
        if status in retry_status or status >= 500:
            raise Retryable(f"HTTP {status}: {detail}", retry_after(exc.headers)) from None
        hint = f" ({auth_hint})" if status in (401, 403) and auth_hint else ""
        message = f"{what}: {url} returned HTTP {status}: {detail}{hint}"
        raise (status_error(message, status) if status_error else error(message)) from None
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, ssl.SSLCertVerificationError):  # will not fix itself between attempts
            raise error(f"{what}: TLS certificate check failed for {url}: {exc.reason}") from None
        if isinstance(exc.reason, TimeoutError):
            raise Retryable(f"timed out after {timeout:.3g}s") from None
        # DNS failure, refused connection: worth another try
        raise Retryable(f"connection error: {exc.reason}") from None
    except TimeoutError:
        raise Retryable(f"timed out after {timeout:.3g}s") from None
    except (ConnectionError, http.client.HTTPException) as exc:  # e.g. RemoteDisconnected, IncompleteRead
        raise Retryable(f"connection error: {type(exc).__name__}: {exc}") from None


def error_message(exc: urllib.error.HTTPError) -> str:
    """The server's own error text: OpenAI/Gemini/Anthropic ``{"error": {"message"}}``,
    Ollama ``{"error": "..."}``, or the raw body."""
    try:
        raw = exc.read()
    except Exception:  # noqa: BLE001 -- the body is a courtesy; never let reading it mask the HTTP error
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
