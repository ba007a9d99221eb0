"""The agent-memory calls of ``Memory`` (docs/agent-memory.md), mixed into it: statements of a
user's or agent's memory with the conflict check (:mod:`hybridmem.conflicts`), chat messages
(:mod:`hybridmem.conversation`), new versions, soft deletes and the history of versions."""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import nullcontext
from typing import Any, Protocol

from . import conflicts, conversation
from . import dedupe as dd
from . import extract as extraction
from .conversation import check_scopes
from .errors import NotFoundError, ValidationError
from .ingest import check_id
from .models import ExtractionReport, IngestReport, MemoryDecision, MemoryPage
from .read_routes import ReadRoutes
from .retrieve.legs import Legs
from .retrieve.listing import list_page, list_request
from .retrieve.search import Searcher
from .store.base import version_record

__all__ = ["AgentMethods"]


class _Host(conflicts.Writes, conversation.Writes, Protocol):
    """What the agent-memory calls need of the memory they are mixed into."""

    @property
    def legs(self) -> Legs: ...
    @property
    def searcher(self) -> Searcher: ...
    @property
    def reads(self) -> ReadRoutes: ...
    def _ns(self, namespace: str | None) -> str: ...
    def list(
        self, cursor: str | None = None, limit: int = 100, *, namespace: str | None = None, **fields: Any
    ) -> MemoryPage: ...


class AgentMethods:
    """``remember``, ``add_messages``, ``supersede``, ``forget``, ``history`` and ``list`` of ``Memory``."""

    def remember(
        self: _Host,
        text: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        source: str | None = None,
        occurred_at: str | float | None = None,
        id: str | None = None,
        namespace: str | None = None,
        reconcile: bool = False,
        candidates: int = 5,
        vector: Any = None,
        dedupe: bool = False,
    ) -> MemoryDecision:
        """Store a statement of a user's or agent's memory (the scopes go into its metadata). With
        ``reconcile`` (needs an LLM), the ``candidates`` most similar current memories of the same
        scope are compared with it first (:mod:`hybridmem.conflicts`): it is new (ADD), changes one
        (UPDATE: a new version, the old kept in the history), retracts one (DELETE: a soft delete,
        kept in the history) or is held already (NONE: nothing written). Each decision's reason
        goes into the history of the memory it wrote; a model that fails or names a memory it was
        not shown ends in ADD: the statement is never lost. Validated before the model is asked.
        ``vector``: the statement's precomputed vector (as in ``add``), stored when it is written as
        given (ADD, or an UPDATE to the statement as it is); another text the model writes is embedded.
        With ``dedupe``, a current memory of the same scope saying the same (equal normalized text,
        or nearly: :mod:`hybridmem.dedupe`) makes it NONE naming that memory, before any model."""
        ns = self._ns(namespace)
        check_scopes(session_id, user_id, agent_id, session_required=False)
        scopes = {"user_id": user_id, "agent_id": agent_id, "session_id": session_id}
        meta = {**(metadata or {}), **{k: v for k, v in scopes.items() if v is not None}}
        doc = {"text": text, "id": id, "metadata": meta, "source": source, "occurred_at": occurred_at, "vector": vector}
        prepared = self.preparer.prepare(doc)
        if isinstance(candidates, bool) or not isinstance(candidates, int) or not 1 <= candidates <= 20:
            raise ValidationError(f"must be an integer from 1 to 20, got {candidates!r}", field="candidates")
        if reconcile and self.llm is None:
            raise ValidationError("the conflict check needs an LLM (llm=, or HYBRIDMEM_LLM)", field="reconcile")
        if not isinstance(dedupe, bool):
            raise ValidationError(f"must be true or false, got {dedupe!r}", field="dedupe")
        with self.reads.primary():  # the reads of a write see the primary
            return _remember(self, ns, prepared, text, meta, occurred_at, scopes, id, candidates, reconcile, dedupe)

    def add_messages(
        self: _Host,
        messages: Iterable[Any],
        *,
        session_id: str,
        user_id: str | None = None,
        agent_id: str | None = None,
        namespace: str | None = None,
        extract: bool = False,
        extract_batch: int = 20,
    ) -> IngestReport:
        """Store chat messages (OpenAI style: ``role``, ``content``, optional ``name``, ``timestamp``,
        ``id``, ``metadata``) as memories of the session (``kind: "turn"``), turns numbered after its
        last one (:mod:`hybridmem.conversation`). All are validated first: one bad message writes
        nothing. With ``extract`` (needs an LLM), the LLM then reads the new turns, ``extract_batch``
        a call, and the facts it proposes are stored through the conflict check as memories of
        ``kind: "fact"`` naming their source turns (:mod:`hybridmem.extract`); ``report.extraction``
        says what each batch gave and cost. A batch whose call fails stays pending (the turns are
        stored): :meth:`extract_pending` retries it."""
        ns = self._ns(namespace)
        opts = extraction.check_options(extract, extract_batch, self.llm)
        scope = {"session_id": session_id, "user_id": user_id, "agent_id": agent_id}
        written: list[tuple[str, str]] = []
        with self.reads.primary():  # a write's own reads (the session's last turn, the facts) see it
            report = conversation.add_messages(
                self, ns, messages, session_id=session_id, user_id=user_id, agent_id=agent_id, written=written
            )
            if extract:  # the turns this call wrote (a message stored unchanged already had its chance)
                new = set(report.added) | set(report.updated)
                turns = [(tid, text) for tid, text in written if tid in new]
                report.extraction = extraction.extract_turns(self, ns, turns, scope, opts)
        return report

    def extract_session(
        self: _Host, session_id: str, *, namespace: str | None = None, extract_batch: int = 20
    ) -> ExtractionReport:
        """Extract facts from the turns a session holds now (stored without ``extract``, or again),
        as ``add_messages(..., extract=True)`` does from new ones, its scope (user, agent) read from
        its turns. NotFoundError for a session without turns; needs an LLM (``extract``)."""
        ns = self._ns(namespace)
        check_scopes(session_id)
        opts = extraction.check_options(True, extract_batch, self.llm)
        with self.reads.primary():
            turns, scope = extraction.stored_session(self, ns, session_id)
            return extraction.extract_turns(self, ns, turns, scope, opts)

    def extract_pending(self: _Host, *, namespace: str | None = None, limit: int | None = None) -> ExtractionReport:
        """Run again the extraction batches left pending (a model that failed or answered invalid
        JSON): of ``namespace``, or of every namespace with ``namespace="*"``; at most ``limit``
        batches, oldest first. ``report.pending``: the batches still pending after it."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise ValidationError(f"must be an integer >= 1, got {limit!r}", field="limit")
        ns = None if namespace == "*" else self._ns(namespace)
        with self.reads.primary():
            return extraction.run_pending(self, ns, limit=limit)

    def supersede(
        self: _Host, old_id: str, new: str | dict[str, Any], *, namespace: str | None = None, reason: str | None = None
    ) -> IngestReport:
        """A new version of a memory (its text, or a message ``{"role", "content", ...}``), the old one
        kept in the history with ``valid_to``; a message keeps the memory's session and turn."""
        with self.reads.primary():
            return conversation.supersede(self, old_id, new, namespace=namespace, reason=reason)

    def forget(self: _Host, id: str, *, namespace: str | None = None, reason: str | None = None) -> None:
        """A soft delete: the memory stops being current now and stays in its history (``as_of`` an
        earlier time still sees it). ``delete`` removes every version for good."""
        ns = self._ns(namespace)
        self.legs.commit(lambda: self.store.retire(ns, check_id(id), reason or "forgotten"))

    def history(self: _Host, id: str, *, namespace: str | None = None) -> list[dict[str, Any]]:
        """Every version of a memory, oldest first: id, version, times (ISO 8601 UTC), why it was
        written, and whether it is current. NotFoundError when the memory has no version."""
        ns = self._ns(namespace)
        return self.reads.run(lambda: _history(self, ns, check_id(id)))[0]

    def find_duplicates(self: _Host, *, namespace: str | None = None) -> list[dict[str, Any]]:
        """The groups of near duplicates among the current memories (:mod:`hybridmem.dedupe`), each
        ``{"keep": ..., "drop": [...]}``: the newest by recorded time kept. Nothing is written."""
        return [g.as_dict() for g in dd.find_groups(self, self._ns(namespace))]

    def dedupe(self: _Host, *, apply: bool = False, namespace: str | None = None) -> dict[str, Any]:
        """``find_duplicates``, and with ``apply`` each group's older memories forgotten (a soft
        delete, the reason "near duplicate of ID (dedup)" in their history)."""
        ns = self._ns(namespace)
        with self.reads.primary() if apply else nullcontext():
            return dd.run(self, ns, apply=apply)

    def list(
        self: _Host, cursor: str | None = None, limit: int = 100, *, namespace: str | None = None, **fields: Any
    ) -> MemoryPage:
        """A page of the memories themselves, no ranking: ``limit`` (1-1,000) after ``cursor`` (the
        previous page's ``next_cursor``; None when it was the last). ``fields``: ``user_id``,
        ``agent_id``, ``session_id``, ``metadata_filter``, ``time_range``, ``as_of``,
        ``include_superseded`` (as a query's), ``order`` (``recorded_at``, ``occurred_at`` or ``id``)
        and ``descending``. Exact under concurrent writes (:mod:`hybridmem.retrieve.listing`)."""
        req = list_request({"cursor": cursor, "limit": limit, "namespace": namespace, **fields})
        return self.reads.run(lambda: list_page(self.searcher, req, self._ns(req.namespace)))[0]


