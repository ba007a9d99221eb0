"""POST a JSON body, get a JSON object back, standard library only; transient failures become
:class:`Retryable`, the others :class:`HTTPStatusError` with the server's own message."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import urllib.error
import urllib.request
from typing import Any

from ..errors import LLMError
from ..httputil import error_message, retry_after
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
        status, detail = exc.code, error_message(exc)
        if status in _RETRYABLE_STATUS or status >= 500:
            raise Retryable(f"HTTP {status}: {detail}", retry_after(exc.headers)) from None
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


