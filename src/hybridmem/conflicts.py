"""The conflict check on write (Mem0's ADD / UPDATE / DELETE / NONE), as one schema-validated LLM
call against the most similar current memories of the same scope.

:func:`decide` asks the model, through the LLM layer (its retries, structured output and one repair
of invalid JSON), what a new statement does to what the memory holds: ``ADD`` it (nothing says the
same), ``UPDATE`` one memory (the new text replaces it; the old version stays in its history),
``DELETE`` one (the statement retracts it: a soft delete, kept in the history), or ``NONE`` (one
memory already says it). The model may only name memories it was shown: an invented id, a missing
target, an empty update, or a model that fails are repaired to ``ADD`` with the reason saying why,
so no statement is ever lost to the check. :func:`reconcile` finds the candidates, decides and
applies the decision for ``Memory.remember`` (docs/agent-memory.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

from .errors import LLMError, ValidationError
from .llm.base import ChatModel, Message
from .models import MemoryDecision, QueryResponse, Usage
from .store.base import PreparedDocument
from .writes import MemoryWrites

__all__ = ["Candidate", "Decision", "decide", "reconcile"]

Event = Literal["ADD", "UPDATE", "DELETE", "NONE"]
#: the most characters of one candidate memory shown to the model
CANDIDATE_CHARS = 1000


class ConflictVerdict(BaseModel):
    """What the model must answer (its JSON schema is the structured output asked for)."""

    event: Event = Field(description="ADD, UPDATE, DELETE or NONE")
    target_id: str | None = Field(None, description="the id of the memory updated, deleted or already saying it")
    text: str | None = Field(None, description="for UPDATE: the memory's new full text")
    reason: str = Field("", max_length=1000, description="one short sentence: why")


@dataclass(frozen=True)
class Candidate:
    """A current memory shown to the model: its id, text and when it happened (ISO 8601, or None)."""

    id: str
    text: str
    occurred_at: str | None = None


@dataclass
class Decision:
    """What to do with a new statement, and why. ``decided_by``: the model's name, or ``rule`` (no
    candidate to compare with, or the model's answer repaired); ``text``: what UPDATE writes."""

    event: Event
    target_id: str | None
    text: str
    reason: str
    decided_by: str
    usage: Usage | None = None


_SYSTEM = (
    "You keep an agent's long-term memory consistent. A NEW statement arrives; EXISTING memories "
    "of the same user are listed with their ids. Decide one event:\n"
    "- ADD: the statement is new information (no existing memory says it or contradicts it).\n"
    "- UPDATE: the statement changes or refines one existing memory (e.g. a new value for the "
    "same fact); give its target_id and the memory's new full text.\n"
    "- DELETE: the statement retracts one existing memory (it is no longer true) without stating "
    "a replacement; give its target_id.\n"
    "- NONE: one existing memory already says the same; give its target_id.\n"
    "Name only ids from the list. Answer with one JSON object: "
    '{"event": ..., "target_id": ..., "text": ..., "reason": ...}; the reason is one short sentence.'
)


def _prompt(new: str, candidates: list[Candidate]) -> list[Message]:
    listed = [
        {"id": c.id, "text": c.text[:CANDIDATE_CHARS], **({"occurred_at": c.occurred_at} if c.occurred_at else {})}
        for c in candidates
    ]
    user = "EXISTING:\n" + json.dumps(listed, ensure_ascii=False, indent=1) + "\n\nNEW:\n" + new
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}]


def decide(llm: ChatModel, new: str, candidates: list[Candidate]) -> Decision:
    """The event for ``new`` against ``candidates`` (the model is not asked when there are none)."""
    if not candidates:
        return Decision("ADD", None, new, "no similar memory in this scope", "rule")
    try:
        done = llm.complete(_prompt(new, candidates), schema=ConflictVerdict, purpose="reconcile")
    except LLMError as e:
        return Decision("ADD", None, new, f"the conflict check failed ({e}); added as new", "rule")
    v = done.data
    assert isinstance(v, ConflictVerdict)
    return _repaired(v, new, {c.id for c in candidates}, done.model, done.usage)


def _repaired(v: ConflictVerdict, new: str, known: set[str], model: str, usage: Usage) -> Decision:
    """The model's verdict, or ADD where it cannot be applied as given (the reason says why)."""
    reason = v.reason.strip() or "no reason given"
    if v.event == "ADD":
        return Decision("ADD", None, new, reason, model, usage)
    if v.target_id not in known:
        why = f"the model answered {v.event} for {v.target_id!r}, not one of the memories shown; added as new"
        return Decision("ADD", None, new, why, "rule", usage)
    if v.event == "UPDATE":
        text = (v.text or "").strip() or new
        return Decision("UPDATE", v.target_id, text, reason, model, usage)
    return Decision(v.event, v.target_id, new, reason, model, usage)


