"""``hybridmem export`` and ``hybridmem import``: a store's memories as a JSON Lines file
(docs/export-format.md) and back, into an SQLite file or a PostgreSQL URL. The store is opened as
data: no embedding model loads."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Optional

import typer

from ..errors import HybridMemError, ValidationError
from .common import cli_context, err, fail, out, progress

__all__ = ["register"]


def export(
    ctx: typer.Context,
    output: Optional[str] = typer.Option(
        None, "--output", "-o", metavar="FILE", help="Write here (FILE.gz is compressed); default: standard output."
    ),
    namespaces: Optional[list[str]] = typer.Option(
        None, "--namespace", "-n", metavar="NAME", help="Namespace to export (repeat; default: the global --namespace)."
    ),
    all_namespaces: bool = typer.Option(False, "--all-namespaces", help="Every namespace of the store."),
    vectors: bool = typer.Option(False, "--with-vectors", help="The chunks' vectors too (reused by an import)."),
    graph: bool = typer.Option(
        False, "--with-graph", help="The GraphRAG layer too (entities, relations, communities)."
    ),
) -> None:
    """Write memories as versioned JSON Lines: documents, metadata, scopes, every version, optionally vectors and graph."""
    from ..transfer import export_to

    cli = cli_context(ctx)
    if all_namespaces and namespaces:
        raise fail(ValidationError("give --namespace or --all-namespaces, not both", field="--all-namespaces"))
    names = None if all_namespaces else (namespaces or [cli.namespace])
    try:
        rep = export_to(cli.db, output, names, vectors=vectors, graph=graph)
    except HybridMemError as e:
        raise fail(e) from None
    except OSError as e:
        raise fail(ValidationError(f"cannot write {output}: {e.strerror or e}", field="--output")) from None
    docs = sum(c["documents"] for c in rep.namespaces.values())
    vecs = sum(c["vectors"] for c in rep.namespaces.values())
    err.print(
        f"exported {docs} documents ({vecs} vectors) of {len(rep.namespaces)} namespace(s) in {rep.seconds:.1f} s"
        + (f" to {output}" if output and output != "-" else ""),
        highlight=False,
    )


def import_(
    ctx: typer.Context,
    file: Path = typer.Argument(..., metavar="FILE", help="An export file (plain or .gz)."),
    reembed: bool = typer.Option(
        False, "--reembed", help="Leave the file's vectors out (another embedder): every chunk is queued for embedding."
    ),
    on_conflict: str = typer.Option(
        "error",
        "--on-conflict",
        metavar="error|skip|replace",
        help="A document the store holds with other content: refuse the file (default), keep the store's, or write the file's.",
    ),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Import an export file into --db (SQLite file or PostgreSQL URL); checked whole first, idempotent."""
    from ..transfer import import_into

    cli = cli_context(ctx)
    if not file.is_file():
        raise fail(ValidationError(f"no file {file}", field="FILE"))
    try:
        with progress() as prog:
            task = prog.add_task("importing", total=None)
            rep = import_into(
                file,
                cli.db,
                reembed=reembed,
                on_conflict=on_conflict,
                progress=lambda ns, n: prog.update(task, advance=n, description=f"importing {ns}"),
            )
    except HybridMemError as e:
        raise fail(e) from None
    if as_json:
        out.print_json(json.dumps({**asdict(rep), "seconds": round(rep.seconds, 2)}))
        return
    for ns, c in rep.namespaces.items():
        out.print(
            f"{ns}: {c.get('written', 0)} written, {c.get('unchanged', 0)} unchanged, {c.get('conflicts', 0)} kept "
            f"(other content), {c.get('replaced', 0)} replaced; {c.get('vectors', 0)} vectors reused, "
            f"{c.get('queued', 0)} chunks to embed; {c.get('graph_rows', 0)} graph rows",
            highlight=False,
        )
    for note in rep.notes:
        err.print(f"[yellow]note:[/] {note}", highlight=False)
    if any(c.get("queued", 0) for c in rep.namespaces.values()):
        err.print("chunks wait for their vectors: `hybridmem embed` computes them (or a running server does)")


def register(app: typer.Typer) -> None:
    app.command("export")(export)
    app.command("import")(import_)
