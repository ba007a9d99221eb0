"""``hybridmem ingest --format chat``: conversation files as chat messages (``Memory.add_messages``).

A file is one conversation, in one of three shapes:

- ``.jsonl``: one message per line (``{"role", "content", "name"?, "timestamp"?, "id"?, "metadata"?}``;
  blank lines skipped);
- ``.json``: an array of messages, or an object ``{"session_id"?, "user_id"?, "agent_id"?, "messages": [...]}``;
- any other name (and ``-``, stdin): whichever of the two its text is.

Every file is read and every message checked before anything is written: one bad message stops the
ingest, named by file and line (or index), and the store is left as it was."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from ..errors import NotFoundError, ValidationError

__all__ = ["Conversation", "load_conversations"]

#: the keys of a conversation object
_OBJECT_KEYS = ("session_id", "user_id", "agent_id", "messages")


@dataclass
class Conversation:
    """One file's messages and the session (and scope) they go to."""

    path: str
    messages: list[dict[str, Any]]
    session_id: Optional[str]
    user_id: Optional[str] = None
    agent_id: Optional[str] = None
    #: where each message is in the file, for errors: "line 3" or "messages[2]"
    places: list[str] = field(default_factory=list)

    def scope(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "user_id": self.user_id, "agent_id": self.agent_id}


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    p = Path(path)
    if not p.is_file():
        raise NotFoundError(f"no such file: {path}")
    try:
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ValidationError(f"not UTF-8 text ({e.reason} at byte {e.start})", field=path) from None


def _json(raw: str, where: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError as e:
        raise ValidationError(f"not valid JSON: {e.msg} at column {e.colno}", field=where) from None
    except RecursionError:
        raise ValidationError("JSON nested too deeply", field=where) from None


def _jsonl(path: str, raw: str) -> Conversation:
    messages, places = [], []
    for n, line in enumerate(raw.splitlines(), start=1):
        if line.strip():
            messages.append(_json(line, f"{path}, line {n}"))
            places.append(f"line {n}")
    return Conversation(path, messages, None, places=places)


def _document(path: str, data: Any) -> Conversation:
    """A parsed ``.json`` file: an array of messages or a conversation object."""
    if isinstance(data, list):
        return Conversation(path, data, None, places=[f"messages[{i}]" for i in range(len(data))])
    if not isinstance(data, dict) or "messages" not in data:
        raise ValidationError(
            'expected an array of messages or an object {"session_id", "messages": [...]}', field=path
        )
    unknown = sorted(set(data) - set(_OBJECT_KEYS))
    if unknown:
        raise ValidationError(f"unknown key {', '.join(unknown)}; a conversation has {', '.join(_OBJECT_KEYS)}", path)
    if not isinstance(data["messages"], list):
        raise ValidationError("messages must be an array of messages", field=f"{path}, messages")
    for key in ("session_id", "user_id", "agent_id"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise ValidationError(f"must be a string, got {type(data[key]).__name__}", field=f"{path}, {key}")
    convo = Conversation(path, data["messages"], data.get("session_id"), data.get("user_id"), data.get("agent_id"))
    convo.places = [f"messages[{i}]" for i in range(len(convo.messages))]
    return convo


def _parse(path: str, raw: str) -> Conversation:
    if path.endswith(".jsonl"):
        return _jsonl(path, raw)
    if path.endswith(".json") or raw.lstrip().startswith("["):
        return _document(path, _json(raw, path))
    try:  # stdin or another name: one JSON document, else JSON lines
        data = json.loads(raw)
    except (json.JSONDecodeError, RecursionError):
        return _jsonl(path, raw)
    return _document(path, data) if isinstance(data, dict) and "messages" in data else _jsonl(path, raw)


def _check(convo: Conversation) -> None:
    """Every message of ``convo`` as ``Memory.add_messages`` checks it; the first problem is named
    by the file and the message's place in it."""
    from ..conversation import parse_messages

    for msg, place in zip(convo.messages, convo.places):
        try:
            parse_messages([msg])
        except ValidationError as e:
            sub = (e.field or "").removeprefix("messages[0]").lstrip(".")
            message = str(e).removeprefix(f"{e.field}: ") if e.field else str(e)
            raise ValidationError(message, field=f"{convo.path}, {place}" + (f", {sub}" if sub else "")) from None


def load_conversations(paths: list[str], scope: dict[str, Optional[str]]) -> list[Conversation]:
    """Every file's conversation, checked. ``scope``: ``--session``, ``--user``, ``--agent``, which
    win over a conversation object's own; a conversation without a session is an error."""
    convos = []
    for path in paths:
        convo = _parse(path, _read(path))
        if not convo.messages:
            raise ValidationError("no messages", field=path)
        for key, value in scope.items():
            if value is not None:
                setattr(convo, key, value)
        if convo.session_id is None:
            raise ValidationError(f"{path} names no session_id: give --session ID", field="--session")
        _check(convo)
        convos.append(convo)
    return convos
