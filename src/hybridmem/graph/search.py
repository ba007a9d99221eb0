"""Graph search. Local: the entities a question names → their neighbourhood → the chunks that
mention them, as a ranked leg for RRF. Global: map-reduce over community summaries of one level."""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import cast

import numpy as np
from pydantic import BaseModel, Field

from .. import config
from ..llm.base import Message
from ..models import Usage
from ..text.tokenize import query_tokens, tokenize
from .communities import undirected_weights
from .extract import RuleExtractor, entity_key
from .store import GraphData, StoredCommunity

__all__ = [
    "LocalGraphIndex",
    "GlobalAnswer",
    "MapPoint",
    "rank_communities",
    "estimate_tokens",
    "map_messages",
    "reduce_messages",
]

_QWORD = re.compile(r"[\w][\w'’./:-]*[\w]|[\w]")


def estimate_tokens(text: str) -> int:
    """Prompt size in tokens, estimated as characters / 4 (the usual rule of thumb for BPE
    tokenizers on English; the same estimator is used for every side of a comparison)."""
    return math.ceil(len(text) / 4)


class LocalGraphIndex:
    """In-memory view of one namespace's graph for the ``graph`` leg."""

    def __init__(self, data: GraphData, *, neighbours: int = 10, neighbour_weight: float = 0.5) -> None:
        self.version = data.version
        self.by_key = {v[0]: eid for eid, v in data.entities.items()}
        self.mentions = {eid: dict(m) for eid, m in data.mentions.items()}
        n_chunks = len({r for m in self.mentions.values() for r in m}) or 1
        self.idf = {eid: math.log(1 + n_chunks / max(1, len(m))) for eid, m in self.mentions.items()}
        adj: dict[int, dict[int, float]] = defaultdict(dict)
        for (a, b), w in undirected_weights(data.relations).items():
            adj[a][b] = w
            adj[b][a] = w
        self.adj = {e: sorted(nb.items(), key=lambda x: -x[1])[:neighbours] for e, nb in adj.items()}
        self.neighbour_weight = neighbour_weight
        self.max_words = max((k.count("-") + 1 for k in self.by_key), default=1)
        self._rules = RuleExtractor()

    def __len__(self) -> int:
        return len(self.by_key)

    def seeds(self, question: str) -> list[int]:
        """Entities the question names: rule-extracted spans and known entity names as n-grams."""
        found: dict[int, None] = {}
        for k in self._rules.query_entities(question):
            if k in self.by_key:
                found[self.by_key[k]] = None
        words = _QWORD.findall(question)
        n_max = min(self.max_words, 6)
        for n in range(n_max, 0, -1):
            for i in range(len(words) - n + 1):
                k = entity_key(" ".join(words[i : i + n]))
                eid = self.by_key.get(k)
                if eid is not None and (n > 1 or len(k) > 2):
                    found[eid] = None
        return list(found)

    def search(self, question: str, allowed: np.ndarray | None, k: int) -> list[tuple[int, float]]:
        seeds = self.seeds(question)
        if not seeds:
            return []
        score = cast("dict[int, float]", Counter())  # a Counter of float scores (typeshed: int counts only)
        for e in seeds:
            idf = self.idf.get(e, 0.0)
            for rid, cnt in self.mentions.get(e, {}).items():
                score[rid] += idf * (1 + math.log(cnt))
            nbs = self.adj.get(e, [])
            if not nbs:
                continue
            top = nbs[0][1]
            for nb, w in nbs:
                if nb in seeds:
                    continue
                contrib = self.neighbour_weight * idf * (w / top)
                nidf = self.idf.get(nb, 0.0)
                for rid, cnt in self.mentions.get(nb, {}).items():
                    # a chunk naming the neighbour often is about it (a bridge entity's own page)
                    score[rid] += contrib * nidf / (nidf + 1) * (1 + math.log(cnt))
        items: Iterable[tuple[int, float]] = score.items()
        if allowed is not None:
            ok = set(allowed.tolist())
            items = [(r, s) for r, s in items if r in ok]
        return sorted(items, key=lambda x: (-x[1], x[0]))[:k]


# ------------------------------------------------------------------------------ global search
class MapPoint(BaseModel):
    community_id: str
    answer: str = Field(..., max_length=2000)
    score: float = Field(..., ge=0, le=100)


class MapResult(BaseModel):
    """What a map call returns: key points, each from one community, rated 0-100 for the question."""

    points: list[MapPoint] = Field(default_factory=list)


class ReduceResult(BaseModel):
    answer: str = Field(..., max_length=6000)
    community_ids: list[str] = Field(default_factory=list)
    chunk_ids: list[str] = Field(default_factory=list)


