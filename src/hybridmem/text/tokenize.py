"""Our token stream for BM25: multilingual, accent-folded, identifier-aware, CJK bigrams.

Identifiers are kept whole *and* split (``HEL-4040`` → ``hel-4040``, ``hel``, ``4040``), so an exact
error code outranks documents that merely share its parts. ``HTTP 504`` also yields ``http504``.
Latin words are stemmed with Snowball in the language detected for the text (en/fr/de/es).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections import Counter
from itertools import chain
from types import ModuleType
from typing import Any, cast

from .stopwords import ALL as STOPWORDS
from .stopwords import BY_LANG

_scan: ModuleType | None
try:  # the character scans compiled (setup.py); without them the regular expressions, same tokens
    from . import _scan as _compiled_scan

    _scan = _compiled_scan
except ImportError:  # pragma: no cover - a build without a C compiler
    _scan = None

__all__ = [
    "tokenize",
    "index_tokens",
    "CONTEXT_TOKENS",
    "query_tokens",
    "identifier_tokens",
    "is_identifier",
    "detect_language",
    "fold",
    "TOKENIZER_VERSION",
    "TOKEN_CHARS",
]

#: bump when the token stream changes: stores re-index their BM25 tables on open
TOKENIZER_VERSION = "5"  # 4: "v2.38.5" also gives "2.38.5"; 5: a chunk's context indexed by its last tokens
#: tokens of a chunk's index-only context (``Document.context``) that BM25 indexes: its last ones
#: (the end of the turn a reply answers: "... where did you go last weekend?"). The embedding sees
#: the whole context. On LoCoMo 6-10 tokens score alike (BM25 nDCG@10 0.552-0.557); the whole
#: turn 0.503, none 0.488: all of it drowns the reply's own words, temporal questions most.
CONTEXT_TOKENS = 8
#: characters that may join parts of one identifier; FTS5 must treat them as token characters
TOKEN_CHARS = "-_./:@#+"

_CJK = (
    "\u3040-\u30ff"  # hiragana, katakana
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # CJK ideographs
    "\uac00-\ud7af"  # hangul
)
# letters and digits of those scripts only: CJK punctuation (・, ゠, ゛) separates like any other
_CJK_RUN = re.compile(f"(?:(?=\\w)[{_CJK}])+")
# a word, or words joined by identifier punctuation: hel-4040, max_connections, foo.bar, v2.3.1, a/b/c.
# Never CJK characters: "2015年黑豹队" is the number 2015, then a CJK run (as one \w+ word, a whole
# Chinese sentence after a digit or a Latin letter became a single token no query could match)
_WCHAR = f"[^\\W_{_CJK}]"
_WORD = re.compile(f"{_WCHAR}+(?:[-_./:@#+]+{_WCHAR}+)*")
_PIECE = re.compile(_CJK_RUN.pattern + "|" + _WORD.pattern)
_SPLIT = re.compile(r"[-_./:@#+]+")
_ALPHA = re.compile(r"^[^\W\d_]+$")
_DIGITS = re.compile(r"^\d+$")
_V_VERSION = re.compile(r"^v\d+(?:\.\d+)+$")
_LETTERS = re.compile(r"[^\W\d_]+")
_SNOWBALL = {"en": "english", "fr": "french", "de": "german", "es": "spanish"}


def fold(text: str) -> str:
    """NFKC, casefold, strip combining accents (é → e, ß → ss); CJK untouched."""
    if text.isascii():  # the common case, the same answer: NFKC and accents do nothing to ASCII
        return text.lower()
    text = unicodedata.normalize("NFKC", text).casefold()
    decomposed = unicodedata.normalize("NFD", text)
    # the combining marks among the text's distinct characters, deleted in one C pass (a Python test
    # of every character was a third of a long document's tokenizing)
    marks = {ord(ch): None for ch in set(decomposed) if unicodedata.combining(ch)}
    stripped = decomposed.translate(marks) if marks else decomposed
    return unicodedata.normalize("NFC", stripped)


def detect_language(text: str) -> str | None:
    """'zh' when CJK dominates, else the en/fr/de/es stopword list that matches most words (or None)."""
    folded = fold(text[:4000])
    if _scan is None:
        cjk, n_words, counts = _lang_counts(folded)
        per_lang = tuple(counts[lang] for lang in _LANG_ORDER)
    else:
        cjk, n_words, per_lang = _scan.lang_counts(folded, _LANG_BITS, _LANG_MAXLEN, len(_LANG_ORDER))
    if cjk and cjk >= n_words:
        return "zh"
    best = max(per_lang, default=0)
    if not n_words or not best or per_lang.count(best) > 1:  # no stopword, or a tie: no language
        return None
    return _LANG_ORDER[per_lang.index(best)]


def _lang_counts(folded: str) -> tuple[int, int, Counter[str]]:
    """What ``_scan.lang_counts`` gives, without it: the CJK characters, the words, and per
    language the words (of two letters or more) that are its stopwords."""
    cjk = 0 if folded.isascii() else sum(len(m) for m in _CJK_RUN.findall(folded))
    words = _LETTERS.findall(folded)
    counts: Counter[str] = Counter()
    for w, n in Counter(words).items():  # each distinct word once, weighted by its count
        if (
            len(w) < 2 or w not in STOPWORDS
        ):  # elided French articles (l', d') are stopwords, but "T cells" is not French
            continue
        for lang, stops in BY_LANG.items():
            if w in stops:
                counts[lang] += n
    return cjk, len(words), counts


#: for the compiled scan: each stopword (of >= 2 characters) -> the bit mask of the languages it is one in
_LANG_ORDER = list(BY_LANG)
_LANG_BITS = {
    w: mask
    for w in STOPWORDS
    if len(w) >= 2 and (mask := sum(1 << i for i, lang in enumerate(_LANG_ORDER) if w in BY_LANG[lang]))
}
_LANG_MAXLEN = max(map(len, _LANG_BITS), default=0)


@functools.lru_cache(maxsize=8)
def _stemmer(lang: str) -> Any:
    import Stemmer  # PyStemmer: Snowball in C

    return Stemmer.Stemmer(_SNOWBALL[lang], 100_000)


@functools.lru_cache(maxsize=262_144)
def _stem(word: str, lang: str | None) -> str:
    """Snowball's stem of a word (unchanged when it has a digit or no stemmer): words are Zipfian, so
    the cache answers almost every call of a bulk ingest."""
    if lang not in _SNOWBALL or not _ALPHA.match(word):
        return word
    return cast(str, _stemmer(lang).stemWord(word))  # PyStemmer has no type hints


def _cjk_tokens(run: str) -> list[str]:
    # overlapping bigrams (as Lucene's CJKAnalyzer). Measured, XQuAD-zh BM25 nDCG@10: bigrams 0.901,
    # jieba search mode 0.902, unigrams + bigrams 0.907 — but the extra unigrams lengthen Chinese
    # chunks and cost 0.03 MRR on the mixed-language demo set through BM25 length normalisation
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


class _Pieces(dict[str, tuple[str, ...]]):
    """piece -> its tokens in one language (they depend on the piece and the language alone, but for
    the acronym-number join, made apart): most pieces of a text repeat, and a hit is a C lookup."""

    def __init__(self, lang: str | None) -> None:
        super().__init__()
        self.lang = lang
        #: for the compiled scan, which makes a plain word's tokens itself (as _piece_tokens does)
        self.stem = _stemmer(lang).stemWord if lang in _SNOWBALL else None

    def __missing__(self, piece: str) -> tuple[str, ...]:
        toks = self[piece] = _piece_tokens(piece, self.lang)
        return toks


#: one cache per language, emptied when it grows past _PIECE_CACHE pieces
_PIECES: dict[str | None, _Pieces] = {}
_PIECE_CACHE = 100_000
#: every acronym-number join has an acronym here (and more match: the exact test is the piece loop)
_JOIN_CANDIDATE = re.compile(f"(?<![^\\W\\d_{_CJK}])([^\\W\\d_{_CJK}]{{2,}})\\s+\\d\\d")  # each word tried once
#: in ASCII text, the words _ACRONYM finds that are all capitals (the same set, without testing each word)
_ASCII_ACRONYM = re.compile(r"(?<![A-Za-z])[A-Z]{2,}(?![A-Za-z])")


def _piece_tokens(piece: str, lang: str | None) -> tuple[str, ...]:
    """The tokens of one word or identifier of the folded text (without the acronym-number join)."""
    if piece.isascii() and piece.isalnum():  # the common case: a plain word or number, no CJK, no separator
        if piece in STOPWORDS:
            return ()
        return (_stem(piece, lang),) if piece.isalpha() else (piece,)  # a digit: never stemmed
    if _CJK_RUN.fullmatch(piece):
        return tuple(_cjk_tokens(piece))
    parts = _SPLIT.split(piece)
    if len(parts) > 1:
        out = [piece]
        if _V_VERSION.match(piece):  # "v2.38.5" also as "2.38.5": a version with and without its v meet
            out.append(piece[1:])
        out.extend(_stem(p, lang) for p in parts if p not in STOPWORDS)
        return tuple(out)
    return () if piece in STOPWORDS else (_stem(piece, lang),)


def tokenize(text: str, lang: str | None = "auto", *, stem: bool = True) -> list[str]:
    """Tokens of ``text`` in order (duplicates kept: they are term frequencies).

    ``lang``: "auto" detects it; None disables stemming; or one of en/fr/de/es/zh.
    """
    if not text:
        return []
    if lang == "auto":
        lang = detect_language(text)
    if not stem:
        lang = None
    folded = fold(text)
    cache = _PIECES.get(lang)
    if cache is None or len(cache) > _PIECE_CACHE:
        cache = _PIECES[lang] = _Pieces(lang)
    # "HTTP 504", "BWV 1033" → also "http504": only after a word written in capitals (an acronym),
    # never after ordinary words ("since 2004", "October 27")
    if _scan is not None:
        # each piece's tokens from the cache, and where an all-letter piece has a number after it
        out, joins = _scan.tokens(folded, cache, STOPWORDS, cache.stem)
        if joins:
            acronyms: set[str] | None = None
            ascii_text = text.isascii()
            for at, word, number in reversed(joins):  # from the end: the earlier positions stay
                if word in STOPWORDS or (ascii_text and word.upper() not in text):
                    continue  # (in ASCII text an acronym is its word in capitals: most joins end here)
                if acronyms is None:
                    acronyms = _acronyms(text)
                if word in acronyms:
                    out.insert(at, word + number)
        return cast(list[str], out)
    acronyms = _acronyms(text)
    if not acronyms or not any(m.group(1) in acronyms for m in _JOIN_CANDIDATE.finditer(folded)):
        # no join to make: each piece's tokens, from the cache (most pieces repeat)
        return list(chain.from_iterable(map(cache.__getitem__, _PIECE.findall(folded))))
    return _joined(folded, acronyms, cache)


def _acronyms(text: str) -> set[str]:
    """The folded words of ``text`` written in capitals (two letters or more)."""
    if text.isascii():
        return {w.lower() for w in _ASCII_ACRONYM.findall(text)}
    return {fold(w) for w in _ACRONYM.findall(text) if w.isupper()}


def index_tokens(text: str, lang: str | None, context: str | None = None) -> list[str]:
    """The BM25 tokens of a chunk: the last :data:`CONTEXT_TOKENS` tokens of its context, then its own."""
    if not context:
        return tokenize(text, lang)
    return tokenize(context, lang)[-CONTEXT_TOKENS:] + tokenize(text, lang)


def _joined(folded: str, acronyms: set[str], cache: _Pieces) -> list[str]:
    """The tokens, piece by piece, with an acronym's join to the number right after it."""
    out: list[str] = []
    pos = 0
    prev_alpha: str | None = None  # for "http 504" → "http504"
    for m in _PIECE.finditer(folded):
        piece = m.group()
        if prev_alpha is not None and len(piece) >= 2 and _DIGITS.match(piece) and not folded[pos : m.start()].strip():
            out.append(prev_alpha + piece)
        pos = m.end()
        out += cache[piece]
        # an acronym joins the number right after it; a stopword or an identifier joins nothing
        joins = piece in acronyms and len(piece) >= 2 and piece not in STOPWORDS and _ALPHA.match(piece)
        prev_alpha = piece if joins else None
    return out


