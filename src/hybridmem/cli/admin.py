"""Store maintenance: ``delete``, ``get``, ``stats``, ``embed``, ``reembed``, ``migrate``."""

from __future__ import annotations

import json
from typing import Optional

import typer

from ..errors import HybridMemError, NotFoundError
from .common import cli_context, embed_with_progress, err, fail, out, progress
from .render import plural, print_migrate

__all__ = ["register"]


def delete(ctx: typer.Context, ids: list[str] = typer.Argument(..., help="Document ids or chunk ids.")) -> None:
    """Delete documents or single chunks from every index, in one transaction."""
    cli = cli_context(ctx)
    try:
        with cli.open_memory(create=False) as mem:
            found = mem.delete(ids)
        missing = [i for i in ids if i not in found]
        out.print(f"deleted {len(found)}: {', '.join(found) or '–'}", highlight=False)
        if missing:
            err.print(f"[yellow]not found in namespace {cli.namespace!r}:[/] {', '.join(missing)}", highlight=False)
            raise typer.Exit(NotFoundError.exit_code)
    except HybridMemError as e:
        raise fail(e) from None


def get(ctx: typer.Context, doc_id: str) -> None:
    """Print one stored document (metadata and chunks) as JSON."""
    try:
        with cli_context(ctx).open_memory(create=False) as mem:
            out.print_json(json.dumps(mem.get(doc_id), ensure_ascii=False))
    except HybridMemError as e:
        raise fail(e) from None


def stats(ctx: typer.Context, as_json: bool = typer.Option(False, "--json")) -> None:
    """Documents, chunks, vectors, chunks still waiting for vectors, embedder, size."""
    try:
        with cli_context(ctx).open_memory(create=False) as mem:
            s = mem.stats()
        if as_json:
            out.print_json(s.model_dump_json())
            return
        from rich.table import Table

        t = Table(show_header=False)
        for k, v in s.model_dump().items():
            t.add_row(k, ", ".join(v) if isinstance(v, list) else str(v))
        out.print(t)
    except HybridMemError as e:
        raise fail(e) from None


def embed(ctx: typer.Context) -> None:
    """Compute the vectors of every chunk still waiting in the queue."""
    try:
        with cli_context(ctx).open_memory(create=False) as mem:
            n = mem.store.pending_count()
            embed_with_progress(mem)
        out.print(f"embedded {plural(n, 'chunk')}", highlight=False)
    except HybridMemError as e:
        raise fail(e) from None


def reembed(ctx: typer.Context, embedder: str = typer.Option(..., "--embedder", help="The new embedder spec.")) -> None:
    """Switch the store to another embedder and recompute every vector."""
    cli = cli_context(ctx)
    try:
        with cli.open_memory(create=False, check_embedder=False) as mem:
            total = mem.store.counts(mem.namespace)["chunks"]

            with progress() as prog:
                task = prog.add_task(f"re-embedding with {embedder}", total=None)
                n = mem.reembed(embedder, progress=lambda k: prog.advance(task, k))
        out.print(
            f"re-embedded {plural(n, 'chunk')} ({total} in namespace {cli.namespace!r}) with {embedder}",
            highlight=False,
            markup=False,
        )
    except HybridMemError as e:
        raise fail(e) from None


def migrate(
    source: str = typer.Option(..., "--from", help="The store to copy: an SQLite file or a postgresql:// URL."),
    destination: str = typer.Option(..., "--to", help="An empty store to copy into (file or URL)."),
    namespaces: Optional[str] = typer.Option(None, "--namespaces", help="Comma-separated (default: all)."),
    verify_queries: int = typer.Option(
        20,
        "--verify-queries",
        help="Sample queries per namespace compared on both sides (BM25 and dense top-10); 0 skips.",
    ),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Copy namespaces, documents, chunks, embeddings and the graph between backends, then verify
    counts and identical top-10 results on sample queries. Exits 1 when verification fails."""
    from ..migrate import migrate as run

    try:
        with progress() as prog:
            task = prog.add_task("copying documents", total=None)
            rep = run(
                source,
                destination,
                verify_queries=verify_queries,
                namespaces=[n.strip() for n in namespaces.split(",")] if namespaces else None,
                progress=lambda ns, n: prog.update(task, advance=n, description=f"copying {ns}"),
            )
    except HybridMemError as e:
        raise fail(e) from None
    if as_json:
        out.print_json(
            json.dumps(
                {
                    "source": rep.source,
                    "destination": rep.destination,
                    "ok": rep.ok,
                    "namespaces": rep.namespaces,
                    "queries_checked": rep.queries_checked,
                    "mismatches": rep.mismatches,
                    "seconds": round(rep.seconds, 2),
                }
            )
        )
    else:
        print_migrate(rep)
    if not rep.ok:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("delete")(delete)
    app.command("get")(get)
    app.command("stats")(stats)
    app.command("embed")(embed)
    app.command("reembed")(reembed)
    app.command("migrate")(migrate)
