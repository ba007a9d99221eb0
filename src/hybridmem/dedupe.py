"""Near duplicates, caught without a model: ``remember(..., dedupe=True)`` and ``Memory.dedupe``.

Two memories of the same scope (``user_id``, ``agent_id``, ``session_id``, all three equal) are
duplicates when their normalized texts are equal (NFKC, case and accents folded, punctuation and
whitespace collapsed), or when they nearly are: the sets of their BM25 tokens (the project's
tokenizer: stemmed, stopwords out, Chinese in bigrams) overlap (Jaccard) by :data:`JACCARD_ALONE`
or more, or, when both are embedded, by :data:`JACCARD` or more with a cosine of :data:`COSINE` or
more. Whatever the overlap, two texts whose numbers or identifiers
differ ("May 3" / "May 5", "HEL-4040" / "HEL-4041"), or whose negations differ ("likes" / "does
not like"), are never duplicates. The thresholds were measured on LoCoMo, the demo and SciFact
(``python -m bench dedupe``, docs/agent-memory.md).

Candidates are found without a scan: the BM25 leg over the text's tokens, in its scope, current
memories only, the :data:`CANDIDATES` best; :func:`find_groups` does that once per memory.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from .errors import ValidationError
from .models import MemoryDecision, MemoryPage, QueryResponse
from .store.base import Store
from .text.tokenize import fold, tokenize

__all__ = ["JACCARD", "JACCARD_ALONE", "COSINE", "Profile", "Match", "Group", "normalize", "find_match", "find_groups"]

#: token overlap (Jaccard) from which two embedded memories are duplicates if their cosine is high
JACCARD = 0.6
#: cosine at or above which such a pair is a duplicate
COSINE = 0.93
#: token overlap at or above which two memories are duplicates, vectors or not
JACCARD_ALONE = 0.75
#: current memories of the scope compared with each text (the BM25 leg's best)
CANDIDATES = 8
SCOPES = ("user_id", "agent_id", "session_id")

_PUNCT = re.compile(r"[\W_]+")
_NUMBER = re.compile(r"\w*\d[\w.,:/-]*")
_NEGATION = re.compile(
    r"n't\b|\b(?:not|no|never|nothing|nobody|none|neither|nor|cannot|ne|pas|jamais|aucun|aucune|rien|nicht|"
    r"kein|keine|keinen|keinem|keiner|nie|niemals|nunca|jamas|tampoco|ningun|ninguna)\b|[不没沒别未无無]"
)


def normalize(text: str) -> str:
    """NFKC, case and accents folded, every run of punctuation and whitespace one space."""
    return _PUNCT.sub(" ", fold(text)).strip()


@dataclass(frozen=True)
class Profile:
    """What the comparison needs of a text: its normalized form, token set, numbers, negations."""

    norm: str
    tokens: frozenset[str]
    numbers: frozenset[str]
    negations: tuple[str, ...]

    @classmethod
    def of(cls, text: str) -> Profile:
        folded = fold(text)
        numbers = frozenset(m.group(0).strip(".,:/-") for m in _NUMBER.finditer(folded))
        negations = tuple(sorted(m.group(0) for m in _NEGATION.finditer(folded)))
        return cls(normalize(text), frozenset(tokenize(text)), numbers, negations)


def jaccard(a: Profile, b: Profile) -> float:
    if not a.tokens or not b.tokens:
        return 0.0
    return len(a.tokens & b.tokens) / len(a.tokens | b.tokens)


def similar(a: Profile, b: Profile, cosine: float | None) -> tuple[bool, float]:
    """Whether ``a`` and ``b`` are duplicates, and their token overlap (1.0 for equal texts)."""
    if a.norm == b.norm:
        return True, 1.0
    j = jaccard(a, b)
    if a.numbers != b.numbers or a.negations != b.negations:
        return False, j
    if j >= JACCARD_ALONE:
        return True, j
    return cosine is not None and j >= JACCARD and cosine >= COSINE, j


@dataclass(frozen=True)
class Match:
    """A current memory a text duplicates: its id, text, token overlap and cosine (None: no vectors)."""

    id: str
    text: str
    jaccard: float
    cosine: float | None
    recorded_at: str | None = None


@dataclass
class Group:
    """Near duplicates: ``keep`` (the newest by recorded time) and the others, each with how alike."""

    keep: Match
    drop: list[Match] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        def one(m: Match) -> dict[str, Any]:
            c = None if m.cosine is None else round(m.cosine, 4)
            return {
                "id": m.id,
                "text": m.text,
                "jaccard": round(m.jaccard, 4),
                "cosine": c,
                "recorded_at": m.recorded_at,
            }

        return {"keep": one(self.keep), "drop": [one(m) for m in self.drop]}


class Host(Protocol):
    """What duplicate finding needs of the memory (``Memory`` is one)."""

    @property
    def store(self) -> Store: ...
    def search(self, request: dict[str, Any]) -> QueryResponse: ...
    def list(
        self, cursor: str | None = None, limit: int = 100, *, namespace: str | None = None, **f: Any
    ) -> MemoryPage: ...
    def forget(self, id: str, *, namespace: str | None = None, reason: str | None = None) -> None: ...


def _scope(meta: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(meta.get(k) for k in SCOPES)


def _candidates(mem: Host, ns: str, text: str, scope: tuple[Any, ...], exclude: str | None) -> list[dict[str, Any]]:
    """The current memories of exactly ``scope`` that BM25 ranks best for ``text`` (whole documents)."""
    req: dict[str, Any] = {"search_text": text[:2000], "top_k": 2 * CANDIDATES, "mode": "bm25", "namespace": ns}
    req.update({k: v for k, v in zip(SCOPES, scope, strict=True) if v is not None})
    try:
        hits = mem.search(req).results
    except ValidationError:  # a scope no memory has yet, or a text with no token: nothing to compare with
        return []
    out: dict[str, dict[str, Any]] = {}
    for h in hits:
        if h.doc_id == exclude or h.doc_id in out or len(out) >= CANDIDATES:
            continue
        doc = mem.store.get_document(ns, h.doc_id)
        if doc is not None and doc["valid_to"] is None and _scope(doc["metadata"]) == scope:
            out[h.doc_id] = doc
    return list(out.values())


def _vector(store: Store, ns: str, doc: dict[str, Any]) -> np.ndarray | None:
    """The vector of a one-chunk memory, normalized (None: several chunks, or not embedded yet)."""
    if len(doc["chunks"]) != 1:
        return None
    rowid = store.rowids_for(ns, [doc["chunks"][0]["chunk_id"]]).get(doc["chunks"][0]["chunk_id"])
    if rowid is None:
        return None
    _, mat = store.vectors_for([rowid], ns)
    if len(mat) == 0:
        return None
    v = np.asarray(mat[0], dtype=np.float32)
    n = float(np.linalg.norm(v))
    return v / n if n > 0 else None


def _text(doc: dict[str, Any]) -> str:
    return "\n\n".join(c["text"] for c in doc["chunks"])


@dataclass(frozen=True)
class Pair:
    """A memory and one candidate of its scope, as compared: token overlap, cosine, the verdict."""

    id: str
    other: str
    text: str
    other_text: str
    jaccard: float
    cosine: float | None
    guarded: bool  # numbers, identifiers or negations differ
    duplicate: bool
    recorded_at: str | None


def compared(
    mem: Host, ns: str, text: str, meta: dict[str, Any], *, exclude: str | None = None, vector: np.ndarray | None = None
) -> Iterator[Pair]:
    """``text`` against each candidate of ``meta``'s scope (``vector``: its own, to compare by cosine)."""
    scope, mine = _scope(meta), Profile.of(text)
    for doc in _candidates(mem, ns, text, scope, exclude):
        other, theirs = _text(doc), Profile.of(_text(doc))
        v = _vector(mem.store, ns, doc) if vector is not None else None
        cos = float(vector @ v) if vector is not None and v is not None else None
        dup, j = similar(mine, theirs, cos)
        guarded = mine.numbers != theirs.numbers or mine.negations != theirs.negations
        yield Pair(exclude or "", doc["doc_id"], text, other, j, cos, guarded, dup, doc["recorded_at"])


