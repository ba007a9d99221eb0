"""What every command shares: the consoles, the per-invocation :class:`CliContext` (the global
``--db/--namespace/--embedder``, set by the root callback in ``ctx.obj``), opening the memory,
mapping an error to an exit code, and progress bars."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from .. import config
from ..errors import HybridMemError, NotFoundError
from ..memory import Memory, store_exists, stored_embedder

__all__ = ["CliContext", "cli_context", "embed_with_progress", "err", "fail", "out", "progress", "stored_embedder"]

out = Console(soft_wrap=True)
err = Console(stderr=True)


@dataclass
class CliContext:
    """The global options of one invocation."""

    db: str = str(config.DEFAULT_DB)  # a file path or a postgresql:// URL
    namespace: str = config.DEFAULT_NAMESPACE
    embedder: Optional[str] = None

    def open_memory(self, *, create: bool = True, auto_embed: bool = False, **kw: Any) -> Memory:
        # reuse the embedder the store was built with, so commands need no --embedder
        spec = self.embedder or stored_embedder(self.db)
        if not create and not store_exists(self.db):
            raise NotFoundError(f"no memory store at {self.db} (ingest something first, or pass --db)")
        return Memory(self.db, embedder=spec, namespace=self.namespace, auto_embed=auto_embed, create=create, **kw)


def cli_context(ctx: typer.Context) -> CliContext:
    """The invocation's :class:`CliContext` (the defaults when no root callback set one)."""
    return ctx.ensure_object(CliContext)


def fail(e: Exception) -> typer.Exit:
    code = e.exit_code if isinstance(e, HybridMemError) else 1
    err.print(f"[bold red]error:[/] {e}", highlight=False)
    return typer.Exit(code)


def progress() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=False,
        disable=not err.is_terminal,
    )


def embed_with_progress(mem: Memory) -> None:
    pending = mem.store.pending_count()
    if not pending:
        return
    with progress() as prog:
        task = prog.add_task("embedding", total=pending)
        mem.wait_for_vectors(progress=lambda n: prog.advance(task, n))