class Writes(MemoryWrites, Protocol):
    """What the conflict check needs of the memory (``Memory`` is one): search its scope, read,
    update, forget, write."""

    @property
    def llm(self) -> ChatModel | None: ...
    def search(self, request: dict[str, Any]) -> QueryResponse: ...
    def forget(self, id: str, *, namespace: str | None = None, reason: str | None = None) -> None: ...


def reconcile(
    mem: Writes,
    ns: str,
    prepared: PreparedDocument,
    *,
    text: str,
    meta: dict[str, Any],
    occurred_at: str | float | None,
    user_id: str | None,
    agent_id: str | None,
    candidates: int,
    check: bool,
    where: dict[str, Any] | None = None,
    note: str | None = None,
) -> MemoryDecision:
    """Store a validated statement: with ``check`` (the memory has an LLM), decided against its
    ``candidates`` most similar memories of the scope (of those ``where`` allows, a metadata filter,
    when given); without, added as it is. ``note`` (e.g. the turns a fact came from) follows the
    decision's reason in the history of the memory written."""
    shown: list[Candidate] = []
    if check:
        shown = _similar(mem, ns, text, user_id, agent_id, candidates, where)
        assert mem.llm is not None
        decision = decide(mem.llm, text, shown)
    else:
        decision = Decision("ADD", None, text, "stored without a conflict check", "rule")
    out = MemoryDecision(
        event=decision.event,
        reason=decision.reason[:1000],
        decided_by=decision.decided_by,
        candidates=[c.id for c in shown],
        usage=decision.usage,
    )
    _apply(mem, ns, decision, prepared, meta, occurred_at, out, note)
    return out


def _similar(
    mem: Writes,
    ns: str,
    text: str,
    user_id: str | None,
    agent_id: str | None,
    k: int,
    where: dict[str, Any] | None = None,
) -> list[Candidate]:
    """The ``k`` current memories most like ``text`` in its scope (hybrid), one per document."""
    req: dict[str, Any] = {"search_text": text[:2000], "top_k": 4 * k, "mode": "hybrid", "namespace": ns}
    if where:
        req["metadata_filter"] = where
    req.update({f: v for f, v in (("user_id", user_id), ("agent_id", agent_id)) if v is not None})
    try:
        hits = mem.search(req).results
    except ValidationError:  # a scope no memory has yet: nothing to compare with
        return []
    seen: dict[str, Candidate] = {}
    for h in hits:
        if h.doc_id not in seen and len(seen) < k:
            seen[h.doc_id] = Candidate(h.doc_id, h.text, h.occurred_at)
    return list(seen.values())


def _apply(
    mem: Writes,
    ns: str,
    d: Decision,
    prepared: PreparedDocument,
    meta: dict[str, Any],
    occurred_at: str | float | None,
    out: MemoryDecision,
    note: str | None = None,
) -> None:
    """Write what the decision says; ``out`` gets the memory's id and the write's report."""
    why = f"{d.event} ({d.decided_by}): {out.reason}"[:1000] + (f"; {note}"[:1000] if note else "")
    if d.event == "ADD":
        prepared.keep_history, prepared.reason = True, why
        out.id, out.report = prepared.doc_id, mem._write(ns, [prepared], count_pending=True)
    elif d.event == "UPDATE":
        assert d.target_id is not None
        old = mem.get(d.target_id, namespace=ns)
        merged = {**old["metadata"], **meta}
        when = occurred_at if occurred_at is not None else old.get("occurred_at")
        out.id = d.target_id
        # a precomputed vector is of the statement: kept only when the model wrote the statement as it is
        same = prepared.vectors is not None and prepared.chunks == [d.text.strip()]
        vector = prepared.vectors[0] if same and prepared.vectors is not None else None
        out.report = mem.update(
            d.target_id, d.text, metadata=merged, namespace=ns, occurred_at=when, reason=why, vector=vector
        )
    elif d.event == "DELETE":
        assert d.target_id is not None
        mem.forget(d.target_id, namespace=ns, reason=f"{why} (retracted by: {d.text[:300]})"[:1300])
        out.id = d.target_id
    else:  # NONE: the memory already says it
        out.id = d.target_id
