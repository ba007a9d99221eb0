"""``hybridmem graph …`` commands (a typer sub-app): thin adapters over :class:`hybridmem.graph.GraphRAG`,
reached as ``Memory.graph``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table

from ..errors import HybridMemError, ValidationError
from .common import CliContext, cli_context, err, fail, out, progress
from .render import emit, print_graph_report

__all__ = ["graph_app", "register"]

graph_app = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode=None,
    help="GraphRAG: entity graph, communities and their summaries, global answers.",
)


def _run_update(
    cli: CliContext,
    rebuild: bool,
    llm: Optional[str],
    extractor: str,
    summarizer: str,
    max_cluster_size: Optional[int],
    max_levels: Optional[int],
    batch_size: int,
    as_json: bool,
) -> None:
    try:
        with cli.open_memory(create=False, llm=llm) as mem:
            with progress() as prog:
                tasks: dict[str, Any] = {}

                def on_progress(stage: str, n: int, total: int | None) -> None:
                    if stage not in tasks:
                        tasks[stage] = prog.add_task(stage, total=total)
                    prog.advance(tasks[stage], n)

                rep = mem.graph.update(
                    rebuild=rebuild,
                    extractor=extractor,
                    summarizer=summarizer,
                    max_cluster_size=max_cluster_size,
                    max_levels=max_levels,
                    batch_size=batch_size,
                    progress=on_progress,
                )
        emit(rep, as_json, print_graph_report)
    except HybridMemError as e:
        raise fail(e) from None


_EXTRACTOR = "rules (offline), llm, or auto (the LLM when one is configured)."
_SUMMARIZER = "extractive (offline), llm, or auto (the LLM when one is configured)."


@graph_app.command("build")
def build(
    ctx: typer.Context,
    llm: Optional[str] = typer.Option(
        None, "--llm", help="LLM spec for extraction/summaries (default: HYBRIDMEM_LLM)."
    ),
    extractor: str = typer.Option("auto", "--extractor", help=_EXTRACTOR),
    summarizer: str = typer.Option("auto", "--summarizer", help=_SUMMARIZER),
    max_cluster_size: Optional[int] = typer.Option(
        None, "--max-cluster-size", help="Split communities above this size (default 25)."
    ),
    max_levels: Optional[int] = typer.Option(None, "--max-levels", help="Community levels kept (default 3)."),
    batch_size: int = typer.Option(4, "--batch-size", help="Chunks per LLM extraction call."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Build the namespace's graph from scratch: extract every chunk, detect communities, summarize."""
    _run_update(cli_context(ctx), True, llm, extractor, summarizer, max_cluster_size, max_levels, batch_size, as_json)


