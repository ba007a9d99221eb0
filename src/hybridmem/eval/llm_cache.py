"""LLM calls of an evaluation cached on disk, so a re-run costs nothing: answers and verdicts are
stored by a hash of the model spec, its temperature, the messages, the output schema and the
retrieved chunk ids; a hit returns the stored object without a call.

:class:`CachedChatModel` sits behind the :class:`~hybridmem.llm.base.ChatModel` protocol, so the
grounded-answer pipeline runs unchanged on top of it. What the calls cost is counted in a
:class:`Tally`: calls made now (failed ones included, never cached) and hits, with their tokens.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..errors import LLMError
from ..llm.base import ChatModel, Completion, Message, json_schema
from ..models import Usage

__all__ = ["CACHE_FORMAT", "CallCache", "CachedChatModel", "Tally"]

#: bump when what a cached entry means changes (the same key would now get another answer)
CACHE_FORMAT = 1


@dataclass
class Tally:
    """What one role's calls cost: ``calls`` made now (a repair attempt counts), their tokens,
    ``errors`` (requests that failed in the end: no reply, or invalid after the repair), and ``cached`` hits with the tokens they cost when made."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    errors: int = 0
    #: calls whose provider reported no token counts (counted as 0 tokens)
    unreported: int = 0
    cached: int = 0
    cached_prompt_tokens: int = 0
    cached_completion_tokens: int = 0

    def spend(self, usage: Usage | None) -> tuple[int, int]:
        """Count ``usage``'s calls as made now; returns its (prompt, completion) tokens."""
        if usage is None:
            return 0, 0
        for c in usage.per_call:
            self.calls += 1
            if c.ok and c.prompt_tokens is None and c.completion_tokens is None:
                self.unreported += 1
        self.prompt_tokens += usage.prompt_tokens
        self.completion_tokens += usage.completion_tokens
        return usage.prompt_tokens, usage.completion_tokens

    def add(self, other: Tally) -> Tally:
        for k, v in asdict(other).items():
            setattr(self, k, getattr(self, k) + v)
        return self


class CallCache:
    """A SQLite file of completed structured calls (thread-safe; one lock)."""

    def __init__(self, path: str | Path) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.path = Path(path)
        self._db = sqlite3.connect(str(path), check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, model TEXT, purpose TEXT, data TEXT,"
            " prompt_tokens INTEGER, completion_tokens INTEGER)"
        )
        self._lock = threading.Lock()

    def get(self, key: str) -> tuple[dict[str, Any], int, int] | None:
        with self._lock:
            row = self._db.execute(
                "SELECT data, prompt_tokens, completion_tokens FROM calls WHERE key=?", (key,)
            ).fetchone()
        if row is None:
            return None
        try:
            data = json.loads(row[0])
        except json.JSONDecodeError:
            return None  # a damaged entry is a miss: the call is made again and the entry replaced
        return (data, int(row[1] or 0), int(row[2] or 0)) if isinstance(data, dict) else None

    def put(self, key: str, model: str, purpose: str | None, data: dict[str, Any], tokens: tuple[int, int]) -> None:
        with self._lock, self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO calls VALUES (?, ?, ?, ?, ?, ?)",
                (key, model, purpose, json.dumps(data, ensure_ascii=False), tokens[0], tokens[1]),
            )

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM calls").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()


def call_key(
    model: ChatModel, messages: Sequence[Message], schema: type[BaseModel] | None, extra: Sequence[str]
) -> str:
    blob = json.dumps(
        {
            "format": CACHE_FORMAT,
            "model": model.name,
            "temperature": getattr(model, "temperature", None),
            "messages": list(messages),
            "schema": json_schema(schema) if schema is not None else None,
            "chunks": list(extra),
        },
        sort_keys=True,
        ensure_ascii=False,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


class CachedChatModel:
    """``inner`` behind the cache, for structured calls: a hit returns the stored object (no call,
    an empty usage); a miss calls ``inner`` and stores what it returned. ``extra`` (the retrieved
    chunk ids) is part of every key. Costs are counted in ``tally``."""

    def __init__(self, inner: ChatModel, cache: CallCache, tally: Tally, extra: Sequence[str] = ()) -> None:
        self.inner = inner
        self.name = inner.name
        self.cache = cache
        self.tally = tally
        self.extra = list(extra)

    def complete(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None, purpose: str | None = None
    ) -> Completion:
        if schema is None:  # only structured replies are cached (all the evaluation asks for)
            out = self.inner.complete(messages, purpose=purpose)
            self.tally.spend(out.usage)
            return out
        key = call_key(self.inner, messages, schema, self.extra)
        hit = self.cache.get(key)
        if hit is not None:
            try:
                data = schema.model_validate(hit[0])
            except ValueError:
                data = None  # stored under an older schema: call again
            if data is not None:
                self.tally.cached += 1
                self.tally.cached_prompt_tokens += hit[1]
                self.tally.cached_completion_tokens += hit[2]
                return Completion(
                    text=json.dumps(hit[0], ensure_ascii=False), data=data, usage=Usage(), model=self.name
                )
        try:
            out = self.inner.complete(messages, schema=schema, purpose=purpose)
        except LLMError as e:
            self.tally.spend(e.usage if isinstance(e.usage, Usage) else None)
            self.tally.errors += 1
            raise
        tokens = self.tally.spend(out.usage)
        if out.data is not None:
            self.cache.put(key, self.name, purpose, out.data.model_dump(mode="json"), tokens)
        return out

    async def acomplete(
        self, messages: Sequence[Message], *, schema: type[BaseModel] | None = None, purpose: str | None = None
    ) -> Completion:
        import asyncio  # noqa: PLC0415 - only the async path needs it

        return await asyncio.to_thread(self.complete, messages, schema=schema, purpose=purpose)
