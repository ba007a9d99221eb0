"""``hybridmem ingest``: files, directories or stdin text into the memory."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Optional

import typer
from rich.markup import escape

from .. import config
from ..errors import HybridMemError, ValidationError
from ..ingest import check_metadata
from ..models import Document, IngestReport
from .common import cli_context, embed_with_progress, err, fail, out, progress
from .parsing import parse_meta

if TYPE_CHECKING:
    from ..memory import Memory

__all__ = ["register"]


#: the exit code of an ingest that stored some inputs but not all (each one named on stderr)
PARTIAL_EXIT = 7


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _ingest_all(mem: Memory, paths: list[str], opts: dict[str, Any], prog: Any) -> IngestReport:
    """Every path into ``mem``, one after the other (a later path's ids are checked against what
    the earlier ones stored)."""
    report = IngestReport()
    task = prog.add_task("indexing", total=None)
    for p in paths:
        if p == "-":
            doc = Document(
                text=sys.stdin.read(), id=opts["doc_id"], source=opts["source"] or "stdin", metadata=opts["meta"]
            )
            part = mem.add_documents([doc], skip_invalid=True)
        else:
            part = mem.ingest_path(
                p,
                metadata=opts["meta"],
                doc_id=opts["doc_id"],
                root=opts["root"],
                id_prefix=opts["id_prefix"],
                encoding=opts["encoding"],
                replace_metadata=opts["replace_meta"],
                progress=lambda n: prog.advance(task, n),
            )
        report.merge(part)
    return report


def _print_report(report: IngestReport) -> None:
    for s in report.skipped:
        what = s["path"] + (f" (id {s['id']})" if "id" in s else "")
        err.print(f"[yellow]skipped[/] {escape(what)}: {escape(s['reason'])}", highlight=False)
    for n in report.notes:
        err.print(f"[cyan]note[/] {escape(n['path'])}: {escape(n['message'])}", highlight=False)
    out.print(
        f"{len(report.added)} added, {len(report.updated)} updated, {len(report.unchanged)} unchanged, "
        f"{len(report.skipped)} skipped; {_plural(report.chunks_written, 'chunk')} written"
        + (f" ({_plural(report.vectors_reused, 'vector')} reused)" if report.vectors_reused else ""),
        highlight=False,
    )
    if report.pending_vectors:
        out.print(
            f"{_plural(report.pending_vectors, 'chunk')} wait for vectors (BM25-searchable now); "
            "run `hybridmem embed` or ingest with --wait",
            highlight=False,
        )


def ingest(
    ctx: typer.Context,
    paths: list[str] = typer.Argument(..., help="Files or directories; '-' reads text from stdin."),
    doc_id: Optional[str] = typer.Option(None, "--id", help="Document id (one file or stdin only)."),
    meta: list[str] = typer.Option(
        [], "--meta", metavar="KEY=VALUE", help="Metadata for every document (repeatable); merged into stored metadata."
    ),
    replace_meta: bool = typer.Option(
        False, "--replace-meta", help="Replace a re-ingested document's metadata instead of merging into it."
    ),
    root: Optional[str] = typer.Option(
        None,
        "--root",
        metavar="DIR",
        help="Ids are paths relative to DIR (default: the current directory if the path is inside it, else its parent).",
    ),
    id_prefix: str = typer.Option("", "--id-prefix", metavar="TEXT", help="Put TEXT before every id from a path."),
    encoding: Optional[str] = typer.Option(
        None, "--encoding", metavar="NAME", help="Read files in this encoding (default: UTF-8, else detected)."
    ),
    source: Optional[str] = typer.Option(None, "--source", help="Source name for stdin text."),
    wait: bool = typer.Option(False, "--wait", help="Block until every chunk has its vector."),
    chunk_size: int = typer.Option(config.DEFAULT_CHUNK_SIZE, "--chunk-size", help="Characters per chunk (0 = whole)."),
    chunk_overlap: int = typer.Option(config.DEFAULT_CHUNK_OVERLAP, "--chunk-overlap"),
    as_json: bool = typer.Option(False, "--json", help="Print the ingest report as JSON."),
) -> None:
    """Store files, directories or stdin text. Writes are BM25-searchable at once; vectors follow.

    A file that cannot be stored (too big, binary, undecodable, an id another file holds) is named
    on stderr and the others are stored; the exit code is then 7 (0: every input stored)."""
    try:
        if doc_id and len(paths) > 1:
            raise ValidationError("--id needs exactly one path", field="--id")
        check_metadata(parse_meta(meta), "--meta")  # every document gets it: a usage error, not a skip
        opts = {
            "doc_id": doc_id,
            "meta": parse_meta(meta),
            "source": source,
            "root": root,
            "id_prefix": id_prefix,
            "encoding": encoding,
            "replace_meta": replace_meta,
        }
        with cli_context(ctx).open_memory(chunk_size=chunk_size or None, chunk_overlap=chunk_overlap) as mem:
            with progress() as prog:
                report = _ingest_all(mem, paths, opts, prog)
            if wait:
                embed_with_progress(mem)
            report.pending_vectors = mem.store.pending_count(mem.namespace)
        if as_json:
            out.print_json(report.model_dump_json())
        else:
            _print_report(report)
    except HybridMemError as e:
        raise fail(e) from None
    if report.skipped:
        raise typer.Exit(PARTIAL_EXIT)


def register(app: typer.Typer) -> None:
    app.command("ingest")(ingest)