def _remember(
    self: _Host,
    ns: str,
    prepared: Any,
    text: str,
    meta: dict[str, Any],
    occurred_at: str | float | None,
    scopes: dict[str, str | None],
    id: str | None,
    candidates: int,
    reconcile: bool,
    dedupe: bool,
) -> MemoryDecision:
    """``remember`` once validated: the near-duplicate check, then the conflict check and the write
    (its reads on the primary: the caller holds ``reads.primary()``)."""
    held = dd.find_match(self, ns, text, meta, exclude=id) if dedupe else None  # id given: its own is an update
    if held is not None:
        return dd.decision(held)
    user_id, agent_id = scopes["user_id"], scopes["agent_id"]
    return conflicts.reconcile(
        self,
        ns,
        prepared,
        text=text,
        meta=meta,
        occurred_at=occurred_at,
        user_id=user_id,
        agent_id=agent_id,
        candidates=candidates,
        check=reconcile,
    )


def _history(self: _Host, ns: str, id: str) -> list[dict[str, Any]]:
    """``history`` inside its read route (the replica's, when there is one)."""
    rows = self.store.history(ns, id)
    if not rows:
        raise NotFoundError(f"no memory {id!r} in namespace {ns!r}")
    out = []
    for r in rows:
        rec = version_record(r)
        doc = self.store.get_document(ns, rec["id"])
        rec["text"] = "\n\n".join(c["text"] for c in doc["chunks"]) if doc else ""
        out.append(rec)
    return out
