"""``hybridmem extract --pending``: run again the fact-extraction batches a failing model left
pending (``Memory.extract_pending``); and the summary of an extraction that ``hybridmem ingest
--format chat --extract`` prints too."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, Optional

import typer
from rich.markup import escape

from ..errors import HybridMemError, ValidationError
from .common import cli_context, err, fail, out

if TYPE_CHECKING:
    from ..models import ExtractionReport

__all__ = ["print_extraction", "register"]

#: the exit code when batches are still pending after the run (the model failed again)
PENDING_EXIT = 7


def print_extraction(report: ExtractionReport) -> None:
    """A line per batch that failed, then what the run extracted and what it cost."""
    for b in report.batches:
        if b.status == "pending":
            where = f"{b.turns[0]}..{b.turns[-1]}" if len(b.turns) > 1 else b.turns[0]
            err.print(f"[yellow]pending[/] batch {b.batch_id} (turns {escape(where)}): {escape(b.error or '')}")
    events = Counter(f.event for f in report.facts)
    dropped = sum(len(b.dropped) for b in report.batches)
    u = report.usage
    shown = ", ".join(f"{n} {e}" for e, n in sorted(events.items())) or "none"
    out.print(
        f"extraction ({report.model}): {len(report.batches)} batch(es), {len(report.facts)} fact(s) ({shown}), "
        f"{dropped} dropped; {u.calls} LLM call(s), {u.prompt_tokens} prompt + {u.completion_tokens} completion tokens",
        markup=False,
        highlight=False,
    )
    if report.pending:
        out.print(
            f"{report.pending} batch(es) pending: their turns are stored; retry with `hybridmem extract --pending`",
            markup=False,
            highlight=False,
        )


def extract(
    ctx: typer.Context,
    pending: bool = typer.Option(False, "--pending", help="Run again the batches a failing model left pending."),
    session: Optional[str] = typer.Option(
        None, "--session", metavar="ID", help="Extract from the turns this session holds (stored without --extract)."
    ),
    extract_batch: int = typer.Option(20, "--extract-batch", min=1, max=200, help="--session: turns per LLM call."),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="At most N batches, oldest first."),
    all_namespaces: bool = typer.Option(False, "--all-namespaces", help="Every namespace's (default: --namespace)."),
    llm: Optional[str] = typer.Option(None, "--llm", help="The LLM spec (default: HYBRIDMEM_LLM)."),
    as_json: bool = typer.Option(False, "--json", help="Print the extraction report as JSON."),
) -> None:
    """Run again the fact-extraction batches left pending by a model that failed (--pending).

    Turns ingested with --extract whose LLM call timed out, failed or answered invalid JSON are
    stored, and their batch waits in the store; this runs each again, its facts through the
    conflict check. --session ID extracts from the turns a session holds (ingested without
    --extract). The exit code is 7 when batches are still pending after it."""
    try:
        if pending == (session is not None):
            raise ValidationError("say what to extract: --pending, or --session ID (one of the two)", "--pending")
        kw: dict[str, Any] = {"llm": llm} if llm else {}
        with cli_context(ctx).open_memory(create=False, **kw) as mem:
            if mem.llm is None:
                raise ValidationError("extracting facts needs an LLM: give --llm SPEC or set HYBRIDMEM_LLM", "--llm")
            if session is not None:
                report = mem.extract_session(session, extract_batch=extract_batch)
            else:
                report = mem.extract_pending(namespace="*" if all_namespaces else None, limit=limit)
    except HybridMemError as e:
        raise fail(e) from None
    if as_json:
        out.print_json(report.model_dump_json())
    else:
        print_extraction(report)
    if report.pending and any(b.status == "pending" for b in report.batches):
        raise typer.Exit(PENDING_EXIT)


def register(app: typer.Typer) -> None:
    app.command("extract")(extract)
