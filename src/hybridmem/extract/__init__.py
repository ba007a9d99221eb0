"""Facts from conversations (``Memory.add_messages(..., extract=True)``, docs/llm.md): the
configured LLM reads the new turns in batches, with the scope's most relevant current facts, and
proposes short statements (a key, a time, the turns they came from) through structured output
(:mod:`.prompt`); each checked fact goes through the conflict check and is stored as a memory of
``kind: "fact"`` with its provenance (:mod:`.facts`). The turns stay stored whatever happens.

Cost is bounded: one extraction call per batch (``batch`` turns, at most ``max_chars`` of their
text), then one conflict-check call per fact that has similar facts in its scope and no key held
already; at most :data:`CONCURRENCY` extraction calls at once in the process. Every call's usage is
reported per batch and in total. A batch whose call fails (timeout, HTTP error, invalid JSON after
the LLM layer's retries and its one repair) stays pending in the store (:mod:`.pending`) and
:func:`run_pending` retries it."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import LLMError, NotFoundError, ValidationError
from ..models import DroppedFact, ExtractionBatch, ExtractionReport, Usage
from ..timeexpr import parse_timestamp
from . import pending, prompt
from .facts import FACT_FILTER, Writes, store_fact
from .pending import Batch

__all__ = [
    "BUDGET_ENVS",
    "CONCURRENCY",
    "Options",
    "budget_from_env",
    "check_options",
    "extract_turns",
    "pending_count",
    "run_pending",
    "stored_session",
]

#: the most extraction calls running at once in this process (``HYBRIDMEM_EXTRACT_CONCURRENCY``)
CONCURRENCY = max(1, int(os.environ.get("HYBRIDMEM_EXTRACT_CONCURRENCY", "") or 2))
_SLOTS = threading.BoundedSemaphore(CONCURRENCY)


@dataclass(frozen=True)
class Options:
    """``batch``: turns per call; ``max_chars``: the most characters of turn text in one call;
    ``max_facts``: the most facts kept from one call; ``known``: current facts shown with the
    turns; ``candidates``: similar facts each fact's conflict check compares with."""

    batch: int = 20
    max_chars: int = 12_000
    max_facts: int = 20
    known: int = 10
    candidates: int = 5


#: the environment variables of the per-call budget, with their defaults and bounds
BUDGET_ENVS = {
    "max_chars": ("HYBRIDMEM_EXTRACT_MAX_CHARS", 12_000, 500, 1_000_000),
    "max_facts": ("HYBRIDMEM_EXTRACT_MAX_FACTS", 20, 1, 200),
}


def budget_from_env() -> dict[str, int]:
    """``max_chars`` and ``max_facts`` from the environment (unset: the defaults)."""
    out = {}
    for name, (env, default, lo, hi) in BUDGET_ENVS.items():
        raw = os.environ.get(env, "").strip()
        try:
            value = int(raw) if raw else default
        except ValueError:
            value = lo - 1
        if not lo <= value <= hi:
            raise ValidationError(f"must be an integer from {lo} to {hi}, got {raw!r}", field=env)
        out[name] = value
    return out


def check_options(extract: Any, batch: Any, llm: Any) -> Options:
    """The options of ``add_messages(extract=..., extract_batch=...)``, checked before anything is
    written; ValidationError naming ``extract`` when there is no LLM to extract with."""
    if not isinstance(extract, bool):
        raise ValidationError(f"must be true or false, got {extract!r}", field="extract")
    if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= 200:
        raise ValidationError(f"must be an integer from 1 to 200, got {batch!r}", field="extract_batch")
    if extract and llm is None:
        raise ValidationError(
            "extracting facts needs an LLM (llm=, or HYBRIDMEM_LLM; e.g. openai:MODEL with "
            "HYBRIDMEM_LLM_BASE_URL for a local server)",
            field="extract",
        )
    return Options(batch=batch, **budget_from_env())


def batches_of(ns: str, turns: Sequence[tuple[str, str]], scope: dict[str, Any], opts: Options) -> list[Batch]:
    """``turns`` (id, text) cut into batches of ``opts.batch`` turns and at most ``opts.max_chars``
    characters of text (a batch holds one turn at least)."""
    out: list[Batch] = []
    ids: list[str] = []
    chars = 0
    for tid, text in turns:
        if ids and (len(ids) >= opts.batch or chars + len(text) > opts.max_chars):
            out.append(Batch(namespace=ns, turns=ids, **scope))
            ids, chars = [], 0
        ids.append(tid)
        chars += len(text)
    if ids:
        out.append(Batch(namespace=ns, turns=ids, **scope))
    return out


def extract_turns(
    mem: Writes, ns: str, turns: Sequence[tuple[str, str]], scope: dict[str, Any], opts: Options
) -> ExtractionReport:
    """Extract the facts of stored ``turns`` (id, text) of one session: every batch is recorded as
    pending first, then run (``scope``: session_id, user_id, agent_id)."""
    work = batches_of(ns, turns, scope, opts)
    for b in work:
        pending.record(mem.store, b)
    return _run(mem, ns, work, opts)


