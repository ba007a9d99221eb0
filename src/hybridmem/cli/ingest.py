"""``hybridmem ingest``: files, directories or stdin text into the memory."""

from __future__ import annotations

import sys
from typing import Any, Optional

import typer

from .. import config
from ..errors import HybridMemError, ValidationError
from ..models import Document
from .common import cli_context, embed_with_progress, err, fail, out, progress
from .parsing import parse_meta

__all__ = ["register"]


def _collect(
    paths: list[str], doc_id: Optional[str], source: Optional[str], metadata: dict[str, Any]
) -> tuple[list[Document], list[dict[str, str]]]:
    """The documents to store, and the files skipped (with why)."""
    docs: list[Document] = []
    skipped: list[dict[str, str]] = []
    from ..ingest import load_documents

    for p in paths:
        if p == "-":
            text = sys.stdin.read()
            docs.append(Document(text=text, id=doc_id, source=source or "stdin", metadata=dict(metadata)))
            continue
        if doc_id and len(paths) > 1:
            raise ValidationError("--id needs exactly one path", field="--id")
        found, skip = load_documents(p, metadata=metadata, doc_id=doc_id)
        docs += found
        skipped += skip
    return docs, skipped


def ingest(
    ctx: typer.Context,
    paths: list[str] = typer.Argument(..., help="Files or directories; '-' reads text from stdin."),
    doc_id: Optional[str] = typer.Option(None, "--id", help="Document id (one file or stdin only)."),
    meta: list[str] = typer.Option([], "--meta", help="key=value metadata for every document (repeatable)."),
    source: Optional[str] = typer.Option(None, "--source", help="Source name for stdin text."),
    wait: bool = typer.Option(False, "--wait", help="Block until every chunk has its vector."),
    chunk_size: int = typer.Option(config.DEFAULT_CHUNK_SIZE, "--chunk-size", help="Characters per chunk (0 = whole)."),
    chunk_overlap: int = typer.Option(config.DEFAULT_CHUNK_OVERLAP, "--chunk-overlap"),
    as_json: bool = typer.Option(False, "--json", help="Print the ingest report as JSON."),
) -> None:
    """Store files, directories or stdin text. Writes are BM25-searchable at once; vectors follow."""
    try:
        docs, skipped = _collect(paths, doc_id, source, parse_meta(meta))
        for s in skipped:
            err.print(f"[yellow]warning:[/] skipped {s['reason']}", highlight=False)
        with cli_context(ctx).open_memory(chunk_size=chunk_size or None, chunk_overlap=chunk_overlap) as mem:
            with progress() as prog:
                task = prog.add_task("indexing", total=len(docs))
                report = mem.add_documents(docs, progress=lambda n: prog.advance(task, n))
            report.skipped = skipped
            if wait:
                embed_with_progress(mem)
            report.pending_vectors = mem.store.pending_count(mem.namespace)
        if as_json:
            out.print_json(report.model_dump_json())
            return
        out.print(
            f"{len(report.added)} added, {len(report.updated)} updated, {len(report.unchanged)} unchanged, "
            f"{len(skipped)} skipped; {report.chunks_written} chunks written"
            + (f" ({report.vectors_reused} vectors reused)" if report.vectors_reused else ""),
            highlight=False,
        )
        if report.pending_vectors:
            out.print(
                f"{report.pending_vectors} chunks wait for vectors (BM25-searchable now); "
                "run `hybridmem embed` or ingest with --wait",
                highlight=False,
            )
    except HybridMemError as e:
        raise fail(e) from None


def register(app: typer.Typer) -> None:
    app.command("ingest")(ingest)
