"""``hybridmem ingest``: files, directories or stdin text into the memory."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Optional

import typer
from rich.markup import escape

from .. import config
from ..errors import HybridMemError, ValidationError
from ..ingest import check_metadata, common_root
from ..models import Document, IngestReport
from .common import cli_context, embed_with_progress, err, fail, out, progress
from .parsing import parse_meta

if TYPE_CHECKING:
    from ..memory import Memory

__all__ = ["register"]


#: the exit code of an ingest that stored some inputs but not all (each one named on stderr)
PARTIAL_EXIT = 7

_FORMAT_HELP = (
    "files (default: documents, by suffix) or chat (conversation files: .jsonl a message a line, .json an "
    'array of messages or {"session_id", "messages"}; each message a memory with speaker, turn and time).'
)
_EXTRACT_HELP = (
    "--format chat: then let the LLM (--llm or HYBRIDMEM_LLM) extract facts from the new turns, each through "
    "the conflict check (kind: fact, naming its source turns); a failed batch stays pending (hybridmem extract --pending)."
)
_SESSION_HELP = "--format chat: the conversation the messages belong to (needed unless the file names it)."


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _ingest_all(mem: Memory, paths: list[str], opts: dict[str, Any], prog: Any) -> IngestReport:
    """Every path into ``mem``, one after the other (a later path's ids are checked against what
    the earlier ones stored). Without ``--root`` the ids of several paths are relative to the
    directory holding them all (:func:`~hybridmem.ingest.common_root`)."""
    report = IngestReport()
    task = prog.add_task("indexing", total=None)
    files = [p for p in paths if p != "-"]
    root = opts["root"]
    if root is None and len(files) > 1:
        root = common_root(files)  # a/METADATA and b/METADATA stay two documents
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
                root=root,
                id_prefix=opts["id_prefix"],
                encoding=opts["encoding"],
                include_all=opts["include_all"],
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


def _chat_options(opts: dict[str, Any], meta: dict[str, Any]) -> None:
    """Refuse the options of file ingests that a chat ingest has no use for, and scope keys in --meta."""
    from ..conversation import SCOPE_KEYS

    flags = {"doc_id": "--id", "root": "--root", "id_prefix": "--id-prefix", "encoding": "--encoding"}
    flags["include_all"] = "--include-all"
    flags.update({"source": "--source", "replace_meta": "--replace-meta"})
    for key, flag in flags.items():
        if opts[key]:
            raise ValidationError("does not apply to --format chat (a message's id and source are its own)", flag)
    reserved = sorted(set(meta) & set(SCOPE_KEYS))
    if reserved:
        raise ValidationError(
            f"{', '.join(reserved)} is set by each message (use --session, --user, --agent)", "--meta"
        )


def _ingest_chat(
    mem: Memory, convos: list[Any], meta: dict[str, Any], extract: dict[str, Any]
) -> tuple[IngestReport, list[str]]:
    """Each conversation into its session (``Memory.add_messages``, with ``extract``: its options);
    the report, and a line per session saying which turns its messages became."""
    report, lines = IngestReport(), []
    if extract["extract"] and mem.llm is None:
        raise ValidationError("extracting facts needs an LLM: give --llm SPEC or set HYBRIDMEM_LLM", "--extract")
    for c in convos:
        last = mem.store.max_turn(mem.namespace, c.session_id)
        first = 0 if last is None else last + 1
        msgs = [{**m, "metadata": {**meta, **m.get("metadata", {})}} if meta else m for m in c.messages]
        report.merge(mem.add_messages(msgs, **c.scope(), **extract))
        turns = f"turns {first}-{first + len(msgs) - 1}" if len(msgs) > 1 else f"turn {first}"
        lines.append(
            f"session {c.session_id}: {_plural(len(msgs), 'message')} from {c.path} as {turns}"
            + (f" (it already held turns 0-{last}: a file ingested twice is stored twice)" if last is not None else "")
        )
    return report, lines


def _run_ingest(ctx: typer.Context, paths: list[str], opts: dict[str, Any], chat: dict[str, Any] | None) -> None:
    """The ingest itself (files, or ``chat`` conversations), the vectors when ``--wait``, the report."""
    convos = None
    if chat is not None:
        from .chat import load_conversations

        _chat_options(opts, opts["meta"])
        convos = load_conversations(paths, chat)  # every message checked before anything is written
    lines: list[str] = []
    kw = {"chunk_size": opts["chunk_size"] or None, "chunk_overlap": opts["overlap"]}
    with cli_context(ctx).open_memory(**kw, **({"llm": opts["llm"]} if opts["llm"] else {})) as mem:
        if convos is not None:
            report, lines = _ingest_chat(mem, convos, opts["meta"], opts["extract"])
        else:
            with progress() as prog:
                report = _ingest_all(mem, paths, opts, prog)
        if opts["wait"]:
            embed_with_progress(mem)
        report.pending_vectors = mem.store.pending_count(mem.namespace)
    if opts["as_json"]:
        out.print_json(report.model_dump_json())
    else:
        for line in lines:
            out.print(line, markup=False, highlight=False)
        _print_report(report)
        if report.extraction is not None:
            from .extract_cmd import print_extraction

            print_extraction(report.extraction)
    if report.skipped:
        raise typer.Exit(PARTIAL_EXIT)


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
        help=(
            "Ids are paths relative to DIR (default: the current directory if every path is inside it, "
            "else the deepest directory holding them all)."
        ),
    ),
    id_prefix: str = typer.Option("", "--id-prefix", metavar="TEXT", help="Put TEXT before every id from a path."),
    encoding: Optional[str] = typer.Option(
        None, "--encoding", metavar="NAME", help="Read files in this encoding (default: UTF-8, else detected)."
    ),
    include_all: bool = typer.Option(
        False, "--include-all", help="In directories, every file whose content is text, whatever its suffix."
    ),
    source: Optional[str] = typer.Option(None, "--source", help="Source name for stdin text."),
    fmt: str = typer.Option("files", "--format", metavar="FORMAT", help=_FORMAT_HELP),
    session: Optional[str] = typer.Option(None, "--session", metavar="ID", help=_SESSION_HELP),
    user: Optional[str] = typer.Option(None, "--user", metavar="ID", help="--format chat: the user (scope)."),
    agent: Optional[str] = typer.Option(None, "--agent", metavar="ID", help="--format chat: the agent (scope)."),
    extract: bool = typer.Option(False, "--extract", help=_EXTRACT_HELP),
    extract_batch: int = typer.Option(20, "--extract-batch", min=1, max=200, help="--extract: turns per LLM call."),
    llm: Optional[str] = typer.Option(None, "--llm", help="--extract: the LLM spec (default: HYBRIDMEM_LLM)."),
    wait: bool = typer.Option(False, "--wait", help="Block until every chunk has its vector."),
    chunk_size: int = typer.Option(config.DEFAULT_CHUNK_SIZE, "--chunk-size", help="Characters per chunk (0 = whole)."),
    chunk_overlap: int = typer.Option(config.DEFAULT_CHUNK_OVERLAP, "--chunk-overlap"),
    as_json: bool = typer.Option(False, "--json", help="Print the ingest report as JSON."),
) -> None:
    """Store files, directories or stdin text. Writes are BM25-searchable at once; vectors follow.

    A file that cannot be stored (too big, binary, undecodable, an id another file holds) is named
    on stderr and the others are stored; the exit code is then 7 (0: every input stored).
    --format chat stores conversation files (.jsonl: a message a line; .json: an array of messages
    or {"session_id", "messages"}) as chat messages of --session, checked before anything is written."""
    try:
        scope = {"session_id": session, "user_id": user, "agent_id": agent}
        if fmt not in ("files", "chat"):
            raise ValidationError(f"expected files or chat, got {fmt!r}", field="--format")
        if fmt != "chat" and any(scope.values()):
            raise ValidationError("--session, --user and --agent go with --format chat", field="--session")
        if fmt != "chat" and extract:
            raise ValidationError("facts are extracted from conversations: use it with --format chat", "--extract")
        if doc_id and len(paths) > 1 and fmt != "chat":
            raise ValidationError("--id needs exactly one path", field="--id")
        check_metadata(parse_meta(meta), "--meta")  # every document gets it: a usage error, not a skip
        opts = {
            "doc_id": doc_id,
            "meta": parse_meta(meta),
            "source": source,
            "root": root,
            "id_prefix": id_prefix,
            "encoding": encoding,
            "include_all": include_all,
            "replace_meta": replace_meta,
            **{"wait": wait, "chunk_size": chunk_size, "overlap": chunk_overlap, "as_json": as_json},
            "extract": {"extract": extract, "extract_batch": extract_batch},
            "llm": llm,
        }
        _run_ingest(ctx, paths, opts, scope if fmt == "chat" else None)
    except HybridMemError as e:
        raise fail(e) from None


def register(app: typer.Typer) -> None:
    app.command("ingest")(ingest)
