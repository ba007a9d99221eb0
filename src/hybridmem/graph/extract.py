"""Entity and relation extraction behind one protocol: offline rules (multilingual technical
entities, relation patterns, co-occurrence) and an LLM extractor (schema-validated JSON, batched)."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from pydantic import BaseModel, Field

from ..errors import LLMError
from ..llm.base import ChatModel, Message
from ..models import Usage
from ..text.stopwords import ALL as STOPWORDS

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
]

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


def _fold(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    text = "".join(c for c in unicodedata.normalize("NFD", text) if not unicodedata.combining(c))
    return unicodedata.normalize("NFC", text)


#: accented Latin letters -> their base letter (one character each, so offsets are kept)
_ACCENTS = {}
for _c in range(0xC0, 0x250):
    _b = "".join(x for x in unicodedata.normalize("NFD", chr(_c)) if not unicodedata.combining(x))
    if len(_b) == 1 and _b != chr(_c):
        _ACCENTS[_c] = _b


def _fold_same_length(text: str) -> str:
    """Lower case without accents, with the same length as ``text`` (relation triggers are found
    in it at the offsets of the original text)."""
    low = text.lower()
    if len(low) != len(text):
        low = "".join(c.lower()[:1] or c for c in text)
    return low.translate(_ACCENTS)


def entity_key(name: str) -> str:
    """The resolution key: case, accents, separator (``-``, ``_``, space) and alias variants of one
    name share it (``Billing-Service``, ``billing_service``, ``billing service``; ``HTTP-504``,
    ``http 504``; ``Postgres``, ``PostgreSQL``)."""
    k = _fold(name.strip().strip("`'\"«»“”()[]{}.,;:!?"))
    m = _HTTP.match(k)
    if m:
        return f"http-{m.group(1)}"
    k = _SEP.sub("-", k).strip("-")
    return ALIASES.get(k, k)


# ------------------------------------------------------------------------------ rule extractor
_SERVICE_SUFFIX = r"(?:service|svc|api|gateway|worker|workers|scheduler|proxy|server|db|queue|broker|cache|cluster|agent|manager|store|console)"
_ENTITY_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("http_status", re.compile(r"\bHTTP[\s-]?([1-5]\d\d)\b")),
    ("error_code", re.compile(r"\b[A-Z][A-Z0-9]{1,7}-\d{2,6}\b")),
    ("error_code", re.compile(r"\b(?:E|ERR|ORA|SQLSTATE)[-_ ]?\d{3,5}\b")),
    ("cluster", re.compile(r"\b(?:cluster|Cluster|clúster|Clúster)[\s-]([A-Z0-9][\w-]{0,20})\b")),
    (
        "environment",
        re.compile(r"\b(?:production|staging|préproduction|preproduction|Produktion|producción|development)\b", re.I),
    ),
    ("host", re.compile(r"\b[a-z][a-z0-9-]*-(?:\d{2,3}|prd|stg|dev)(?:-\d{2,3})?(?:\.[a-z0-9-]+)*\b")),
    ("host", re.compile(r"\b[a-z0-9-]+(?:\.[a-z0-9-]+)+\.(?:internal|local|lan|corp|com|net|io|org|fr|de)\b")),
    ("service", re.compile(rf"\b[a-z][a-z0-9]*(?:-[a-z0-9]+)*-{_SERVICE_SUFFIX}\b")),
    ("path", re.compile(r"(?<![\w/])(?:~|\.)?/[\w.-]+(?:/[\w.*<>-]+)+/?")),
    ("version", re.compile(r"\bv\d+(?:\.\d+){1,3}\b")),
    ("function", re.compile(r"\b[A-Za-z_][\w.]*\w\(\)")),
    ("config", re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")),
    ("config", re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b")),
    ("config", re.compile(r"\b[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*){1,4}\b(?!\()")),
]
_SQL_TABLE = re.compile(r"\b(?:FROM|JOIN|INTO|UPDATE|TABLE)\s+([A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)?)")
_BACKTICK = re.compile(r"`([^`\n]{2,60})`")
# capitalised names (people, products, places) for prose: "Kevin Scott", "Ebenezer Scrooge"
_NAME = re.compile(
    r"\b[A-Z][\w'’]*[a-z][\w'’]*(?:(?:\s+(?:of|de|du|des|la|le|von|van|der|del|y)\s+|\s+)[A-Z][\w'’]*[a-z][\w'’]*){0,3}\b"
)
_CJK_TERM = re.compile(r"[A-Za-z][\w-]*[A-Za-z0-9]")
_SENT = re.compile(r"(?<=[.!?。！？;；])\s+|\n{2,}|\n(?=\s*(?:[-*#>|]|\d+\.))")
_FILE_EXT = re.compile(r"\.(?:ya?ml|json|md|py|sh|txt|toml|conf|cfg|log|csv|ini|xml|html?)$", re.I)
_DOMAIN_TLD = re.compile(r"\.(?:com|net|org|io)$")

#: (relation type, pattern): the relation goes from the nearest entity before the trigger to the
#: nearest entity after it; patterns are folded (lower case, no accents) like the text they scan
RELATION_PATTERNS: list[tuple[str, str]] = [
    # en
    ("depends_on", r"depends? on|relies on|requires"),
    ("calls", r"calls|invokes|sends requests to|queries"),
    ("causes", r"causes|triggers|leads to|results in|returns"),
    ("uses", r"uses|reads from|writes to|connects to|is backed by"),
    ("part_of", r"is part of|runs on|is hosted on|belongs to"),
    # fr
    ("depends_on", r"depend de|depend du|depend des|depend d|necessite|requiert"),
    ("calls", r"appelle|interroge|envoie des requetes a"),
    ("causes", r"provoque|cause|entraine|declenche|renvoie|retourne"),
    ("uses", r"utilise|lit dans|ecrit dans|se connecte a|s'appuie sur|s’appuie sur"),
    ("part_of", r"fait partie de|tourne sur|est heberge sur|heberge sur"),
    # de
    ("depends_on", r"hangt von|hangt ab von|ist abhangig von|benotigt|erfordert"),
    ("calls", r"ruft|aufrufen|fragt"),
    ("causes", r"verursacht|fuhrt zu|lost aus|liefert"),
    ("uses", r"verwendet|nutzt|benutzt|schreibt in|liest aus|verbindet sich mit"),
    ("part_of", r"lauft auf|ist teil von|gehort zu"),
    # es
    ("depends_on", r"depende de|depende del|requiere|necesita"),
    ("calls", r"llama a|invoca|consulta"),
    ("causes", r"provoca|causa|genera|desencadena|devuelve"),
    ("uses", r"usa|utiliza|escribe en|lee de|se conecta a"),
    ("part_of", r"forma parte de|se ejecuta en|corre en"),
    # zh (no word boundaries)
    ("depends_on", r"依赖于|依赖|取决于"),
    ("calls", r"调用|请求"),
    ("causes", r"导致|引起|触发|返回"),
    ("uses", r"使用|读取|写入|连接到"),
    ("part_of", r"运行在|属于|部署在"),
]
_REL_RE = [
    (t, re.compile(p if re.search(r"[\u4e00-\u9fff]", p) else rf"(?<![\w-])(?:{p})(?![\w-])"))
    for t, p in RELATION_PATTERNS
]
_GENERIC = {
    "helio",
    "http",
    "https",
    "json",
    "yaml",
    "bash",
    "true",
    "false",
    "null",
    "none",
    "note",
    "notes",
    "example",
    "exemple",
    "ejemplo",
    "beispiel",
    "step",
    "etape",
    "resume",
    "summary",
    "cause",
    "causes",
    "resolution",
    "description",
    "message",
    "analyse",
    "analysis",
    "contexte",
    "context",
    "i",
    "mr",
    "mrs",
    "ms",
    "dr",
    "oh",
    "yes",
    "no",
    "ok",
    "well",
    "so",
    "and",
    "but",
    "yeah",
    "um",
    "uh",
    # fillers of spoken transcripts and words capitalised at the start of a quoted sentence
    "all",
    "like",
    "okay",
    "hey",
    "laughter",
    "applause",
    "right",
    "now",
    "then",
    "just",
    "also",
    "because",
    "maybe",
    "actually",
    "really",
    "thanks",
    "thank",
    "great",
    "good",
    "sure",
    "wow",
    "hmm",
    "absolutely",
    "exactly",
    "interesting",
    "anyway",
    "one",
    "two",
    "yep",
    "cool",
    "alright",
    "god",
    "gosh",
    "hello",
}
_CONTRACTION = re.compile(r"[’'](?:m|ve|d|ll|re|t|s)$", re.I)
_WEEKDAYS = {
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
}


def _type_of_code(span: str) -> str:
    """Type of a backticked code span, by its shape."""
    for typ, pat in _ENTITY_PATTERNS:
        m = pat.fullmatch(span)
        if m:
            return typ
    if " " in span.strip():
        return "command"
    return "term"


def _good(name: str) -> bool:
    k = entity_key(name)
    if len(k) < 2 or k in _GENERIC or k in STOPWORDS or k in _WEEKDAYS or k.isdigit():
        return False
    return True


class RuleExtractor:
    """Offline, multilingual (en/fr/de/es/zh) rules: technical entities by shape (error codes, HTTP
    statuses, services, hosts, config parameters, SQL tables, functions, paths, versions,
    environments, clusters, code spans), capitalised names in prose, relation patterns within a
    sentence, and co-occurrence edges (one per entity pair per chunk)."""

    name = "rules"
    usage: Usage | None = None

    def __init__(self, *, names: bool = True, cooccurrence: bool = True) -> None:
        self.names = names
        self.cooccurrence = cooccurrence

    # spans -------------------------------------------------------------------------------
    def spans(self, text: str) -> list[tuple[int, int, str, str]]:
        """(start, end, surface, type) of entity mentions, longest first where they overlap."""
        found: list[tuple[int, int, str, str]] = []
        for m in _BACKTICK.finditer(text):
            inner = m.group(1).strip()
            if inner and len(inner.split()) <= 3 and not inner.startswith("-"):
                found.append((m.start(1), m.end(1), inner, _type_of_code(inner)))
        for typ, pat in _ENTITY_PATTERNS:
            for m in pat.finditer(text):
                surface = m.group(0)
                if typ == "cluster":
                    surface = f"cluster {m.group(1)}"
                elif typ == "config" and "." in surface and "_" not in surface:
                    # dotted words: keep config keys (cache.ttl), drop file names and domains
                    if _FILE_EXT.search(surface) or _DOMAIN_TLD.search(surface) or surface.count(".") < 1:
                        continue
                found.append((m.start(), m.end(), surface, typ))
        for m in _SQL_TABLE.finditer(text):
            found.append((m.start(1), m.end(1), m.group(1), "sql_table"))
        if self.names:
            for m in _NAME.finditer(text):
                surface = m.group(0)
                words = surface.split()
                # drop leading sentence-initial function words: "The Ghost" -> "Ghost"
                while words and _fold(words[0]) in STOPWORDS | _GENERIC:
                    words.pop(0)
                if not words:
                    continue
                if words and re.search(r"[’'](?:s)$", words[-1]):
                    words[-1] = words[-1][:-2]  # possessive: Scrooge's -> Scrooge
                if not words or any(_CONTRACTION.search(w) for w in words):
                    continue  # I'm, Don't, It's: not names
                surface = " ".join(words)
                start = m.start() + m.group(0).find(surface)
                if len(words) == 1 and surface[1:].islower() and _sentence_initial(text, start):
                    continue  # "Jeton", "Todos", "Verifique": capitalised because they start a sentence
                found.append((start, m.end(), surface, "name"))
        # longest span wins an overlap; then by position
        found.sort(key=lambda s: (-(s[1] - s[0]), s[0]))
        taken = bytearray(len(text) + 1)
        out: list[tuple[int, int, str, str]] = []
        for s in found:
            if any(taken[s[0] : s[1]]) or not _good(s[2]):
                continue
            taken[s[0] : s[1]] = b"\x01" * (s[1] - s[0])
            out.append(s)
        out.sort()
        return out

    # extraction --------------------------------------------------------------------------
    def extract_text(self, text: str) -> tuple[list[Entity], list[Relation]]:
        spans = self.spans(text)
        counts: Counter[str] = Counter()
        first: dict[str, tuple[str, str]] = {}
        for _, _, surface, typ in spans:
            k = entity_key(surface)
            counts[k] += 1
            if k not in first or (first[k][1] == "name" and typ != "name"):
                first[k] = (surface, typ)
        # one-word capitalised names seen once at a sentence start are usually not names
        entities = [Entity(first[k][0], first[k][1], count=c) for k, c in counts.items()]
        relations: list[Relation] = []
        seen: set[tuple[str, str, str]] = set()
        folded = _fold_same_length(text)
        a: int | Entity  # match bounds in the relation loop, entities in the co-occurrence one
        b: int | Entity
        for s_start, s_end in _sentence_bounds(text):
            in_sent = [s for s in spans if s[0] >= s_start and s[1] <= s_end]
            if len(in_sent) < 2:
                continue
            seg = folded[s_start:s_end]
            for typ, rx in _REL_RE:
                for m in rx.finditer(seg):
                    a, b = s_start + m.start(), s_start + m.end()
                    before = [s for s in in_sent if s[1] <= a]
                    after = [s for s in in_sent if s[0] >= b]
                    if not before or not after:
                        continue
                    src, dst = before[-1][2], after[0][2]
                    ks, kd = entity_key(src), entity_key(dst)
                    if ks == kd or (ks, kd, typ) in seen:
                        continue
                    seen.add((ks, kd, typ))
                    sentence = text[s_start:s_end].strip()
                    relations.append(Relation(src, dst, typ, sentence[:300], 2.0))
        if self.cooccurrence and len(entities) > 1:
            top = sorted(entities, key=lambda e: (-e.count, e.key))[:MAX_COOCCUR_ENTITIES]
            top.sort(key=lambda e: e.key)
            for i, a in enumerate(top):
                for b in top[i + 1 :]:
                    relations.append(Relation(a.name, b.name, CO_OCCURS, "", 1.0))
        return entities, relations

    def extract(self, chunks: Sequence[ChunkInput]) -> list[ChunkExtraction]:
        out = []
        for c in chunks:
            ents, rels = self.extract_text(c.text)
            out.append(ChunkExtraction(c.rowid, ents, rels))
        return out

    def query_entities(self, text: str) -> list[str]:
        """Entity keys a question cites by shape (the graph leg also matches known names)."""
        return [entity_key(s[2]) for s in self.spans(text)]


def _sentence_initial(text: str, start: int) -> bool:
    i = start - 1
    while i >= 0 and text[i] in " \t*_\"'«“(":
        i -= 1
    return i < 0 or text[i] in ".!?:;\n#>|-0123456789)"


def _sentence_bounds(text: str) -> list[tuple[int, int]]:
    bounds, start = [], 0
    for m in _SENT.finditer(text):
        bounds.append((start, m.start()))
        start = m.end()
    bounds.append((start, len(text)))
    return [(a, b) for a, b in bounds if b > a]


# ------------------------------------------------------------------------------ LLM extractor
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
                    for e in g.entities:
                        if _good(e.name):
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
