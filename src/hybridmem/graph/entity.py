"""What extraction produces (entities, relations, per-chunk results), the ``Extractor`` protocol,
and the entity resolution key that merges variants of one name."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ..models import Usage

#: relation type of co-occurrence edges (undirected in meaning, stored once per pair)
CO_OCCURS = "co_occurs"
#: at most this many entities per chunk take part in co-occurrence edges (the most mentioned ones)
MAX_COOCCUR_ENTITIES = 12


@dataclass
class Entity:
    name: str
    type: str
    description: str = ""
    count: int = 1

    @property
    def key(self) -> str:
        return entity_key(self.name)


@dataclass
class Relation:
    source: str  # entity names (resolved to keys by the writer)
    target: str
    type: str
    description: str = ""
    weight: float = 1.0


@dataclass
class ChunkInput:
    rowid: int
    chunk_id: str
    text: str


@dataclass
class ChunkExtraction:
    rowid: int
    entities: list[Entity] = field(default_factory=list)
    relations: list[Relation] = field(default_factory=list)


class Extractor(Protocol):
    """Turns chunks into entities and relations. ``name`` is recorded with each extracted chunk;
    ``usage`` sums the LLM cost of the calls made so far (None for offline extractors)."""

    name: str
    usage: Usage | None

    def extract(self, chunks: Sequence[ChunkInput]) -> list[ChunkExtraction]: ...


# ------------------------------------------------------------------------------ entity resolution
#: alias → canonical key (after folding): variants of one thing that folding alone does not merge
ALIASES = {
    "postgres": "postgresql",
    "pg": "postgresql",
    "psql": "postgresql",
    "k8s": "kubernetes",
    "kube": "kubernetes",
    "prod": "production",
    "produccion": "production",
    "produktion": "production",
    "stg": "staging",
    "preprod": "staging",
    "preproduction": "staging",
    "redis-server": "redis",
    "mongo": "mongodb",
    "es": "elasticsearch",
}
_SEP = re.compile(r"[\s_\-]+")
_HTTP = re.compile(r"^https?\s*[-_ ]?\s*(\d{3})$", re.I)
#: letters run into a number ("kb5034441", "rfc9110"): keyed like "KB-5034441", "RFC 9110"
_LETTERS_NUMBER = re.compile(r"^([a-z]{2,8})(\d{3,12})$")


def _fold(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    text = "".join(c for c in unicodedata.normalize("NFD", text) if not unicodedata.combining(c))
    return unicodedata.normalize("NFC", text)


def entity_key(name: str) -> str:
    """The resolution key: case, accents, separator (``-``, ``_``, space) and alias variants of one
    name share it (``Billing-Service``, ``billing_service``, ``billing service``; ``HTTP-504``,
    ``http 504``; ``RFC 9110``, ``RFC-9110``, ``RFC9110``; ``Postgres``, ``PostgreSQL``)."""
    k = _fold(name.strip().strip("`'\"«»“”()[]{}.,;:!?"))
    m = _HTTP.match(k)
    if m:
        return f"http-{m.group(1)}"
    k = _SEP.sub("-", k).strip("-")
    m = _LETTERS_NUMBER.match(k)
    if m:
        k = f"{m.group(1)}-{m.group(2)}"
    return ALIASES.get(k, k)