def query_tokens(text: str, lang: str | None = "auto", *, stem: bool = True, limit: int = 64) -> list[str]:
    """Unique tokens of a query, in first-seen order, from at most ``limit`` distinct query tokens
    (bounds BM25 latency).

    With ``lang="auto"`` each word is looked up in every form an indexed chunk may hold: as is and
    stemmed in en/fr/de/es. Chunks are stemmed in the language detected for *their* text, which a
    short query ("database", "connections") rarely reveals; stemming the query otherwise than the
    chunk (or not at all) would miss a word the chunk contains verbatim.
    """
    if lang != "auto" or not stem:
        stream = [(t, [t]) for t in tokenize(text, lang, stem=stem)]
    else:  # tokenize(text, L) == [_stem(t, L) for t in tokenize(text, None)]
        stream = [(t, [t, *(_stem(t, lg) for lg in _SNOWBALL)]) for t in tokenize(text, None)]
    words: set[str] = set()
    seen: dict[str, None] = {}
    for word, forms in stream:
        if word not in words:
            if len(words) >= limit:
                break
            words.add(word)
        for t in forms:
            seen.setdefault(t, None)
    return list(seen)


_HAS_DIGIT = re.compile(r"\d")
#: digits with letters that are still plain words: ordinals (4th, 1er, 2e, 3eme, 1º), decades (1950s),
#: number-word compounds (4-letter, 24-hour)
_NOT_IDENTIFIER = re.compile(r"^(?:\d+(?:st|nd|rd|th|s|e|er|re|eme|ieme|te|o|a|º|ª)|\d+-[^\W\d_]{3,})$")
_ACRONYM = re.compile(r"[^\W\d_]{2,}")
_HAS_ALPHA = re.compile(r"[^\W\d_]")


