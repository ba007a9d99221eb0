"""Words that name nothing (generic words, abbreviations, company suffixes, month and weekday
names, function words, per language): ``_filler`` classifies one word, ``_good`` judges a name."""

from __future__ import annotations

import re
from collections.abc import Callable

from ..text.stopwords import (
    ABBREVIATIONS,
    CALENDAR_ABBR_BY_LANG,
    CALENDAR_BY_LANG,
    COMPANY_SUFFIXES,
    FUNCTION_WORDS_BY_LANG,
)
from ..text.stopwords import ALL as STOPWORDS
from .entity import _fold, entity_key

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
