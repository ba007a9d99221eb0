"""Entity and relation extraction behind one protocol: offline rules (multilingual technical
entities, relation patterns, co-occurrence) and an LLM extractor (schema-validated JSON, batched).
The parts live in ``entity`` (types, protocol, resolution key), ``patterns``, ``fillers``,
``rules`` and ``llm_extract``; this module keeps their public names in one place."""

from __future__ import annotations

from .entity import (
    ALIASES,
    CO_OCCURS,
    MAX_COOCCUR_ENTITIES,
    ChunkExtraction,
    ChunkInput,
    Entity,
    Extractor,
    Relation,
    entity_key,
)
from .llm_extract import LLMChunkGraph, LLMEntity, LLMExtractor, LLMGraph, LLMRelation
from .patterns import RELATION_PATTERNS, STANDARD_PREFIXES
from .rules import RuleExtractor

__all__ = [
    "Entity",
    "Relation",
    "ChunkInput",
    "ChunkExtraction",
    "Extractor",
    "RuleExtractor",
    "LLMExtractor",
    "entity_key",
    "RELATION_PATTERNS",
    "STANDARD_PREFIXES",
    "ALIASES",
    "CO_OCCURS",
    "MAX_COOCCUR_ENTITIES",
    "LLMChunkGraph",
    "LLMEntity",
    "LLMGraph",
    "LLMRelation",
]
