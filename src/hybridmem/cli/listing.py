"""``hybridmem list``: the memories themselves, page by page, as a table or JSON (``--all``: every
page, streamed as JSON Lines with ``--json``)."""

from __future__ import annotations

import json
from typing import Any, Optional

import typer

from ..errors import HybridMemError, ValidationError
from .common import cli_context, fail, out


def _fields(order: str, descending: bool, user: Optional[str], agent: Optional[str], session: Optional[str],
            as_of: Optional[str], superseded: bool, flt: Optional[str]) -> dict[str, Any]:  # fmt: skip
    fields: dict[str, Any] = {"order": order, "descending": descending, "include_superseded": superseded}
    fields.update({k: v for k, v in (("user_id", user), ("agent_id", agent), ("session_id", session)) if v})
    if as_of is not None:
        fields["as_of"] = as_of
    if flt is not None:
        try:
            fields["metadata_filter"] = json.loads(flt)
        except json.JSONDecodeError as e:
            raise ValidationError(f"not JSON: {e.msg} at column {e.colno}", field="--filter") from None
    return fields


def _row(m: dict[str, Any]) -> str:
    text = " ".join(c["text"] for c in m["chunks"][:1]).replace("\n", " ")
    when = (m.get("occurred_at") or m.get("recorded_at") or "")[:19]
    gone = f"  (until {m['valid_to'][:19]})" if m.get("valid_to") else ""
    return f"{m['doc_id']}  {when}  v{m['version']}{gone}  {text[:80]}"


def list_memories(
    ctx: typer.Context,
    limit: int = typer.Option(20, "--limit", min=1, max=1000, help="Memories per page (1-1000)."),
    cursor: Optional[str] = typer.Option(None, "--cursor", help="next_cursor of a previous page."),
    every: bool = typer.Option(False, "--all", help="Every page, one after the other."),
    order: str = typer.Option("recorded_at", "--order", help="recorded_at, occurred_at or id."),
    descending: bool = typer.Option(False, "--desc", help="Newest (or last id) first."),
    user: Optional[str] = typer.Option(None, "--user", metavar="ID", help="Only this user's memories."),
    agent: Optional[str] = typer.Option(None, "--agent", metavar="ID", help="Only this agent's memories."),
    session: Optional[str] = typer.Option(None, "--session", metavar="ID", help="Only this session's."),
    as_of: Optional[str] = typer.Option(None, "--as-of", metavar="TIME", help="The memory as it stood then."),
    superseded: bool = typer.Option(False, "--include-superseded", help="Also superseded and deleted versions."),
    flt: Optional[str] = typer.Option(None, "--filter", metavar="JSON", help="Metadata filter, as a query's."),
    as_json: bool = typer.Option(False, "--json", help="The page as JSON (with --all: one memory a line)."),
) -> None:
    """List the stored memories in order, page by page (no ranking); --all walks every page."""
    cli = cli_context(ctx)
    try:
        fields = _fields(order, descending, user, agent, session, as_of, superseded, flt)
        with cli.open_memory(create=False) as mem:
            while True:
                page = mem.list(cursor, limit, **fields)
                if as_json and not every:
                    out.print_json(page.model_dump_json())
                for m in page.memories if (every or not as_json) else ():
                    out.print(
                        json.dumps(m, ensure_ascii=False) if as_json else _row(m),
                        highlight=False,
                        markup=False,
                        soft_wrap=True,
                    )
                cursor = page.next_cursor
                if not every or cursor is None:
                    break
        if not as_json and not every and cursor:
            out.print(f"more: hybridmem list --cursor {cursor}", highlight=False, markup=False, soft_wrap=True)
    except HybridMemError as e:
        raise fail(e) from None


def register(app: typer.Typer) -> None:
    app.command("list")(list_memories)
