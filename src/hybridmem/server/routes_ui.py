"""The memory explorer (``/ui``): a few static files shipped in the package (``server/ui/``), no
CDN, no build step. Every ``/ui/...`` path answers the same page (the views route in the browser,
so a reload or a shared link works); the page calls the JSON API with the key it holds.

The page is served without a key (it holds no data); every API call it makes is authenticated as
any other. A Content-Security-Policy allows scripts, styles and connections to this server only.
"""

from __future__ import annotations

from importlib import resources

from fastapi import FastAPI
from fastapi.responses import Response

from ..errors import NotFoundError
from .routing import Deps

#: the files under ``/ui/assets/`` and their media types
ASSETS = {
    "app.js": "text/javascript; charset=utf-8",
    "views.js": "text/javascript; charset=utf-8",
    "graph.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}
#: no inline script or style, nothing from another origin, no framing, no form posting elsewhere
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def _read(name: str) -> bytes:
    return resources.files("hybridmem.server").joinpath("ui", name).read_bytes()


def register(app: FastAPI, d: Deps) -> None:
    page = _read("index.html")
    assets = {name: _read(name) for name in ASSETS}

    @app.get("/ui/assets/{name}", include_in_schema=False)
    async def ui_asset(name: str) -> Response:
        if name not in assets:
            raise NotFoundError(f"no such UI asset: {name!r}")
        return Response(assets[name], media_type=ASSETS[name], headers=HEADERS)

    @app.get("/ui", include_in_schema=False)
    @app.get("/ui/{rest:path}", include_in_schema=False)
    async def ui_page(rest: str = "") -> Response:
        """The explorer's page, whatever the view (``rest``): the browser routes it."""
        return Response(page, media_type="text/html; charset=utf-8", headers=HEADERS)