#: file-name extensions: a dotted token made of them only (``tar.gz``, ``.md``) names a kind of
#: file, not one thing, and is not an identifier (``config.json``, ``node.js``, ``setup.py`` are)
FILE_EXTENSIONS = frozenset(
    "gz tar tgz zip bz2 xz zst 7z rar deb rpm iso img md txt rst pdf doc docx odt rtf html htm css js "
    "ts json yaml yml xml csv tsv ini cfg conf toml log sh bash ps1 bat py rb go rs c h cpp hpp java "
    "jar class php pl sql db png jpg jpeg gif svg webp ico mp3 mp4 wav ogg avi mkv exe dll so dylib "
    "bin dat bak tmp".split()
)


def is_identifier(token: str) -> bool:
    """An exact identifier: letters mixed with digits (``hel-4040``, ``v2.3.1``, ``http504``, ``s3``)
    or parts joined by ``_ . / : @ # +`` (``max_connections``, ``foo.bar``). Plain words, plain
    numbers and hyphenated words (``peut-être``, ``Saint-Denis``) are not; nor are dotted words that
    are only file extensions (``tar.gz``) or single letters (``e.g``, ``z.b``, ``u.s``)."""
    parts = [p for p in _SPLIT.split(token) if p]
    if set("".join(_SPLIT.findall(token))) == {"."} and (
        all(p in FILE_EXTENSIONS for p in parts) or all(len(p) == 1 and p.isalpha() for p in parts)
    ):
        return False
    if _HAS_DIGIT.search(token) and _HAS_ALPHA.search(token):
        return not _NOT_IDENTIFIER.match(token)
    return any(c in token for c in TOKEN_CHARS if c != "-") and len(parts) > 1


def identifier_tokens(text: str, lang: str | None = "auto") -> list[str]:
    """The identifier tokens of a query, unique, in order (for the exact-identifier leg)."""
    return [t for t in query_tokens(text, lang) if is_identifier(t)]
