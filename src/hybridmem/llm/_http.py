"""POST a JSON body, get a JSON object back, over the shared transport of
:func:`hybridmem.httputil.post`; transient failures become :class:`~hybridmem.retry.Retryable`,
the others :class:`HTTPStatusError` with the server's own message."""

from __future__ import annotations

import json
from typing import Any

from ..errors import LLMError
from ..httputil import post

__all__ = ["HTTPStatusError", "post_json"]

# 408 is a server-side timeout, 409 a transient conflict; every other 4xx means the request is wrong
_RETRYABLE_STATUS = frozenset({408, 409, 429})
_USER_AGENT = "hybridmem-llm"


class HTTPStatusError(LLMError):
    """A non-retryable HTTP error (400, 401, 404, ...)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def post_json(
    url: str, body: dict[str, Any], headers: dict[str, str], timeout: float, *, what: str, auth_hint: str = ""
) -> dict[str, Any]:
    data = json.dumps(body, ensure_ascii=False).encode("utf-8")
    raw = post(
        url,
        data,
        headers,
        timeout,
        what=what,
        error=LLMError,
        status_error=HTTPStatusError,
        retry_status=_RETRYABLE_STATUS,
        user_agent=_USER_AGENT,
        auth_hint=auth_hint,
    )
    try:
        payload = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise LLMError(f"{what}: response is not JSON: {raw[:200].decode('utf-8', 'replace')!r}") from None
    if not isinstance(payload, dict):
        raise LLMError(f"{what}: response is a JSON {type(payload).__name__}, expected an object")
    return payload
