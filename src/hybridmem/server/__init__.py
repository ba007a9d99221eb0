"""Network adapters over :class:`hybridmem.Memory`: the HTTP API (``create_app``) and the MCP
server (``create_server``). Needs the ``server`` extra: ``pip install 'hybridmem[server]'``."""

from __future__ import annotations

from typing import Any

__all__ = ["ServerConfig", "create_app", "create_server", "load_config", "run_server"]

_HINT = "the hybridmem server needs its extra: pip install 'hybridmem[server]'"


def __getattr__(name: str) -> Any:
    # lazy: the MCP server must not need FastAPI, and importing hybridmem.server costs nothing
    try:
        if name in ("create_app", "run_server"):
            from . import http

            return getattr(http, name)
        if name == "create_server":
            from .mcp import create_server

            return create_server
        if name in ("ServerConfig", "load_config"):
            from . import config

            return getattr(config, name)
    except ModuleNotFoundError as e:
        if e.name and e.name.split(".")[0] in (
            "fastapi",
            "starlette",
            "uvicorn",
            "mcp",
            "multipart",
            "python_multipart",
        ):
            raise ModuleNotFoundError(f"{_HINT} (missing: {e.name})", name=e.name) from None
        raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