def find_match(
    mem: Host, ns: str, text: str, meta: dict[str, Any], *, exclude: str | None = None, vector: np.ndarray | None = None
) -> Match | None:
    """The current memory of ``meta``'s scope that ``text`` duplicates, the most alike; None if none."""
    dups = [p for p in compared(mem, ns, text, meta, exclude=exclude, vector=vector) if p.duplicate]
    if not dups:
        return None
    p = max(dups, key=lambda p: (p.jaccard, p.cosine or 0.0))
    return Match(p.other, p.other_text, p.jaccard, p.cosine, p.recorded_at)


def memory_vector(mem: Host, ns: str, doc: dict[str, Any]) -> np.ndarray | None:
    """The stored vector of a one-chunk memory (``Memory.get``'s answer), normalized; None if none."""
    return _vector(mem.store, ns, doc)


def memory_text(doc: dict[str, Any]) -> str:
    return _text(doc)


def memories(mem: Host, ns: str) -> Iterator[dict[str, Any]]:
    cursor: str | None = None
    while True:
        page = mem.list(cursor, 1000, namespace=ns, order="recorded_at")
        yield from page.memories
        if page.next_cursor is None:
            return
        cursor = page.next_cursor


def find_groups(mem: Host, ns: str) -> list[Group]:
    """The groups of near duplicates among the current memories of ``ns``: one candidate search per
    memory (never all pairs), the pairs joined transitively, each group's newest memory kept."""
    parent: dict[str, str] = {}
    info: dict[str, Match] = {}

    def root(x: str) -> str:
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    for doc in memories(mem, ns):
        text, me = _text(doc), doc["doc_id"]  # (only the memories paired are kept: bounded by the duplicates)
        m = find_match(mem, ns, text, doc["metadata"], exclude=me, vector=_vector(mem.store, ns, doc))
        if m is None:
            continue
        info[me] = Match(me, text, m.jaccard, m.cosine, doc["recorded_at"])  # how alike its match is
        info.setdefault(m.id, Match(m.id, m.text, 1.0, None, m.recorded_at))
        parent.setdefault(me, me)
        parent.setdefault(m.id, m.id)
        a, b = root(me), root(m.id)
        if a != b:
            parent[a] = b
    members: dict[str, list[Match]] = {}
    for x in parent:
        members.setdefault(root(x), []).append(info[x])
    groups = []
    for ms in members.values():
        ms.sort(key=lambda m: (m.recorded_at or "", m.id), reverse=True)
        groups.append(Group(ms[0], ms[1:]))
    groups.sort(key=lambda g: g.keep.id)
    return groups


def decision(m: Match) -> MemoryDecision:
    """``remember``'s answer for a statement ``m`` already holds: NONE naming it, nothing written."""
    how = "the same normalized text" if m.jaccard == 1.0 else f"token overlap {m.jaccard:.2f}"
    return MemoryDecision(
        event="NONE", id=m.id, reason=f"near duplicate of {m.id} ({how})", decided_by="rule", candidates=[m.id]
    )


def run(mem: Host, ns: str, *, apply: bool) -> dict[str, Any]:
    """The groups of ``ns`` and their counts; with ``apply``, all but the newest of each forgotten."""
    groups = find_groups(mem, ns)
    if apply:
        for g in groups:
            for m in g.drop:
                mem.forget(m.id, namespace=ns, reason=f"near duplicate of {g.keep.id} (dedup)")
    dropped = sum(len(g.drop) for g in groups)
    return {
        "namespace": ns,
        "applied": apply,
        "groups": len(groups),
        "forgotten" if apply else "would_forget": dropped,
        "duplicates": [g.as_dict() for g in groups],
    }
