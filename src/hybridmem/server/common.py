"""What the HTTP API and the MCP server share (neither FastAPI nor the MCP SDK is needed here)."""

from __future__ import annotations

import inspect
from typing import Any

from ..errors import HybridMemError

__all__ = ["NotImplementedOnServer", "ask"]


class NotImplementedOnServer(HybridMemError):
    """This hybridmem version lacks what the request needs (HTTP 501)."""

    http_status = 501
    error_type = "not_implemented"


def ask(memory: Any, question: str, **options: Any) -> Any:
    """``memory.ask(question, ...)`` with the options that memory's ``ask`` accepts (an option that
    is None is left to ``ask``'s default); :class:`NotImplementedOnServer` when it has no ``ask``."""
    fn = getattr(memory, "ask", None)
    if fn is None:
        raise NotImplementedOnServer("grounded answers are not available in this hybridmem version")
    params = inspect.signature(fn).parameters
    return fn(question, **{k: v for k, v in options.items() if v is not None and k in params})