@graph_app.command("update")
def update(
    ctx: typer.Context,
    llm: Optional[str] = typer.Option(
        None, "--llm", help="LLM spec for extraction/summaries (default: HYBRIDMEM_LLM)."
    ),
    extractor: str = typer.Option("auto", "--extractor", help=_EXTRACTOR),
    summarizer: str = typer.Option("auto", "--summarizer", help=_SUMMARIZER),
    max_cluster_size: Optional[int] = typer.Option(None, "--max-cluster-size"),
    max_levels: Optional[int] = typer.Option(None, "--max-levels"),
    batch_size: int = typer.Option(4, "--batch-size", help="Chunks per LLM extraction call."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Incremental refresh: extract only new/changed chunks, re-summarize only changed communities."""
    _run_update(cli_context(ctx), False, llm, extractor, summarizer, max_cluster_size, max_levels, batch_size, as_json)


@graph_app.command("status")
def status(ctx: typer.Context, as_json: bool = typer.Option(False, "--json")) -> None:
    """Entities, relations, fresh/stale communities, chunks waiting for extraction, summary ages."""
    try:
        with cli_context(ctx).open_memory(create=False) as mem:
            st = mem.graph.status()
        if as_json:
            sys.stdout.write(st.model_dump_json(indent=2) + "\n")
            return
        t = Table(show_header=False, box=None)
        for k, v in st.model_dump().items():
            t.add_row(k, str(v))
        out.print(t)
        if not st.built:
            out.print("no graph yet: run `hybridmem graph build`", markup=False)
    except HybridMemError as e:
        raise fail(e) from None


@graph_app.command("communities")
def communities(
    ctx: typer.Context,
    level: Optional[int] = typer.Option(None, "--level", "-l", help="Only this level (0 = top)."),
    limit: int = typer.Option(20, "--limit", help="Communities shown."),
    full: bool = typer.Option(False, "--full", help="Print each summary in full."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """List communities with their title, size, freshness and summary."""
    try:
        with cli_context(ctx).open_memory(create=False) as mem:
            comms = mem.graph.communities(level=level)
            stale = mem.graph.stale_community_ids()
        if as_json:
            sys.stdout.write(
                json.dumps(
                    [{**x.__dict__, "stale": x.community_id in stale} for x in comms[:limit]],
                    ensure_ascii=False,
                    indent=2,
                )
                + "\n"
            )
            return
        if not comms:
            out.print("no communities: run `hybridmem graph build`", markup=False)
            return
        t = Table()
        for col in ("id", "level", "parent", "size", "state", "title", "summary"):
            t.add_column(col)
        for x in comms[:limit]:
            summ = x.summary if full else (x.summary[:160] + ("…" if len(x.summary) > 160 else ""))
            t.add_row(
                x.community_id,
                str(x.level),
                x.parent or "",
                str(len(x.members)),
                "stale" if x.community_id in stale else "fresh",
                x.title,
                summ,
            )
        out.print(t)
    except HybridMemError as e:
        raise fail(e) from None


@graph_app.command("show")
def show(
    ctx: typer.Context,
    entity: str = typer.Argument(..., help="An entity name (any case/accent/separator variant)."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """An entity: type, the chunks and documents it comes from, its relations and communities."""
    try:
        with cli_context(ctx).open_memory(create=False) as mem:
            info = mem.graph.show(entity)
        if as_json:
            sys.stdout.write(json.dumps(info, ensure_ascii=False, indent=2) + "\n")
            return
        out.print(
            f"{info['name']} ({info['type']}) — communities: {', '.join(info['communities']) or '–'}",
            markup=False,
            highlight=False,
        )
        out.print(f"documents: {', '.join(info['documents'])}", markup=False, highlight=False)
        out.print(f"chunks: {', '.join(info['chunks'])}", markup=False, highlight=False)
        for r in info["relations_out"]:
            out.print(f"  → {r['type']} {r['target']} (weight {r['weight']:g})", markup=False, highlight=False)
        for r in info["relations_in"]:
            out.print(f"  ← {r['type']} {r['source']} (weight {r['weight']:g})", markup=False, highlight=False)
    except HybridMemError as e:
        raise fail(e) from None


@graph_app.command("export")
def export(
    ctx: typer.Context,
    fmt: str = typer.Option("json", "--format", help="graphml or json."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="File to write (default: stdout)."),
) -> None:
    """Export the graph (entities with provenance and communities, relations) as GraphML or JSON."""
    try:
        if fmt.lower() not in ("json", "graphml"):
            raise ValidationError(f"unknown export format {fmt!r}; use graphml or json", field="--format")
        with cli_context(ctx).open_memory(create=False) as mem:
            text = mem.graph.export(fmt)
        if output is None:
            sys.stdout.write(text + "\n")
        else:
            output.write_text(text + "\n", encoding="utf-8")
            err.print(f"wrote {output}", markup=False, highlight=False)
    except OSError as e:
        raise fail(HybridMemError(f"cannot write {output}: {e.strerror}")) from None
    except HybridMemError as e:
        raise fail(e) from None


@graph_app.command("plot")
def plot(
    ctx: typer.Context,
    output: Path = typer.Option(Path("graph.png"), "--output", "-o", help="PNG file to write."),
    top: int = typer.Option(8, "--top", help="Largest communities drawn."),
    level: Optional[int] = typer.Option(None, "--level", help="Community level (default: the top level)."),
    entity: Optional[str] = typer.Option(
        None, "--entity", "-e", help="Draw this entity's neighbourhood instead (any variant of its name)."
    ),
    hops: int = typer.Option(1, "--hops", help="With --entity: neighbours within 1 or 2 hops."),
    max_nodes: int = typer.Option(80, "--max-nodes", help="Entities drawn at most."),
    labels: int = typer.Option(40, "--labels", help="Labels drawn at most (the most central entities)."),
) -> None:
    """A PNG readable at any graph size: the largest communities, each by its most central entities
    (or, with --entity, one entity's neighbourhood), coloured by community, sized by degree."""
    try:
        if top < 1:
            raise ValidationError("--top must be at least 1", field="--top")
        if hops not in (1, 2):
            raise ValidationError("--hops must be 1 or 2", field="--hops")
        if max_nodes < 2:
            raise ValidationError("--max-nodes must be at least 2", field="--max-nodes")
        if labels < 0:
            raise ValidationError("--labels must be at least 0", field="--labels")
        with cli_context(ctx).open_memory(create=False) as mem:
            info = mem.graph.plot(
                str(output), top=top, level=level, entity=entity, hops=hops, max_nodes=max_nodes, labels=labels
            )
        what = (
            f"neighbourhood of {info['entity']} ({hops} hop{'s' * (hops > 1)})"
            if info["mode"] == "neighbourhood"
            else "communities"
        )
        out.print(
            f"wrote {info['path']}: {what}, {info['nodes']} of {info['entities']} entities, {info['edges']} edges, "
            f"{info['labels']} labels, communities {', '.join(info['communities'])}",
            markup=False,
            highlight=False,
        )
    except OSError as e:
        raise fail(HybridMemError(f"cannot write {output}: {e}")) from None
    except HybridMemError as e:
        raise fail(e) from None


def register(app: typer.Typer) -> None:
    app.add_typer(graph_app, name="graph")
