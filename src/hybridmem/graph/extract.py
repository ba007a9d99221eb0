"""Entity and relation extraction behind one protocol: offline rules (multilingual technical
entities, relation patterns, co-occurrence) and an LLM extractor (schema-validated JSON, batched)."""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Protocol

from pydantic import BaseModel, Field

from ..errors import LLMError
from ..llm.base import ChatModel, Message
from ..models import Usage
from ..text.stopwords import (
    ABBREVIATIONS,
    CALENDAR_ABBR_BY_LANG,
    CALENDAR_BY_LANG,
    COMPANY_SUFFIXES,
    FUNCTION_WORDS_BY_LANG,
)
from ..text.stopwords import ALL as STOPWORDS
from ..text.tokenize import detect_language

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
#: letters run into a number ("kb5034441", "rfc9110"): keyed like "KB-5034441", "RFC 9110"
_LETTERS_NUMBER = re.compile(r"^([a-z]{2,8})(\d{3,12})$")


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


@lru_cache(maxsize=8)  # spans() and the relation patterns of extract_text() fold the same chunk
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


# ------------------------------------------------------------------------------ rule extractor
_SERVICE_SUFFIX = r"(?:service|svc|api|gateway|worker|workers|scheduler|proxy|server|db|queue|broker|cache|cluster|agent|manager|store|console)"
#: prefixes of standards and specification series, written with a number after a space, a hyphen
#: or nothing: ``RFC 9110``, ``ISO 8601-1:2019``, ``ISO-8601``, ``IEEE 802.11ax``, ``PEP 8``, ``RFC9110``
STANDARD_PREFIXES: tuple[str, ...] = (
    "RFC", "BCP", "ISO", "IEC", "ISO/IEC", "IEEE", "PEP", "PSR", "JSR", "SRFI", "XEP", "BIP", "EIP", "ERC",
    "ECMA", "ANSI", "NIST SP", "FIPS", "ETSI", "ITU-T", "DIN", "DIN EN", "NF EN", "BS EN", "UNE", "UNE-EN",
    "GB/T", "JIS",
)  # fmt: skip
_STANDARD = re.compile(
    r"(?<![\w/.-])(?:"
    + "|".join(re.escape(p) for p in sorted(STANDARD_PREFIXES, key=len, reverse=True))
    + r")[ \u00a0-]?\d+(?:[-.:]\d+)*[a-z]{0,3}(?!\w)"
)
#: multi-part identifiers, every part kept: ``CVE-2022-39253``, ``GHSA-4f8r-qqr9-fq8j``, ``DSA-5332-1``,
#: ``RHSA-2023:0001``, ``HEL-4040``, ``MS17-010`` (trailing words are cut by ``_identifier``)
_ID_PARTS = re.compile(r"(?<![\w.-])[A-Z][A-Z0-9]{1,9}-[A-Za-z0-9]{1,16}(?:[-:][A-Za-z0-9]{1,16}){0,6}(?!\w)")
#: capitals run into a number: ``KB5034441``, ``SHA256``
_ID_LETTERS_NUMBER = re.compile(r"(?<![\w.-])[A-Z]{2,8}\d{3,12}(?!\w)")
_ENTITY_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("http_status", re.compile(r"\bHTTP[\s-]?([1-5]\d\d)\b")),
    ("standard", _STANDARD),
    ("identifier", _ID_PARTS),
    ("error_code", re.compile(r"\b(?:E|ERR|ORA|SQLSTATE)[-_ ]?\d{3,5}\b")),
    ("identifier", _ID_LETTERS_NUMBER),
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
_STOP_GENERIC = STOPWORDS | _GENERIC
#: lower-case words the name pattern lets inside a name ("Bank of England", "Charles de Gaulle")
_JOINERS = frozenset("of de du des la le von van der del y".split())
_CONTRACTION = re.compile(r"[’'](?:m|ve|d|ll|re|t|s)$", re.I)


def _type_of_code(span: str) -> str:
    """Type of a backticked code span, by its shape."""
    for typ, pat in _ENTITY_PATTERNS:
        m = pat.fullmatch(span)
        if m:
            if typ == "identifier":
                ident = _identifier(span)
                if ident is None or ident[0] != span:
                    continue
                typ = ident[1]
            return typ
    if " " in span.strip():
        return "command"
    return "term"


