"""Batches whose extraction has not succeeded yet, kept in the store itself (its ``meta`` table, which
both backends have: no schema change), so that a model that times out, fails or answers invalid
JSON loses nothing: the turns are stored already, and the batch waits here until
``Memory.extract_pending`` (``hybridmem extract --pending``) runs it again.

A batch is recorded before its LLM call and removed once its facts are stored, so a process that
dies in between leaves it pending too. One row a batch: key ``extract.pending:<id>``, value the
JSON of :class:`Batch`."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

from ..store.base import Store

__all__ = ["PREFIX", "Batch", "done", "list_pending", "record"]

PREFIX = "extract.pending:"


@dataclass
class Batch:
    """The turns of one extraction call and their scope."""

    namespace: str
    turns: list[str]
    session_id: str | None = None
    user_id: str | None = None
    agent_id: str | None = None
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:16])
    attempts: int = 0
    error: str | None = None
    created_at: float = field(default_factory=time.time)

    @property
    def scope(self) -> dict[str, Any]:
        return {"user_id": self.user_id, "agent_id": self.agent_id}


def record(store: Store, batch: Batch) -> None:
    """Write (or rewrite) ``batch``'s row."""
    key = PREFIX + batch.id
    value = json.dumps(asdict(batch), ensure_ascii=False)
    with store.write_transaction() as db:
        db.execute("DELETE FROM meta WHERE key=?", (key,))
        db.execute("INSERT INTO meta (key, value) VALUES (?, ?)", (key, value))


def done(store: Store, batch_id: str) -> None:
    """The batch's facts are stored: its row goes."""
    with store.write_transaction() as db:
        db.execute("DELETE FROM meta WHERE key=?", (PREFIX + batch_id,))


def list_pending(store: Store, namespace: str | None) -> list[Batch]:
    """The pending batches (of ``namespace``, when given), oldest first; a row that does not read
    as a batch is skipped."""
    rows = store.reader.execute("SELECT key, value FROM meta WHERE substr(key, 1, ?) = ?", (len(PREFIX), PREFIX))
    out = []
    for _key, value in rows.fetchall():
        try:
            raw = json.loads(value)
            batch = Batch(**raw)
        except (ValueError, TypeError):
            continue
        if namespace is None or batch.namespace == namespace:
            out.append(batch)
    return sorted(out, key=lambda b: (b.created_at, b.id))


def count(store: Store, namespace: str | None) -> int:
    return len(list_pending(store, namespace))
