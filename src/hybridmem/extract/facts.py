"""A checked fact into the memory: a memory of ``kind: "fact"`` whose metadata names the turns it came
from (``source_turns``) and whose history says so. A fact with a ``key`` that a current fact of the
scope holds goes on as that fact's new version (UPDATE, decided by the key: no model call); any
other goes through the conflict check (:func:`hybridmem.conflicts.reconcile`: ADD / UPDATE / DELETE
/ NONE) against the scope's most similar current facts (never against turns: a raw turn is never
rewritten by a fact)."""

from __future__ import annotations

import hashlib
from typing import Any, Protocol

from .. import conflicts
from ..conversation import Writes as MessageWrites
from ..ingest import scoped_key
from ..models import ExtractedFact, Usage
from .pending import Batch
from .prompt import Fact

__all__ = ["FACT_FILTER", "Writes", "store_fact"]

#: the metadata filter of extracted facts
FACT_FILTER = {"kind": "fact"}


class Writes(conflicts.Writes, MessageWrites, Protocol):
    """What storing a fact needs of the memory (``Memory`` is one)."""


def fact_id(text: str, batch: Batch) -> str:
    """A fact's id: of its text within its scope, so one user's fact never lands on another's."""
    scope = "\x1f".join(str(v or "") for v in (batch.user_id, batch.agent_id))
    return "fact-" + hashlib.sha1(f"{scope}\x1f{text}".encode()).hexdigest()[:16]


def _metadata(fact: Fact, batch: Batch) -> dict[str, Any]:
    meta: dict[str, Any] = {"kind": "fact", "source_turns": list(fact.source_turns)}
    if batch.session_id is not None:
        meta["source_session"] = batch.session_id
    if fact.key is not None:
        meta["key"] = fact.key
    if fact.occurred_text is not None:
        meta["occurred_text"] = fact.occurred_text
    meta.update({k: v for k, v in batch.scope.items() if v is not None})
    return meta


def store_fact(mem: Writes, ns: str, fact: Fact, batch: Batch, candidates: int) -> tuple[ExtractedFact, Usage | None]:
    """Store ``fact`` (the key's rule, else the conflict check); what became of it, and the usage of
    the check's model call (None when the model was not asked)."""
    meta = _metadata(fact, batch)
    doc = {
        "text": fact.text,
        "id": fact_id(fact.text, batch),
        "metadata": meta,
        "occurred_at": fact.occurred_at,
        "source": "extracted",
    }
    note = "from turns " + ", ".join(fact.source_turns)
    out: dict[str, Any] = {
        "text": fact.text,
        "key": fact.key,
        "occurred_at": fact.occurred_at,
        "occurred_text": fact.occurred_text,
        "source_turns": fact.source_turns,
    }
    holder = mem.store.key_holder(ns, scoped_key(fact.key, meta)) if fact.key is not None else None
    if holder is not None:
        return ExtractedFact(**out, **_by_key(mem, ns, doc, fact, holder, note)), None
    prepared = mem.preparer.prepare(doc)
    if fact.key is not None:
        prepared.mem_key = scoped_key(fact.key, meta)
    scope = batch.scope
    d = conflicts.reconcile(
        mem,
        ns,
        prepared,
        text=fact.text,
        meta=meta,
        occurred_at=fact.occurred_at,
        user_id=scope["user_id"],
        agent_id=scope["agent_id"],
        candidates=candidates,
        check=True,
        where=FACT_FILTER,
        note=note,
    )
    fields: dict[str, Any] = {
        "event": d.event,
        "id": d.id,
        "reason": d.reason,
        "decided_by": d.decided_by,
        "candidates": d.candidates,
    }
    return ExtractedFact(**out, **fields), d.usage


def _by_key(mem: Writes, ns: str, doc: dict[str, Any], fact: Fact, holder: str, note: str) -> dict[str, Any]:
    """The fact holding ``fact.key`` now (``holder``) gets the new text as its next version."""
    assert fact.key is not None
    old = mem.get(holder, namespace=ns)
    old_text = "\n\n".join(c["text"] for c in old.get("chunks", []))
    base = {"id": holder, "decided_by": "rule", "candidates": [holder]}
    if " ".join(old_text.split()) == fact.text:
        return {**base, "event": "NONE", "reason": f"the fact holding key {fact.key!r} says the same"}
    reason = f"the fact holding key {fact.key!r} gets a new value"
    prepared = mem.preparer.prepare({**doc, "id": holder, "metadata": {**old["metadata"], **doc["metadata"]}})
    prepared.mem_key = scoped_key(fact.key, doc["metadata"])
    prepared.keep_history, prepared.reason = True, f"UPDATE (rule): {reason}; {note}"[:2000]
    mem._write(ns, [prepared], count_pending=True)
    return {**base, "event": "UPDATE", "reason": reason}