def _identifier(surface: str) -> tuple[str, str] | None:
    """An identifier match with every part kept, and its type: ``standard`` (a standard's prefix),
    ``error_code`` (two parts: ``HEL-4040``, ``ORA-00942``) or ``identifier`` (more parts, or capitals
    run into a number). Trailing words are cut (``UTF-8-encoded``: ``UTF-8``); the parts after the
    prefix need two digits (``UTF-8`` is no identifier), unless they look like a hash
    (``GHSA-xxxx-xxxx-xxxx``: three or more parts of one length). None when nothing is left."""
    if _STANDARD.fullmatch(surface):
        return surface, "standard"
    parts = re.split(r"[-:]", surface)
    if len(parts) == 1:
        return (surface, "identifier") if _ID_LETTERS_NUMBER.fullmatch(surface) else None
    prefix, tail = parts[0], parts[1:]
    hashlike = len(tail) >= 3 and len({len(p) for p in tail}) == 1 and len(tail[0]) >= 3
    if not hashlike:
        while tail and tail[-1].isalpha():
            tail.pop()
    if not tail or (not hashlike and sum(c.isdigit() for p in tail for c in p) < 2):
        return None
    surface = surface[: len(prefix) + sum(len(p) + 1 for p in tail)]
    if prefix in STANDARD_PREFIXES:
        return surface, "standard"
    return surface, "error_code" if len(tail) == 1 else "identifier"


# ------------------------------------------------------------------------------ words that name nothing
def _word_sets(*groups: frozenset[str]) -> tuple[frozenset[str], frozenset[str]]:
    """(words written without inner dots, compact forms of the ones with inner dots): ``e.g.`` is
    recognised as ``e.g``, ``e. g.`` or ``E.G.``, never as the word ``eg``."""
    words = {w.rstrip(".") for g in groups for w in g}
    plain = frozenset(w for w in words if "." not in w)
    dotted = frozenset(_compact(w) for w in words if "." in w)
    return plain, dotted


def _fold_word(word: str) -> str:
    """``_fold`` of one word, faster for the usual ASCII word."""
    return word.lower() if word.isascii() else _fold(word)


def _compact(word: str) -> str:
    return re.sub(r"[.\s-]+", "", word)


_ABBREV_WORDS = _word_sets(ABBREVIATIONS)
_COMPANY_WORDS = _word_sets(COMPANY_SUFFIXES)


def _by_lang(lists: dict[str, frozenset[str]]) -> dict[str | None, frozenset[str]]:
    """Per text language: its list and the English one (dates and UI words in English are
    everywhere); every list when the language is unknown."""
    out: dict[str | None, frozenset[str]] = {None: frozenset().union(*lists.values())}
    for lang, words in lists.items():
        out[lang] = frozenset(w.rstrip(".") for w in words | lists["en"])
    return out


#: month and weekday names (and their abbreviations), function words: per language, because one
#: language's weekday is another's name ("Sam", "Mars", "Mayo" are names in English text)
_CALENDAR = _by_lang(CALENDAR_BY_LANG)
_CALENDAR_ABBR = _by_lang(CALENDAR_ABBR_BY_LANG)
_FUNCTION = _by_lang(FUNCTION_WORDS_BY_LANG)
_PUNCT = "`'\"«»“”()[]{},;:!?"
#: dotted abbreviations as written in running text: every span overlapping one is dropped (the
#: dotted-name rule would read ``i.d.R.`` as the config key ``i.d``)
_ABBREV_RE = re.compile(
    r"(?<![\w./-])(?:"
    + "|".join(
        "".join(r"\.\s?" if c == "." else re.escape(c) for c in a.rstrip(".")) + r"\.?"
        for a in sorted(ABBREVIATIONS, key=len, reverse=True)
        if "." in a.rstrip(".") and a.isascii()
    )
    + r")(?!\.?[\w-])"
)


#: a text's language, or a function giving it when needed (detecting it costs more than the rest)
_Lang = str | None | Callable[[], str | None]


def _filler(word: str, lang: _Lang = None) -> str | None:
    """What makes one word name nothing, or None: ``abbreviation`` (``e.g.``, ``z.B.``, ``c.-à-d.``,
    ``例如``), ``company`` (a suffix such as ``Inc``, ``GmbH``, ``SA``), ``calendar`` (month and
    weekday names and their abbreviations) or ``function`` (``Off``, ``However``, ``Sinon``,
    ``Jedoch``, ``Además``). Calendar and function words are those of the text's language ``lang``
    and English (of every language, en/fr/de/es/zh, when None). A word in capitals without dots
    (``DEC``, ``SAT``, ``VS``) is an acronym: no abbreviation nor abbreviated month or weekday."""
    w = _fold_word(word.strip(_PUNCT)).rstrip(".")
    if not w:
        return None
    dotted = "." in w
    acronym = not dotted and word.strip(_PUNCT + ".").isupper()
    if not acronym and ((_compact(w) in _ABBREV_WORDS[1]) if dotted else (w in _ABBREV_WORDS[0])):
        return "abbreviation"
    if (_compact(w) in _COMPANY_WORDS[1]) if dotted else (w in _COMPANY_WORDS[0]):
        return "company"
    calendar = w in _CALENDAR[None] or (not acronym and w in _CALENDAR_ABBR[None])
    if not calendar and w not in _FUNCTION[None]:
        return None
    code = lang() if callable(lang) else lang
    if w in _CALENDAR.get(code, _CALENDAR[None]) or (
        not acronym and w in _CALENDAR_ABBR.get(code, _CALENDAR_ABBR[None])
    ):
        return "calendar"
    if w in _FUNCTION.get(code, _FUNCTION[None]):
        return "function"
    return None


