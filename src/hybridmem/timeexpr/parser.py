"""From a question to its time mentions: every rule's matches resolved against ``now``, the
longest kept, those that open a range dropped."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from .languages import _rules
from .rules import _Rule
from .spans import _context, _Ctx
from .timestamps import _shown
from .vocab import _OPEN_AFTER, _OPEN_BEFORE, LANGUAGES


@dataclass(frozen=True)
class TimeMention:
    """One time expression of a question and the period it names."""

    start: datetime  # [start, end): aware UTC
    end: datetime
    text: str  # the matched words ("in May 2023", "il y a deux semaines")
    span: tuple[int, int]  # character offsets of ``text`` in the question
    granularity: str  # "day" | "week" | "month" | "year"


def find_time_expressions(text: str, now: datetime, lang: str | None = None) -> list[TimeMention]:
    """The time expressions of a question, each resolved against ``now`` into a UTC range.

    ``now`` is aware (naive = UTC); its own zone is the asker's calendar. ``lang`` is one of
    :data:`LANGUAGES` (a tag such as "en-US" or "zh-Hans" counts by its first part), or None to try
    every language: each language's rules are anchored on its own words, and the few words two
    languages share (French "hier" is German "here") then need their language's context.
    Overlapping matches keep the longest; the result is in text order.
    """
    if not isinstance(text, str):
        raise TypeError(f"text: expected a string, got {type(text).__name__}")
    ctx = _context(now, guessing=lang is None)
    languages = _languages(lang)
    found: list[tuple[TimeMention, bool]] = []
    for rule in _rules():
        if rule.lang != "*" and rule.lang not in languages:
            continue
        for match in rule.pattern.finditer(text):
            mention = _mention(rule, match, ctx)
            if mention is not None:
                found.append(mention)
    return _longest(found)


def _languages(lang: str | None) -> frozenset[str]:
    if lang is None:
        return frozenset(LANGUAGES)
    primary = re.split(r"[-_]", lang.strip().lower(), maxsplit=1)[0] if isinstance(lang, str) else ""
    if primary not in LANGUAGES:
        raise ValueError(f"lang: {_shown(lang)} is not supported (one of {', '.join(LANGUAGES)}, or None for all)")
    return frozenset({primary})


# ---------------------------------------------------------------------------------------------------
# from matches to mentions


def _opens_range(lang: str, text: str, start: int, end: int) -> bool:
    languages = LANGUAGES if lang == "*" else (lang,)
    before, after = text[max(0, start - 40) : start], text[end : end + 10]
    return any(
        (lg in _OPEN_BEFORE and _OPEN_BEFORE[lg].search(before) is not None)
        or (lg in _OPEN_AFTER and _OPEN_AFTER[lg].search(after) is not None)
        for lg in languages
    )


def _mention(rule: _Rule, m: re.Match[str], ctx: _Ctx) -> tuple[TimeMention, bool] | None:
    """The mention of a match, and whether it opens a range (it is then dropped, but still blocks the
    shorter matches inside it: in "avant le 8 mai 2023", "mai 2023" is no closed period either)."""
    try:
        span = rule.resolve(m, ctx)
    except (ValueError, OverflowError):  # a day or year the calendar does not have (31 June, year 10000)
        return None
    if span is None:
        return None
    start, end = span[0].astimezone(UTC), span[1].astimezone(UTC)
    if start >= end:
        return None
    return TimeMention(start, end, m.group(0), m.span(), span[2]), _opens_range(rule.lang, m.string, *m.span())


def _longest(found: list[tuple[TimeMention, bool]]) -> list[TimeMention]:
    """The longest mentions that do not overlap (ties: the first), in text order, without those that
    open a range."""
    kept: list[tuple[TimeMention, bool]] = []
    for mention, opens in sorted(found, key=lambda x: (x[0].span[0] - x[0].span[1], x[0].span[0])):
        if all(mention.span[1] <= k.span[0] or mention.span[0] >= k.span[1] for k, _ in kept):
            kept.append((mention, opens))
    return sorted((mention for mention, opens in kept if not opens), key=lambda x: x.span[0])
