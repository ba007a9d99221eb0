"""``hybridmem dedup``: the near duplicates of a store, grouped (``--dry-run``, the default), or
forgotten but the newest of each group (``--apply``, the reason in their history)."""

from __future__ import annotations

import json
from typing import Any, Optional

import typer

from ..errors import HybridMemError
from .common import cli_context, fail, out


def _show(report: dict[str, Any]) -> None:
    for g in report["duplicates"]:
        k = g["keep"]
        out.print(f"keep  {k['id']}  {k['recorded_at'] or ''}  {k['text'][:80]!r}", highlight=False, markup=False)
        for m in g["drop"]:
            sim = f"jaccard {m['jaccard']:.2f}" + (f" cosine {m['cosine']:.3f}" if m["cosine"] is not None else "")
            out.print(f"  drop {m['id']}  {sim}  {m['text'][:80]!r}", highlight=False, markup=False)
    verb = "forgotten" if report["applied"] else "would be forgotten (--apply to forget them)"
    n = report["forgotten" if report["applied"] else "would_forget"]
    out.print(f"{report['groups']} group(s), {n} memories {verb}", highlight=False, markup=False)


def dedup(
    ctx: typer.Context,
    dry_run: bool = typer.Option(True, "--dry-run/--apply", help="Only show the groups (default), or forget."),
    namespace: Optional[str] = typer.Option(None, "--namespace", "-n", help="The namespace (default: --namespace)."),
    as_json: bool = typer.Option(False, "--json", help="The groups and counts as JSON."),
) -> None:
    """Group the near duplicates of each scope; --apply forgets all but the newest of each group."""
    cli = cli_context(ctx)
    try:
        with cli.open_memory(create=False) as mem:
            report = mem.dedupe(apply=not dry_run, namespace=namespace)
    except HybridMemError as e:
        raise fail(e) from None
    if as_json:
        out.print_json(json.dumps(report, ensure_ascii=False))
    else:
        _show(report)


def register(app: typer.Typer) -> None:
    app.command("dedup")(dedup)
