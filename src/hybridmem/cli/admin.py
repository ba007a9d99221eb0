"""Store maintenance: ``delete``, ``get``, ``history``, ``stats``, ``embed``, ``reembed``, ``migrate``, ``check``,
``backup``."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, Optional

import typer

from ..errors import HybridMemError, NotFoundError, StoreError
from .common import cli_context, embed_with_progress, err, fail, out, progress
from .render import plural, print_history, print_migrate

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


def history(
    ctx: typer.Context,
    memory_id: str = typer.Argument(..., metavar="ID", help="The memory's id (a document id, e.g. s1:3)."),
    as_json: bool = typer.Option(False, "--json", help='Print {"id", "versions", "namespace"} as JSON.'),
) -> None:
    """Every version of a memory, oldest first: when it occurred, was recorded and stopped being current, and why.

    Versions are kept by updates, supersessions, keyed writes (Memory.add(key=)) and soft deletes
    (Memory.forget); `hybridmem delete` removes every version."""
    cli = cli_context(ctx)
    try:
        with cli.open_memory(create=False) as mem:
            versions = mem.history(memory_id)
    except HybridMemError as e:
        raise fail(e) from None
    if as_json:
        out.print_json(
            json.dumps({"id": memory_id, "versions": versions, "namespace": cli.namespace}, ensure_ascii=False)
        )
    else:
        print_history(memory_id, versions)


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
    except sqlite3.DatabaseError as e:  # damage the check at open did not reach (see `hybridmem check`)
        raise fail(_unreadable(cli_context(ctx).db, e)) from None


def _unreadable(db: str, e: Exception) -> StoreError:
    return StoreError(f"reading the store {db} failed: {e}; run `hybridmem --db {db} check`, or restore a backup")


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


def _is_postgres(target: str) -> bool:
    return target.lower().startswith(("postgresql://", "postgres://"))


def _size(n: int) -> str:
    """``812 bytes``, ``3.4 MiB``."""
    if n < 1024:
        return f"{n} bytes"
    size, unit = n / 1024, "KiB"
    for bigger in ("MiB", "GiB", "TiB"):
        if size < 1024:
            break
        size, unit = size / 1024, bigger
    return f"{size:.1f} {unit}"


def _check_report(db: str, namespace: str, embedder: Optional[str]) -> dict[str, Any]:
    """What ``check`` prints: the store's own full check (SQLite), or its consistency checks (PostgreSQL)."""
    from ..memory import Memory
    from ..runtime import display_target, store_exists

    if not store_exists(db):
        raise NotFoundError(f"no memory store at {db} (pass --db)")
    # an SQLite store opens read-only (a check changes nothing, not even a damaged file's header)
    # and without the quick_check at open, which would refuse a damaged store before it is examined
    options = {} if _is_postgres(db) else {"read_only": True, "verify": False}
    try:
        mem = Memory(
            db,
            embedder=embedder,
            namespace=namespace,
            auto_embed=False,
            create=False,
            check_embedder=False,
            store_options=options,
        )
    except StoreError as e:  # refused before any check could run (not a store, unreadable header)
        return {"path": display_target(db), "ok": False, "problems": [str(e)], "namespaces": {}}
    except sqlite3.DatabaseError as e:
        return {"path": display_target(db), "ok": False, "problems": [f"cannot be opened: {e}"], "namespaces": {}}
    with mem:
        if mem.store.capabilities.file_checks:
            report: dict[str, Any] = mem.store.check()
        else:
            said = mem.store.integrity_check()
            report = {
                "ok": said == "ok",
                "problems": [] if said == "ok" else said.split("; "),
                "namespaces": {ns: mem.store.counts(ns) for ns in mem.store.namespaces()},
            }
    return {"path": display_target(db), **report}


def check(ctx: typer.Context, as_json: bool = typer.Option(False, "--json")) -> None:
    """Check the whole store: SQLite's integrity check, foreign keys, the indexes against the chunks, counts."""
    cli = cli_context(ctx)
    try:
        report = _check_report(cli.db, cli.namespace, cli.embedder)
    except HybridMemError as e:
        raise fail(e) from None
    if as_json:
        out.print_json(json.dumps(report, ensure_ascii=False))
    else:
        for name, counts in report["namespaces"].items():
            out.print(
                f"{name}: "
                + ", ".join(f"{plural(n, k.replace('_', ' ').removesuffix('s'))}" for k, n in counts.items()),
                highlight=False,
                markup=False,
            )
        if report["ok"]:
            out.print(f"ok: {report['path']} has no problem", highlight=False, markup=False)
        for problem in report["problems"]:
            err.print(f"problem: {problem}", highlight=False, markup=False)
    if not report["ok"]:
        raise typer.Exit(StoreError.exit_code)


def backup(
    ctx: typer.Context,
    dest: Path = typer.Argument(..., help="The copy: a file (replaced atomically) or a directory to put it in."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Copy the store to DEST while it is in use: SQLite's online backup, checked, then renamed into place."""
    cli = cli_context(ctx)
    if _is_postgres(cli.db):
        from ..runtime import display_target

        err.print(
            "error: a PostgreSQL store is backed up by PostgreSQL: pg_dump --format=custom --schema=hybridmem "
            f"--file={dest} '{display_target(cli.db)}' (the schema is hybridmem unless your server config sets "
            "another; restore with pg_restore --dbname URL, into a database with the vector extension), or copy it "
            f"into an SQLite file with `hybridmem migrate --from URL --to {dest}`",
            highlight=False,
            markup=False,
        )
        raise typer.Exit(2)
    try:
        with cli.open_memory(create=False, check_embedder=False) as mem:
            if not mem.store.capabilities.file_checks:  # pragma: no cover - every file store has it
                raise StoreError(f"{cli.db} cannot be backed up by hybridmem")
            res = mem.store.backup(dest)
    except HybridMemError as e:
        raise fail(e) from None
    if as_json:
        out.print_json(json.dumps({**res, "seconds": round(res["seconds"], 3)}))
        return
    out.print(
        f"backed up {cli.db} to {res['path']}: {_size(res['bytes'])} in {res['seconds']:.2f} s "
        f"({plural(res['documents'], 'document')}, {plural(res['chunks'], 'chunk')}; quick_check ok)",
        highlight=False,
        markup=False,
    )


def register(app: typer.Typer) -> None:
    app.command("delete")(delete)
    app.command("get")(get)
    app.command("history")(history)
    app.command("stats")(stats)
    app.command("embed")(embed)
    app.command("reembed")(reembed)
    app.command("migrate")(migrate)
    app.command("check")(check)
    app.command("backup")(backup)
