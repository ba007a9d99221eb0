"""The root ``hybridmem`` app: the global options (into ``ctx.obj``) and every command group, in help order.

The command modules load lazily (:class:`LazyGroup`): ``hybridmem --help`` imports none of them, and
``hybridmem search`` only ``search``'s. Each module keeps its ``register(app)``; the group calls it on
a throw-away Typer the first time one of the module's commands is looked up. Every loaded parameter
without a metavar gets a meaningful one (``TEXT``, ``KEY=VALUE``, ``PATH``, ``N``…) instead of
Typer's ``<str>`` / ``<list[str]>``."""

from __future__ import annotations

import importlib
import sys
from typing import Any, Optional

import typer
from typer.core import TyperCommand, TyperGroup

from .. import config
from ..errors import HybridMemError
from .common import CliContext, err

__all__ = ["COMMANDS", "LazyGroup", "app", "main"]

#: command -> (module of ``hybridmem.cli``, the one-line help of ``hybridmem --help``), in help order.
#: The help line is the command docstring's first sentence (a test keeps the two the same).
COMMANDS: dict[str, tuple[str, str]] = {
    "ingest": ("ingest", "Store files, directories or stdin text."),
    "search": ("search", "Query the memory (hybrid by default) and show each result's rank in each leg."),
    "ask": ("search", "Answer a question from the memory, citing the chunks used as [chunk_id]."),
    "delete": ("admin", "Delete documents or single chunks from every index, in one transaction."),
    "get": ("admin", "Print one stored document (metadata and chunks) as JSON."),
    "list": ("listing", "List the stored memories in order, page by page (no ranking); --all walks every page."),
    "history": (
        "admin",
        "Every version of a memory, oldest first: when it occurred, was recorded and stopped being current, and why.",
    ),
    "extract": (
        "extract_cmd",
        "Run again the fact-extraction batches left pending by a model that failed (--pending).",
    ),
    "dedup": ("dedup", "Group the near duplicates of each scope; --apply forgets all but the newest of each group."),
    "stats": ("admin", "Documents, chunks, vectors, chunks still waiting for vectors, embedder, size."),
    "embed": ("admin", "Compute the vectors of every chunk still waiting in the queue."),
    "reembed": ("admin", "Switch the store to another embedder and recompute every vector."),
    "migrate": (
        "admin",
        "Copy namespaces, documents, chunks, embeddings and the graph between backends, then verify counts and "
        "identical top-10 results on sample queries.",
    ),
    "export": (
        "transfer",
        "Write memories as versioned JSON Lines: documents, metadata, scopes, every version, optionally vectors and graph.",
    ),
    "import": (
        "transfer",
        "Import an export file into --db (SQLite file or PostgreSQL URL); checked whole first, idempotent.",
    ),
    "check": (
        "admin",
        "Check the whole store: SQLite's integrity check, foreign keys, the indexes against the chunks, counts.",
    ),
    "backup": (
        "admin",
        "Copy the store to DEST while it is in use: SQLite's online backup, checked, then renamed into place.",
    ),
    "demo": ("demo", "Build the Helio demo memory in a fresh store and show BM25 vs vectors vs hybrid."),
    "eval": (
        "eval_cmd",
        "Score every mode on a dataset: MRR/nDCG/Recall by category, latency, paired tests, charts; with "
        "--answer (LoCoMo), the answers: LLM-judged J, F1 and BLEU-1 by category, tokens and cost.",
    ),
    "serve": (
        "serve",
        "Serve the memory over HTTP: /v1/query, /v1/answer, /v1/memories, /v1/messages, /v1/documents, /metrics, "
        "/docs.",
    ),
    "ui": ("ui", "Open the memory explorer: a loopback server on the store, the UI at http://127.0.0.1:PORT/ui."),
    "mcp": (
        "serve",
        "Serve the memory to an agent over MCP: tools remember, recall, history, forget, ask; resource hybridmem://stats.",
    ),
    "graph": ("graph", "GraphRAG: entity graph, communities and their summaries, global answers."),
}

