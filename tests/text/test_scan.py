"""The tokenizer's compiled character scans (text/_scan.c) give the answers of their Python twins: the
regular expressions of text/tokenize.py and the term-id loop of the BM25 index. Checked character
class by character class over every code point, on random text mixing scripts, identifiers and
whitespace, and token for token on the five corpora of ../shared/data."""

from __future__ import annotations

import random
import sys

import pytest

from corpora import BEIR_SETS, beir_set
from hybridmem.retrieve import sparse
from hybridmem.text import tokenize as T

scan = T._scan


def test_the_scans_are_built() -> None:
    # setup.py builds them optionally (no compiler: the regular expressions); here they must be there
    assert scan is not None


def _alphabet() -> list[str]:
    """Characters of every kind the scans tell apart, and their neighbours."""
    picks = [chr(c) for c in range(0, 0x250)] + list("-_./:@#+ \t\n\r\x0b\x0c\x1c\x1f\x85\xa0\u2028\u3000")
    picks += list("²³¹½¼٣۴߁०১௫๓᠑０９ⅷ〇一二三年黑豹队ひらカタ가나・゠゛")  # digits and numbers of other scripts, CJK
    picks += list("éèêßæøåñçÉÈÊÑÇÖÄÜöäüẞǅǈΣσςДдאب")
    return picks


def _random_texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    alpha = _alphabet()
    words = ["HTTP", "504", "HEL-4040", "max_connections", "v2.38.5", "BWV 1033", "DNA", "the", "de", "und", "el"]
    words += ["l'homme", "2015年黑豹队", "IL-6", "p53", "CO2", "a--b", "x_", "_y", "foo.", ".bar", "3eme", "NASA  2020"]
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(0, 40)):
            if rng.random() < 0.4:
                parts.append(rng.choice(words))
            else:
                parts.append("".join(rng.choice(alpha) for _ in range(rng.randint(1, 6))))
            parts.append(rng.choice([" ", "", "  ", "\n", "-", ". ", "\u3000"]))
        out.append("".join(parts))
    return out


class _Identity(dict[str, tuple[str, ...]]):
    """A piece cache whose tokens are the piece itself: tokens() then gives the pieces."""

    def __missing__(self, piece: str) -> tuple[str, ...]:
        return (piece,)


def _pieces(folded: str) -> tuple[list[str], list[int]]:
    """The pieces tokens() finds and the indices of the pieces its join candidates start at."""
    assert scan is not None
    pieces, joins = scan.tokens(folded, _Identity())
    assert all(pieces[at] == number and pieces[at - 1] == word for at, word, number in joins)
    return pieces, [at - 1 for at, _, _ in joins]


def _regex_joins(folded: str) -> list[int]:
    """The join candidates by the rule of tokenize._joined: an all-letter piece (>= 2) with only
    whitespace before a piece of >= 2 digits."""
    ms = list(T._PIECE.finditer(folded))
    return [
        i
        for i in range(len(ms) - 1)
        if len(ms[i].group()) >= 2
        and T._ALPHA.match(ms[i].group())
        and len(ms[i + 1].group()) >= 2
        and T._DIGITS.match(ms[i + 1].group())
        and not folded[ms[i].end() : ms[i + 1].start()].strip()
    ]


def test_every_code_point_is_classed_as_the_regular_expressions_class_it() -> None:
    assert scan is not None
    # each code point alone, and between two ASCII letters (how it ends or joins a piece)
    for c in range(sys.maxunicode + 1):
        if 0xD800 <= c <= 0xDFFF:
            continue
        ch = chr(c)
        for s in (ch, f"ab{ch}cd", f"{ch}{ch}", f"ab{ch}12"):
            pieces, joins = _pieces(s)
            assert pieces == T._PIECE.findall(s), (hex(c), s)
            assert joins == _regex_joins(s), (hex(c), s)
        cjk, n_words, _ = scan.lang_counts(ch + ch, {}, 0, 0)
        assert n_words == len(T._LETTERS.findall(ch + ch)), hex(c)
        assert cjk == sum(len(m) for m in T._CJK_RUN.findall(ch + ch)), hex(c)


def test_pieces_and_joins_match_the_regular_expressions_on_random_text() -> None:
    assert scan is not None
    for text in _random_texts(3000, seed=1):
        folded = T.fold(text)
        pieces, joins = _pieces(folded)
        assert pieces == T._PIECE.findall(folded), text
        assert joins == _regex_joins(folded), text


def test_language_counts_match_the_python_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    assert scan is not None
    texts = _random_texts(2000, seed=2) + [
        "the cat and the dog",
        "le chat et le chien de la maison",
        "der Hund und die Katze",
        "el perro y el gato de la casa",
        "我们去年五月去了北京",
        "",
        "1234 5678",
    ]
    for text in texts:
        folded = T.fold(text[:4000])
        cjk, n_words, per_lang = scan.lang_counts(folded, T._LANG_BITS, T._LANG_MAXLEN, len(T._LANG_ORDER))
        want = T._lang_counts(folded)
        assert (cjk, n_words, {lang: n for lang, n in zip(T._LANG_ORDER, per_lang) if n}) == (
            want[0],
            want[1],
            dict(want[2]),
        ), text
    fast = [T.detect_language(t) for t in texts]
    monkeypatch.setattr(T, "_scan", None)
    assert [T.detect_language(t) for t in texts] == fast
    assert {"en", "fr", "de", "es", "zh"} <= set(fast)