def stored_session(mem: Writes, ns: str, session_id: str) -> tuple[list[tuple[str, str]], dict[str, Any]]:
    """A stored session's current turns (id, text), in turn order, and its scope (session, and the
    user and agent its first turn names): what :func:`extract_turns` takes, for turns stored
    without ``extract``. NotFoundError when the session has no turn."""
    last = mem.store.max_turn(ns, session_id)
    if last is None:
        raise NotFoundError(f"no turn of session {session_id!r} in namespace {ns!r}")
    rowids = mem.store.session_turns(ns, session_id, 0, last, None)  # in turn order, a turn's chunks in order
    rows = mem.store.fetch(rowids, ns)
    texts: dict[str, list[str]] = {}
    metas: dict[str, dict[str, Any]] = {}
    for r in (rows[i] for i in rowids if i in rows):
        texts.setdefault(r.doc_id, []).append(r.text)
        metas.setdefault(r.doc_id, r.metadata)
    first = next(iter(metas.values()), {})
    scope = {"session_id": session_id, **{k: first.get(k) for k in ("user_id", "agent_id")}}
    return [(doc_id, "\n\n".join(parts)) for doc_id, parts in texts.items()], scope


def run_pending(mem: Writes, ns: str | None, opts: Options | None = None, limit: int | None = None) -> ExtractionReport:
    """Run the pending batches again (of ``ns``, or every namespace), oldest first."""
    if mem.llm is None:
        raise ValidationError("extracting facts needs an LLM (llm=, or HYBRIDMEM_LLM)", field="extract")
    work = pending.list_pending(mem.store, ns)[: limit if limit is not None else None]
    report = ExtractionReport(model=mem.llm.name)
    opts = opts or Options(**budget_from_env())
    for b in work:
        report.batches.append(_batch(mem, b.namespace, b, opts))
        report.usage.merge(report.batches[-1].usage)
    report.pending = pending.count(mem.store, ns)
    return report


def pending_count(mem: Writes, ns: str | None) -> int:
    return pending.count(mem.store, ns)


def _run(mem: Writes, ns: str, work: list[Batch], opts: Options) -> ExtractionReport:
    assert mem.llm is not None
    report = ExtractionReport(model=mem.llm.name)
    for b in work:
        done = _batch(mem, ns, b, opts)
        report.batches.append(done)
        report.usage.merge(done.usage)
    report.pending = pending.count(mem.store, ns)
    return report


def _turns(mem: Writes, ns: str, ids: list[str]) -> list[prompt.Turn]:
    """The batch's turns as stored now (a turn deleted since is left out)."""
    out = []
    for tid in ids:
        doc = mem.store.get_document(ns, tid)
        if doc is None or doc.get("valid_to") is not None:
            continue
        when = parse_timestamp(doc["occurred_at"]) if doc.get("occurred_at") else None
        out.append(prompt.Turn(tid, "\n\n".join(c["text"] for c in doc.get("chunks", [])), when))
    return out


def _known(mem: Writes, ns: str, turns: list[prompt.Turn], b: Batch, k: int) -> list[prompt.Known]:
    """The scope's ``k`` current facts most relevant to the batch's turns."""
    req: dict[str, Any] = {
        "search_text": " ".join(t.text for t in turns)[:2000],
        "top_k": 4 * k,
        "mode": "hybrid",
        "namespace": ns,
        "metadata_filter": FACT_FILTER,
        **{f: v for f, v in b.scope.items() if v is not None},
    }
    try:
        hits = mem.search(req).results
    except ValidationError:  # a scope no memory has yet
        return []
    seen: dict[str, prompt.Known] = {}
    for h in hits:
        if h.doc_id not in seen and len(seen) < k:
            key = h.metadata.get("key")
            seen[h.doc_id] = prompt.Known(h.doc_id, h.text, key if isinstance(key, str) else None)
    return list(seen.values())


def _batch(mem: Writes, ns: str, b: Batch, opts: Options) -> ExtractionBatch:
    """One batch: the call, the checks, each fact stored; pending (recorded) when the call fails."""
    assert mem.llm is not None
    out = ExtractionBatch(batch_id=b.id, session_id=b.session_id, turns=list(b.turns), status="pending")
    turns = _turns(mem, ns, b.turns)
    if not turns:  # every turn of the batch was deleted since: nothing to extract
        pending.done(mem.store, b.id)
        out.status = "done"
        return out
    known = _known(mem, ns, turns, b, opts.known)
    out.known = [k.id for k in known]
    msgs = prompt.messages(turns, known, opts.max_facts, opts.max_chars)
    try:
        with _SLOTS:
            done = mem.llm.complete(msgs, schema=prompt.ProposedFacts, purpose="extract")
    except LLMError as e:
        out.usage.merge(e.usage if isinstance(e.usage, Usage) else None)
        b.attempts, b.error = b.attempts + 1, str(e)[:1000]
        pending.record(mem.store, b)
        out.error = b.error
        return out
    out.usage.merge(done.usage)
    assert isinstance(done.data, prompt.ProposedFacts)
    facts, out.dropped = prompt.check(done.data, turns, opts.max_facts)
    for f in facts:
        try:
            result, usage = store_fact(mem, ns, f, b, opts.candidates)
        except ValidationError as e:  # what the model wrote cannot be stored as it is (too much metadata, ...)
            out.dropped.append(DroppedFact(text=f.text, reason=f"not stored: {e}"[:1000]))
            continue
        out.facts.append(result)
        out.usage.merge(usage)
    pending.done(mem.store, b.id)
    out.status = "done"
    return out