#: metavars by option name (the value's shape), then by the parameter's Python type
_OPTION_METAVARS = {
    "--meta": "KEY=VALUE",
    "--filter": "KEY=VALUE|JSON",
    "--filter-json": "JSON",
    "--sweep": "NAME=V1,V2",
    "--embedder": "SPEC",
    "--llm": "SPEC",
    "--db": "PATH|URL",
    "--from": "PATH|URL",
    "--to": "PATH|URL",
}
_TYPE_METAVARS = {"str": "TEXT", "int": "N", "float": "NUMBER", "Path": "PATH", "bool": "BOOLEAN"}


def _metavar(param: Any) -> str | None:
    """The metavar a parameter shows in help (None: leave it as it is)."""
    if getattr(param, "metavar", None) is not None or getattr(param, "is_flag", False):
        return None
    for opt in getattr(param, "opts", ()):
        if opt in _OPTION_METAVARS:
            return _OPTION_METAVARS[opt]
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    args = getattr(annotation, "__args__", None)
    if getattr(annotation, "__origin__", None) is list and args:
        annotation = args[0]  # a repeatable option or a variadic argument: one value's metavar
    if param.param_type_name == "argument" and param.name:
        return str(param.name).upper()  # as click names an argument: DATASET, IDS, QUESTION
    return _TYPE_METAVARS.get(getattr(annotation, "__name__", ""), None)


def _no_type(ctx: Any) -> None:
    return None


def tidy_metavars(command: Any) -> None:
    """Give ``command``'s parameters (and its sub-commands', for a group) meaningful metavars."""
    for param in getattr(command, "params", ()):
        label = _metavar(param)
        if label is not None:
            param.metavar = label
        if param.param_type_name == "argument":
            # an argument shows its name (the metavar); Typer would add "<str>" after it
            setattr(param, "display_type_rich", _no_type)
    for sub in getattr(command, "commands", {}).values():
        tidy_metavars(sub)


def _load(module: str) -> dict[str, Any]:
    """The click commands ``hybridmem.cli.<module>`` registers, by name."""
    mod = importlib.import_module(f"{__package__}.{module}")
    sub = typer.Typer(add_completion=False, rich_markup_mode=None)
    sub.callback()(lambda: None)  # a callback makes Typer build a group even for one command
    mod.register(sub)
    group = typer.main.get_command(sub)
    commands = dict(getattr(group, "commands", {}))
    for cmd in commands.values():
        tidy_metavars(cmd)
    return commands


class LazyGroup(TyperGroup):
    """A Typer group whose commands (:data:`COMMANDS`) are imported the first time they are needed."""

    _listing = False

    def list_commands(self, ctx: Any) -> list[str]:
        return [*COMMANDS, *(n for n in self.commands if n not in COMMANDS)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            if self._listing:  # `hybridmem --help` lists every command without importing any
                return TyperCommand(cmd_name, help=COMMANDS[cmd_name][1])
            self.commands.update({n: c for n, c in _load(COMMANDS[cmd_name][0]).items() if n not in self.commands})
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_commands(ctx, formatter)
        finally:
            self._listing = False

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        try:
            return super().resolve_command(ctx, args)
        except typer.core._click.exceptions.UsageError as e:
            # Typer suggests from the loaded commands only: suggest from them all
            if args and "Did you mean" not in e.message:
                from difflib import get_close_matches

                matches = get_close_matches(args[0], list(COMMANDS))
                if matches:
                    e.message = e.message.rstrip(".") + f". Did you mean {', '.join(map(repr, matches))}?"
            raise


app = typer.Typer(
    cls=LazyGroup,
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
        metavar="PATH|URL",
        help="The memory: an SQLite file, or a postgresql://user@host/db URL.",
    ),
    namespace: str = typer.Option(
        config.DEFAULT_NAMESPACE, "--namespace", "-n", envvar="HYBRIDMEM_NAMESPACE", metavar="NAME"
    ),
    embedder: Optional[str] = typer.Option(
        None,
        "--embedder",
        envvar="HYBRIDMEM_EMBEDDER",
        metavar="SPEC",
        help="e5 (default), use, st:NAME_OR_PATH, openai:MODEL, hash[:DIM]. Defaults to the store's own.",
    ),
) -> None:
    ctx.obj = CliContext(db=db, namespace=namespace, embedder=embedder)


def main() -> None:
    try:
        app()
    except HybridMemError as e:  # pragma: no cover - commands map their own errors
        err.print(f"error: {e}", markup=False, highlight=False)
        sys.exit(e.exit_code)
