"""GraphRAG layer: entity graph from chunks (offline rules or an LLM), hierarchical Leiden
communities with fingerprinted summaries, incremental refresh, local (a ranked leg) and global
(map-reduce) search. Reached as ``Memory.graph``."""

from .extract import Entity, LLMExtractor, Relation, RuleExtractor, entity_key
from .rag import GraphRAG, GraphReport, GraphStatus
from .search import GlobalAnswer

__all__ = [
    "GraphRAG",
    "GraphReport",
    "GraphStatus",
    "GlobalAnswer",
    "RuleExtractor",
    "LLMExtractor",
    "Entity",
    "Relation",
    "entity_key",
]
