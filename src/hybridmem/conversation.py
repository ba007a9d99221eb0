"""Chat messages as memories (docs/agent-memory.md): each message is one memory unit (a long one is
chunked like any document) whose speaker, role, session, turn index and scope are metadata —
filterable like any metadata and lifted into each search result — and whose time is its
``occurred_at``.

    {"role": "user", "name": "Caroline", "content": "I moved to Lisbon.", "timestamp": "2023-05-08T13:56Z"}

becomes the document ``{session_id}:{turn}`` with text ``Caroline: I moved to Lisbon.`` (the speaker in
the text, so that "what did Caroline say" meets it on BM25) and metadata ``{"session_id", "turn",
"role", "speaker", "user_id", "agent_id", "kind": "turn"}`` (facts extracted from turns are ``kind:
"fact"``, :mod:`hybridmem.extract`). Messages are validated first; one bad message rejects
the call, naming the message and the field, and nothing is written. :func:`add_messages` and
:func:`supersede` are ``Memory``'s writes of messages.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from . import config
from .errors import ValidationError
from .models import Document, IngestReport, Message
from .store.base import PreparedDocument, Store
from .writes import MemoryWrites

__all__ = [
    "SCOPE_KEYS",
    "add_messages",
    "check_scope",
    "check_scopes",
    "messages_to_documents",
    "parse_messages",
    "supersede",
]

#: the metadata keys a message's memory carries (reserved in a message's own metadata)
SCOPE_KEYS = ("session_id", "turn", "role", "speaker", "user_id", "agent_id", "kind")


def _message(m: dict[str, Any], i: int, error: type[Exception]) -> Message:
    try:
        return Message(**m)
    except error as e:
        err = e.errors()[0]  # type: ignore[attr-defined]
        loc = ".".join(str(p) for p in err["loc"])
        raise ValidationError(err["msg"].removeprefix("Value error, "), field=f"messages[{i}].{loc}") from None


def parse_messages(messages: Iterable[Message | dict[str, Any]]) -> list[Message]:
    """Validated messages; the first problem raises ValidationError naming ``messages[i].field``."""
    from pydantic import ValidationError as PydanticError  # noqa: PLC0415

    out: list[Message] = []
    for i, m in enumerate(messages):
        if isinstance(m, Message):
            out.append(m)
        elif not isinstance(m, dict):
            raise ValidationError(f"a message is an object, got {type(m).__name__}", field=f"messages[{i}]")
        else:
            out.append(_message(m, i, PydanticError))
        reserved = set(out[-1].metadata) & set(SCOPE_KEYS)
        if reserved:
            raise ValidationError(
                f"{', '.join(sorted(reserved))} is set by the message itself, not its metadata",
                field=f"messages[{i}].metadata",
            )
    if not out:
        raise ValidationError("no messages", field="messages")
    return out


def check_scope(value: str | None, field: str) -> None:
    """A scope id (session, user, agent) when given: 1-512 characters of valid Unicode, no NUL."""
    if value is not None and (not isinstance(value, str) or not value.strip() or len(value) > 512 or "\x00" in value):
        raise ValidationError("an id of 1-512 characters, without NUL", field=field)
    if value is not None:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValidationError("text with an unpaired surrogate is not valid Unicode", field=field) from None


def check_scopes(
    session_id: str | None, user_id: str | None = None, agent_id: str | None = None, *, session_required: bool = True
) -> None:
    """The scope ids of a write, checked before any store sees them (messages need their session)."""
    if session_id is None and session_required:
        raise ValidationError("session_id is required", field="session_id")
    for value, field in ((session_id, "session_id"), (user_id, "user_id"), (agent_id, "agent_id")):
        check_scope(value, field)


def messages_to_documents(
    messages: list[Message],
    *,
    session_id: str,
    first_turn: int,
    user_id: str | None = None,
    agent_id: str | None = None,
    previous: str | None = None,
) -> list[dict[str, Any]]:
    """The documents of validated messages, turns numbered from ``first_turn``. Each carries the
    message before it (``previous`` for the first) as index-only context: a reply ("Yes, in May!")
    is found by the words of what it answers (LoCoMo, BM25: nDCG@10 0.454 -> 0.505)."""
    for value, field in ((session_id, "session_id"), (user_id, "user_id"), (agent_id, "agent_id")):
        check_scope(value, field)
    docs = []
    for i, m in enumerate(messages):
        turn = first_turn + i
        speaker = m.name or m.role
        meta: dict[str, Any] = {
            **m.metadata,
            "session_id": session_id,
            "turn": turn,
            "role": m.role,
            "speaker": speaker,
            "kind": "turn",
        }
        if user_id is not None:
            meta["user_id"] = user_id
        if agent_id is not None:
            meta["agent_id"] = agent_id
        text = f"{speaker}: {m.content}"
        docs.append(
            {
                "id": m.id or f"{session_id}:{turn}",
                "text": text,
                "metadata": meta,
                "occurred_at": m.timestamp,
                "source": f"session {session_id}",
                "context": previous[-config.MAX_CONTEXT_CHARS :] if previous else None,
            }
        )
        previous = text
    return docs


class _Prepares(Protocol):
    def prepare(self, doc: Document | dict[str, Any]) -> PreparedDocument: ...


class Writes(MemoryWrites, Protocol):
    """What the writes of messages need of the memory (``Memory`` is one)."""

    store: Store

    @property
    def preparer(self) -> _Prepares: ...


def add_messages(
    mem: Writes,
    ns: str,
    messages: Iterable[Any],
    *,
    session_id: str,
    user_id: str | None = None,
    agent_id: str | None = None,
    written: list[tuple[str, str]] | None = None,
) -> IngestReport:
    """Store chat messages as memories of the session (``Memory.add_messages``), turns numbered
    after its last one. All are validated first: one bad message writes nothing. ``written`` (a
    list) gets each stored turn's (id, text), in order."""
    check_scopes(session_id, user_id, agent_id)
    parsed = parse_messages(messages)
    last = mem.store.max_turn(ns, session_id)
    previous = None
    if last is not None:  # the session's last message: the context of the first new one
        rows = mem.store.fetch(mem.store.session_turns(ns, session_id, last, last, None), ns)
        previous = "\n".join(r.text for r in rows.values()) or None
    docs = messages_to_documents(
        parsed,
        session_id=session_id,
        first_turn=(last + 1) if last is not None else 0,
        user_id=user_id,
        agent_id=agent_id,
        previous=previous,
    )
    prepared = [mem.preparer.prepare(d) for d in docs]
    report = IngestReport()
    for i in range(0, len(prepared), 256):
        report.merge(mem._write(ns, prepared[i : i + 256]))
    report.pending_vectors = mem.store.pending_count(ns)
    if written is not None:
        written.extend((d["id"], d["text"]) for d in docs)
    return report


def supersede(
    mem: Writes, old_id: str, new: str | dict[str, Any], *, namespace: str | None, reason: str | None
) -> IngestReport:
    """A new version of a memory (``Memory.supersede``): its text, or a message that keeps the
    memory's session and turn."""
    if isinstance(new, str):
        return mem.update(old_id, new, namespace=namespace, reason=reason or "superseded")
    msg = parse_messages([new])[0]
    old = mem.get(old_id, namespace=namespace)
    meta = {**old["metadata"], **msg.metadata, "role": msg.role, "speaker": msg.name or msg.role}
    text = f"{meta['speaker']}: {msg.content}"
    # without a timestamp, the correction keeps the time of what it corrects
    when = msg.timestamp if msg.timestamp is not None else old.get("occurred_at")
    return mem.update(old_id, text, metadata=meta, namespace=namespace, occurred_at=when, reason=reason or "superseded")
