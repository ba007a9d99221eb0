"""The root ``hybridmem`` app: the global options (into ``ctx.obj``) and every command group, in help order."""

from __future__ import annotations

import sys
from typing import Optional

import typer

from .. import config
from ..errors import HybridMemError
from . import admin, demo, eval_cmd, graph, ingest, search, serve
from .common import CliContext, err

__all__ = ["app", "main"]

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="hybridmem: long-term memory for AI agents (BM25 ‖ dense, fused by RRF, behind metadata filters).",
    rich_markup_mode=None,
)


@app.callback()
def main_options(
    ctx: typer.Context,
    db: str = typer.Option(
        str(config.DEFAULT_DB),
        "--db",
        envvar="HYBRIDMEM_DB",
        help="The memory: an SQLite file, or a postgresql://user@host/db URL.",
    ),
    namespace: str = typer.Option(config.DEFAULT_NAMESPACE, "--namespace", "-n", envvar="HYBRIDMEM_NAMESPACE"),
    embedder: Optional[str] = typer.Option(
        None,
        "--embedder",
        envvar="HYBRIDMEM_EMBEDDER",
        help="e5 (default), use, st:NAME_OR_PATH, openai:MODEL, hash[:DIM]. Defaults to the store's own.",
    ),
) -> None:
    ctx.obj = CliContext(db=db, namespace=namespace, embedder=embedder)


# the order here is the order of `hybridmem --help`
for _group in (ingest, search, admin, demo, eval_cmd, serve, graph):
    _group.register(app)


def main() -> None:
    try:
        app()
    except HybridMemError as e:  # pragma: no cover - commands map their own errors
        err.print(f"error: {e}")
        sys.exit(e.exit_code)
