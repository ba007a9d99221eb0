"""``RuleExtractor``: offline, multilingual extraction. Entity spans by shape and capitalised
names in prose, relation triggers within a sentence, co-occurrence edges."""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Sequence
from functools import lru_cache

from ..models import Usage
from ..text.tokenize import detect_language
from .entity import CO_OCCURS, MAX_COOCCUR_ENTITIES, ChunkExtraction, ChunkInput, Entity, Relation, entity_key
from .fillers import _ABBREV_RE, _STOP_GENERIC, _filler, _fold_word, _good, _Lang
from .patterns import (
    _BACKTICK,
    _DOMAIN_TLD,
    _ENTITY_PATTERNS,
    _FILE_EXT,
    _NAME,
    _REL_RE,
    _SENT,
    _SQL_TABLE,
    _identifier,
    _type_of_code,
)

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


#: lower-case words the name pattern lets inside a name ("Bank of England", "Charles de Gaulle")
_JOINERS = frozenset("of de du des la le von van der del y".split())
_CONTRACTION = re.compile(r"[’'](?:m|ve|d|ll|re|t|s)$", re.I)


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
