"""What every command shares: the consoles, the per-invocation :class:`CliContext` (the global
``--db/--namespace/--embedder``, set by the root callback in ``ctx.obj``), opening the memory,
mapping an error to an exit code, and progress (bars on a terminal, plain lines otherwise).

Nothing heavy is imported here at module level: ``hybridmem --help`` must start fast. The memory,
rich and its progress bars load when a command first needs them."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, Optional, cast

import typer

from .. import config
from ..errors import HybridMemError, NotFoundError

if TYPE_CHECKING:
    from rich.console import Console

    from ..memory import Memory

__all__ = [
    "CliContext",
    "PlainProgress",
    "cli_context",
    "embed_with_progress",
    "err",
    "fail",
    "out",
    "progress",
    "real_console",
    "stored_embedder",
]


class _LazyConsole:
    """A rich ``Console`` made on first use (importing rich costs start-up time ``--help`` need not
    pay). Every attribute is the real console's."""

    def __init__(self, make: Callable[[], Console]) -> None:
        self._make = make
        self._console: Console | None = None

    def get(self) -> Console:
        """The real console (made now if not yet)."""
        if self._console is None:
            self._console = self._make()
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self.get(), name)


def _out() -> Console:
    from rich.console import Console

    return Console(soft_wrap=True)


def _err() -> Console:
    from rich.console import Console

    console = Console(stderr=True)
    # a log or a pipe gets each message on one line (a terminal wraps what it shows itself)
    console.soft_wrap = not console.is_terminal
    return console


out = cast("Console", _LazyConsole(_out))
err = cast("Console", _LazyConsole(_err))


def real_console(console: Console) -> Console:
    """``out`` or ``err`` as the rich ``Console`` itself (for rich APIs that take a console)."""
    return console.get() if isinstance(console, _LazyConsole) else console


def stored_embedder(target: str) -> str | None:
    """The embedder spec the store was built with (None: no store yet); see :func:`hybridmem.runtime.stored_embedder`."""
    from ..runtime import stored_embedder as _stored

    return _stored(target)


@dataclass
class CliContext:
    """The global options of one invocation."""

    db: str = str(config.DEFAULT_DB)  # a file path or a postgresql:// URL
    namespace: str = config.DEFAULT_NAMESPACE
    embedder: Optional[str] = None

    def open_memory(
        self, *, create: bool = True, auto_embed: bool = False, long_running: bool = False, **kw: Any
    ) -> Memory:
        """The invocation's memory. A one-shot command (not ``long_running``: not a server) on
        PostgreSQL runs the BM25 leg in SQL unless ``HYBRIDMEM_PG_BM25_LEG`` says otherwise: loading a
        namespace's postings into the process (the default, for servers) costs seconds per 100k
        chunks and pays off over many queries, not one."""
        from ..memory import Memory
        from ..runtime import is_url, store_exists

        # reuse the embedder the store was built with, so commands need no --embedder
        spec = self.embedder or stored_embedder(self.db)
        if not create and not store_exists(self.db):
            raise NotFoundError(f"no memory store at {self.db} (ingest something first, or pass --db)")
        if not long_running and is_url(self.db) and not os.environ.get(config.PG_BM25_LEG_ENV):
            kw["store_options"] = {"bm25_leg": "sql", **(kw.get("store_options") or {})}
        return Memory(self.db, embedder=spec, namespace=self.namespace, auto_embed=auto_embed, create=create, **kw)


def cli_context(ctx: typer.Context) -> CliContext:
    """The invocation's :class:`CliContext` (the defaults when no root callback set one)."""
    return ctx.ensure_object(CliContext)


def fail(e: Exception) -> typer.Exit:
    """Print ``error: MESSAGE`` (one line on stderr) and return the exit to raise."""
    from rich.markup import escape

    code = e.exit_code if isinstance(e, HybridMemError) else 1
    err.print(f"[bold red]error:[/] {escape(str(e))}", highlight=False)
    return typer.Exit(code)


class PlainProgress:
    """What the commands use of ``rich.progress.Progress`` (``add_task``, ``advance``, ``update``)
    as plain lines on stderr, for a log or a pipe where a live bar cannot show: one line when a task
    starts, one per task every ``interval`` seconds while it runs (so a long step never looks hung,
    even when it advances rarely), and one when the block ends.

    >>> with PlainProgress() as prog:
    ...     task = prog.add_task("embedding", total=500)
    ...     prog.advance(task, 16)
    """

    def __init__(self, interval: float = 10.0, stream: IO[str] | None = None) -> None:
        self.interval = interval
        self._stream = stream
        self._tasks: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def __enter__(self) -> PlainProgress:
        self._ticker = threading.Thread(target=self._tick, name="hybridmem-progress", daemon=True)
        self._ticker.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=5)
        with self._lock:
            for t in self._tasks:
                self._line(t, final=exc[0] is None)

    def add_task(self, description: str, total: float | None = None, **_: Any) -> int:
        with self._lock:
            task = {"description": description, "total": total, "done": 0.0, "t0": time.monotonic()}
            self._tasks.append(task)
            self._line(task)
            return len(self._tasks) - 1

    def advance(self, task_id: int, advance: float = 1) -> None:
        with self._lock:
            self._tasks[task_id]["done"] += advance

    def update(
        self,
        task_id: int,
        *,
        advance: float | None = None,
        description: str | None = None,
        total: float | None = None,
        completed: float | None = None,
        **_: Any,
    ) -> None:
        with self._lock:
            task = self._tasks[task_id]
            if description is not None:
                task["description"] = description
            if total is not None:
                task["total"] = total
            if completed is not None:
                task["done"] = completed
            if advance is not None:
                task["done"] += advance

    def _tick(self) -> None:
        while not self._stop.wait(self.interval):
            with self._lock:
                for t in self._tasks:
                    if t["total"] is None or t["done"] < t["total"]:
                        self._line(t)

    def _line(self, task: dict[str, Any], final: bool = False) -> None:
        elapsed = time.monotonic() - task["t0"]
        done, total = int(task["done"]), task["total"]
        counted = f"{done}/{int(total)}" if total is not None else str(done)
        if final:
            text = f"{task['description']}: {counted + ' ' if total is not None or done else ''}done in {elapsed:.1f} s"
        elif total:
            text = f"{task['description']}: {counted} ({100 * done / total:.0f}%), {elapsed:.0f} s elapsed"
        else:
            text = f"{task['description']}: {counted}, {elapsed:.0f} s elapsed"
        stream = self._stream or sys.stderr
        stream.write(text + "\n")
        stream.flush()


def progress(interval: float = 10.0) -> Any:
    """Progress for a block of work: live bars on a terminal (``rich.progress.Progress``), else a
    :class:`PlainProgress` printing a line every ``interval`` seconds to stderr. Both take
    ``add_task(description, total=)``, ``advance(task, n)`` and ``update(task, advance=, description=)``."""
    if not err.is_terminal:
        return PlainProgress(interval)
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=real_console(err),
        transient=False,
    )


def embed_with_progress(mem: Memory) -> None:
    pending = mem.store.pending_count()
    if not pending:
        return
    with progress() as prog:
        task = prog.add_task("embedding", total=pending)
        mem.wait_for_vectors(progress=lambda n: prog.advance(task, n))