def _good(name: str, lang: _Lang = None) -> bool:
    k = entity_key(name)
    if len(k) < 2 or k in _GENERIC or k in STOPWORDS or k.isdigit():
        return False
    # "Fri", "Aug.", "e.g", "Inc", "Off", "星期一", "Fri, 17 Feb 2023": fillers, stopwords and numbers only
    words = name.split()
    kinds = [_filler(w, lang) for w in words]
    if any(kinds) and all(
        kind or _fold(w.strip(_PUNCT + ".")) in _STOP_GENERIC or w.strip(_PUNCT + ".").isdigit()
        for kind, w in zip(kinds, words)
    ):
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
                elif typ == "identifier":
                    ident = _identifier(surface)
                    if ident is None:
                        continue
                    found.append((m.start(), m.start() + len(ident[0]), ident[0], ident[1]))
                    continue
                elif typ == "config" and "." in surface and "_" not in surface:
                    # dotted words: keep config keys (cache.ttl), drop file names and domains
                    if _FILE_EXT.search(surface) or _DOMAIN_TLD.search(surface) or surface.count(".") < 1:
                        continue
                found.append((m.start(), m.end(), surface, typ))
        for m in _SQL_TABLE.finditer(text):
            found.append((m.start(1), m.end(1), m.group(1), "sql_table"))
        lang_at = _languages(text)
        if self.names:
            found.extend(_name_spans(text, lang_at))
        # longest span wins an overlap; then by position. Dotted abbreviations ("e.g.", "z.B.",
        # "i.d.R.", "p. ex.") are taken first, so no span overlapping one is kept
        found.sort(key=lambda s: (-(s[1] - s[0]), s[0]))
        taken = bytearray(len(text) + 1)
        for m in _ABBREV_RE.finditer(_fold_same_length(text) if "." in text else ""):
            taken[m.start() : m.end()] = b"\x01" * (m.end() - m.start())
        out: list[tuple[int, int, str, str]] = []
        for s in found:
            if any(taken[s[0] : s[1]]) or not _good(s[2], lang_at(s[0])):
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


def _languages(text: str) -> Callable[[int], Callable[[], str | None]]:
    """The language of the sentence at an offset of ``text`` (None: too short to tell), detected
    when first asked for, so a chunk mixing languages reads each sentence's weekdays and function
    words in its own language."""
    bounds = _sentence_bounds(text) or [(0, 0)]
    starts = [a for a, _ in bounds]
    memo: dict[int, str | None] = {}

    def at(offset: int) -> Callable[[], str | None]:
        i = max(0, bisect_right(starts, offset) - 1)

        def lang() -> str | None:
            if i not in memo:
                memo[i] = detect_language(text[bounds[i][0] : bounds[i][1]])
            return memo[i]

        return lang

    return at


def _name_spans(text: str, lang_at: Callable[[int], Callable[[], str | None]]) -> list[tuple[int, int, str, str]]:
    """Capitalised names in prose. A run of capitalised words is cut at abbreviations ("Python Vs
    Ruby": two names); leading function words go ("The Ghost", "Perhaps Scrooge": "Ghost",
    "Scrooge"), and so do possessives. Month and weekday names stay inside a name ("Sun
    Microsystems", "Mayo Clinic"): ``_good`` drops a run made of them only ("Fri Aug")."""
    out: list[tuple[int, int, str, str]] = []
    for m in _NAME.finditer(text):
        lang = lang_at(m.start())
        run: list[tuple[int, int, str]] = []
        for w in [*re.finditer(r"\S+", m.group(0)), None]:
            if w is not None and _filler(w.group(0), lang) != "abbreviation":
                run.append((m.start() + w.start(), m.start() + w.end(), w.group(0)))
                continue
            span = _name_run(text, run, lang)
            if span is not None:
                out.append(span)
            run = []
    return out


def _name_run(text: str, words: list[tuple[int, int, str]], lang: _Lang) -> tuple[int, int, str, str] | None:
    """The name span of a run of words (start, end, word), or None."""
    while words and (_fold_word(words[0][2]) in _STOP_GENERIC or _filler(words[0][2], lang) == "function"):
        words = words[1:]  # sentence-initial function words: "The Ghost" -> "Ghost", "Perhaps Scrooge"
    while words and words[-1][2] in _JOINERS:
        words = words[:-1]
    if not words:
        return None
    if re.search(r"[’'](?:s)$", words[-1][2]):
        a, b, w = words[-1]
        words = [*words[:-1], (a, b - 2, w[:-2])]  # possessive: Scrooge's -> Scrooge
    if any(_CONTRACTION.search(w[2]) for w in words):
        return None  # I'm, Don't, It's: not names
    surface = " ".join(w[2] for w in words)
    start = words[0][0]
    if len(words) == 1 and surface[1:].islower() and _sentence_initial(text, start):
        return None  # "Jeton", "Todos", "Verifique": capitalised because they start a sentence
    return start, words[-1][1], surface, "name"


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
