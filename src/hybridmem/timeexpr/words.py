"""Words and numbers: the folded form the word tables are keyed by, regex alternations of a
table's words, and the number, month and relation a matched word stands for."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from .vocab import (
    _MONTH_ABBR_EN,
    _MONTHS_DE,
    _MONTHS_EN,
    _MONTHS_ES,
    _MONTHS_FR,
    _NUMBERS_DE,
    _NUMBERS_EN,
    _NUMBERS_ES,
    _NUMBERS_FR,
    _RELATION_PREFIXES,
    _RELATIONS,
    _WEEKDAYS_DE,
    _WEEKDAYS_EN,
    _WEEKDAYS_ES,
    _WEEKDAYS_FR,
    _ZH_DIGITS,
)


def _fold(text: str) -> str:
    """Lower case without accents and with one space: the form the word tables are keyed by."""
    decomposed = unicodedata.normalize("NFKD", text.lower().replace("’", "'"))
    return " ".join("".join(c for c in decomposed if not unicodedata.combining(c)).split())


def _alt(words: Iterable[str]) -> str:
    """A regex alternation of ``words`` and their unaccented forms, longest first."""
    forms = {w for w in words} | {_fold(w) for w in words}
    return "(?:" + "|".join(re.escape(w) for w in sorted(forms, key=lambda w: (-len(w), w))) + ")"


_MONTHS = {_fold(k): v for d in (_MONTHS_EN, _MONTH_ABBR_EN, _MONTHS_FR, _MONTHS_DE, _MONTHS_ES) for k, v in d.items()}
_WEEKDAYS = {_fold(k): v for d in (_WEEKDAYS_EN, _WEEKDAYS_FR, _WEEKDAYS_DE, _WEEKDAYS_ES) for k, v in d.items()}
_NUMBERS = {_fold(k): v for d in (_NUMBERS_EN, _NUMBERS_FR, _NUMBERS_DE, _NUMBERS_ES) for k, v in d.items()}


def _number(text: str) -> int:
    """Digits (any script), a number word of one of the languages, or a Chinese numeral (〇-九十九)."""
    text = text.strip()
    if text.isdecimal():
        return int(text)
    folded = _fold(text)
    if folded in _NUMBERS:
        return _NUMBERS[folded]
    if any(c not in _ZH_DIGITS and c != "十" for c in text) or not text:
        raise ValueError(f"not a number: {text!r}")
    if "十" not in text:  # digit by digit: 二〇二三
        return int("".join(str(_ZH_DIGITS[c]) for c in text))
    tens, _, units = text.partition("十")
    return (_ZH_DIGITS[tens] if tens else 1) * 10 + (_ZH_DIGITS[units] if units else 0)


def _month_number(text: str) -> int:
    folded = _fold(text).rstrip(".")
    return _MONTHS[folded] if folded in _MONTHS else _number(text)


def _relation(text: str | None) -> str | None:
    if text is None:
        return None
    folded = _fold(text)
    if folded in _RELATIONS:
        return _RELATIONS[folded]
    return next((rel for prefix, rel in _RELATION_PREFIXES if folded.startswith(prefix)), None)


def _previous_word(m: re.Match[str]) -> str:
    before = re.search(r"(\w+)\W*$", m.string[max(0, m.start() - 30) : m.start()])
    return _fold(before.group(1)) if before else ""
