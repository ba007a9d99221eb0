"""``LLMExtractor``: schema-validated JSON extraction by a chat model, ``batch_size`` chunks per
call, with the same co-occurrence edges as the rule extractor."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from ..errors import LLMError
from ..llm.base import ChatModel, Message
from ..models import Usage
from ..text.tokenize import detect_language
from .entity import CO_OCCURS, MAX_COOCCUR_ENTITIES, ChunkExtraction, ChunkInput, Entity, Relation, entity_key
from .fillers import _good
from .rules import RuleExtractor


class LLMEntity(BaseModel):
    name: str = Field(..., min_length=1, max_length=200)
    type: str = Field(..., min_length=1, max_length=60)
    description: str = Field("", max_length=1000)


class LLMRelation(BaseModel):
    source: str = Field(..., min_length=1, max_length=200)
    target: str = Field(..., min_length=1, max_length=200)
    type: str = Field(..., min_length=1, max_length=60)
    description: str = Field("", max_length=1000)
    weight: float = Field(1.0, ge=0, le=10)


class LLMChunkGraph(BaseModel):
    chunk_id: str
    entities: list[LLMEntity] = Field(default_factory=list)
    relations: list[LLMRelation] = Field(default_factory=list)


class LLMGraph(BaseModel):
    """What the LLM extractor must return: one item per chunk of the batch."""

    chunks: list[LLMChunkGraph]


_EXTRACT_SYSTEM = (
    "You extract a knowledge graph from technical documents. For each chunk given as `[chunk_id] text`, "
    "list the entities (services, error codes, HTTP statuses, configuration parameters, SQL tables, "
    "functions, hosts, paths, versions, environments, clusters, people, organisations, products) with a "
    "type and a one-sentence description, and the relations between them (source, target, type such as "
    "depends_on / calls / causes / uses / part_of, a short description and a weight from 1 to 10). "
    "Use the names as written in the text. Keep each chunk's own chunk_id. Reply with JSON only."
)


class LLMExtractor:
    """Schema-validated LLM extraction, ``batch_size`` chunks per call; the rule extractor's
    co-occurrence edges are kept so the graph stays connected the same way offline and online."""

    def __init__(self, llm: ChatModel, *, batch_size: int = 4, max_chars: int = 6000) -> None:
        self.llm = llm
        self.batch_size = max(1, batch_size)
        self.max_chars = max_chars
        self.name = f"llm:{llm.name}"
        self.usage: Usage | None = Usage()
        self._rules = RuleExtractor(names=False)

    def messages(self, batch: Sequence[ChunkInput]) -> list[Message]:
        per = max(200, self.max_chars // len(batch))
        body = "\n\n".join(f"[{c.chunk_id}] {c.text[:per]}" for c in batch)
        return [{"role": "system", "content": _EXTRACT_SYSTEM}, {"role": "user", "content": body}]

    def extract(self, chunks: Sequence[ChunkInput]) -> list[ChunkExtraction]:
        out: list[ChunkExtraction] = []
        for i in range(0, len(chunks), self.batch_size):
            batch = list(chunks[i : i + self.batch_size])
            try:
                comp = self.llm.complete(self.messages(batch), schema=LLMGraph, purpose="graph:extract")
            except LLMError as err:
                if isinstance(err.usage, Usage) and self.usage is not None:
                    self.usage.merge(err.usage)
                raise
            assert self.usage is not None
            self.usage.merge(comp.usage)
            data = comp.data
            assert isinstance(data, LLMGraph)
            by_id = {g.chunk_id: g for g in data.chunks}
            for c in batch:
                g = by_id.get(c.chunk_id)
                ents: dict[str, Entity] = {}
                rels: list[Relation] = []
                if g is not None:
                    lang = detect_language(c.text)
                    for e in g.entities:
                        if _good(e.name, lang):
                            ents.setdefault(entity_key(e.name), Entity(e.name, e.type.lower(), e.description))
                    for r in g.relations:
                        if entity_key(r.source) == entity_key(r.target):
                            continue
                        for name in (r.source, r.target):  # a relation end the model did not list
                            ents.setdefault(entity_key(name), Entity(name, "unknown"))
                        rels.append(
                            Relation(
                                r.source, r.target, r.type.lower().replace(" ", "_"), r.description, max(r.weight, 0.1)
                            )
                        )
                # co-occurrence of the LLM's entities, as the rule extractor would add it
                names = sorted(ents.values(), key=lambda e: e.key)[:MAX_COOCCUR_ENTITIES]
                for a_i, a in enumerate(names):
                    for b in names[a_i + 1 :]:
                        rels.append(Relation(a.name, b.name, CO_OCCURS, "", 1.0))
                out.append(ChunkExtraction(c.rowid, list(ents.values()), rels))
        return out