def test_term_ids_match_the_python_loop() -> None:
    assert scan is not None
    texts = [" ".join(T.tokenize(t)) for t in _random_texts(500, seed=3)] + ["", "  a  b\ta\n", "\u3000x\x1cy"]
    vocab_c: dict[str, int] = {"pre": 0}
    vocab_py: dict[str, int] = {"pre": 0}
    ids, lengths = scan.term_ids(texts, vocab_c)
    want: list[int] = []
    for t in texts:
        want.extend(vocab_py.setdefault(tok, len(vocab_py)) for tok in t.split())
    assert list(memoryview(ids).cast("q")) == want
    assert lengths == [len(t.split()) for t in texts]
    assert vocab_c == vocab_py
    with pytest.raises(TypeError, match="str"):
        scan.term_ids(["a", 3], {})


@pytest.mark.parametrize("block", [sparse.LOAD_BLOCK, 37])  # 37: terms met again in later blocks
def test_the_bulk_load_is_the_same_index_either_way(block: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sparse, "LOAD_BLOCK", block)
    rows = [(i, " ".join(T.tokenize(t))) for i, t in enumerate(_random_texts(400, seed=4), 1)]
    fast = sparse.SparseIndex()
    fast.load(1, rows)
    monkeypatch.setattr(sparse, "_scan", None)
    slow = sparse.SparseIndex()
    slow.load(1, rows)
    assert {t: (list(p), list(f)) for t, (p, f) in fast._post.items()} == {
        t: (list(p), list(f)) for t, (p, f) in slow._post.items()
    }
    assert list(fast._dl) == list(slow._dl) and list(fast._rowids) == list(slow._rowids)


@pytest.mark.parametrize("name", BEIR_SETS)
def test_real_corpora_tokenize_the_same_either_way(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    ds = beir_set(name)
    texts = [d["text"] for d in ds.docs][:3000] + list(ds.queries.values())[:300]
    T._PIECES.clear()  # every piece a miss once: those of ASCII letters, digits and joiners are made in C
    fast = [(T.detect_language(t), T.tokenize(t)) for t in texts]
    monkeypatch.setattr(T, "_scan", None)
    T._PIECES.clear()
    slow = [(T.detect_language(t), T.tokenize(t)) for t in texts]
    for t, a, b in zip(texts, fast, slow):
        assert a == b, t[:200]


def test_tokens_are_the_pieces_tokens_with_the_same_join_candidates() -> None:
    assert scan is not None
    cache = T._Pieces("en")
    for text in _random_texts(2000, seed=5):
        folded = T.fold(text)
        pieces, joins = T._PIECE.findall(folded), _regex_joins(folded)
        toks, cands = scan.tokens(folded, cache)
        assert toks == [t for p in pieces for t in cache[p]], text
        starts = [sum(len(cache[p]) for p in pieces[: i + 1]) for i in joins]
        assert cands == [(at, pieces[i], pieces[i + 1]) for at, i in zip(starts, joins)], text
    with pytest.raises(TypeError, match="tuples"):
        scan.tokens("a b", {"a": ["a"]})


def test_the_misses_made_in_c_are_the_pieces_tokens_python_makes() -> None:
    """tokens() makes a missing plain word, number or ASCII identifier itself (stopwords dropped,
    letters-only parts stemmed, a version also without its v): the same tuples as _piece_tokens,
    in every language and without one."""
    assert scan is not None
    rng = random.Random(6)
    stop = sorted(w for w in T.STOPWORDS if w.isascii() and w.isalpha())[:300]
    chars = "abcdefghijklmnopqrstuvwxyz0123456789"
    made = 0
    for _ in range(20_000):
        parts = [
            rng.choice(stop) if rng.random() < 0.25 else "".join(rng.choice(chars) for _ in range(rng.randint(1, 6)))
            for _ in range(rng.randint(1, 4))
        ]
        piece = parts[0] + "".join(rng.choice("-_./:@#+") * rng.randint(1, 2) + p for p in parts[1:])
        if rng.random() < 0.15:
            piece = "v" + ".".join(str(rng.randint(0, 30)) for _ in range(rng.randint(1, 4)))
        if T._PIECE.findall(piece) != [piece]:
            continue
        lang = rng.choice([None, "en", "fr", "de", "es"])
        cache = T._Pieces(lang)
        toks, _ = scan.tokens(piece, cache, T.STOPWORDS, cache.stem)
        assert cache[piece] == T._piece_tokens(piece, lang) and toks == list(cache[piece]), (piece, lang)
        made += 1
    assert made > 15_000
    with pytest.raises(TypeError, match="set"):
        scan.tokens("a b", {}, ["a"], None)
