"""The extraction call: what the model is asked (a batch of turns, with the scope's most relevant
current facts), the JSON schema it answers in, and the checks its answer passes before any fact is
stored: a fact needs text, at least one source turn of the batch (invented turn ids are dropped),
a bounded length, and at most ``max_facts`` per batch; its time is resolved from a date or from
relative words ("last week") against the time of the turn it came from (:mod:`hybridmem.timeexpr`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from pydantic import BaseModel, Field

from ..llm.base import Message
from ..models import DroppedFact
from ..timeexpr import find_time_expressions, parse_timestamp

__all__ = ["FACT_CHARS", "KEY_CHARS", "Fact", "Known", "ProposedFact", "ProposedFacts", "Turn", "check", "messages"]

#: the most characters of one fact's text; a longer proposal is dropped (a fact is a short statement)
FACT_CHARS = 500
#: the most characters of a fact's key; a longer one is dropped from the fact (the fact is kept)
KEY_CHARS = 128
#: the most source turns one fact keeps (the first named)
MAX_SOURCES = 20
#: the most characters of one known fact shown to the model
KNOWN_CHARS = 300


class ProposedFact(BaseModel):
    """One fact as the model proposes it (the schema of the structured output)."""

    text: str = Field(description="One short self-contained statement, naming who it is about.")
    key: str | None = Field(
        None, description="A stable slot for a value a later fact may replace (e.g. caroline.city), else null."
    )
    occurred_at: str | None = Field(
        None, description="When it happened: an ISO 8601 date, or the conversation's words (e.g. 'last week'); null."
    )
    source_turns: list[str] = Field(default_factory=list, description="The ids of the turns that state it.")


class ProposedFacts(BaseModel):
    """The model's whole answer: the facts worth keeping from the new turns (maybe none)."""

    facts: list[ProposedFact] = Field(default_factory=list)


@dataclass(frozen=True)
class Turn:
    """A stored turn as the model sees it: its id, text (``Speaker: text``) and time."""

    id: str
    text: str
    when: datetime | None


@dataclass(frozen=True)
class Known:
    """A current fact of the scope shown to the model."""

    id: str
    text: str
    key: str | None = None


@dataclass
class Fact:
    """A proposal that passed the checks, its time resolved (ISO 8601 UTC, or None)."""

    text: str
    key: str | None
    source_turns: list[str]
    occurred_at: str | None
    occurred_text: str | None


_SYSTEM = (
    "You extract long-term memory facts from a conversation. NEW TURNS are listed as "
    "[turn id] (time) Speaker: text. KNOWN FACTS are what the memory holds already about these people.\n"
    "Return the facts worth remembering from the NEW TURNS only: events, plans, preferences, "
    "relationships, attributes, decisions. Skip greetings and small talk.\n"
    "- text: one short statement in the third person that names who it is about "
    '(e.g. "Caroline moved to Berlin in May 2023"), understandable without the conversation.\n'
    "- key: for a value a later fact may replace (where someone lives, works, a count, a plan), a "
    "stable slot such as caroline.city; reuse the key of a KNOWN fact it updates; otherwise null.\n"
    "- occurred_at: when it happened, if the turns say: an ISO 8601 date, or the exact words used "
    '("yesterday", "last week", "in May"), which are resolved against the time of the turn; else null.\n'
    "- source_turns: the ids of the NEW TURNS that state it (at least one; only ids listed).\n"
    "Do not repeat a KNOWN fact unchanged. At most {max_facts} facts. "
    'Answer with one JSON object: {{"facts": [{{"text": ..., "key": ..., "occurred_at": ..., '
    '"source_turns": [...]}}]}}; {{"facts": []}} when nothing is worth remembering.'
)


def messages(turns: list[Turn], known: list[Known], max_facts: int, max_chars: int) -> list[Message]:
    """The extraction prompt. ``max_chars`` bounds the turns' text (a longer turn is cut)."""
    listed = [{"id": k.id, "text": k.text[:KNOWN_CHARS], **({"key": k.key} if k.key else {})} for k in known]
    budget = max(max_chars, 1)
    lines = []
    for t in turns:
        when = f" ({t.when.isoformat().replace('+00:00', 'Z')})" if t.when is not None else ""
        text = t.text[:budget]
        budget = max(budget - len(text), 1)
        lines.append(f"[{t.id}]{when} {text}")
    user = (
        "KNOWN FACTS:\n"
        + (json.dumps(listed, ensure_ascii=False, indent=1) if listed else "(none)")
        + "\n\nNEW TURNS:\n"
        + "\n".join(lines)
    )
    return [{"role": "system", "content": _SYSTEM.format(max_facts=max_facts)}, {"role": "user", "content": user}]


def check(proposed: ProposedFacts, turns: list[Turn], max_facts: int) -> tuple[list[Fact], list[DroppedFact]]:
    """The proposals that may be stored, and the others with why. Turn ids the batch does not hold
    are dropped from a fact; a fact left with none is dropped (every fact keeps its provenance)."""
    by_id = {t.id: t for t in turns}
    kept: list[Fact] = []
    dropped: list[DroppedFact] = []
    seen: set[str] = set()
    for p in proposed.facts:
        text = " ".join(p.text.split())
        named = (s.strip() for s in p.source_turns if isinstance(s, str))
        sources = list(dict.fromkeys(s for s in named if s in by_id))[:MAX_SOURCES]
        why = _refused(text, sources, p, seen, len(kept), max_facts)
        if why is not None:
            dropped.append(DroppedFact(text=text[:FACT_CHARS], reason=why))
            continue
        seen.add(text.casefold())
        key = " ".join((p.key or "").split()) or None
        when, words = _resolve(p.occurred_at, [by_id[s] for s in sources])
        kept.append(Fact(text, key if key is None or len(key) <= KEY_CHARS else None, sources, when, words))
    return kept, dropped


def _refused(text: str, sources: list[str], p: ProposedFact, seen: set[str], n: int, max_facts: int) -> str | None:
    if not text:
        return "empty text"
    if len(text) > FACT_CHARS:
        return f"longer than {FACT_CHARS} characters (a fact is a short statement)"
    if not sources:
        named = ", ".join(map(repr, p.source_turns[:5])) or "none"
        return f"no source turn of this batch (named: {named})"
    if text.casefold() in seen:
        return "the same text as another fact of the batch"
    if n >= max_facts:
        return f"over the limit of {max_facts} facts per batch"
    return None


def _resolve(said: str | None, sources: list[Turn]) -> tuple[str | None, str | None]:
    """A fact's time: the model's date, else its words resolved against the latest source turn's
    time, else that turn's time (when the fact was said). Returns (ISO 8601 UTC, the words)."""
    ref = max((t.when for t in sources if t.when is not None), default=None)
    words = " ".join((said or "").split())[:200] or None
    if words is not None:
        try:
            return _iso(parse_timestamp(words)), None
        except ValueError:
            pass
        if ref is not None:
            found = find_time_expressions(words, ref, None)
            if found:
                return _iso(found[0].start), words
    return (_iso(ref) if ref is not None else None), words


def _iso(t: datetime) -> str:
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")