class GlobalAnswer(BaseModel):
    """A corpus-wide answer: map-reduce over the summaries of one community level."""

    question: str
    answer: str
    found: bool
    level: int
    community_ids: list[str] = Field(default_factory=list)
    chunk_ids: list[str] = Field(default_factory=list)
    points: list[MapPoint] = Field(default_factory=list)
    #: communities read (map) out of the level's total
    communities_used: int = 0
    communities_total: int = 0
    #: True when some summary used is stale, or chunks were added since the graph was updated
    stale: bool = False
    answerer: str = "extractive"
    notes: list[str] = Field(default_factory=list)
    #: prompt tokens of the map and reduce prompts (estimated at 4 characters a token when no LLM ran)
    prompt_tokens: int = 0
    usage: Usage | None = None
    namespace: str = config.DEFAULT_NAMESPACE
    took_ms: float = 0.0


def _bm25_scores(question: str, docs: Sequence[str]) -> list[float]:
    q = set(query_tokens(question))
    toks = [tokenize(d) for d in docs]
    n = len(docs) or 1
    avg = sum(len(t) for t in toks) / n or 1.0
    df: Counter[str] = Counter()
    for t in toks:
        df.update(set(t))
    out = []
    for t in toks:
        tf = Counter(t)
        s = 0.0
        for term in q:
            f = tf.get(term, 0)
            if f:
                idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
                s += idf * f * 2.2 / (f + 1.2 * (0.25 + 0.75 * len(t) / avg))
        out.append(s)
    return out


def rank_communities(question: str, communities: Sequence[StoredCommunity]) -> list[tuple[StoredCommunity, float]]:
    """Communities by relevance to the question (BM25 over title + summary) plus importance, so a
    broad question with no matching words still reads the most important communities."""
    if not communities:
        return []
    rel = _bm25_scores(question, [f"{c.title}\n{c.summary}" for c in communities])
    top_rel = max(rel) or 1.0
    top_imp = max(c.importance for c in communities) or 1.0
    scored = [(c, r / top_rel + 0.3 * c.importance / top_imp) for c, r in zip(communities, rel)]
    return sorted(scored, key=lambda x: (-x[1], x[0].community_id))


_MAP_SYSTEM = (
    "You answer a corpus-wide question from community reports of a knowledge graph. For each report that "
    "helps, give one key point answering the question (1-3 sentences, keeping any [chunk_id] it relies on) "
    "with the report's community_id and a score from 0 (useless) to 100 (essential). Skip reports that do "
    "not help. Reply with JSON only."
)
_REDUCE_SYSTEM = (
    "You write the final answer to a corpus-wide question from key points rated by importance. Answer in "
    "the question's language, in at most 6 sentences, citing the community ids as [L0-3] and chunk ids as "
    "[chunk_id] that support each statement, using only the key points. If they do not answer the question, "
    "say so. Reply with JSON only."
)


def map_messages(question: str, batch: Sequence[StoredCommunity]) -> list[Message]:
    body = "\n\n".join(f"[{c.community_id}] {c.title}\n{c.summary}" for c in batch)
    return [
        {"role": "system", "content": _MAP_SYSTEM},
        {"role": "user", "content": f"Question: {question}\n\nCommunity reports:\n\n{body}"},
    ]


def reduce_messages(question: str, points: Sequence[MapPoint]) -> list[Message]:
    body = "\n".join(f"- ({p.score:.0f}) [{p.community_id}] {p.answer}" for p in points)
    return [
        {"role": "system", "content": _REDUCE_SYSTEM},
        {"role": "user", "content": f"Question: {question}\n\nKey points:\n{body}"},
    ]


def offline_map(question: str, batch: Sequence[StoredCommunity]) -> list[MapPoint]:
    """Extractive map: each summary line scored by the question's words it shares (0-100)."""
    qwords = {t for t in query_tokens(question)}
    points = []
    for c in batch:
        lines = [ln for ln in c.summary.split("\n") if ln.strip() and not ln.startswith("Sub-communities:")]
        best, best_s = None, 0.0
        for ln in lines:
            toks = set(tokenize(ln))
            s = len(qwords & toks) / (len(qwords) or 1)
            # a sentence of the corpus (with its chunk id) reads better than a list of entity names
            s_rank = s + (0.05 if ln.startswith("- ") else 0.0) - (0.05 if ln.startswith("Entities:") else 0.0)
            if s > 0 and s_rank > best_s:
                best, best_s = ln, s_rank
        if best is not None:
            points.append(
                MapPoint(
                    community_id=c.community_id,
                    answer=best.removeprefix("- ")[:2000],
                    score=round(min(100.0, max(0.0, 100 * best_s)), 1),
                )
            )
    return points


_CITE = re.compile(r"\[([^\[\]\s]{1,200})\]")


def cited_ids(text: str) -> list[str]:
    return list(dict.fromkeys(_CITE.findall(text)))
