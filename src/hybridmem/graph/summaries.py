"""Community summaries, bottom-up: extractive offline (central entities, strongest relations,
representative sentences with their chunk ids), or by the LLM (schema-validated) when configured.
A parent community is summarized from its children's summaries."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from pydantic import BaseModel, Field

from ..llm.base import ChatModel, Message
from ..models import Usage
from .extract import CO_OCCURS

__all__ = ["SummaryInput", "Summary", "extractive_summary", "llm_summary", "CommunityReport"]

_SENT = re.compile(r"(?<=[.!?。！？])\s+|\n+")
_MD = re.compile(r"[#*`>|]+")


@dataclass
class SummaryInput:
    community_id: str
    level: int
    entities: list[tuple[str, str, int]]  # (name, type, degree in the community), most central first
    relations: list[tuple[str, str, str, float, str]]  # (source, target, type, weight, description)
    chunks: list[tuple[str, str]]  # (chunk_id, text) of chunks mentioning members, most relevant first
    children: list["Summary"]


@dataclass
class Summary:
    community_id: str
    title: str
    text: str
    chunk_ids: list[str]
    importance: float
    model: str


def _sentences(text: str) -> list[str]:
    out = []
    for s in _SENT.split(text):
        s = " ".join(_MD.sub(" ", s).split())
        if 30 <= len(s) <= 400:
            out.append(s)
    return out


def _title(inp: SummaryInput) -> str:
    names = [n for n, _, _ in inp.entities[:3]]
    if not names and inp.children:
        names = [c.title.split(" · ")[0] for c in inp.children[:3]]
    return " · ".join(names) or inp.community_id


def extractive_summary(
    inp: SummaryInput, *, max_sentences: int = 4, max_entities: int = 8, max_relations: int = 6
) -> Summary:
    """Offline summary: the most central entities, the strongest typed relations, and the sentences
    that mention most member entities (each with its chunk id)."""
    lines: list[str] = []
    ents = inp.entities[:max_entities]
    if ents:
        lines.append("Entities: " + ", ".join(f"{n} ({t})" for n, t, _ in ents) + ".")
    typed = sorted((r for r in inp.relations if r[2] != CO_OCCURS), key=lambda r: -r[3])[:max_relations]
    if typed:
        lines.append("Relations: " + "; ".join(f"{s} {t.replace('_', ' ')} {d}" for s, d, t, _, _ in typed) + ".")
    cited: list[str] = []
    if inp.children:
        # a parent: its children's titles and their best sentence each
        lines.append("Sub-communities: " + "; ".join(f"[{c.community_id}] {c.title}" for c in inp.children[:8]) + ".")
        for c in sorted(inp.children, key=lambda c: -c.importance)[:max_sentences]:
            best = next((ln for ln in c.text.split("\n") if ln.startswith("- ")), None)
            if best:
                lines.append(best)
            cited += [x for x in c.chunk_ids[:2] if x not in cited]
    else:
        names = [n.casefold() for n, _, _ in inp.entities[: max_entities * 2]]
        scored: list[tuple[float, int, str, str]] = []
        for i, (cid, text) in enumerate(inp.chunks[:40]):
            for s in _sentences(text):
                low = s.casefold()
                hits = sum(1 for n in names if n and n in low)
                if hits:
                    scored.append((hits + 0.5 * any(r[4] and r[4][:60] in s for r in typed), -i, s, cid))
        scored.sort(key=lambda x: (-x[0], -x[1]))
        seen_chunks: set[str] = set()
        for _, _, s, cid in scored:
            if len(cited) >= max_sentences:
                break
            if cid in seen_chunks:
                continue
            seen_chunks.add(cid)
            cited.append(cid)
            lines.append(f"- {s} [{cid}]")
    size = sum(1 for _ in inp.entities) + sum(len(c.chunk_ids) for c in inp.children)
    importance = round(len(inp.entities) + 2 * len(typed) + len(inp.chunks) * 0.5 + size * 0.1, 2)
    return Summary(inp.community_id, _title(inp), "\n".join(lines), cited, importance, "extractive")


class CommunityReport(BaseModel):
    """What the LLM summarizer must return."""

    title: str = Field(..., min_length=1, max_length=200)
    summary: str = Field(..., min_length=1, max_length=4000)
    importance: float = Field(..., ge=0, le=10)
    chunk_ids: list[str] = Field(default_factory=list)


_SUMMARY_SYSTEM = (
    "You write the report of one community of a knowledge graph built from technical documents: a short "
    "title naming its main entities, a summary of at most 5 sentences saying what these entities are and "
    "how they relate (in the language of the material), an importance from 0 to 10 for an engineer "
    "answering questions about the whole corpus, and the chunk ids your summary relies on "
    "(only ids shown as [chunk_id]). Reply with JSON only."
)


def summary_messages(inp: SummaryInput, *, max_chars: int = 6000) -> list[Message]:
    parts = [f"Community {inp.community_id} (level {inp.level})"]
    if inp.entities:
        parts.append("Entities:\n" + "\n".join(f"- {n} ({t}, degree {d})" for n, t, d in inp.entities[:20]))
    typed = sorted((r for r in inp.relations if r[2] != CO_OCCURS), key=lambda r: -r[3])[:15]
    if typed:
        parts.append("Relations:\n" + "\n".join(f"- {s} {t} {d}: {desc[:160]}" for s, d, t, _, desc in typed))
    if inp.children:
        parts.append(
            "Sub-community reports:\n"
            + "\n\n".join(f"[{c.community_id}] {c.title}\n{c.text}" for c in inp.children[:12])
        )
    else:
        parts.append("Source chunks:\n" + "\n\n".join(f"[{cid}] {text[:800]}" for cid, text in inp.chunks[:6]))
    body = "\n\n".join(parts)[:max_chars]
    return [{"role": "system", "content": _SUMMARY_SYSTEM}, {"role": "user", "content": body}]


def llm_summary(inp: SummaryInput, llm: ChatModel, usage: Usage) -> Summary:
    """One schema-validated LLM call (one repair attempt inside the model layer); ``usage``
    receives its cost. Unknown chunk ids are dropped."""
    comp = llm.complete(summary_messages(inp), schema=CommunityReport, purpose="graph:summary")
    usage.merge(comp.usage)
    rep = comp.data
    assert isinstance(rep, CommunityReport)
    known = {cid for cid, _ in inp.chunks} | {x for c in inp.children for x in c.chunk_ids}
    cited = [c for c in dict.fromkeys(rep.chunk_ids) if c in known]
    return Summary(inp.community_id, rep.title, rep.summary, cited, rep.importance, llm.name)


def build_input(
    community_id: str,
    level: int,
    members: Sequence[int],
    entities: Mapping[int, tuple[Any, ...]],
    mentions: Mapping[int, Mapping[int, int]],
    relations: Sequence[tuple[int, int, str, float, str]],
    chunk_text: Mapping[int, tuple[str, str]],
    children: list[Summary],
) -> SummaryInput:
    """Gather a community's material: members by weighted degree inside the community, its internal
    relations, and the chunks mentioning most members."""
    mem = set(members)
    deg = cast("dict[int, float]", Counter())  # a Counter of float weights (typeshed: int counts only)
    rels = []
    for s, d, typ, w, desc in relations:
        if s in mem and d in mem:
            deg[s] += w
            deg[d] += w
            rels.append((entities[s][1], entities[d][1], typ, w, desc))
    ordered = sorted(mem, key=lambda e: (-deg[e], -len(mentions.get(e, {})), entities[e][0]))
    chunk_score: Counter[int] = Counter()
    for e in ordered[:50]:
        for rid in mentions.get(e, {}):
            chunk_score[rid] += 1
    top_chunks = [r for r, _ in sorted(chunk_score.items(), key=lambda x: (-x[1], x[0]))[:40]]
    return SummaryInput(
        community_id,
        level,
        [(entities[e][1], entities[e][2], int(deg[e])) for e in ordered],
        rels,
        [chunk_text[r] for r in top_chunks if r in chunk_text],
        children,
    )
