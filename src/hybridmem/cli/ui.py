"""``hybridmem ui``: the memory explorer on a loopback server over the store (``hybridmem serve``
bound to 127.0.0.1), its URL printed and, with ``--open``, opened in the browser."""

from __future__ import annotations

import threading
import webbrowser
from typing import Optional

import typer

from .common import out
from .serve import serve


def ui_cmd(
    ctx: typer.Context,
    port: int = typer.Option(8080, "--port", min=1, max=65535, help="Loopback port."),
    db: Optional[str] = typer.Option(
        None, "--db", help="SQLite file or postgresql:// URL (overrides the global --db)."
    ),
    open_browser: bool = typer.Option(False, "--open", help="Open the explorer in the default browser."),
) -> None:
    """Open the memory explorer: a loopback server on the store, the UI at http://127.0.0.1:PORT/ui."""
    url = f"http://127.0.0.1:{port}/ui"
    out.print(f"memory explorer: {url}  (Ctrl+C stops it)")
    if open_browser:
        threading.Timer(1.5, webbrowser.open, args=(url,)).start()
    serve(
        ctx,
        host="127.0.0.1",
        port=port,
        db=db,
        config_file=None,
        allowed_host=None,
        log_level=None,
        log_format=None,
        read_db=None,
        read_your_writes=False,
    )


def register(app: typer.Typer) -> None:
    app.command("ui")(ui_cmd)
